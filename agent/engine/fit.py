"""Fitting a compiled pipeline: cross-validation with out-of-fold (and averaged test) predictions, and the refit on
every training row that keeps the number of trees early stopping chose in the folds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from agent.engine import runtime
from agent.engine.dataset import Dataset, DatasetError
from agent.engine.spec import SolutionSpec
from retrieval.profile import TRAIN_FILE


def check_folds(dataset: Dataset, n_splits: int) -> None:
    """DatasetError, naming the table and the fix, when the training rows cannot fill `n_splits` CV folds:
    fewer rows than folds or, for classification, a class with fewer rows than folds."""
    if dataset.task_dir is not None:
        table, option = str(dataset.task_dir / TRAIN_FILE), "--cv {}"
    else:
        table, option = "the training table", "cv={}"

    def fix(n: int) -> str:
        return f"use {option.format(n)} or more data" if n >= 2 else "use more data"

    n_rows = len(dataset.y)
    if n_rows < n_splits:
        raise DatasetError(f"{table} has {_rows(n_rows)}, fewer than the {n_splits} CV folds; {fix(n_rows)}")
    if dataset.classification:
        counts = np.bincount(np.asarray(dataset.y, dtype=int))
        smallest = int(np.argmin(counts))
        size = int(counts[smallest])
        if size < n_splits:
            label = dataset.classes[smallest] if dataset.classes is not None else smallest
            label = label.item() if isinstance(label, np.generic) else label
            raise DatasetError(f"{table}: class {label!r} of {dataset.target!r} has {_rows(size)}, fewer than the "
                               f"{n_splits} CV folds; {fix(size)}")


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def cross_validate(pipeline: Pipeline, dataset: Dataset, spec: SolutionSpec) -> list[float]:
    """The task metric on each validation fold, in the metric's own units."""
    return cross_validate_predictions(pipeline, dataset, spec)[0]


def cross_validate_predictions(pipeline: Pipeline, dataset: Dataset, spec: SolutionSpec) -> tuple[list[float], Any]:
    """(the metric on each validation fold, every training row's out-of-fold prediction)."""
    fitted = cross_fit(pipeline, dataset, spec)
    return fold_values(fitted, dataset), fitted.predictions


def cross_fit(pipeline: Pipeline, dataset: Dataset, spec: SolutionSpec, *, predict_test: bool = False,
              keep_models: bool = False) -> runtime.CrossFit:
    """The pipeline cross-fitted on the spec's folds (runtime.cross_fit: GBDTs stop early on each validation fold);
    with `predict_test`, the fold models' averaged test-set predictions too; with `keep_models`, the fold models."""
    return runtime.cross_fit(
        pipeline, dataset.X, dataset.y, needs_proba=dataset.metric_info.needs_proba,
        classification=dataset.classification, n_splits=spec.validation.n_splits, seed=spec.validation.seed,
        X_test=dataset.X_test if predict_test else None, keep_models=keep_models,
    )


def fold_values(fitted: runtime.CrossFit, dataset: Dataset) -> list[float]:
    """The task metric on each validation fold of a cross-fit."""
    return runtime.fold_scores(fitted.predictions, dataset.y, fitted.folds, dataset.metric)


def fit_and_predict(pipeline: Pipeline, dataset: Dataset,
                    rounds: Mapping[str, float] | None = None) -> tuple[Pipeline, Any]:
    """Fit on every training row, early-stopping models with the trees their CV folds kept (`rounds`, by path:
    runtime.CrossFit.stopped_rounds); predict the test set (probabilities when the metric needs them)."""
    fitted = runtime.refit(pipeline, dataset.X, dataset.y, dict(rounds or {}))
    if dataset.X_test is None:
        return fitted, None
    n_classes = len(dataset.classes) if dataset.classes is not None else None
    return fitted, runtime.predict_for_metric(fitted, dataset.X_test, dataset.metric_info.needs_proba, n_classes)
