"""The verifier: a verdict on each attempt from its evidence (ran, finite, no leakage, beats the trivial baseline)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agent.verify.findings import Evidence, Verdict
from retrieval.metrics import MetricInfo


@runtime_checkable
class Verifier(Protocol):
    def verify(self, evidence: Evidence, baseline_score: float, metric: MetricInfo) -> Verdict:
        """Judge one attempt against the trivial baseline's score (greater is better)."""


def oriented(value: float, metric: MetricInfo) -> float:
    """A metric value as a greater-is-better score."""
    return value if metric.greater_is_better else -value


def natural(score: float, metric: MetricInfo) -> float:
    """A greater-is-better score back in the metric's own units."""
    return oriented(score, metric)


@dataclass(frozen=True)
class DeterministicVerifier:
    """Valid = ran, finite, no leakage, and beats the trivial baseline by more than `margin` (in score units)."""

    margin: float = 0.0

    def verify(self, evidence: Evidence, baseline_score: float, metric: MetricInfo) -> Verdict:
        notes = usage_notes(evidence)
        if evidence.status != "ok":
            return Verdict(False, f"failed ({evidence.status}): {last_line(evidence.error)}", -math.inf, notes)
        if not math.isfinite(evidence.metric_value):
            return Verdict(False, f"non-finite CV score ({evidence.metric_value})", -math.inf, notes)
        score = oriented(evidence.metric_value, metric)
        if evidence.inspection.leaks:
            return Verdict(False, "leakage: " + "; ".join(evidence.inspection.leaks), score, notes)
        threshold = natural(baseline_score + self.margin, metric)
        if score <= baseline_score + self.margin:
            relation = "<=" if metric.greater_is_better else ">="
            return Verdict(False, f"does not beat the trivial baseline ({evidence.metric_value:.4f} {relation} "
                                  f"{threshold:.4f})", score, notes)
        relation = ">" if metric.greater_is_better else "<"
        return Verdict(True, f"beats the trivial baseline ({evidence.metric_value:.4f} {relation} {threshold:.4f})",
                       score, notes)


def usage_notes(evidence: Evidence) -> tuple[str, ...]:
    notes = list(evidence.inspection.warnings)
    if evidence.inspection.ignored_columns:
        notes.append("ignores columns: " + ", ".join(evidence.inspection.ignored_columns))
    if evidence.ignored_files:
        notes.append("ignores files: " + ", ".join(evidence.ignored_files))
    return tuple(notes)


def last_line(error: str) -> str:
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown error"
