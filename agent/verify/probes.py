"""Verification beyond "it ran": leakage and data-usage checks, and the verdict on each attempt.

`inspect_candidate` runs next to the cross-validation (in the candidate's own process). It asks
concrete, deterministic questions of the candidate's preprocessing, fitted on one training fold:
  - does its output change when only the test set changes?            -> it learns from the test set (leak_test)
  - does it change when only the out-of-fold targets change?          -> it reads the target outside the folds
                                                                         (leak_target)
  - does it change when only the out-of-fold training rows change?    -> fitted before the split (fit_outside_fold,
                                                                         a warning)
  - which raw columns can be changed without changing its output?     -> columns the solution ignores
                                                                         (ignored_column)
Each answer is a `Finding` naming the first step (1-based index and op) whose output changes. A verifier then turns
the measurements into a `Verdict`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.pipeline import Pipeline

from agent.engine import runtime
from agent.engine.compile import compile_spec
from agent.engine.dataset import Dataset
from agent.engine.spec import SolutionSpec
from agent.engine.steps import CompileContext, StepOp
from agent.engine.trainers import Trainer
from agent.verify.findings import (
    FIT_OUTSIDE_FOLD,
    IGNORED_COLUMN,
    LEAK_TARGET,
    LEAK_TEST,
    NOT_DETERMINISTIC,
    TARGET_COPY,
    Finding,
    Inspection,
    culprit,
)

# Enough rows to fit any preprocessing faithfully, few enough to keep the checks to a second or two.
_FIT_ROWS = 1000
_PROBE_ROWS = 200
_USAGE_PROBE_ROWS = 50
_TARGET_COPY_CORRELATION = 0.999


def inspect_candidate(
    spec: SolutionSpec,
    dataset: Dataset,
    trainers: Mapping[str, Trainer],
    extra_steps: Mapping[str, StepOp] | None = None,
    random_state: int = 0,
) -> Inspection:
    """Leakage and data-usage findings for the candidate's preprocessing (everything before the model)."""
    findings = list(_target_copies(dataset))
    if not spec.steps:
        return Inspection(tuple(findings))
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
        findings.append(Finding(NOT_DETERMINISTIC, message="preprocessing is not deterministic, so leakage was not "
                                                           "checked"))
        return Inspection((*findings, *_ignored_columns(reference, probe, expected)))

    def differing_step(variant: CompileContext) -> tuple[int | None, str | None] | None:
        """(step, op) of the first step whose output changes with the variant's data; (None, None) when only the
        preprocessing as a whole does; None when nothing changes."""
        if _same(fitted(variant).transform(probe), expected):
            return None
        for n_steps in range(1, len(spec.steps) + 1):
            if not _same(fitted(variant, n_steps).transform(probe), fitted(context, n_steps).transform(probe)):
                return n_steps, spec.steps[n_steps - 1].op
        return None, None

    def finding(kind: str, where: tuple[int | None, str | None], what: str) -> Finding:
        step, op = where
        return Finding(kind, step=step, op=op, message=f"{culprit(step, op)} {what}")

    leaks = []
    if dataset.X_test is not None:
        where = differing_step(context.with_data(X_test=_perturbed(dataset.X_test)))
        if where:
            leaks.append(finding(LEAK_TEST, where, "learns from the test set"))
    where = differing_step(context.with_data(y=dataset.changed_target(valid_rows)))
    if where:
        leaks.append(finding(LEAK_TARGET, where, "learns from the target outside the CV folds"))
    outside_rows = dataset.X.copy()
    outside_rows.iloc[valid_rows] = _perturbed(dataset.X.iloc[valid_rows])
    where = differing_step(context.with_data(X=outside_rows))
    if where:
        findings.append(finding(FIT_OUTSIDE_FOLD, where,
                                "is fitted on training rows outside the CV fold (fit before the split)"))
    return Inspection((*leaks, *findings, *_ignored_columns(reference, probe, expected)))


def _ignored_columns(preprocessing: Pipeline, probe: pd.DataFrame, expected: pd.DataFrame) -> tuple[Finding, ...]:
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
        Finding(IGNORED_COLUMN, column=str(name), message=f"ignores column {str(name)!r}")
        for index, name in enumerate(rows.columns)
        if _same(output.iloc[index * len(rows):(index + 1) * len(rows)], baseline)
    )


def _target_copies(dataset: Dataset) -> list[Finding]:
    if dataset.task_type == "multiclass":
        return []
    target = pd.Series(dataset.y, index=dataset.X.index, dtype=float)
    copies = []
    for name in dataset.X.select_dtypes("number").columns:
        # Rank correlation: any monotone transform of the target (log, scaling) carries all of it.
        correlation = dataset.X[name].corr(target, method="spearman")
        if abs(correlation) >= _TARGET_COPY_CORRELATION:
            copies.append(Finding(TARGET_COPY, column=str(name), message=(
                f"column {name!r} is a near-copy of the target (rank correlation {correlation:+.3f}): "
                "check that it is known when predicting")))
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
