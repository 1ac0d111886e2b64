"""Prediction shapes, normalised in one place: whatever a library's predict() or predict_proba() returns (CatBoost's
(n, 1) labels, a 1-D probability of the positive class, float32 rows that sum to 1 only roughly), the rest of the
runtime sees 1-D predictions or an (n, classes) probability matrix in class-code order."""

import numpy as np


def as_predictions(values):
    """Labels or numbers as a 1-D array: CatBoost's multiclass predict() gives an (n, 1) column."""
    values = np.asarray(values)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise ValueError(f"a model predicted an array of shape {values.shape}; one value per row was expected")
    return values


def as_probabilities(proba, classes=None, n_classes=None):
    """Class probabilities as an (n, k) matrix whose rows sum to 1, column j the class coded j: a 1-D array is
    the probability of class 1 of two; a model's `classes` (codes) place its columns among `n_classes`."""
    proba = np.asarray(proba, dtype=float)
    if proba.ndim == 1:
        proba = np.column_stack([1 - proba, proba])
    if proba.ndim != 2:
        raise ValueError(f"a model gave probabilities of shape {proba.shape}; an (n, classes) matrix was expected")
    sums = proba.sum(axis=1, keepdims=True)
    if not np.allclose(sums, 1.0, rtol=0, atol=1e-12):  # float32 outputs (XGBoost) sum to 1 only roughly
        proba = proba / sums
    if n_classes is not None and proba.shape[1] != n_classes:
        if classes is None or len(classes) != proba.shape[1]:
            raise ValueError(f"a model gave {proba.shape[1]} probability columns for {n_classes} classes")
        full = np.zeros((len(proba), n_classes))
        full[:, np.asarray(classes, dtype=int)] = proba
        proba = full
    return proba


def predicts_classes(model):
    """Whether a fitted model is a classifier: it has classes and their probabilities. CatBoost's regressors have a
    `classes_` attribute too, so that alone does not tell."""
    return hasattr(model, "classes_") and hasattr(model, "predict_proba")
