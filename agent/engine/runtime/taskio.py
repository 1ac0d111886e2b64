"""Reading a task folder, encoding its target, and writing the submission in the sample's shape."""

from pathlib import Path

import numpy as np
import pandas as pd


def normalise_frame(frame):
    """Every non-numeric column as Python objects with NaN for missing, whatever the pandas version."""
    frame = frame.copy()
    for name in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[name]):
            values = frame[name].astype(object)
            frame[name] = values.where(values.notna(), np.nan)
    return frame


def read_table(path):
    return normalise_frame(pd.read_csv(path))


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


def load_task(task_dir, target, id_column):
    """Training features, raw target, test features, test ids (None without an id column) and the sample submission."""
    task_dir = Path(task_dir)
    train = read_table(task_dir / "train.csv")
    test = read_table(task_dir / "test.csv")
    sample_path = task_dir / "sample_submission.csv"
    sample = read_table(sample_path) if sample_path.is_file() else None
    features = [name for name in train.columns if name != target and name in test.columns]
    test_ids = test[id_column] if id_column is not None else None
    return train[features], train[target], test[features], test_ids, sample


def submission_frame(prediction, *, test_ids, id_column, target, classes, needs_proba, sample):
    """The submission: the sample's ids, order and columns when there is a sample, else id + target."""
    single_output = sample is not None and len(sample.columns) == (2 if id_column is not None else 1)
    target = sample.columns[-1] if single_output else target
    if classes is not None and needs_proba:
        # Columns named after classes get their class's probability, in the sample's order; a single binary
        # column gets the positive class's (code 1, last); else the most probable label.
        proba = np.asarray(prediction)
        by_class = {str(label): proba[:, index] for index, label in enumerate(classes)}
        outputs = [] if sample is None else [str(name) for name in sample.columns if name != id_column]
        class_columns = bool(outputs) and set(outputs) <= set(by_class)
        values = by_class if class_columns else {target: proba[:, -1] if proba.shape[1] == 2 else classes[proba.argmax(1)]}
    elif classes is not None:
        values = {target: classes[np.asarray(prediction, dtype=int)]}
    else:
        values = {target: np.asarray(prediction, dtype=float)}
    predicted = pd.DataFrame(values)
    if id_column is not None:
        predicted.insert(0, id_column, np.asarray(test_ids))
    if sample is None:
        return predicted
    if id_column is None:
        if len(sample) != len(predicted):
            raise ValueError(f"sample_submission.csv has {len(sample)} rows but test.csv has {len(predicted)}")
        return predicted[list(sample.columns)]
    ordered = sample[[id_column]].merge(predicted, on=id_column, how="left", validate="one_to_one")
    if ordered.drop(columns=[id_column]).isna().to_numpy().any():
        raise ValueError(f"sample_submission.csv lists ids that test.csv lacks (column {id_column!r})")
    return ordered[list(sample.columns)]
