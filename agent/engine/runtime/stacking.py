"""Combining fitted members with fixed coefficients (agent.search.blending learns them out of fold)."""

import numpy as np
from scipy.stats import rankdata
from sklearn.base import clone

from .shapes import as_predictions, as_probabilities, predicts_classes
from .wrappers import Wrapper

LINKS = ("identity", "log1p", "logit", "rank")


def apply_link(values, link, groups=None):
    """Values (members x rows, or rows) in the space they are combined in. "rank" scales each member's ranks
    to (0, 1] within each group of row positions (all rows when there are no groups)."""
    values = np.asarray(values, dtype=float)
    if link == "log1p":
        return np.log1p(np.clip(values, 0, None))
    if link == "logit":
        clipped = np.clip(values, 1e-6, 1 - 1e-6)
        return np.log(clipped / (1 - clipped))
    if link == "rank":
        ranks = np.empty_like(values)
        for rows in groups if groups is not None else [np.arange(values.shape[-1])]:
            ranks[..., rows] = rankdata(values[..., rows], axis=-1) / len(rows)
        return ranks
    if link != "identity":
        raise ValueError(f"unknown link {link!r}; use one of {LINKS}")
    return values


def combine(member_values, weights, intercept, link, *, classification, groups=None):
    """inverse_link(intercept + weights . link(member values)): regression values, or class probabilities of a
    binary task from each member's positive-class probability."""
    combined = intercept + np.tensordot(np.asarray(weights, dtype=float), apply_link(member_values, link, groups),
                                        axes=1)
    if link == "logit":
        combined = 1.0 / (1.0 + np.exp(-combined))
    elif link == "log1p":
        combined = np.expm1(combined)
    return np.column_stack([1.0 - combined, combined]) if classification else combined


class LinearStack(Wrapper):
    """Members fitted on the same rows, combined with fixed coefficients (see combine): a linear stack, or a
    rank average. Binary classifiers combine their positive-class probabilities; "rank" ranks the batch
    being predicted."""

    def __init__(self, estimators=(), weights=(), intercept=0.0, link="identity"):
        self.estimators = estimators
        self.weights = weights
        self.intercept = intercept
        self.link = link

    def _inner(self):
        return self.estimators[0][1] if self.estimators else None

    def fit(self, X, y):
        self.estimators_ = [clone(estimator).fit(X, y) for _, estimator in self.estimators]
        if predicts_classes(self.estimators_[0]):
            self.classes_ = self.estimators_[0].classes_
        return self

    def _combined(self, X):
        classification = hasattr(self, "classes_")
        values = [as_probabilities(member.predict_proba(X))[:, 1] if classification else as_predictions(member.predict(X))
                  for member in self.estimators_]
        return combine(np.stack(values), self.weights, self.intercept, self.link, classification=classification)

    def predict_proba(self, X):
        return self._combined(X)

    def predict(self, X):
        combined = self._combined(X)
        return self.classes_[np.argmax(combined, axis=1)] if hasattr(self, "classes_") else combined
