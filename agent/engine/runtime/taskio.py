"""Reading a task folder, encoding its target, and writing the submission in the sample's shape."""

from pathlib import Path

import numpy as np
import pandas as pd

from .shapes import as_predictions, as_probabilities


def normalise_frame(frame):
    """Every non-numeric column as Python objects with NaN for missing, whatever the pandas version."""
    frame = frame.copy()
    for name in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[name]):
            values = frame[name].astype(object)
            frame[name] = values.where(values.notna(), np.nan)
    return frame


def read_table(path, encoding=None, csv_format=None):
    """A CSV file as a normalised frame; `encoding` and `csv_format` (its "sep", "decimal", "na_values" and
    "thousands") as task set-up detected them (None: UTF-8 and pandas' defaults)."""
    csv_format = csv_format or {}
    return normalise_frame(pd.read_csv(path, encoding=encoding or "utf-8", sep=csv_format.get("sep", ","),
                                       decimal=csv_format.get("decimal", "."), thousands=csv_format.get("thousands"),
                                       na_values=csv_format.get("na_values")))


def encode_target(values, classification, positive=None):
    """Classes as 0..k-1 in sorted order; for a binary task with a `positive` label, that class is code 1 (last)."""
    if not classification:
        return np.asarray(values, dtype=float), None
    classes, codes = np.unique(np.asarray(values), return_inverse=True)
    if positive is None or len(classes) != 2:
        return codes, classes
    matches = [index for index, label in enumerate(classes) if label == positive or str(label) == str(positive)]
    if len(matches) != 1:
        raise ValueError(f"positive class {positive!r} is not one of the labels {[str(label) for label in classes]}")
    if matches[0] == 0:
        classes, codes = classes[::-1].copy(), 1 - codes
    return codes, classes


def load_task(task_dir, target, id_column, features=None, encodings=None, csv_formats=None):
    """Training features, raw target, test features, test ids (None without an id column) and the sample submission.
    `features`: the columns to learn from (default: every train.csv column test.csv has too, but the target);
    `encodings`: file name -> text encoding, for files that are not UTF-8; `csv_formats`: file name -> how it is
    read beyond pandas' defaults (read_table)."""
    task_dir, encodings, csv_formats = Path(task_dir), encodings or {}, csv_formats or {}

    def read(name):
        return read_table(task_dir / name, encodings.get(name), csv_formats.get(name))

    train, test = read("train.csv"), read("test.csv")
    sample = read("sample_submission.csv") if (task_dir / "sample_submission.csv").is_file() else None
    if features is None:
        features = [name for name in train.columns if name != target and name in test.columns]
    features = list(features)
    train = train[train[target].notna()].reset_index(drop=True)  # a row without a target teaches nothing
    test_ids = test[id_column] if id_column is not None else None
    return train[features], train[target], test[features], test_ids, sample


def drop_rare_classes(X, y_raw, min_rows):
    """Training rows whose class has fewer than `min_rows` rows left out (None: none), and those classes, each with
    its share of the training rows (label -> share, in sorted label order): a class too rare for every CV fold to hold
    it can be neither validated nor, scored on labels, usefully predicted; scored on probabilities, its share is its
    probability (with_rare_classes)."""
    if not min_rows:
        return X, y_raw, {}
    counts = y_raw.value_counts()
    rare = sorted(label for label, count in counts.items() if count < min_rows)
    if not rare:
        return X, y_raw, {}
    keep = ~y_raw.isin(rare).to_numpy()
    shares = {label: float(counts[label]) / len(y_raw) for label in rare}
    return X[keep].reset_index(drop=True), y_raw[keep].reset_index(drop=True), shares


def with_rare_classes(proba, classes, rare):
    """Class probabilities over `classes` and the `rare` classes left out of training (label -> share): each rare
    class gets its share of the training rows, the others what is left in their proportions; (probabilities,
    labels). The prior is all the training rows tell of a class no fold could validate."""
    if not rare:
        return proba, classes
    shares = np.asarray(list(rare.values()), dtype=float)
    proba = np.column_stack([proba * (1.0 - shares.sum()), np.tile(shares, (len(proba), 1))])
    labels = np.concatenate([np.asarray(classes), np.asarray(list(rare))])
    return proba, labels


class ClassColumnsError(ValueError):
    """A sample submission with a column per class, and a column for a class no training row has."""


def submission_frame(prediction, *, test_ids, id_column, target, classes, needs_proba, sample, rare=None):
    """The submission: the sample's ids, order and columns when there is a sample, else id + target. `rare`: the
    classes left out of training (drop_rare_classes), which probabilities give their share (with_rare_classes)."""
    single_output = sample is not None and len(sample.columns) == (2 if id_column is not None else 1)
    target = sample.columns[-1] if single_output else target
    proba = None
    if classes is not None and needs_proba:
        proba, classes = with_rare_classes(as_probabilities(prediction), classes, rare)
    read, classes = classes, written_labels(classes)
    if proba is not None:
        # Columns named after classes get their class's probability, in the sample's order; a single binary
        # column gets the positive class's (code 1, last); else the most probable label. A class's column may be
        # named as its label is written (1) or as pandas read it (1.0, from a column with a gap).
        by_class = {}
        for index, (label, written) in enumerate(zip(read, classes)):
            by_class.setdefault(str(label), proba[:, index])
            by_class.setdefault(str(written), proba[:, index])
        outputs = [] if sample is None else [str(name) for name in sample.columns if name != id_column]
        class_columns = bool(outputs) and set(outputs) <= set(by_class)
        if len(outputs) > 1 and not class_columns:  # a column per class, one of them for no class trained on
            unknown = [name for name in outputs if name not in by_class]
            raise ClassColumnsError(f"sample_submission.csv's column{'s' if len(unknown) > 1 else ''} "
                                    f"{', '.join(repr(name) for name in unknown)} name{'' if len(unknown) > 1 else 's'} "
                                    f"no class of the training rows ({', '.join(repr(str(c)) for c in classes)})")
        values = ({name: by_class[name] for name in outputs} if class_columns
                  else {target: proba[:, -1] if proba.shape[1] == 2 else classes[proba.argmax(1)]})
    elif classes is not None:
        values = {target: classes[as_predictions(prediction).astype(int)]}
    else:
        values = {target: as_predictions(prediction).astype(float)}
    predicted = pd.DataFrame(values)
    if id_column is not None:
        predicted.insert(0, id_column, np.asarray(test_ids))
    if sample is None:
        return predicted
    if id_column is None or not pd.Series(np.asarray(test_ids)).is_unique:
        # No ids, or ids repeated in test.csv: one row per test row, in test order (a merge on a repeated id would
        # multiply rows), with the sample's ids where it lists test.csv's rows in the same order.
        if len(sample) != len(predicted):
            raise ValueError(f"sample_submission.csv has {len(sample)} rows but test.csv has {len(predicted)}")
        return predicted[list(sample.columns)]
    ordered = sample[[id_column]].merge(predicted, on=id_column, how="left", validate="one_to_one")
    if ordered.drop(columns=[id_column]).isna().to_numpy().any():
        raise ValueError(f"sample_submission.csv lists ids that test.csv lacks (column {id_column!r})")
    return ordered[list(sample.columns)]


def written_labels(classes):
    """Class labels as a submission writes them: float-coded classes that are whole numbers (1.0, 2.0, as pandas
    reads an integer column with a gap) as integers."""
    if classes is None:
        return None
    classes = np.asarray(classes)
    if classes.dtype.kind == "f" and np.isfinite(classes).all() and (classes % 1 == 0).all():
        return classes.astype(np.int64)
    return classes


def submission_problems(submission, sample, *, id_column, classes, needs_proba, test_rows):
    """What makes `submission` invalid against the sample submission (or, without one, against test.csv's rows):
    rows, ids and their order, column names, missing values, labels outside the training classes, probabilities
    outside [0, 1]. An empty list when it is valid."""
    problems = []
    if len(submission) != (len(sample) if sample is not None else test_rows):
        expected = f"sample_submission.csv's {len(sample)}" if sample is not None else f"test.csv's {test_rows}"
        problems.append(f"{len(submission)} rows, not {expected}")
    if sample is not None:
        if list(submission.columns) != list(sample.columns):
            problems.append(f"columns {list(submission.columns)}, not sample_submission.csv's {list(sample.columns)}")
        elif id_column is not None and len(submission) == len(sample) and not (
                submission[id_column].astype(str).to_numpy() == sample[id_column].astype(str).to_numpy()).all():
            problems.append(f"ids in column {id_column!r} differ from sample_submission.csv's, or are in another order")
    outputs = submission.drop(columns=[id_column]) if id_column in submission.columns else submission
    if outputs.isna().to_numpy().any():
        problems.append("missing values in " + ", ".join(str(name) for name in outputs.columns[outputs.isna().any()]))
    elif classes is not None and needs_proba:
        values = outputs.to_numpy(dtype=float)
        if ((values < 0) | (values > 1)).any():
            problems.append("probabilities outside [0, 1]")
    elif classes is not None:
        known = {str(label) for label in written_labels(classes)}
        unknown = sorted({str(value) for value in outputs.to_numpy().ravel()} - known)
        if unknown:
            problems.append(f"labels {unknown[:5]} that are not training classes")
    return problems
