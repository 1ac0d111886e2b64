"""Cross-validation: the folds, out-of-fold predictions with early stopping on each validation fold, the metric on
each fold, and the refit on every row that keeps the folds' numbers of trees."""

import copy
import time
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import VotingClassifier, VotingRegressor
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, LabelEncoder
from sklearn.utils import Bunch

from .metrics import METRIC_FUNCTIONS, predict_for_metric
from .shapes import predicts_classes
from .stacking import LinearStack
from .wrappers import ClassWeighted, EarlyStopped, SeedBagged

COMBINERS = (VotingClassifier, VotingRegressor, LinearStack)  # models made of member models, by (name, model) pairs


def make_folds(y, *, classification, n_splits, seed):
    """Shuffled K folds, stratified for classification."""
    splitter = (StratifiedKFold if classification else KFold)(n_splits=n_splits, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(y)), y))


@dataclass
class CrossFit:
    """A model cross-fitted on K folds: every row's out-of-fold prediction, the folds, the fold models' test-set
    predictions averaged (None without test rows), the number of trees each early-stopping model inside kept (the
    mean over the folds, by its path in the model: see fit_fold) and the seconds each fold's fit took."""

    predictions: np.ndarray
    folds: list
    test_prediction: np.ndarray | None = None
    stopped_rounds: dict = field(default_factory=dict)
    fit_seconds: list = field(default_factory=list)
    models: list = field(default_factory=list)  # the fold models, in fold order, when asked to keep them
    scored_folds: int = 0  # the folds fitted and predicted: fewer than len(folds) when `keep_going` stopped it

    @property
    def complete(self):
        return self.scored_folds == len(self.folds)


def cross_fit(model, X, y, *, needs_proba, classification, n_splits, seed, X_test=None, keep_models=False,
              preprocessed=None, keep_going=None, expected_trees=None):
    """Every row predicted by a clone of `model` fitted on the other folds (early-stopping models stop on the fold
    being predicted); with `X_test`, the fold models' test predictions averaged: class probabilities averaged (then
    the most probable class when the metric scores labels; none for a classifier without probabilities); with
    `keep_models`, the fold models themselves. With `preprocessed` (a store: `load(fold)` and `save(fold, prepared)`)
    a pipeline's preprocessing fitted on each fold is taken from the store when it holds it, and saved to it when
    not: a node that changes only the model does not fit its features again (the same values either way). With
    `keep_going(fold, valid_rows, prediction) -> bool`, asked after every fold but the last, a False stops the CV
    there: the rows of the folds not scored keep a prediction of 0. Each early-stopping model's later folds know the
    most trees its earlier folds kept (EarlyStopped.earlier_best: CatBoost's patience follows it); with
    `expected_trees` (by path, as CrossFit.stopped_rounds), the first fold knows the trees it should keep likewise
    (a change of a model whose own CV kept them)."""
    model = clone(model)  # the earlier folds' trees are set on this copy, never on the caller's model
    if expected_trees:
        _set_stoppers(model, earlier_best={path: max(round(value), 1) for path, value in expected_trees.items()})
    n_classes = int(np.max(y)) + 1 if classification else None
    folds = make_folds(y, classification=classification, n_splits=n_splits, seed=seed)
    predictions, test_total, rounds, seconds, models = None, None, {}, [], []
    for fold, (train_rows, valid_rows) in enumerate(folds):
        started = time.perf_counter()
        X_fit, X_valid, X_test_fold = X.iloc[train_rows], X.iloc[valid_rows], X_test
        if preprocessed is not None and _has_preprocessing(model):
            head, X_fit, X_valid, X_test_fold = _prepared(preprocessed, fold, model, X_fit, y[train_rows], X_valid,
                                                          X_test)
            name, final = model.steps[-1]
            final, stopped = fit_fold(final, X_fit, y[train_rows], X_valid, y[valid_rows], path=name)
            fitted = Pipeline([*head.steps, (name, final)])
        else:
            final, stopped = fit_fold(model, X_fit, y[train_rows], X_valid, y[valid_rows])
            fitted = final
        seconds.append(time.perf_counter() - started)
        prediction = predict_for_metric(final, X_valid, needs_proba, n_classes)
        if predictions is None:
            predictions = np.zeros((len(y), *np.shape(prediction)[1:]), dtype=np.asarray(prediction).dtype)
        predictions[valid_rows] = prediction
        test = fold_test_prediction(final, X_test_fold, classification, n_classes) if X_test is not None else None
        if test is not None:
            test_total = test if test_total is None else test_total + test
        if keep_models:
            models.append(fitted)
        for path, value in stopped.items():
            rounds.setdefault(path, []).append(value)
        _set_stoppers(model, earlier_best={path: round(max(values)) for path, values in rounds.items()})
        if keep_going is not None and fold + 1 < len(folds) and not keep_going(fold, valid_rows, prediction):
            break
    scored = len(seconds)
    test_prediction = None if test_total is None else averaged(test_total, scored, classification, needs_proba)
    return CrossFit(predictions, folds, test_prediction, {path: float(np.mean(values)) for path, values in rounds.items()},
                    seconds, models, scored)


def _has_preprocessing(model):
    return isinstance(model, Pipeline) and len(model.steps) > 1


def _prepared(store, fold, model, X, y, X_valid, X_test):
    """(the pipeline's preprocessing fitted on the fold's rows, and the fit, validation and test rows it gives):
    from `store` when it holds the fold, else fitted and saved to it. Test rows a stored fold lacks are transformed
    by its fitted preprocessing."""
    prepared = store.load(fold)
    if prepared is None:
        head = clone(model[:-1])
        X_fit = head.fit_transform(X, y)
        prepared = (head, X_fit, head.transform(X_valid), head.transform(X_test) if X_test is not None else None)
        store.save(fold, prepared)
    head, X_fit, X_valid, X_test_fold = prepared
    if X_test is not None and X_test_fold is None:
        X_test_fold = head.transform(X_test)
    return head, X_fit, X_valid, X_test_fold


def fold_test_prediction(fitted, X_test, classification, n_classes):
    """One fold model's test predictions as the fold average adds them up: class probabilities for classification
    (None for a classifier without them), values for regression."""
    if classification and not hasattr(fitted, "predict_proba"):
        return None
    return np.asarray(predict_for_metric(fitted, X_test, classification, n_classes), dtype=float)


def averaged(total, n_folds, classification, needs_proba):
    """The fold models' summed test predictions averaged; the most probable class when the metric scores labels."""
    prediction = total / n_folds
    return np.argmax(prediction, axis=1) if classification and not needs_proba else prediction


def average_fold_models(models, X_test, *, needs_proba, classification, n_classes):
    """The fold models' test predictions averaged, added up in fold order as cross_fit adds them (so the same
    models give the same values); None for classifiers without probabilities."""
    tests = [fold_test_prediction(fitted, X_test, classification, n_classes) for fitted in models]
    if not tests or any(test is None for test in tests):
        return None
    total = tests[0]
    for test in tests[1:]:
        total = total + test
    return averaged(total, len(tests), classification, needs_proba)


class FoldMean:
    """One ensemble member's CV fold models as one fitted model, predicting their average as cross_fit averages its
    test predictions (average_fold_models)."""

    def __init__(self, models, n_classes=None):
        self.models, self.n_classes = tuple(models), n_classes
        if n_classes is not None:
            self.classes_ = np.arange(n_classes)

    def predict_proba(self, X):
        return average_fold_models(self.models, X, needs_proba=True, classification=True, n_classes=self.n_classes)

    def predict(self, X):
        if self.n_classes is not None:
            return np.argmax(self.predict_proba(X), axis=1)
        return average_fold_models(self.models, X, needs_proba=False, classification=False, n_classes=None)


def members_averaged_or_refit(fitted, X, y, X_test, refit_members, *, needs_proba, n_classes):
    """An ensemble's test predictions from its cross_fit with keep_models (`fitted`): each member's fold models
    averaged, but the members at `refit_members` refit on every row with the trees their folds kept, combined as the
    ensemble combines its members. The agent's submission is made so when some members kept no fold models."""
    combiner = copy.copy(fitted.models[0].steps[-1][1])
    members = [FoldMean([fold.steps[-1][1].estimators_[k] for fold in fitted.models], n_classes)
               for k in range(len(combiner.estimators))]
    for k in refit_members:
        prefix = f"model/m{k}/"
        rounds = {path[len(prefix):]: value for path, value in fitted.stopped_rounds.items() if path.startswith(prefix)}
        members[k] = refit(combiner.estimators[k][1], X, y, rounds)
    combiner.estimators_ = members
    return predict_for_metric(combiner, X_test, needs_proba, n_classes)


def out_of_fold(model, X, y, *, needs_proba, classification, n_splits, seed):
    """(every row's out-of-fold prediction, the folds): see cross_fit."""
    fitted = cross_fit(model, X, y, needs_proba=needs_proba, classification=classification, n_splits=n_splits,
                       seed=seed)
    return fitted.predictions, fitted.folds


def fold_scores(predictions, y, folds, metric):
    """The metric on each validation fold of out-of-fold predictions (pass only the folds that were scored)."""
    return [METRIC_FUNCTIONS[metric](y[valid_rows], predictions[valid_rows]) for _, valid_rows in folds]


def cross_validate(model, X, y, *, metric, needs_proba, classification, n_splits, seed):
    """The metric on each held-out fold, fitting a fresh clone of `model` per fold."""
    predictions, folds = out_of_fold(model, X, y, needs_proba=needs_proba, classification=classification,
                                     n_splits=n_splits, seed=seed)
    return fold_scores(predictions, y, folds, metric)


# ---- early stopping inside a model: pipelines, target transforms, wrappers and combinations of members


def _wrapped(model):
    """The model a wrapper or a target transform fits, None for any other model."""
    if isinstance(model, TransformedTargetRegressor):
        return model.regressor
    if isinstance(model, (ClassWeighted, SeedBagged, EarlyStopped)):
        return model.estimator
    return None


def stops_early(model):
    """Whether `model` holds an early-stopping model (runtime.EarlyStopped) that validation rows would reach."""
    if isinstance(model, EarlyStopped):
        return True
    if isinstance(model, Pipeline):
        return stops_early(model.steps[-1][1])
    if isinstance(model, COMBINERS):
        return any(stops_early(member) for _, member in model.estimators)
    inner = _wrapped(model)
    return inner is not None and stops_early(inner)


def _path(path, name):
    return f"{path}/{name}" if path else name


def fit_fold(model, X, y, X_valid, y_valid, path=""):
    """A clone of `model` fitted on (X, y), and the number of trees each early-stopping model inside kept, by its
    path (the step and member names down to it, e.g. "model" or "model/m1/model"; `path` is where `model` itself
    sits). Each early-stopping model stops
    on (X_valid, y_valid) as its own pipeline's steps transform them (fitted on (X, y) only); a target transform
    maps y_valid as it maps y."""
    model, stopped = clone(model), {}
    _fit(model, X, y, (X_valid, y_valid), path, stopped)
    return model, stopped


def _fit(model, X, y, validation, path, stopped):
    if not stops_early(model):
        return model.fit(X, y)
    if isinstance(model, Pipeline):
        name, final = model.steps[-1]
        if len(model.steps) > 1:
            head = model[:-1]  # the same step objects: fitting them fits the pipeline's own steps
            X = head.fit_transform(X, y)
            validation = (head.transform(validation[0]), validation[1])
        _fit(final, X, y, validation, _path(path, name), stopped)
        return model
    if isinstance(model, COMBINERS):
        members = [_fit(clone(member), X, y, validation, _path(path, name), stopped) for name, member in model.estimators]
        return _with_members(model, members, y)
    if isinstance(model, TransformedTargetRegressor):
        validation = (validation[0], _transformed_target(model, y, validation[1]))
    model.fit(X, y, validation=validation)
    stopped[path] = stopped_rounds(model)
    return model


def _with_members(model, members, y):
    """A combination of members fitted on the same rows, as its own fit() would have left it."""
    model.estimators_ = members
    if isinstance(model, LinearStack):
        if predicts_classes(members[0]):
            model.classes_ = members[0].classes_
        return model
    model.named_estimators_ = Bunch(**{name: member for (name, _), member in zip(model.estimators, members)})
    if isinstance(model, VotingClassifier):  # members see the labels encoded, as VotingClassifier.fit encodes them
        model.le_ = LabelEncoder().fit(y)
        model.classes_ = model.le_.classes_
    return model


def _transformed_target(model, y, y_valid):
    """y_valid as the target transform of `model` (a TransformedTargetRegressor) maps the target it is fitted on."""
    transformer = clone(model.transformer) if model.transformer is not None else FunctionTransformer(
        func=model.func, inverse_func=model.inverse_func)
    transformer.fit(np.asarray(y, dtype=float).reshape(-1, 1))
    return np.asarray(transformer.transform(np.asarray(y_valid, dtype=float).reshape(-1, 1))).reshape(-1)


def stopped_rounds(fitted):
    """The number of trees a fitted early-stopping model kept (the mean over a seed bag's seeds)."""
    if isinstance(fitted, EarlyStopped):
        return float(fitted.best_rounds_)
    if isinstance(fitted, SeedBagged):
        return float(np.mean([stopped_rounds(member) for member in fitted.estimators_]))
    if isinstance(fitted, TransformedTargetRegressor):
        return stopped_rounds(fitted.regressor_)
    return stopped_rounds(fitted.estimator_)  # ClassWeighted


def _stopping_paths(model, path=""):
    """(path, model) for each model inside `model` that validation rows reach first, as _fit walks them."""
    if not stops_early(model):
        return []
    if isinstance(model, Pipeline):
        name, final = model.steps[-1]
        return _stopping_paths(final, _path(path, name))
    if isinstance(model, COMBINERS):
        return [found for name, member in model.estimators for found in _stopping_paths(member, _path(path, name))]
    return [(path, model)]


def refit(model, X, y, rounds=None):
    """A clone of `model` fitted on every row. Each early-stopping model inside fits the number of trees its
    cross-validation folds kept on average (`rounds`, by path: CrossFit.stopped_rounds), so the refit model is
    the one the folds scored; one without a number stops on a share of its own fit rows."""
    model = clone(model)
    _set_stoppers(model, refit_rounds={path: max(int(round(value)), 1) for path, value in (rounds or {}).items()})
    return model.fit(X, y)


def _set_stoppers(model, **values):
    """Set a parameter of each early-stopping model inside `model` (runtime.EarlyStopped) to its value by path
    (`values`: parameter name -> {path: value}); a path without a value is left as it is."""
    for path, reached in _stopping_paths(model):
        stopper = reached
        while not isinstance(stopper, EarlyStopped):
            stopper = _wrapped(stopper)
        stopper.set_params(**{name: by_path[path] for name, by_path in values.items() if path in by_path})
