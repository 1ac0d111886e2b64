"""The verifier: a verdict on each attempt from its evidence (ran, finite, no leakage, beats the trivial baseline)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agent.execution.sandbox import last_line
from agent.verify.findings import (
    IGNORED_COLUMN,
    IGNORED_FILE,
    LEAKAGE,
    NON_FINITE,
    NOT_BETTER,
    STOPPED_EARLY,
    Evidence,
    Finding,
    Verdict,
)
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
        findings = evidence.findings
        notes = usage_notes(evidence)
        if evidence.status != "ok":
            return Verdict(False, f"failed ({evidence.status}): {last_line(evidence.error)}", -math.inf, notes,
                           evidence.status, findings)
        if not math.isfinite(evidence.metric_value):
            return Verdict(False, f"non-finite CV score ({evidence.metric_value})", -math.inf, notes, NON_FINITE,
                           findings)
        score = oriented(evidence.metric_value, metric)
        leaks = [finding for finding in findings if finding.leak]
        if leaks:
            return Verdict(False, "leakage: " + "; ".join(finding.message for finding in leaks), score, notes,
                           LEAKAGE, findings)
        if evidence.stopped_early:
            return Verdict(False, f"stopped after {len(evidence.fold_values)} of {evidence.folds} folds: it trailed "
                                  f"the best node on them ({evidence.metric_value:.4f} on those folds)", score, notes,
                           STOPPED_EARLY, findings)
        threshold = natural(baseline_score + self.margin, metric)
        if score <= baseline_score + self.margin:
            relation = "<=" if metric.greater_is_better else ">="
            return Verdict(False, f"does not beat the trivial baseline ({evidence.metric_value:.4f} {relation} "
                                  f"{threshold:.4f})", score, notes, NOT_BETTER, findings)
        relation = ">" if metric.greater_is_better else "<"
        return Verdict(True, f"beats the trivial baseline ({evidence.metric_value:.4f} {relation} {threshold:.4f})",
                       score, notes, None, findings)


def usage_notes(evidence: Evidence) -> tuple[str, ...]:
    """The verdict's notes: the warnings, then the columns and the files the solution ignores."""
    findings = evidence.findings
    notes = [finding.message for finding in findings if finding.warning]
    columns = _named(findings, IGNORED_COLUMN)
    if columns:
        notes.append("ignores columns: " + ", ".join(columns))
    files = _named(findings, IGNORED_FILE)
    if files:
        notes.append("ignores files: " + ", ".join(files))
    return tuple(notes)


def _named(findings: tuple[Finding, ...], kind: str) -> list[str]:
    return [str(finding.column if kind == IGNORED_COLUMN else finding.file) for finding in findings
            if finding.kind == kind]
