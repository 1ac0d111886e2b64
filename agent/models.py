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

from agent.spec import SpecError, Step
from agent.steps import evaluate_source, steps_named

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
    classifier: str  # class names in agent.runtime
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
        classification = task_type in ("binary", "multiclass")
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


def lookup_trainer(name: str, trainers: Mapping[str, Trainer]) -> Trainer:
    if name not in trainers:
        raise SpecError(f"unknown trainer {name!r}: known trainers are {', '.join(sorted(trainers))}")
    return trainers[name]
