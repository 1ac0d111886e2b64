"""Fitting a compiled pipeline: cross-validation with out-of-fold predictions, and the refit on every training row."""

from __future__ import annotations

from typing import Any

from sklearn.pipeline import Pipeline

from agent.engine import runtime
from agent.engine.dataset import Dataset
from agent.engine.spec import SolutionSpec


def cross_validate(pipeline: Pipeline, dataset: Dataset, spec: SolutionSpec) -> list[float]:
    """The task metric on each validation fold, in the metric's own units."""
    return cross_validate_predictions(pipeline, dataset, spec)[0]


def cross_validate_predictions(pipeline: Pipeline, dataset: Dataset, spec: SolutionSpec) -> tuple[list[float], Any]:
    """(the metric on each validation fold, every training row's out-of-fold prediction)."""
    predictions, folds = runtime.out_of_fold(
        pipeline, dataset.X, dataset.y, needs_proba=dataset.metric_info.needs_proba,
        classification=dataset.classification, n_splits=spec.validation.n_splits, seed=spec.validation.seed,
    )
    return runtime.fold_scores(predictions, dataset.y, folds, dataset.metric), predictions


def fit_and_predict(pipeline: Pipeline, dataset: Dataset) -> tuple[Pipeline, Any]:
    """Fit on every training row; predict the test set (probabilities when the metric needs them)."""
    fitted = pipeline.fit(dataset.X, dataset.y)
    if dataset.X_test is None:
        return fitted, None
    n_classes = len(dataset.classes) if dataset.classes is not None else None
    return fitted, runtime.predict_for_metric(fitted, dataset.X_test, dataset.metric_info.needs_proba, n_classes)
