"""Metrics, and the prediction each one scores.

Every metric function takes the true labels or values and the prediction the metric needs: class probabilities
(n_rows x n_classes) when it needs probabilities, else labels or values. Labels are class codes; in a binary task
code 1 is the positive class (taskio.encode_target), so ROC AUC scores column 1 and F1 scores class 1.
"""

import numpy as np
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

from .shapes import as_predictions, as_probabilities


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
    """What the metric scores, in one shape whatever the library: class probabilities as an (n, k) matrix (all
    classes, even ones a fold lacked, in class-code order) or predictions as a 1-D array."""
    if not needs_proba:
        return as_predictions(model.predict(X))
    return as_probabilities(model.predict_proba(X), getattr(model, "classes_", None), n_classes)
