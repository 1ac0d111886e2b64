"""The classical engine: a Dataset, and a SolutionSpec compiled to a scikit-learn pipeline, cross-validated and refit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.pipeline import Pipeline

from agent import runtime
from agent.models import Trainer, lookup_trainer
from agent.spec import ModelSpec, SolutionSpec, ValidationSpec
from agent.steps import CompileContext, StepOp, step_op, target_op
from retrieval.metrics import DEFAULT_METRIC, MetricInfo, metric_info
from retrieval.profile import (
    DESCRIPTION_FILE,
    SAMPLE_SUBMISSION_FILE,
    TEST_FILE,
    TRAIN_FILE,
    ColumnInfo,
    TaskProfile,
    describe_columns,
    infer_task_type,
)

CLASSIFICATION_TASKS = ("binary", "multiclass")
# The model of a blend: params {"members": [member spec dicts], "weights": [...]}, and for a stack or a rank
# average also "intercept" and "link" (see agent.ensemble).
ENSEMBLE = "ensemble"
_FILES_EVERY_SOLUTION_READS = {TRAIN_FILE, TEST_FILE, SAMPLE_SUBMISSION_FILE, DESCRIPTION_FILE}


class DatasetError(ValueError):
    """Data the engine cannot learn from; the message names the column or argument to fix."""


@dataclass(frozen=True, eq=False)
class Dataset:
    name: str
    X: pd.DataFrame
    y: np.ndarray  # 0..k-1 class codes for classification, floats for regression
    task_type: str
    metric: str
    columns: tuple[ColumnInfo, ...]
    target: str
    classes: np.ndarray | None = None  # the label of each class code
    X_test: pd.DataFrame | None = None
    test_ids: pd.Series | None = None
    id_column: str | None = None
    sample_submission: pd.DataFrame | None = None
    task_dir: Path | None = None
    ignored_files: tuple[str, ...] = ()  # task files that no solution reads

    @property
    def metric_info(self) -> MetricInfo:
        return metric_info(self.metric)

    @property
    def classification(self) -> bool:
        return self.task_type in CLASSIFICATION_TASKS

    def compile_context(self, random_state: int) -> CompileContext:
        return CompileContext(self.task_type, self.columns, self.X, self.y, self.X_test, random_state)

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        target: str,
        *,
        metric: str | None = None,
        test: pd.DataFrame | None = None,
        id_column: str | None = None,
        name: str = "frame",
    ) -> Dataset:
        """A dataset from one table: `target` is predicted from every other column."""
        if target not in df.columns:
            raise DatasetError(f"the frame has no column {target!r}; pass target= one of {list(df.columns)[:10]}")
        named_metric = metric_info(metric) if metric is not None else None
        task_type = infer_task_type(df[target], named_metric)
        if task_type not in (*CLASSIFICATION_TASKS, "regression"):
            raise DatasetError(f"column {target!r} cannot be learned (task type {task_type}); check target=")
        X = runtime.normalise_frame(df.drop(columns=[target]))
        y, classes = runtime.encode_target(df[target], task_type in CLASSIFICATION_TASKS)
        return cls(
            name=name, X=X, y=y, task_type=task_type, metric=(named_metric.name if named_metric else DEFAULT_METRIC[task_type]),
            columns=tuple(describe_columns(X, id_column=id_column)), target=target, classes=classes,
            X_test=None if test is None else runtime.normalise_frame(test[X.columns]), id_column=id_column,
            test_ids=None if test is None or id_column is None else test[id_column],
        )

    @classmethod
    def from_profile(cls, profile: TaskProfile) -> Dataset:
        """The task folder's data, as the profile set it up."""
        if profile.task_type not in (*CLASSIFICATION_TASKS, "regression"):
            raise DatasetError(f"{profile.task_dir / TRAIN_FILE}: target {profile.target!r} gives task type "
                               f"{profile.task_type}; pass --target naming a class or numeric column")
        X, y_raw, X_test, test_ids, sample = runtime.load_task(profile.task_dir, profile.target, profile.id_column)
        y, classes = runtime.encode_target(y_raw, profile.task_type in CLASSIFICATION_TASKS)
        present = set(X.columns)
        return cls(
            name=profile.name, X=X, y=y, task_type=profile.task_type, metric=profile.metric,
            columns=tuple(column for column in profile.columns if column.name in present), target=profile.target,
            classes=classes, X_test=X_test, test_ids=test_ids, id_column=profile.id_column, sample_submission=sample,
            task_dir=profile.task_dir,
            ignored_files=tuple(name for name in profile.files if name not in _FILES_EVERY_SOLUTION_READS),
        )


def compile_spec(
    spec: SolutionSpec,
    context: CompileContext,
    trainers: Mapping[str, Trainer],
    extra_steps: Mapping[str, StepOp] | None = None,
) -> Pipeline:
    """The spec as an unfitted pipeline: its steps, then the model (wrapped by the target transform)."""
    if spec.model.name == ENSEMBLE:
        members = [(f"m{index}", compile_spec(member, context, trainers, extra_steps))
                   for index, member in enumerate(ensemble_members(spec))]
        params = spec.model.params
        weights = list(params["weights"])
        if "link" in params:
            return Pipeline([("model", runtime.LinearStack(members, weights, params["intercept"], params["link"]))])
        if context.task_type in CLASSIFICATION_TASKS:
            return Pipeline([("model", runtime.VotingClassifier(members, voting="soft", weights=weights))])
        return Pipeline([("model", runtime.VotingRegressor(members, weights=weights))])
    model = lookup_trainer(spec.model.name, trainers)(spec.model.params, context.task_type, context.random_state)
    if spec.target_transform is not None:
        model = target_op(spec.target_transform.op).wrap(spec.target_transform.params, model)
    steps = [(f"{index}_{step.op}", step_op(step.op, extra_steps).build(step.params, context))
             for index, step in enumerate(spec.steps)]
    return Pipeline([*steps, ("model", model)])


def ensemble_spec(members: Sequence[SolutionSpec], weights: Sequence[float], validation: ValidationSpec, *,
                  intercept: float = 0.0, link: str | None = None) -> SolutionSpec:
    """A weighted blend of member solutions (probabilities averaged for classification, values for regression);
    with a `link`, members are combined in that space with an intercept (runtime.LinearStack)."""
    params: dict[str, Any] = {"members": [member.to_dict() for member in members],
                              "weights": [float(weight) for weight in weights]}
    if link is not None:
        params.update(intercept=float(intercept), link=link)
    return SolutionSpec((), ModelSpec(ENSEMBLE, params), None, validation)


def ensemble_members(spec: SolutionSpec) -> list[SolutionSpec]:
    return [SolutionSpec.from_dict(member) for member in spec.model.params["members"]] \
        if spec.model.name == ENSEMBLE else []


def model_names(spec: SolutionSpec) -> set[str]:
    """Every trainer a spec uses, its ensemble members' included."""
    members = ensemble_members(spec)
    return set().union(*(model_names(member) for member in members)) if members else {spec.model.name}


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


def submission(dataset: Dataset, prediction: Any) -> pd.DataFrame:
    """The submission table for test-set predictions, shaped like the sample submission."""
    return runtime.submission_frame(
        prediction, test_ids=dataset.test_ids, id_column=dataset.id_column, target=dataset.target,
        classes=dataset.classes, needs_proba=dataset.metric_info.needs_proba, sample=dataset.sample_submission,
    )
