"""The classical engine: a Dataset, and a SolutionSpec compiled to a scikit-learn pipeline, cross-validated and refit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agent.engine import runtime
from agent.engine.steps import CompileContext
from retrieval.metrics import CLASSIFICATION, DEFAULT_METRIC, MetricInfo, metric_info
from retrieval.profile import (
    DESCRIPTION_FILE,
    SAMPLE_SUBMISSION_FILE,
    TEST_FILE,
    TRAIN_FILE,
    ColumnInfo,
    TaskProfile,
    TaskSetupError,
    describe_columns,
    infer_positive_class,
    infer_task_type,
)

_FILES_EVERY_SOLUTION_READS = {TRAIN_FILE, TEST_FILE, SAMPLE_SUBMISSION_FILE, DESCRIPTION_FILE}


class DatasetError(ValueError):
    """Data the engine cannot learn from; the message names the column or argument to fix."""


@dataclass(frozen=True, eq=False)
class Dataset:
    name: str
    X: pd.DataFrame
    y: np.ndarray  # 0..k-1 class codes for classification (a binary task's positive class is 1), floats for regression
    task_type: str
    metric: str
    columns: tuple[ColumnInfo, ...]
    target: str
    classes: np.ndarray | None = None  # the label of each class code
    positive_class: Any = None  # binary tasks: the label coded 1, whose probability a submission holds
    X_test: pd.DataFrame | None = None
    test_ids: pd.Series | None = None
    id_column: str | None = None
    sample_submission: pd.DataFrame | None = None
    task_dir: Path | None = None
    ignored_files: tuple[str, ...] = ()  # task files that no solution reads
    encodings: Mapping[str, str] = field(default_factory=dict)  # task files not in UTF-8 -> their encoding
    # task files read beyond pandas' defaults -> how (TaskProfile.csv_formats)
    csv_formats: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Classes with fewer training rows than this are left out (runtime.drop_rare_classes), and their labels with their
    # share of the training rows, which is their probability in a submission of probabilities
    min_class_rows: int | None = None
    dropped_classes: Mapping[Any, float] = field(default_factory=dict)

    @property
    def metric_info(self) -> MetricInfo:
        return metric_info(self.metric)

    @property
    def classification(self) -> bool:
        return self.task_type in CLASSIFICATION

    def compile_context(self, random_state: int) -> CompileContext:
        return CompileContext(self.task_type, self.columns, self.X, self.y, self.X_test, random_state)

    def changed_target(self, rows: np.ndarray) -> np.ndarray:
        """The encoded target with every value in `rows` changed (the next class, or y * 3 + 7): the leakage
        probes' perturbation (agent.verify.probes, agent.execution.free_code)."""
        y = self.y.copy()
        y[rows] = (y[rows] + 1) % len(self.classes) if self.classification else y[rows] * 3 + 7
        return y

    def submission(self, prediction: Any) -> pd.DataFrame:
        """The submission table for test-set predictions, shaped like the sample submission."""
        return runtime.submission_frame(
            prediction, test_ids=self.test_ids, id_column=self.id_column, target=self.target,
            classes=self.classes, needs_proba=self.metric_info.needs_proba, sample=self.sample_submission,
            rare=self.dropped_classes,
        )

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
        positive_class: Any = None,
    ) -> Dataset:
        """A dataset from one table: `target` is predicted from every other column.

        A binary target's positive class is `positive_class`, else the conventional label (1, yes, true, ...),
        else the minority class, as task set-up chooses it."""
        if target not in df.columns:
            raise DatasetError(f"the frame has no column {target!r}; pass target= one of {list(df.columns)[:10]}")
        named_metric = metric_info(metric) if metric is not None else None
        task_type = infer_task_type(df[target], named_metric)
        if task_type not in (*CLASSIFICATION, "regression"):
            raise DatasetError(f"column {target!r} cannot be learned (task type {task_type}); check target=")
        positive = None
        if task_type == "binary":
            try:
                positive = infer_positive_class(df[target], given=positive_class, target=target)[0]
            except TaskSetupError as error:
                raise DatasetError(str(error)) from error
        elif positive_class is not None:
            raise DatasetError(f"positive_class={positive_class!r} needs a binary target; {target!r} is {task_type}")
        X = runtime.normalise_frame(df.drop(columns=[target]))
        y, classes = runtime.encode_target(df[target], task_type in CLASSIFICATION, positive)
        return cls(
            name=name, X=X, y=y, task_type=task_type, metric=(named_metric.name if named_metric else DEFAULT_METRIC[task_type]),
            columns=tuple(describe_columns(X, id_column=id_column)), target=target, classes=classes,
            positive_class=positive,
            X_test=None if test is None else runtime.normalise_frame(test[X.columns]), id_column=id_column,
            test_ids=None if test is None or id_column is None else test[id_column],
        )

    @classmethod
    def from_profile(cls, profile: TaskProfile, min_class_rows: int | None = None) -> Dataset:
        """The task folder's data, as the profile set it up; a multiclass task leaves out the rows of classes with
        fewer than `min_class_rows` rows (the CV's folds), which no fold could validate: scored on labels they are
        never predicted, on probabilities they get their share of the training rows."""
        if profile.task_type not in (*CLASSIFICATION, "regression"):
            raise DatasetError(f"{profile.task_dir / TRAIN_FILE}: target {profile.target!r} gives task type "
                               f"{profile.task_type}; pass --target naming a class or numeric column")
        X, y_raw, X_test, test_ids, sample = runtime.load_task(
            profile.task_dir, profile.target, profile.id_column, [column.name for column in profile.columns],
            profile.encodings, profile.csv_formats)
        if profile.task_type != "multiclass":
            min_class_rows = None  # a binary task cannot lose a class
        X, y_raw, dropped = runtime.drop_rare_classes(X, y_raw, min_class_rows)
        positive = profile.positive_class if profile.task_type == "binary" else None
        y, classes = runtime.encode_target(y_raw, profile.task_type in CLASSIFICATION, positive)
        present = set(X.columns)
        return cls(
            name=profile.name, X=X, y=y, task_type=profile.task_type, metric=profile.metric,
            columns=tuple(column for column in profile.columns if column.name in present), target=profile.target,
            classes=classes, positive_class=positive, X_test=X_test, test_ids=test_ids, id_column=profile.id_column,
            sample_submission=sample,
            task_dir=profile.task_dir,
            ignored_files=tuple(name for name in profile.files if name not in _FILES_EVERY_SOLUTION_READS),
            encodings=dict(profile.encodings), csv_formats=dict(profile.csv_formats), min_class_rows=min_class_rows,
            dropped_classes={label.item() if isinstance(label, np.generic) else label: share
                             for label, share in dropped.items()},
        )

    def sample(self, rows: int, n_splits: int, seed: int) -> Dataset:
        """`rows` of the training rows, drawn at random (by class for classification, and every class keeps at least
        `n_splits` rows so that each CV fold holds it), without the test set: the data a large table is explored on."""
        n_rows = len(self.y)
        if rows >= n_rows:
            return self
        rng = np.random.default_rng(seed)
        if self.classification:
            picked = []
            for label in np.unique(self.y):
                members = rng.permutation(np.flatnonzero(self.y == label))
                share = max(round(rows * len(members) / n_rows), min(n_splits, len(members)))
                picked.append(members[:share])
            chosen = np.sort(np.concatenate(picked))
        else:
            chosen = np.sort(rng.choice(n_rows, size=rows, replace=False))
        return replace(self, X=self.X.iloc[chosen].reset_index(drop=True), y=self.y[chosen], X_test=None,
                       test_ids=None)

    def with_features(self, names: Sequence[str]) -> Dataset:
        """The dataset learning from `names` only (in that order): a wide table's screened columns."""
        names = list(names)
        kept = set(names)
        return replace(self, X=self.X[names], X_test=self.X_test[names] if self.X_test is not None else None,
                       columns=tuple(column for column in self.columns if column.name in kept))

    def baseline_prediction(self) -> Any:
        """The trivial model's test predictions, in the shape a model's are: the training class shares for every
        row (or the most frequent class's code when the metric scores labels), or the mean target."""
        rows = len(self.X_test) if self.X_test is not None else 0
        if not self.classification:
            return np.full(rows, float(np.mean(self.y)))
        shares = np.bincount(np.asarray(self.y, dtype=int), minlength=len(self.classes)) / len(self.y)
        if not self.metric_info.needs_proba:
            return np.full(rows, int(np.argmax(shares)))
        return np.tile(shares, (rows, 1))

    def submission_problems(self, submission: pd.DataFrame) -> list[str]:
        """What makes `submission` invalid against sample_submission.csv (runtime.submission_problems)."""
        return runtime.submission_problems(submission, self.sample_submission, id_column=self.id_column,
                                           classes=self.classes, needs_proba=self.metric_info.needs_proba,
                                           test_rows=len(self.X_test) if self.X_test is not None else 0)
