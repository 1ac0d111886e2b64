"""Models around a model: class weighting, early stopping, seed bagging."""

import inspect

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, clone

from .shapes import as_predictions, as_probabilities, predicts_classes


def _validation_keywords(validation):
    """`validation=` for an inner fit, only when there are validation rows (a refit has none)."""
    return {} if validation is None else {"validation": validation}


class ClassWeighted(ClassifierMixin, BaseEstimator):
    """A classifier fitted with per-row weights that balance the classes (capped at `max_weight`)."""

    def __init__(self, estimator=None, mode="balanced", max_weight=50.0):
        self.estimator = estimator
        self.mode = mode
        self.max_weight = max_weight

    def fit(self, X, y, sample_weight=None, validation=None):
        y = np.asarray(y)
        classes, counts = np.unique(y, return_counts=True)
        weights = np.minimum(len(y) / (len(classes) * counts), self.max_weight)
        row_weights = weights[np.searchsorted(classes, y)]
        if sample_weight is not None:
            row_weights = row_weights * np.asarray(sample_weight)
        self.estimator_ = clone(self.estimator).fit(X, y, sample_weight=row_weights, **_validation_keywords(validation))
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


# The boosting libraries EarlyStopped knows, by the start of their model class names, and each one's number of rounds.
BOOSTING_LIBRARIES = {"XGB": "n_estimators", "LGBM": "n_estimators", "CatBoost": "iterations",
                      "HistGradientBoosting": "max_iter"}
MISSING_LEVEL = "__NaN__"  # CatBoost takes no missing categorical value: a missing one is a level of its own


def boosting_library(model):
    """The key of BOOSTING_LIBRARIES a model belongs to; ValueError for any other model."""
    name = type(model).__name__
    for prefix in BOOSTING_LIBRARIES:
        if name.startswith(prefix):
            return prefix
    raise ValueError(f"early stopping is for XGBoost, LightGBM, CatBoost and HistGradientBoosting models, not {name}")


def catboost_frame(X):
    """X as CatBoost takes it: every non-numeric column a categorical one, a missing level a level of its own;
    (the frame, the names of those columns)."""
    names = [name for name in X.columns if not pd.api.types.is_numeric_dtype(X[name])] if hasattr(X, "columns") else []
    if not names:
        return X, names
    converted = {}
    for name in names:
        values = X[name]
        if isinstance(values.dtype, pd.CategoricalDtype):
            if MISSING_LEVEL not in values.cat.categories:
                values = values.cat.add_categories(MISSING_LEVEL)
            converted[name] = values.fillna(MISSING_LEVEL)
        else:
            converted[name] = values.astype(object).where(values.notna(), MISSING_LEVEL).astype(str)
    return X.assign(**converted), names


# Adaptive patience, AutoGluon's adaptive early stopping with its rate and smallest offset: a GBDT waits
# PATIENCE_OFFSET + PATIENCE_RATE x its best round so far, within its fixed patience (bench/patience.py measures it).
PATIENCE_OFFSET = 20
PATIENCE_RATE = 0.3
# Fewer validation rows than this, the curve is too noisy to stop on a short wait: on a 610-row table (122 rows per
# fold) a slow-learning Optuna trial stopped at an early plateau, 0.69 AUC on its first folds against 0.80.
ADAPTIVE_MIN_ROWS = 500


def patience_adapts(validation_rows):
    """Whether a GBDT stopping on this many validation rows waits adaptively (`patience`) rather than its fixed
    patience."""
    return validation_rows >= ADAPTIVE_MIN_ROWS


def patience(best_rounds, rounds, rate=PATIENCE_RATE):
    """Rounds a GBDT waits for its validation score to improve, when its best round so far is the `best_rounds`-th:
    PATIENCE_OFFSET + `rate` x `best_rounds`, at most `rounds` (`rounds` itself when `rate` is 0)."""
    return rounds if rate <= 0 else min(rounds, PATIENCE_OFFSET + round(rate * best_rounds))


class _LightGBMStopping:
    """LightGBM's early stopping callback with its patience set from the best round before each check."""

    def __init__(self, rounds, rate):
        import lightgbm

        self.stopping = lightgbm.early_stopping(rounds, verbose=False)
        self.rounds, self.rate = rounds, rate
        self.order, self.before_iteration = self.stopping.order, False

    def __call__(self, env):
        best = max(self.stopping.best_iter, default=-1) + 1 if env.iteration > env.begin_iteration else 0
        self.stopping.stopping_rounds = patience(best, self.rounds, self.rate)
        self.stopping(env)


def _xgboost_stopping(rounds, rate):
    """XGBoost's early stopping callback with its patience set from the best round before each check."""
    import xgboost

    class AdaptiveStopping(xgboost.callback.EarlyStopping):
        def after_iteration(self, model, epoch, evals_log):
            best = model.attr("best_iteration")
            self.rounds = patience(0 if best is None else int(best) + 1, rounds, rate)
            return super().after_iteration(model, epoch, evals_log)

    return AdaptiveStopping(rounds=rounds)


class EarlyStopped(Wrapper):
    """A gradient-boosted model (XGBoost, LightGBM, CatBoost or scikit-learn's histogram GBDT) that stops adding
    trees once its validation rows have not improved for `rounds` rounds.

    In cross-validation the validation rows are the fold's own, passed as `validation` (cv.fit_fold puts them
    through the model's own preprocessing), so the number of trees is chosen on the rows the fold is scored on, as
    AutoGluon's bagged GBDTs do. A refit on every row has no validation rows: it fits `refit_rounds` trees
    (cv.refit sets the mean of the folds' best iterations) or, when that is unset, stops on a held-out
    `validation_fraction` of its own fit rows. `best_rounds_` is the number of trees it kept.

    The patience is adaptive (`patience`): a model whose best round came early waits fewer rounds, at most `rounds`;
    `patience_rate=0`, or fewer than ADAPTIVE_MIN_ROWS validation rows, waits `rounds` always. XGBoost and LightGBM
    adapt it within each fit, from the best round so far. CatBoost would need a Python callback for that, and it
    hands a callback its whole metric history every round (a fit took twice as long): it waits a fixed number of
    rounds, the adaptive patience of `earlier_best` (the most trees the same model kept on the CV's earlier folds,
    set by cv.cross_fit), or on a first fold `rounds` unless the CV was told the trees to expect (cv.cross_fit's
    expected_trees). Histogram GBDT waits `rounds`. CatBoost is handed its
    categorical columns by name (catboost_frame); LightGBM and histogram GBDT split on pandas categories natively."""

    def __init__(self, estimator=None, rounds=100, patience_rate=PATIENCE_RATE, validation_fraction=0.1,
                 refit_rounds=None, earlier_best=None, random_state=0):
        self.estimator = estimator
        self.rounds = rounds
        self.patience_rate = patience_rate
        self.validation_fraction = validation_fraction
        self.refit_rounds = refit_rounds
        self.earlier_best = earlier_best
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None, validation=None):
        y = np.asarray(y)
        model = clone(self.estimator)
        self.library_ = boosting_library(model)
        weights = {} if sample_weight is None else {"sample_weight": np.asarray(sample_weight)}
        if validation is None and self.refit_rounds is not None:
            model.set_params(**{BOOSTING_LIBRARIES[self.library_]: max(int(self.refit_rounds), 1)})
            if self.library_ == "HistGradientBoosting":
                model.set_params(early_stopping=False)
            self._fit_rounds(model, X, y, weights)
            self.best_rounds_ = max(int(self.refit_rounds), 1)
        else:
            if validation is None:
                X, y, weights, validation = self._held_out(X, y, weights, model)
            self.best_rounds_ = self._fit_stopping(model, X, y, weights, *validation)
        self.estimator_ = model
        if predicts_classes(model):
            self.classes_ = model.classes_
        return self

    def _held_out(self, X, y, weights, model):
        """(fit rows, their target and weights, validation rows): `validation_fraction` of the rows held out."""
        held_out = np.random.default_rng(self.random_state).random(len(y)) < self.validation_fraction
        if hasattr(model, "predict_proba"):  # keep every class in the fitting part
            for label in np.unique(y):
                held_out[np.flatnonzero(y == label)[:1]] = False
        fit_rows, eval_rows = np.flatnonzero(~held_out), np.flatnonzero(held_out)
        part = (lambda data, rows: data.iloc[rows]) if hasattr(X, "iloc") else (lambda data, rows: data[rows])
        kept = {name: values[fit_rows] for name, values in weights.items()}
        return part(X, fit_rows), y[fit_rows], kept, (part(X, eval_rows), y[eval_rows])

    def _fit_rounds(self, model, X, y, weights):
        if self.library_ == "CatBoost":
            X, names = catboost_frame(X)
            model.fit(X, y, cat_features=names, verbose=False, **weights)
        else:
            model.fit(X, y, **weights)

    def _fit_stopping(self, model, X, y, weights, X_valid, y_valid):
        """Fit with early stopping on (X_valid, y_valid); the number of trees kept."""
        y_valid = np.asarray(y_valid)
        rate = self.patience_rate if patience_adapts(len(y_valid)) else 0.0
        if self.library_ == "XGB":
            model.set_params(callbacks=[_xgboost_stopping(self.rounds, rate)])
            model.fit(X, y, eval_set=[(X_valid, y_valid)], verbose=False, **weights)
            model.set_params(callbacks=None)  # the callback's class is made per fit: the fitted model must not hold it
            return int(model.best_iteration) + 1
        if self.library_ == "LGBM":
            stop = [_LightGBMStopping(self.rounds, rate)]
            # LightGBM 4.7 renamed eval_set to eval_X and eval_y; older 4.x releases know only eval_set.
            if "eval_X" in inspect.signature(model.fit).parameters:
                model.fit(X, y, eval_X=(X_valid,), eval_y=(y_valid,), callbacks=stop, **weights)
            else:
                model.fit(X, y, eval_set=[(X_valid, y_valid)], callbacks=stop, **weights)
            return int(model.best_iteration_ or model.n_estimators)
        if self.library_ == "CatBoost":
            X, names = catboost_frame(X)
            wait = self.rounds if self.earlier_best is None else patience(self.earlier_best, self.rounds, rate)
            model.fit(X, y, cat_features=names, eval_set=(catboost_frame(X_valid)[0], y_valid),
                      early_stopping_rounds=wait, use_best_model=True, verbose=False, **weights)
            return int(model.get_best_iteration()) + 1
        # HistGradientBoosting keeps every tree it grew, the last `rounds` that did not improve included.
        model.set_params(early_stopping=True, n_iter_no_change=self.rounds)
        model.fit(X, y, X_val=X_valid, y_val=y_valid, **weights)
        return int(model.n_iter_)

    def _ready(self, X):
        return catboost_frame(X)[0] if self.library_ == "CatBoost" else X

    def predict(self, X):
        return self.estimator_.predict(self._ready(X))

    def predict_proba(self, X):
        return self.estimator_.predict_proba(self._ready(X))


class SeedBagged(Wrapper):
    """The same model fitted with `n_seeds` random seeds (random_state, random_state + 1, ...) and its
    predictions averaged, which averages away the variance one seed's row and column sampling adds.
    `seed_param` names the seed inside `estimator` (e.g. "estimator__random_state" through a wrapper)."""

    def __init__(self, estimator=None, n_seeds=3, seed_param="random_state", random_state=0):
        self.estimator = estimator
        self.n_seeds = n_seeds
        self.seed_param = seed_param
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None, validation=None):
        weights = {} if sample_weight is None else {"sample_weight": sample_weight}
        self.estimators_ = [clone(self.estimator).set_params(**{self.seed_param: self.random_state + k})
                            .fit(X, y, **weights, **_validation_keywords(validation)) for k in range(self.n_seeds)]
        if predicts_classes(self.estimators_[0]):
            self.classes_ = self.estimators_[0].classes_
        return self

    def predict_proba(self, X):
        return np.mean([as_probabilities(member.predict_proba(X)) for member in self.estimators_], axis=0)

    def predict(self, X):
        if hasattr(self, "classes_"):
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        return np.mean([as_predictions(member.predict(X)) for member in self.estimators_], axis=0)
