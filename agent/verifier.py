"""Verification beyond "it ran": leakage and data-usage checks, and the verdict on each attempt.

`inspect_candidate` runs next to the cross-validation (in the candidate's own process). It asks
concrete, deterministic questions of the candidate's preprocessing, fitted on one training fold:
  - does its output change when only the test set changes?            -> it learns from the test set
  - does it change when only the out-of-fold targets change?          -> it reads the target outside the folds
  - does it change when only the out-of-fold training rows change?    -> fitted before the split (warning)
  - which raw columns can be changed without changing its output?     -> columns the solution ignores
A verifier then turns the measurements into a `Verdict`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import scipy.sparse as sp
import pandas as pd
from sklearn.pipeline import Pipeline

from agent import runtime
from agent.engine import Dataset, compile_spec
from agent.models import Trainer
from agent.spec import SolutionSpec
from agent.steps import CompileContext, StepOp
from retrieval.metrics import MetricInfo

# Enough rows to fit any preprocessing faithfully, few enough to keep the checks to a second or two.
_FIT_ROWS = 1000
_PROBE_ROWS = 200
_USAGE_PROBE_ROWS = 50
_TARGET_COPY_CORRELATION = 0.999


@dataclass(frozen=True)
class Inspection:
    leaks: tuple[str, ...] = ()  # reasons to reject
    warnings: tuple[str, ...] = ()  # worth a look, not a reason to reject
    ignored_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Evidence:
    """What evaluating one candidate measured."""

    status: str  # as agent.sandbox.Outcome.status
    metric_value: float = math.nan  # mean CV metric in its own units
    fold_values: tuple[float, ...] = ()
    error: str = ""
    inspection: Inspection = Inspection()
    ignored_files: tuple[str, ...] = ()
    elapsed: float = 0.0
    # Every training row's out-of-fold prediction (what the metric scores), for blending candidates; not compared.
    predictions: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Verdict:
    valid: bool
    reason: str
    score: float  # greater is better (errors negated, as scikit-learn scorers do); -inf for a failure
    notes: tuple[str, ...] = field(default=())


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


def inspect_candidate(
    spec: SolutionSpec,
    dataset: Dataset,
    trainers: Mapping[str, Trainer],
    extra_steps: Mapping[str, StepOp] | None = None,
    random_state: int = 0,
) -> Inspection:
    """Leakage and data-usage findings for the candidate's preprocessing (everything before the model)."""
    warnings = list(_target_copies(dataset))
    if not spec.steps:
        return Inspection(warnings=tuple(warnings))
    context = dataset.compile_context(random_state)
    train_rows, valid_rows = runtime.make_folds(
        dataset.y, classification=dataset.classification, n_splits=spec.validation.n_splits, seed=spec.validation.seed
    )[0]
    fit_rows = train_rows[:_FIT_ROWS]
    probe = dataset.X.iloc[np.concatenate([train_rows[:_PROBE_ROWS], valid_rows[:_PROBE_ROWS]])]

    def fitted(variant: CompileContext, n_steps: int = len(spec.steps)) -> Pipeline:
        preprocessing = Pipeline(compile_spec(spec, variant, trainers, extra_steps).steps[:n_steps])
        return preprocessing.fit(dataset.X.iloc[fit_rows], dataset.y[fit_rows])

    reference = fitted(context)
    expected = reference.transform(probe)
    if not _same(fitted(context).transform(probe), expected):
        warnings.append("preprocessing is not deterministic, so leakage was not checked")
        return Inspection(warnings=tuple(warnings), ignored_columns=_ignored_columns(reference, probe, expected))

    def differing_step(variant: CompileContext) -> str | None:
        if _same(fitted(variant).transform(probe), expected):
            return None
        for n_steps in range(1, len(spec.steps) + 1):
            if not _same(fitted(variant, n_steps).transform(probe), fitted(context, n_steps).transform(probe)):
                return f"step {n_steps} ({spec.steps[n_steps - 1].op})"
        return "the preprocessing"

    leaks = []
    if dataset.X_test is not None:
        culprit = differing_step(context.with_data(X_test=_perturbed(dataset.X_test)))
        if culprit:
            leaks.append(f"{culprit} learns from the test set")
    culprit = differing_step(context.with_data(y=_perturbed_target(dataset, valid_rows)))
    if culprit:
        leaks.append(f"{culprit} learns from the target outside the CV folds")
    outside_rows = dataset.X.copy()
    outside_rows.iloc[valid_rows] = _perturbed(dataset.X.iloc[valid_rows])
    culprit = differing_step(context.with_data(X=outside_rows))
    if culprit:
        warnings.append(f"{culprit} is fitted on training rows outside the CV fold (fit before the split)")
    return Inspection(tuple(leaks), tuple(warnings), _ignored_columns(reference, probe, expected))


def _ignored_columns(preprocessing: Pipeline, probe: pd.DataFrame, expected: pd.DataFrame) -> tuple[str, ...]:
    """Columns whose values can change without changing what the model receives.

    One transform of stacked copies of the probe, copy i with column i perturbed: transforms act row
    by row, so each copy's output can be compared with the unperturbed output on its own."""
    rows = probe.iloc[:_USAGE_PROBE_ROWS]
    baseline = _dense(expected).iloc[:_USAGE_PROBE_ROWS]
    copies = []
    for name in rows.columns:
        changed = rows.copy()
        changed[name] = _perturbed(rows[[name]])[name]
        copies.append(changed)
    try:
        output = _dense(preprocessing.transform(pd.concat(copies, ignore_index=True)))
    except (ValueError, TypeError):  # perturbed values upset a step: fall back to no finding rather than a guess
        return ()
    return tuple(
        str(name) for index, name in enumerate(rows.columns)
        if _same(output.iloc[index * len(rows):(index + 1) * len(rows)], baseline)
    )


def _target_copies(dataset: Dataset) -> list[str]:
    if dataset.task_type == "multiclass":
        return []
    target = pd.Series(dataset.y, index=dataset.X.index, dtype=float)
    copies = []
    for name in dataset.X.select_dtypes("number").columns:
        # Rank correlation: any monotone transform of the target (log, scaling) carries all of it.
        correlation = dataset.X[name].corr(target, method="spearman")
        if abs(correlation) >= _TARGET_COPY_CORRELATION:
            copies.append(f"column {name!r} is a near-copy of the target (rank correlation {correlation:+.3f}): "
                          "check that it is known when predicting")
    return copies


def _perturbed(frame: pd.DataFrame) -> pd.DataFrame:
    """The same rows with every value (missing ones too) changed and every column's statistics moved."""
    changed = frame.copy()
    for name in changed.columns:
        values = changed[name]
        if pd.api.types.is_bool_dtype(values):
            changed[name] = ~values
        elif pd.api.types.is_numeric_dtype(values):
            changed[name] = (values * 3 + 7).fillna(7)
        else:
            changed[name] = values.map(lambda value: f"perturbed {value}")
    return changed


def _perturbed_target(dataset: Dataset, rows: np.ndarray) -> np.ndarray:
    y = dataset.y.copy()
    y[rows] = (y[rows] + 1) % len(dataset.classes) if dataset.classification else y[rows] * 3 + 7
    return y


def _same(left: pd.DataFrame, right: pd.DataFrame) -> bool:
    left, right = _dense(left), _dense(right)
    if left.shape != right.shape or list(left.columns) != list(right.columns):
        return False
    try:
        return bool(np.allclose(left.to_numpy(dtype=float), right.to_numpy(dtype=float), equal_nan=True))
    except (ValueError, TypeError):  # non-numeric output: compare values as they are
        return left.reset_index(drop=True).equals(right.reset_index(drop=True))


def _dense(output) -> pd.DataFrame:
    """Transformer output as a DataFrame; sparse matrices (e.g. TF-IDF) are compared densely."""
    if sp.issparse(output):
        return pd.DataFrame(output.toarray())
    return pd.DataFrame(output)
