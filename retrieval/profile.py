"""Task set-up: read a competition folder and infer what is to be predicted, from what, and how it is scored.

A task folder holds `train.csv`, `test.csv`, usually `description.md` and `sample_submission.csv`, and
maybe other files. Nothing machine-readable says which column is the target or which metric counts,
so `profile_task` infers them and records the evidence for each inference in `TaskProfile.inferred`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from retrieval.metrics import CLASSIFICATION, DEFAULT_METRIC, MetricInfo, UnknownMetricError, metric_info, parse_metric

TRAIN_FILE = "train.csv"
TEST_FILE = "test.csv"
SAMPLE_SUBMISSION_FILE = "sample_submission.csv"
DESCRIPTION_FILE = "description.md"

TASK_TYPES = ("binary", "multiclass", "regression", "other")
COLUMN_KINDS = ("numeric", "categorical", "datetime", "text", "id")

_ID_NAME = re.compile(r"^(id|.*[_\s.]id|id[_\s.].*|.*Id|.*ID|rownames)$", re.IGNORECASE)
_DATE_VALUE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2})?)?|^\d{1,2}/\d{1,2}/\d{2,4}")
_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff"}
_FORECAST_WORDS = re.compile(r"\b(forecast\w*|time[- ]series|future (values|sales|demand))\b", re.IGNORECASE)
# Free text: several words per value and mostly distinct values. Short repeated strings are categories.
_TEXT_MIN_WORDS = 3.0
_TEXT_MIN_UNIQUE_SHARE = 0.5
_KIND_SAMPLE_ROWS = 500


class TaskSetupError(Exception):
    """A task folder that cannot be set up; the message names the file and the fix."""


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    kind: str  # one of COLUMN_KINDS
    cardinality: int
    missing_share: float


@dataclass(frozen=True)
class TaskProfile:
    name: str
    task_dir: Path
    description: str
    modality: str  # "tabular", "tabular+text", "text", "image" or "time series"
    task_type: str  # one of TASK_TYPES
    target: str
    id_column: str | None
    metric: str  # a canonical name of retrieval.metrics
    n_rows: int
    n_cols: int
    columns: tuple[ColumnInfo, ...]  # the feature columns of train.csv (the target excluded)
    missing_share: float
    class_balance: float | None  # share of the rarest class; None for regression
    files: tuple[str, ...]  # every file of the task folder, relative to it
    inferred: Mapping[str, str] = field(default_factory=dict)  # what was inferred -> the evidence
    submission_columns: tuple[str, ...] = ()  # columns of sample_submission.csv, () when absent
    labels: tuple[str, ...] = ()  # hierarchical task labels, filled by retrieval.analysis
    competition: str | None = None

    @property
    def metric_info(self) -> MetricInfo:
        return metric_info(self.metric)

    def columns_of_kind(self, kind: str) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns if column.kind == kind)

    def column_infos(self, kind: str) -> tuple[ColumnInfo, ...]:
        return tuple(column for column in self.columns if column.kind == kind)

    def to_dict(self) -> dict[str, Any]:
        fields = dataclasses.asdict(self)
        fields["task_dir"] = str(self.task_dir)
        fields["inferred"] = dict(self.inferred)
        return fields


def profile_task(
    task_dir: str | Path,
    *,
    target: str | None = None,
    id_column: str | None = None,
    metric: str | None = None,
    competition: str | None = None,
) -> TaskProfile:
    """Profile a competition folder; explicit `target`, `id_column` and `metric` override inference."""
    task_dir = Path(task_dir)
    if not task_dir.is_dir():
        raise TaskSetupError(f"{task_dir}: no such task folder; pass a folder holding {TRAIN_FILE} and {TEST_FILE}")
    train = _read_csv(task_dir, TRAIN_FILE, required=True)
    test = _read_csv(task_dir, TEST_FILE, required=True)
    sample = _read_csv(task_dir, SAMPLE_SUBMISSION_FILE, required=False)
    description_path = task_dir / DESCRIPTION_FILE
    description = description_path.read_text(encoding="utf-8") if description_path.is_file() else ""
    inferred: dict[str, str] = {}

    target = _infer_target(task_dir, train, test, sample, target, inferred)
    id_column = _infer_id_column(task_dir, train, test, sample, id_column, inferred)
    named_metric = _named_metric(task_dir, description, metric, inferred)
    task_type = infer_task_type(train[target], named_metric, inferred)
    if named_metric is None:
        chosen = DEFAULT_METRIC.get(task_type)
        if chosen is None:
            raise TaskSetupError(f"{description_path}: names no metric and the task type is {task_type}; pass --metric")
        named_metric = metric_info(chosen)
        inferred["metric"] = f"{DESCRIPTION_FILE} names no metric; default for {task_type} tasks"
    elif task_type not in named_metric.task_types:
        raise TaskSetupError(
            f"{task_dir / TRAIN_FILE}: target {target!r} looks like a {task_type} target but the metric "
            f"{named_metric.name} is for {'/'.join(sorted(named_metric.task_types))}; pass --metric or --target"
        )

    features = train.drop(columns=[target])
    columns = tuple(describe_columns(features, id_column=id_column))
    files = tuple(sorted(str(path.relative_to(task_dir)) for path in task_dir.rglob("*") if path.is_file()))
    return TaskProfile(
        name=task_dir.resolve().name,
        task_dir=task_dir,
        description=description,
        modality=_infer_modality(columns, files, description),
        task_type=task_type,
        target=target,
        id_column=id_column,
        metric=named_metric.name,
        n_rows=len(train),
        n_cols=train.shape[1],
        columns=columns,
        missing_share=float(features.isna().to_numpy().mean()) if features.size else 0.0,
        class_balance=class_balance(train[target]) if task_type in CLASSIFICATION else None,
        files=files,
        inferred=inferred,
        submission_columns=tuple(sample.columns) if sample is not None else (),
        competition=competition,
    )


def describe_columns(frame: pd.DataFrame, *, id_column: str | None) -> list[ColumnInfo]:
    """Kind, cardinality and missing share of every column of `frame`."""
    return [
        ColumnInfo(
            name=name,
            kind="id" if name == id_column else column_kind(frame[name]),
            cardinality=int(frame[name].nunique(dropna=True)),
            missing_share=float(frame[name].isna().mean()) if len(frame) else 0.0,
        )
        for name in frame.columns
    ]


def column_kind(values: pd.Series) -> str:
    """numeric, datetime, text or categorical, judged from dtype and a sample of the values."""
    if pd.api.types.is_datetime64_any_dtype(values):
        return "datetime"
    if pd.api.types.is_numeric_dtype(values):
        return "numeric"
    present = values.dropna()
    sample = present.head(_KIND_SAMPLE_ROWS).astype(str)
    if sample.empty:
        return "categorical"
    if sample.str.match(_DATE_VALUE).mean() >= 0.95:
        return "datetime"
    words = sample.str.split().str.len().mean()
    if words >= _TEXT_MIN_WORDS and present.nunique() / len(present) >= _TEXT_MIN_UNIQUE_SHARE:
        return "text"
    return "categorical"


def infer_task_type(target: pd.Series, metric: MetricInfo | None, inferred: dict[str, str] | None = None) -> str:
    """binary, multiclass, regression or other, from the target's values and the metric when one is named."""
    n_classes = int(target.nunique(dropna=True))
    numeric = pd.api.types.is_numeric_dtype(target) and not pd.api.types.is_bool_dtype(target)
    if n_classes < 2:
        task_type, evidence = "other", f"target has {n_classes} distinct value(s)"
    elif n_classes == 2:
        task_type, evidence = "binary", "target has 2 distinct values"
    elif not numeric:
        task_type, evidence = "multiclass", f"target is non-numeric with {n_classes} classes"
    elif metric is not None and metric.is_classification:
        integral = bool((target.dropna() % 1 == 0).all())
        task_type = "multiclass" if integral else "other"
        evidence = f"numeric target with {n_classes} values and a classification metric ({metric.name})"
    else:
        task_type, evidence = "regression", f"numeric target with {n_classes} distinct values"
    if inferred is not None:
        inferred["task_type"] = evidence
    return task_type


def class_balance(target: pd.Series) -> float:
    """Share of the rarest class."""
    return float(target.value_counts(normalize=True).min())


def _read_csv(task_dir: Path, file_name: str, *, required: bool) -> pd.DataFrame | None:
    path = task_dir / file_name
    if not path.is_file():
        if required:
            present = ", ".join(sorted(p.name for p in task_dir.iterdir())) or "nothing"
            raise TaskSetupError(f"{path}: missing (the folder holds {present}); a task needs {TRAIN_FILE} and {TEST_FILE}")
        return None
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise TaskSetupError(f"{path}: not a readable CSV file ({error}); fix or replace it") from error
    if required and frame.empty:
        raise TaskSetupError(f"{path}: has no rows; a task needs rows to learn from and to predict")
    return frame


def _infer_target(task_dir, train, test, sample, target, inferred) -> str:
    if target is not None:
        if target not in train.columns:
            raise TaskSetupError(f"{task_dir / TRAIN_FILE}: has no column {target!r} (given as the target); check --target")
        inferred["target"] = "given"
        return target
    only_in_train = [name for name in train.columns if name not in test.columns]
    submitted = list(sample.columns) if sample is not None else []
    if len(only_in_train) == 1:
        inferred["target"] = f"only column of {TRAIN_FILE} missing from {TEST_FILE}"
        return only_in_train[0]
    named = [name for name in (only_in_train or train.columns) if name in submitted[1:]]
    if len(named) == 1:
        where = f"missing from {TEST_FILE} and " if only_in_train else ""
        inferred["target"] = f"column of {TRAIN_FILE} {where}named in {SAMPLE_SUBMISSION_FILE}"
        return named[0]
    if only_in_train:
        raise TaskSetupError(
            f"{task_dir / TRAIN_FILE}: several columns are missing from {TEST_FILE} "
            f"({', '.join(only_in_train)}) and {SAMPLE_SUBMISSION_FILE} does not single one out; pass --target"
        )
    raise TaskSetupError(
        f"{task_dir / TRAIN_FILE}: has the same columns as {TEST_FILE}, so the target cannot be told; pass --target"
    )


def _infer_id_column(task_dir, train, test, sample, id_column, inferred) -> str | None:
    if id_column is not None:
        if id_column not in test.columns:
            raise TaskSetupError(f"{task_dir / TEST_FILE}: has no column {id_column!r} (given as the id); check --id")
        inferred["id_column"] = "given"
        return id_column
    if sample is not None and len(sample.columns) and sample.columns[0] in test.columns:
        inferred["id_column"] = f"first column of {SAMPLE_SUBMISSION_FILE}, also in {TEST_FILE}"
        return str(sample.columns[0])
    for name in test.columns:
        if name in train.columns and _ID_NAME.match(str(name)) and test[name].is_unique and train[name].is_unique:
            inferred["id_column"] = "named like an id and unique in train.csv and test.csv"
            return str(name)
    inferred["id_column"] = f"none found: submission rows follow the order of {TEST_FILE}"
    return None


def _named_metric(task_dir, description, metric, inferred) -> MetricInfo | None:
    if metric is not None:
        try:
            chosen = metric_info(metric)
        except UnknownMetricError as error:
            raise TaskSetupError(f"--metric: {error}") from error
        inferred["metric"] = "given"
        return chosen
    parsed = parse_metric(description)
    if parsed is None:
        return None
    chosen, phrase = parsed
    inferred["metric"] = f"{DESCRIPTION_FILE} says {phrase!r}"
    return chosen


def _infer_modality(columns: tuple[ColumnInfo, ...], files: tuple[str, ...], description: str) -> str:
    if any(Path(name).suffix.lower() in _IMAGE_SUFFIXES for name in files):
        return "image"
    kinds = {column.kind for column in columns if column.kind != "id"}
    if "datetime" in kinds and _FORECAST_WORDS.search(description):
        return "time series"
    if kinds == {"text"}:
        return "text"
    return "tabular+text" if "text" in kinds else "tabular"
