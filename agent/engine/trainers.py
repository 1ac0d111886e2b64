"""Trainers: named factories of scikit-learn-compatible models, with the preprocessing each one needs.

A trainer is any callable `(params, task_type, random_state) -> estimator`. Built-in trainers are
`EstimatorTrainer`s, which also render their model as Python source for solution.py; a user's own
factory works in the loop but cannot be rendered.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.engine.spec import SpecError, Step
from agent.engine.steps import evaluate_source, steps_named
from retrieval.metrics import CLASSIFICATION

Trainer = Callable[[Mapping[str, Any], str, int], Any]

N_JOBS = os.cpu_count() or 1

# Trainer parameters that wrap the model rather than reach its constructor:
#   balance_classes="balanced" (+ max_class_weight): rows weighted so classes weigh alike (runtime.ClassWeighted);
#   early_stopping_rounds (+ early_stopping_fraction): XGBoost/LightGBM stop on held-out fit rows (runtime.EarlyStopped);
#   seed_bag=n: the model fitted with n seeds, predictions averaged (runtime.SeedBagged), around the other wrappers.
WRAPPER_PARAMS = ("balance_classes", "max_class_weight", "early_stopping_rounds", "early_stopping_fraction", "seed_bag")

_COMMON = ("drop_id_columns", "drop_text_columns", "datetime_parts")
LINEAR_STEPS = steps_named(*_COMMON, "missing_indicators", "impute_numeric", "impute_categorical", "one_hot", "standard_scale")
TREE_STEPS = steps_named(*_COMMON, "impute_numeric", "impute_categorical", "ordinal_encoding")
# Gradient boosting libraries handle missing values themselves.
BOOSTING_STEPS = steps_named(*_COMMON, "ordinal_encoding")
# For a user's factory we know nothing about: numeric, imputed, scaled features suit any estimator.
GENERIC_STEPS = LINEAR_STEPS


@dataclass(frozen=True)
class EstimatorTrainer:
    classifier: str  # class names in agent.engine.runtime
    regressor: str
    default_steps: tuple[Step, ...]
    classifier_defaults: Mapping[str, Any] = field(default_factory=dict)
    regressor_defaults: Mapping[str, Any] = field(default_factory=dict)
    seed_param: str | None = "random_state"
    jobs_param: str | None = None
    # Early stopping on a held-out share of the fit rows, through an eval_set (XGBoost, LightGBM).
    eval_set_early_stopping: bool = False
    # A `loss` parameter that selects another regressor class (with its defaults), for a model whose class fixes
    # its loss: ridge is squared error only, the L1 fit is QuantileRegressor.
    regressor_losses: Mapping[str, tuple[str, Mapping[str, Any]]] = field(default_factory=dict)

    def render(self, params: Mapping[str, Any], task_type: str, random_state: int) -> str:
        classification = task_type in CLASSIFICATION
        params = dict(params)
        estimator = self.classifier if classification else self.regressor
        defaults = self.classifier_defaults if classification else self.regressor_defaults
        if self.regressor_losses and "loss" in params:
            loss = params.pop("loss")
            if classification or loss not in self.regressor_losses:
                raise SpecError(f"loss={loss!r} is not available for {estimator}; "
                                f"regression losses: {', '.join(self.regressor_losses)}")
            estimator, defaults = self.regressor_losses[loss]
        arguments = dict(defaults)
        if self.seed_param:
            arguments[self.seed_param] = random_state
        if self.jobs_param:
            arguments[self.jobs_param] = N_JOBS
        wrappers = {name: params.pop(name) for name in WRAPPER_PARAMS if name in params}
        arguments.update(params)
        keywords = ", ".join(f"{name}={value!r}" for name, value in arguments.items())
        model = f"{estimator}({keywords})"
        return self._wrapped(model, wrappers, classification, random_state)

    def _wrapped(self, model: str, wrappers: Mapping[str, Any], classification: bool, random_state: int) -> str:
        """The model inside the wrappers its trainer parameters ask for (see WRAPPER_PARAMS)."""
        seed_path = self.seed_param  # where the seed sits, as the model gets wrapped
        if wrappers.get("early_stopping_rounds") is not None:
            if not self.eval_set_early_stopping:
                raise SpecError(f"early_stopping_rounds is for XGBoost/LightGBM trainers, not {self.regressor}; "
                                "HistGradientBoosting takes early_stopping=True and n_iter_no_change")
            model = (f"EarlyStopped({model}, rounds={int(wrappers['early_stopping_rounds'])!r}, "
                     f"validation_fraction={float(wrappers.get('early_stopping_fraction', 0.1))!r}, random_state={random_state!r})")
            seed_path = f"estimator__{seed_path}"
        if wrappers.get("balance_classes") is not None:
            if not classification:
                raise SpecError("balance_classes is for classification; this is a regression task")
            mode = wrappers["balance_classes"]
            if mode != "balanced":
                raise SpecError(f"balance_classes={mode!r} is not supported; only 'balanced'")
            model = f"ClassWeighted({model}, mode='balanced', max_weight={float(wrappers.get('max_class_weight', 50.0))!r})"
            seed_path = f"estimator__{seed_path}"
        if wrappers.get("seed_bag") is not None:
            if self.seed_param is None:
                raise SpecError(f"seed_bag needs a model with a random seed; {self.regressor} has none")
            model = (f"SeedBagged({model}, n_seeds={int(wrappers['seed_bag'])!r}, seed_param={seed_path!r}, "
                     f"random_state={random_state!r})")
        return model

    def __call__(self, params: Mapping[str, Any], task_type: str, random_state: int) -> Any:
        return evaluate_source(self.render(params, task_type, random_state))


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def builtin_trainers() -> dict[str, EstimatorTrainer]:
    """The built-in trainers; LightGBM and CatBoost only when they are installed."""
    trainers = {
        "baseline": EstimatorTrainer("DummyClassifier", "DummyRegressor", (),
                                     classifier_defaults={"strategy": "prior"}, seed_param=None),
        "linear": EstimatorTrainer("LogisticRegression", "Ridge", LINEAR_STEPS,
                                   classifier_defaults={"max_iter": 2000}, seed_param=None,
                                   regressor_losses={"absolute_error": ("QuantileRegressor", {
                                       "quantile": 0.5, "alpha": 0.0, "solver": "highs"})}),
        "random_forest": EstimatorTrainer("RandomForestClassifier", "RandomForestRegressor", TREE_STEPS,
                                          {"n_estimators": 300}, {"n_estimators": 300}, jobs_param="n_jobs"),
        "extra_trees": EstimatorTrainer("ExtraTreesClassifier", "ExtraTreesRegressor", TREE_STEPS,
                                        {"n_estimators": 300}, {"n_estimators": 300}, jobs_param="n_jobs"),
        "hist_gradient_boosting": EstimatorTrainer("HistGradientBoostingClassifier", "HistGradientBoostingRegressor",
                                                   BOOSTING_STEPS),
    }
    boosting = {"n_estimators": 400, "learning_rate": 0.05, "max_depth": 6, "subsample": 0.8, "colsample_bytree": 0.8}
    if _installed("xgboost"):
        trainers["xgboost"] = EstimatorTrainer("XGBClassifier", "XGBRegressor", BOOSTING_STEPS,
                                               {**boosting, "tree_method": "hist"}, {**boosting, "tree_method": "hist"},
                                               jobs_param="n_jobs", eval_set_early_stopping=True)
    if _installed("lightgbm"):
        lightgbm = {"n_estimators": 400, "learning_rate": 0.05, "subsample": 0.8, "subsample_freq": 1,
                    "colsample_bytree": 0.8, "verbose": -1}
        trainers["lightgbm"] = EstimatorTrainer("LGBMClassifier", "LGBMRegressor", BOOSTING_STEPS,
                                                lightgbm, lightgbm, jobs_param="n_jobs", eval_set_early_stopping=True)
    if _installed("catboost"):
        catboost = {"iterations": 500, "verbose": 0}
        trainers["catboost"] = EstimatorTrainer("CatBoostClassifier", "CatBoostRegressor", BOOSTING_STEPS,
                                                catboost, catboost, seed_param="random_seed", jobs_param="thread_count")
    return trainers


def trainer_registry(extra: Mapping[str, Trainer] | None = None) -> dict[str, Trainer]:
    """Built-in trainers, plus (and overridden by) the user's."""
    return {**builtin_trainers(), **(extra or {})}


def default_steps(trainer: Trainer) -> tuple[Step, ...]:
    return getattr(trainer, "default_steps", GENERIC_STEPS)


def steps_for(trainer: str, trainers: Mapping[str, Trainer]) -> tuple[Step, ...]:
    """A trainer's default preprocessing; for a name not registered, what its kind of model would need."""
    if trainer in trainers:
        return tuple(default_steps(trainers[trainer]))
    return LINEAR_STEPS if trainer == "linear" else TREE_STEPS


def lookup_trainer(name: str, trainers: Mapping[str, Trainer]) -> Trainer:
    if name not in trainers:
        raise SpecError(f"unknown trainer {name!r}: known trainers are {', '.join(sorted(trainers))}")
    return trainers[name]


# ---- what the search knows of each built-in trainer, in one place

Variation = tuple[str, Mapping[str, Any]]  # (why, parameter changes)
# parameter -> (kind, low, high); kind is "float", "log" (float, log-uniform), "int" or "int_log".
SearchSpace = Mapping[str, tuple[str, float, float]]

_TREE_ENSEMBLE: tuple[Variation, ...] = (
    ("more trees", {"n_estimators": 600}),
    ("a third of the features per split", {"max_features": 0.33}),
    ("larger leaves against overfitting", {"min_samples_leaf": 3}),
)
_FOREST_SPACE: SearchSpace = {"max_features": ("float", 0.2, 1.0), "min_samples_leaf": ("int_log", 1, 20)}


@dataclass(frozen=True)
class TrainerFacts:
    family: str  # "baseline", "linear", "forest" or "gbdt"
    rounds_param: str | None = None  # the number of trees or boosting rounds
    default_rounds: int | None = None
    learning_rate_param: str | None = None
    default_learning_rate: float | None = None
    # The fit depends on the seed (row/column subsampling, bootstrap), so averaging seeds helps.
    seed_dependent: bool = False
    # Built-in changes tried in order around a node of this trainer; for a linear model they depend on the task.
    variations: tuple[Variation, ...] = ()
    regression_variations: tuple[Variation, ...] | None = None  # None: the same as `variations`
    search_space: SearchSpace = field(default_factory=dict)  # a short Optuna study's space
    aliases: tuple[str, ...] = ()  # other names write-ups use for it

    def variations_for(self, classification: bool) -> tuple[Variation, ...]:
        if classification or self.regression_variations is None:
            return self.variations
        return self.regression_variations


TRAINER_FACTS: dict[str, TrainerFacts] = {
    "baseline": TrainerFacts("baseline"),
    "linear": TrainerFacts(
        "linear", aliases=("ridge", "logistic_regression", "logreg", "logistic"),
        variations=(("weaker regularisation", {"C": 10.0}), ("stronger regularisation", {"C": 0.1})),
        regression_variations=(("weaker regularisation", {"alpha": 0.1}), ("stronger regularisation", {"alpha": 10.0}))),
    "random_forest": TrainerFacts("forest", "n_estimators", 300, seed_dependent=True, variations=_TREE_ENSEMBLE,
                                  search_space=_FOREST_SPACE, aliases=("rf", "randomforest")),
    "extra_trees": TrainerFacts("forest", "n_estimators", 300, seed_dependent=True, variations=_TREE_ENSEMBLE,
                                search_space=_FOREST_SPACE, aliases=("et", "extratrees")),
    "hist_gradient_boosting": TrainerFacts(
        "gbdt", "max_iter", 100, "learning_rate", 0.1, aliases=("hgb", "histgradientboosting"),
        variations=(("slower learning with more trees", {"learning_rate": 0.05, "max_iter": 300}),
                    ("smaller, regularised trees", {"max_leaf_nodes": 15, "l2_regularization": 1.0}),
                    ("larger trees", {"max_leaf_nodes": 63, "min_samples_leaf": 10}),
                    ("many slow trees", {"learning_rate": 0.03, "max_iter": 600})),
        search_space={"learning_rate": ("log", 0.02, 0.3), "max_leaf_nodes": ("int_log", 15, 127),
                      "min_samples_leaf": ("int_log", 5, 100), "l2_regularization": ("log", 1e-3, 10.0),
                      "max_features": ("float", 0.4, 1.0)}),
    "xgboost": TrainerFacts(
        "gbdt", "n_estimators", 400, "learning_rate", 0.05, seed_dependent=True, aliases=("xgb",),
        variations=(("more trees at half the learning rate", {"n_estimators": 800, "learning_rate": 0.025}),
                    ("shallower trees", {"max_depth": 4}),
                    ("deeper trees with heavier leaves", {"max_depth": 8, "min_child_weight": 3})),
        search_space={"learning_rate": ("log", 0.01, 0.3), "max_depth": ("int", 3, 10),
                      "min_child_weight": ("log", 0.5, 20.0), "subsample": ("float", 0.5, 1.0),
                      "colsample_bytree": ("float", 0.4, 1.0), "reg_lambda": ("log", 1e-3, 10.0)}),
    "lightgbm": TrainerFacts(
        "gbdt", "n_estimators", 400, "learning_rate", 0.05, seed_dependent=True, aliases=("lgbm", "lgb"),
        variations=(("more trees at half the learning rate", {"n_estimators": 800, "learning_rate": 0.025}),
                    ("fewer leaves", {"num_leaves": 15})),
        search_space={"learning_rate": ("log", 0.01, 0.3), "num_leaves": ("int_log", 15, 255),
                      "min_child_samples": ("int_log", 5, 100), "subsample": ("float", 0.5, 1.0),
                      "colsample_bytree": ("float", 0.4, 1.0), "reg_lambda": ("log", 1e-3, 10.0)}),
    "catboost": TrainerFacts(
        "gbdt", "iterations", 500, "learning_rate", 0.05, seed_dependent=True, aliases=("cat",),
        variations=(("deeper trees", {"depth": 8}), ("more iterations", {"iterations": 1000})),
        search_space={"learning_rate": ("log", 0.02, 0.3), "depth": ("int", 4, 10),
                      "l2_leaf_reg": ("log", 1.0, 10.0)}),
}
_NO_FACTS = TrainerFacts("custom")
# The seed loop's population and the order drafts go in: cheap and different first.
SEED_TRAINERS = ("linear", "random_forest", "hist_gradient_boosting", "xgboost", "lightgbm", "catboost")


def trainer_facts(name: str) -> TrainerFacts:
    """What is known of a trainer by name; a user's own trainer has no facts."""
    return TRAINER_FACTS.get(name, _NO_FACTS)


def trainers_of(*families: str) -> tuple[str, ...]:
    return tuple(name for name, facts in TRAINER_FACTS.items() if facts.family in families)


def trainer_alias(name: str) -> str:
    """The trainer a name from a write-up or card means ("lgbm" -> "lightgbm")."""
    lowered = name.lower()
    return next((trainer for trainer, facts in TRAINER_FACTS.items() if lowered in facts.aliases), lowered)
