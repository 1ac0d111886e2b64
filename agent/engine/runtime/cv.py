"""Cross-validation: the folds, out-of-fold predictions and the metric on each fold."""

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import KFold, StratifiedKFold

from .metrics import METRIC_FUNCTIONS, predict_for_metric


def make_folds(y, *, classification, n_splits, seed):
    """Shuffled K folds, stratified for classification."""
    splitter = (StratifiedKFold if classification else KFold)(n_splits=n_splits, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(y)), y))


def out_of_fold(model, X, y, *, needs_proba, classification, n_splits, seed):
    """Every row predicted by a fresh clone of `model` fitted on the other folds; (predictions, folds)."""
    n_classes = int(np.max(y)) + 1 if classification else None
    folds = make_folds(y, classification=classification, n_splits=n_splits, seed=seed)
    predictions = None
    for train_rows, valid_rows in folds:
        fitted = clone(model).fit(X.iloc[train_rows], y[train_rows])
        prediction = predict_for_metric(fitted, X.iloc[valid_rows], needs_proba, n_classes)
        if predictions is None:
            predictions = np.zeros((len(y), *np.shape(prediction)[1:]), dtype=np.asarray(prediction).dtype)
        predictions[valid_rows] = prediction
    return predictions, folds


def fold_scores(predictions, y, folds, metric):
    """The metric on each validation fold of out-of-fold predictions."""
    return [METRIC_FUNCTIONS[metric](y[valid_rows], predictions[valid_rows]) for _, valid_rows in folds]


def cross_validate(model, X, y, *, metric, needs_proba, classification, n_splits, seed):
    """The metric on each held-out fold, fitting a fresh clone of `model` per fold."""
    predictions, folds = out_of_fold(model, X, y, needs_proba=needs_proba, classification=classification,
                                     n_splits=n_splits, seed=seed)
    return fold_scores(predictions, y, folds, metric)
