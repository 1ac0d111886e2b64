"""Run-time support for solutions: reading a task, feature helpers, metrics, cross-validation, submissions.

Every rendered solution.py carries this module's source verbatim (see agent.render), so the agent and
the user's copy score a model with the same code. It must therefore import only numpy, pandas,
scikit-learn and, when installed, xgboost / lightgbm / catboost — nothing from casebook.
"""

import re
from pathlib import Path

import numpy as np
import pandas as pd

# Most estimator imports below are for the model source that solution.py's build_model() evaluates.
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor, make_column_selector
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    cohen_kappa_score,
    f1_score,
    log_loss,
    matthews_corrcoef,
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_squared_error,
    r2_score,
    roc_auc_score,
)
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler, TargetEncoder

try:
    from xgboost import XGBClassifier, XGBRegressor
except ImportError:  # a solution that does not use XGBoost runs without it
    pass
try:
    from lightgbm import LGBMClassifier, LGBMRegressor
except ImportError:
    pass
try:
    from catboost import CatBoostClassifier, CatBoostRegressor
except ImportError:
    pass

# Column selectors evaluated when a step is fitted, so they also see columns earlier steps created.
NUMERIC = make_column_selector(dtype_include="number")
CATEGORICAL = make_column_selector(dtype_exclude="number")


def on_columns(transformer, columns):
    """Apply `transformer` to `columns` and pass every other column through, keeping names."""
    return ColumnTransformer(
        [("step", transformer, columns)], remainder="passthrough", verbose_feature_names_out=False
    ).set_output(transform="pandas")


def one_hot_name(column, category):
    # XGBoost rejects feature names holding [ ] or <, which category values often do ("<30").
    return re.sub(r"[\[\]<>,]", "_", f"{column}={category}")


class AddMissingIndicators(TransformerMixin, BaseEstimator):
    """Add a 0/1 column `<name>_missing` for each column missing in at least `min_missing_frac` of fit rows."""

    def __init__(self, min_missing_frac=0.01):
        self.min_missing_frac = min_missing_frac

    def fit(self, X, y=None):
        shares = X.isna().mean()
        self.columns_ = [name for name in X.columns if shares[name] > 0 and shares[name] >= self.min_missing_frac]
        return self

    def transform(self, X):
        return X.assign(**{f"{name}_missing": X[name].isna().astype(float) for name in self.columns_})


class OrdinalCodes(TransformerMixin, BaseEstimator):
    """Each non-numeric column as numbers: categories by descending training frequency, in sorted order, or
    as `mappings` say. Unseen categories get `unknown_value`; missing values stay missing."""

    def __init__(self, order="frequency", unknown_value=-1, mappings=None):
        self.order = order
        self.unknown_value = unknown_value
        self.mappings = mappings

    def fit(self, X, y=None):
        self.codes_ = {}
        for name in X.columns:
            if pd.api.types.is_numeric_dtype(X[name]):
                continue
            given = (self.mappings or {}).get(name)
            if given is not None:
                self.codes_[name] = dict(given)
                continue
            counts = X[name].dropna().astype(str).value_counts()
            levels = list(counts.index) if self.order == "frequency" else sorted(counts.index)
            self.codes_[name] = {level: code for code, level in enumerate(levels)}
        return self

    def transform(self, X):
        coded = {}
        for name, codes in self.codes_.items():
            values = X[name]
            mapped = values.astype(str).map(codes).astype(float).fillna(self.unknown_value)
            coded[name] = mapped.where(values.notna(), np.nan)
        return X.assign(**coded)


class DatetimeParts(TransformerMixin, BaseEstimator):
    """Replace each listed date column by its parts, and optionally the days since the earliest training date."""

    def __init__(self, columns=(), parts=("year", "month", "day", "dayofweek", "hour"), add_elapsed=False):
        self.columns = columns
        self.parts = parts
        self.add_elapsed = add_elapsed

    def fit(self, X, y=None):
        self.reference_ = {name: _as_datetime(X[name]).min() for name in self.columns}
        return self

    def transform(self, X):
        features = {}
        for name in self.columns:
            when = _as_datetime(X[name])
            for part in self.parts:
                values = when.dt.dayofweek >= 5 if part == "is_weekend" else getattr(when.dt, part)
                features[f"{name}_{part}"] = values.astype(float).where(when.notna(), np.nan)
            if self.add_elapsed:
                features[f"{name}_days"] = (when - self.reference_[name]).dt.total_seconds() / 86400
        return X.drop(columns=list(self.columns)).assign(**features)


def _as_datetime(values):
    return pd.to_datetime(values, errors="coerce", format="mixed")


def shifted_log(y, offset=1.0):
    return np.log(np.asarray(y, dtype=float) + offset)


def shifted_exp(z, offset=1.0):
    return np.exp(z) - offset


# ---- metrics: every function takes the true labels or values and the prediction the metric needs:
# class probabilities (n_rows x n_classes) when it needs probabilities, else labels or values.

def rmse(y_true, y_pred):
    return float(np.sqrt(mean_squared_error(y_true, y_pred)))


def rmsle(y_true, y_pred):
    return rmse(np.log1p(y_true), np.log1p(np.clip(y_pred, 0, None)))


def roc_auc(y_true, proba):
    if proba.shape[1] == 2:
        return float(roc_auc_score(y_true, proba[:, 1]))
    return float(roc_auc_score(y_true, proba, multi_class="ovr", labels=np.arange(proba.shape[1])))


def class_log_loss(y_true, proba):
    return float(log_loss(y_true, proba, labels=np.arange(proba.shape[1])))


def f1(y_true, y_pred):
    return float(f1_score(y_true, y_pred, average="binary" if len(np.unique(y_true)) <= 2 else "macro"))


METRIC_FUNCTIONS = {
    "rmsle": rmsle,
    "rmse": rmse,
    "mse": lambda y, p: float(mean_squared_error(y, p)),
    "mae": lambda y, p: float(mean_absolute_error(y, p)),
    "mape": lambda y, p: float(mean_absolute_percentage_error(y, p)),
    "r2": lambda y, p: float(r2_score(y, p)),
    "roc_auc": roc_auc,
    "log_loss": class_log_loss,
    "mcc": lambda y, p: float(matthews_corrcoef(y, p)),
    "qwk": lambda y, p: float(cohen_kappa_score(y, p, weights="quadratic")),
    "f1_macro": lambda y, p: float(f1_score(y, p, average="macro")),
    "f1": f1,
    "balanced_accuracy": lambda y, p: float(balanced_accuracy_score(y, p)),
    "accuracy": lambda y, p: float(accuracy_score(y, p)),
}


def predict_for_metric(model, X, needs_proba, n_classes=None):
    """What the metric scores: class probabilities (all classes, even ones a fold lacked) or predictions."""
    if not needs_proba:
        return np.asarray(model.predict(X))
    proba = np.asarray(model.predict_proba(X), dtype=float)
    proba = proba / proba.sum(axis=1, keepdims=True)  # float32 outputs (XGBoost) sum to 1 only roughly
    if n_classes is not None and proba.shape[1] != n_classes:
        full = np.zeros((len(proba), n_classes))
        full[:, np.asarray(model.classes_, dtype=int)] = proba
        proba = full
    return proba


def make_folds(y, *, classification, n_splits, seed):
    """Shuffled K folds, stratified for classification."""
    splitter = (StratifiedKFold if classification else KFold)(n_splits=n_splits, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(y)), y))


def cross_validate(model, X, y, *, metric, needs_proba, classification, n_splits, seed):
    """The metric on each held-out fold, fitting a fresh clone of `model` per fold."""
    n_classes = int(np.max(y)) + 1 if classification else None
    scores = []
    for train_rows, valid_rows in make_folds(y, classification=classification, n_splits=n_splits, seed=seed):
        fitted = clone(model).fit(X.iloc[train_rows], y[train_rows])
        prediction = predict_for_metric(fitted, X.iloc[valid_rows], needs_proba, n_classes)
        scores.append(METRIC_FUNCTIONS[metric](y[valid_rows], prediction))
    return scores


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


def encode_target(values, classification):
    """Classes as 0..k-1 (sorted labels, so the positive class of a binary task is the larger one)."""
    if not classification:
        return np.asarray(values, dtype=float), None
    classes, codes = np.unique(np.asarray(values), return_inverse=True)
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
        proba = np.asarray(prediction)
        by_class = {str(label): proba[:, index] for index, label in enumerate(classes)}
        class_columns = sample is not None and set(sample.columns[1:]) <= set(by_class) and len(sample.columns) > 2
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
