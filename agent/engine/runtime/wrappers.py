"""Models around a model: class weighting, early stopping on held-out fit rows, seed bagging."""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone


class ClassWeighted(ClassifierMixin, BaseEstimator):
    """A classifier fitted with per-row weights that balance the classes (capped at `max_weight`)."""

    def __init__(self, estimator=None, mode="balanced", max_weight=50.0):
        self.estimator = estimator
        self.mode = mode
        self.max_weight = max_weight

    def fit(self, X, y, sample_weight=None):
        y = np.asarray(y)
        classes, counts = np.unique(y, return_counts=True)
        weights = np.minimum(len(y) / (len(classes) * counts), self.max_weight)
        row_weights = weights[np.searchsorted(classes, y)]
        if sample_weight is not None:
            row_weights = row_weights * np.asarray(sample_weight)
        self.estimator_ = clone(self.estimator).fit(X, y, sample_weight=row_weights)
        self.classes_ = self.estimator_.classes_
        return self

    def predict(self, X):
        return self.estimator_.predict(X)

    def predict_proba(self, X):
        return self.estimator_.predict_proba(X)


class Wrapper(BaseEstimator):
    """A model around `estimator` that is a classifier or a regressor as its estimator is."""

    def _inner(self):
        return self.estimator

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            tags.estimator_type = self._inner().__sklearn_tags__().estimator_type
        except AttributeError:
            pass
        return tags


class EarlyStopped(Wrapper):
    """An XGBoost or LightGBM model that stops adding trees when a held-out share of its own fit rows stops
    improving for `rounds` rounds (the held-out rows come from the training fold, never the validation fold)."""

    def __init__(self, estimator=None, rounds=100, validation_fraction=0.1, random_state=0):
        self.estimator = estimator
        self.rounds = rounds
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None):
        y = np.asarray(y)
        rng = np.random.default_rng(self.random_state)
        held_out = rng.random(len(y)) < self.validation_fraction
        if hasattr(self.estimator, "predict_proba"):  # keep every class in the fitting part
            for label in np.unique(y):
                rows = np.flatnonzero(y == label)
                held_out[rows[:1]] = False
        fit_rows, eval_rows = np.flatnonzero(~held_out), np.flatnonzero(held_out)
        part = (lambda data, rows: data.iloc[rows]) if hasattr(X, "iloc") else (lambda data, rows: data[rows])
        weights = {} if sample_weight is None else {"sample_weight": np.asarray(sample_weight)[fit_rows]}
        model = clone(self.estimator)
        eval_set = [(part(X, eval_rows), y[eval_rows])]
        if type(model).__name__.startswith("LGBM"):
            import lightgbm

            model.fit(part(X, fit_rows), y[fit_rows], eval_set=eval_set,
                      callbacks=[lightgbm.early_stopping(self.rounds, verbose=False)], **weights)
        else:
            model.set_params(early_stopping_rounds=self.rounds)
            model.fit(part(X, fit_rows), y[fit_rows], eval_set=eval_set, verbose=False, **weights)
        self.estimator_ = model
        if hasattr(model, "classes_"):
            self.classes_ = model.classes_
        return self

    def predict(self, X):
        return self.estimator_.predict(X)

    def predict_proba(self, X):
        return self.estimator_.predict_proba(X)


class SeedBagged(Wrapper):
    """The same model fitted with `n_seeds` random seeds (random_state, random_state + 1, ...) and its
    predictions averaged, which averages away the variance one seed's row and column sampling adds.
    `seed_param` names the seed inside `estimator` (e.g. "estimator__random_state" through a wrapper)."""

    def __init__(self, estimator=None, n_seeds=3, seed_param="random_state", random_state=0):
        self.estimator = estimator
        self.n_seeds = n_seeds
        self.seed_param = seed_param
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None):
        weights = {} if sample_weight is None else {"sample_weight": sample_weight}
        self.estimators_ = [clone(self.estimator).set_params(**{self.seed_param: self.random_state + k}).fit(X, y, **weights)
                            for k in range(self.n_seeds)]
        if hasattr(self.estimators_[0], "classes_"):
            self.classes_ = self.estimators_[0].classes_
        return self

    def predict_proba(self, X):
        return np.mean([member.predict_proba(X) for member in self.estimators_], axis=0)

    def predict(self, X):
        if hasattr(self, "classes_"):
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        return np.mean([member.predict(X) for member in self.estimators_], axis=0)
