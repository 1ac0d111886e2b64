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
# The ignored-column probe transforms columns x rows copies of the probe's rows: at most this many values.
_USAGE_PROBE_CELLS = 20_000_000
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
    by row, so each copy's output can be compared with the unperturbed output on its own. The copies hold
    columns x columns x rows values, so a wide table is probed on fewer rows (at least 2), its columns a batch
    of copies at a time."""
    n_columns = len(probe.columns)
    n_rows = int(min(_USAGE_PROBE_ROWS, max(2, _USAGE_PROBE_CELLS // max(n_columns * n_columns, 1))))
    rows = probe.iloc[:n_rows]
    n_rows = len(rows)  # a small table's probe has fewer
    baseline = _dense(expected).iloc[:n_rows]
    perturbed = _perturbed(rows)
    batch = max(1, _USAGE_PROBE_CELLS // (n_columns * n_rows))
    ignored = []
    for first in range(0, n_columns, batch):
        changed = list(rows.columns[first:first + batch])
        stacked = {}
        for name in rows.columns:  # column by column: concatenating one frame per copy is quadratic in pandas
            values = np.tile(rows[name].to_numpy(dtype=object), len(changed))
            if name in changed:
                at = changed.index(name) * n_rows
                values[at:at + n_rows] = perturbed[name].to_numpy(dtype=object)
            stacked[name] = pd.Series(values).infer_objects()
        try:
            output = _dense(preprocessing.transform(runtime.normalise_frame(pd.DataFrame(stacked))))
        except (ValueError, TypeError):  # perturbed values upset a step: no finding rather than a guess
            return ()
        try:  # numerically, converted once: a slice at a time is slow for pandas' extension arrays
            values, expected_values = output.to_numpy(dtype=float), baseline.to_numpy(dtype=float)
            same = [output.shape[1] == baseline.shape[1] and np.allclose(
                values[index * n_rows:(index + 1) * n_rows], expected_values, equal_nan=True)
                for index in range(len(changed))]
        except (ValueError, TypeError):  # non-numeric output: compare values as they are
            same = [_same(output.iloc[index * n_rows:(index + 1) * n_rows], baseline) for index in range(len(changed))]
        ignored += [name for name, unchanged in zip(changed, same) if unchanged]
    return tuple(Finding(IGNORED_COLUMN, column=str(name), message=f"ignores column {str(name)!r}")
                 for name in ignored)


def _target_copies(dataset: Dataset) -> list[Finding]:
    if dataset.task_type == "multiclass":
        return []
    target = pd.Series(dataset.y, index=dataset.X.index, dtype=float)
    numeric = dataset.X.select_dtypes("number")
    # Rank correlation: any monotone transform of the target (log, scaling) carries all of it. Complete columns at
    # once, as the Pearson correlation of ranks: one call per column took seconds in every node of a wide table.
    has_missing = numeric.isna().any().to_numpy()
    complete = list(numeric.columns[~has_missing])
    correlations = {name: numeric[name].corr(target, method="spearman") for name in numeric.columns[has_missing]}
    if len(complete) and len(target) > 1:
        ranks = numeric[complete].rank().to_numpy(dtype=float, copy=True)
        ranks -= ranks.mean(axis=0)
        target_ranks = target.rank().to_numpy(dtype=float, copy=True)
        target_ranks -= target_ranks.mean()
        with np.errstate(invalid="ignore", divide="ignore"):  # a constant column has no correlation (NaN)
            values = ranks.T @ target_ranks / (np.linalg.norm(ranks, axis=0) * np.linalg.norm(target_ranks))
        correlations.update(zip(complete, values))
    correlations = pd.Series(correlations, dtype=float)
    return [Finding(TARGET_COPY, column=str(name), message=(
                f"column {name!r} is a near-copy of the target (rank correlation {correlation:+.3f}): "
                "check that it is known when predicting"))
            for name, correlation in correlations.items() if abs(correlation) >= _TARGET_COPY_CORRELATION]


def _perturbed(frame: pd.DataFrame) -> pd.DataFrame:
    """The same rows with every value (missing ones too) changed and every column's statistics moved."""
    changed = frame.copy()
    flags = [name for name in changed.columns if pd.api.types.is_bool_dtype(changed[name])]
    numbers = [name for name in changed.select_dtypes("number").columns if name not in flags]
    others = [name for name in changed.columns if name not in flags and name not in numbers]
    if numbers:  # all numeric columns at once: a wide table has thousands
        changed[numbers] = (changed[numbers] * 3 + 7).fillna(7)
    for name in flags:
        changed[name] = ~changed[name]
    for name in others:
        changed[name] = changed[name].map(lambda value: f"perturbed {value}")
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
