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

# The cores a model asks for (CatBoost's threads, a forest's jobs), all of them even with a job per core running at
# once: a job whose partner ends first then has both; splitting them was slower (bench/RESULTS.md, "Throughput:
# nodes per minute (issue 25), threads").
N_JOBS = os.cpu_count() or 1

# Trainer parameters that wrap the model rather than reach its constructor:
#   balance_classes="balanced" (+ max_class_weight): rows weighted so classes weigh alike (runtime.ClassWeighted);
#   early_stopping_rounds (+ patience_rate, early_stopping_fraction): a GBDT (XGBoost, LightGBM, CatBoost, histogram
#     GBDT) stops on each CV validation fold after that many rounds without improvement (XGBoost and LightGBM: fewer
#     when the best round came early, unless patience_rate=0); its refit keeps the folds' mean number of trees
#     (runtime.EarlyStopped, runtime.cv);
#   seed_bag=n: the model fitted with n seeds, predictions averaged (runtime.SeedBagged), around the other wrappers.
WRAPPER_PARAMS = ("balance_classes", "max_class_weight", "early_stopping_rounds", "patience_rate",
                  "early_stopping_fraction", "seed_bag")

_COMMON = ("drop_id_columns", "drop_text_columns", "datetime_parts")
LINEAR_STEPS = steps_named(*_COMMON, "missing_indicators", "impute_numeric", "impute_categorical", "one_hot", "standard_scale")
TREE_STEPS = steps_named(*_COMMON, "impute_numeric", "impute_categorical", "ordinal_encoding")
# Gradient boosting libraries handle missing values themselves.
BOOSTING_STEPS = steps_named(*_COMMON, "ordinal_encoding")
# LightGBM and CatBoost split on categorical columns themselves (pandas categories; CatBoost's ordered target
# statistics), as AutoGluon hands them categoricals: no one-hot or ordinal codes in between.
NATIVE_CATEGORICAL_STEPS = steps_named(*_COMMON, "native_categorical")
# LightGBM's category splits overfit many-level columns, so those (above LightGBM's own max_cat_threshold, 32) reach
# it as frequency codes. Measured with 3-fold CV of its draft (bench tables, so tuning-set numbers): flights 50k
# AUC 0.727 -> 0.744 (tail numbers, 3,570 levels), churn log loss 0.162 -> 0.158 (states), hotel RMSE 15.73 ->
# 15.68, ames unchanged. CatBoost keeps every column native: its ordered target statistics suit many levels.
# On 18 experience-pool tables native splits of 33-260 levels won and lost as much (-48% to +73% of the codes'
# score, bench/RESULTS.md), so there they are a change the search tries (agent.search.builtin), not the default.
MANY_LEVELS = 32
LIGHTGBM_STEPS = (*steps_named(*_COMMON), Step("native_categorical", {"codes_above": MANY_LEVELS}))
# What a GBDT is told to split on the categories the native_categorical step hands it: LightGBM and
# HistGradientBoosting read them from the pandas dtype, XGBoost refuses that dtype without enable_categorical.
NATIVE_SPLIT_PARAMS: Mapping[str, Mapping[str, Any]] = {
    "xgboost": {"enable_categorical": True, "max_cat_to_onehot": 4},
    "lightgbm": {},
    "hist_gradient_boosting": {},
}
# For a user's factory we know nothing about: numeric, imputed, scaled features suit any estimator.
GENERIC_STEPS = LINEAR_STEPS


@dataclass(frozen=True)
class RegressorLoss:
    """The regressor class that fits a loss its trainer's own class cannot, with its defaults, and the trainer's
    parameters it takes under other names (each name -> (its name there, the value there from the value here))."""

    estimator: str
    defaults: Mapping[str, Any]
    renamed: Mapping[str, tuple[str, Callable[[Any], Any]]] = field(default_factory=dict)

    def translated(self, params: Mapping[str, Any]) -> dict[str, Any]:
        out = {}
        for name, value in params.items():
            new_name, convert = self.renamed.get(name, (name, None))
            out[new_name] = convert(value) if convert is not None else value
        return out


def _svr_c(alpha: Any) -> float:
    """Ridge's alpha as a linear SVR's C: alpha * |w|^2 against the errors is 1 / (2 C) * |w|^2."""
    return 1.0 / (2.0 * float(alpha))


# The linear L1 (median) fit: liblinear's linear SVR with no insensitive margin minimises |error| + an L2 penalty.
# On one fold of the flight-delay table (19.7k rows, 1.7k one-hot columns) it fitted in 0.03 s and scored 24.7 MAE,
# where QuantileRegressor's exact linear program took 20 s and scored 25.8. The intercept, a feature of value
# intercept_scaling to liblinear, is penalised less; at 100 liblinear did not converge in 5,000 iterations.
L1_LINEAR = RegressorLoss("LinearSVR", {"loss": "epsilon_insensitive", "epsilon": 0.0, "C": 0.5, "dual": True,
                                        "intercept_scaling": 10.0, "max_iter": 5000, "random_state": 0},
                          {"alpha": ("C", _svr_c)})


@dataclass(frozen=True)
class EstimatorTrainer:
    classifier: str  # class names in agent.engine.runtime
    regressor: str
    default_steps: tuple[Step, ...]
    classifier_defaults: Mapping[str, Any] = field(default_factory=dict)
    regressor_defaults: Mapping[str, Any] = field(default_factory=dict)
    multiclass_defaults: Mapping[str, Any] = field(default_factory=dict)  # over classifier_defaults, 3+ classes
    seed_param: str | None = "random_state"
    jobs_param: str | None = None
    # A gradient-boosting model runtime.EarlyStopped can stop early (XGBoost, LightGBM, CatBoost, histogram GBDT).
    stops_early: bool = False
    # Wrapper parameters (WRAPPER_PARAMS) the model gets unless its params say otherwise: CatBoost is always inside
    # runtime.EarlyStopped, which also hands it its categorical columns by name.
    wrapper_defaults: Mapping[str, Any] = field(default_factory=dict)
    # A `loss` parameter that selects another regressor class, for a model whose class fixes its loss: ridge is
    # squared error only, the L1 fit is another class (RegressorLoss).
    regressor_losses: Mapping[str, RegressorLoss] = field(default_factory=dict)

    def defaults_for(self, task_type: str) -> dict[str, Any]:
        """The parameters the model gets on this task type unless its own say otherwise."""
        defaults = self.classifier_defaults if task_type in CLASSIFICATION else self.regressor_defaults
        return {**defaults, **self.multiclass_defaults} if task_type == "multiclass" else dict(defaults)

    def render(self, params: Mapping[str, Any], task_type: str, random_state: int) -> str:
        classification = task_type in CLASSIFICATION
        params = dict(params)
        estimator = self.classifier if classification else self.regressor
        defaults = self.defaults_for(task_type)
        if self.regressor_losses and "loss" in params:
            loss = params.pop("loss")
            if classification or loss not in self.regressor_losses:
                raise SpecError(f"loss={loss!r} is not available for {estimator}; "
                                f"regression losses: {', '.join(self.regressor_losses)}")
            chosen = self.regressor_losses[loss]
            estimator, defaults, params = chosen.estimator, chosen.defaults, chosen.translated(params)
        arguments = dict(defaults)
        if self.seed_param:
            arguments[self.seed_param] = random_state
        if self.jobs_param:
            arguments[self.jobs_param] = N_JOBS
        wrappers = {**self.wrapper_defaults, **{name: params.pop(name) for name in WRAPPER_PARAMS if name in params}}
        arguments.update(params)
        keywords = ", ".join(f"{name}={value!r}" for name, value in arguments.items())
        model = f"{estimator}({keywords})"
        return self._wrapped(model, wrappers, classification, random_state)

    def _wrapped(self, model: str, wrappers: Mapping[str, Any], classification: bool, random_state: int) -> str:
        """The model inside the wrappers its trainer parameters ask for (see WRAPPER_PARAMS)."""
        seed_path = self.seed_param  # where the seed sits, as the model gets wrapped
        if wrappers.get("early_stopping_rounds") is not None:
            if not self.stops_early:
                raise SpecError(f"early_stopping_rounds is for gradient-boosting trainers (XGBoost, LightGBM, "
                                f"CatBoost, HistGradientBoosting), not {self.regressor}")
            rate = "" if wrappers.get("patience_rate") is None else f"patience_rate={float(wrappers['patience_rate'])!r}, "
            model = (f"EarlyStopped({model}, rounds={int(wrappers['early_stopping_rounds'])!r}, {rate}"
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
    """The built-in trainers; XGBoost, LightGBM and CatBoost when they are installed (casebook depends on all three)."""
    trainers = {
        "baseline": EstimatorTrainer("DummyClassifier", "DummyRegressor", (),
                                     classifier_defaults={"strategy": "prior"}, seed_param=None),
        "linear": EstimatorTrainer("LogisticRegression", "Ridge", LINEAR_STEPS,
                                   classifier_defaults={"max_iter": 2000}, seed_param=None,
                                   regressor_losses={"absolute_error": L1_LINEAR}),
        "random_forest": EstimatorTrainer("RandomForestClassifier", "RandomForestRegressor", TREE_STEPS,
                                          {"n_estimators": 300}, {"n_estimators": 300}, jobs_param="n_jobs"),
        "extra_trees": EstimatorTrainer("ExtraTreesClassifier", "ExtraTreesRegressor", TREE_STEPS,
                                        {"n_estimators": 300}, {"n_estimators": 300}, jobs_param="n_jobs"),
        "hist_gradient_boosting": EstimatorTrainer("HistGradientBoostingClassifier", "HistGradientBoostingRegressor",
                                                   BOOSTING_STEPS, stops_early=True),
    }
    boosting = {"n_estimators": 400, "learning_rate": 0.05, "max_depth": 6, "subsample": 0.8, "colsample_bytree": 0.8}
    if _installed("xgboost"):
        trainers["xgboost"] = EstimatorTrainer("XGBClassifier", "XGBRegressor", BOOSTING_STEPS,
                                               {**boosting, "tree_method": "hist"}, {**boosting, "tree_method": "hist"},
                                               jobs_param="n_jobs", stops_early=True)
    if _installed("lightgbm"):
        # One thread, as every candidate runs (sandbox.Limits.native_threads): LightGBM alone ignores that OpenMP
        # limit, and its threads spin-wait for busy cores (300 trees on 5,000 rows in a candidate's process, two
        # cores shared at load 10: 1.7 s with one thread, 21 s with two, 35 s with its default).
        lightgbm = {"n_estimators": 400, "learning_rate": 0.05, "subsample": 0.8, "subsample_freq": 1,
                    "colsample_bytree": 0.8, "verbose": -1, "n_jobs": 1}
        trainers["lightgbm"] = EstimatorTrainer("LGBMClassifier", "LGBMRegressor", LIGHTGBM_STEPS,
                                                lightgbm, lightgbm, stops_early=True)
    if _installed("catboost"):
        # No catboost_info folder in the working directory (AutoGluon turns it off too).
        catboost = {"iterations": 500, "learning_rate": 0.05, "verbose": 0, "allow_writing_files": False}
        # On a multiclass target a categorical column's target statistics are one per class: columns of up to 255
        # levels are one-hot encoded instead (CatBoost's own threshold where it cannot compute them). Measured on six
        # multiclass pool tables (bench/RESULTS.md, "A multiclass CatBoost's categorical statistics"): drafts 2-15
        # times faster (two finished in 30 s that had projected over 150 s); where both finished, log loss 0.0020
        # better on one table, 0.0004 and 0.0017 worse on two.
        trainers["catboost"] = EstimatorTrainer("CatBoostClassifier", "CatBoostRegressor", NATIVE_CATEGORICAL_STEPS,
                                                catboost, catboost, multiclass_defaults={"one_hot_max_size": 255},
                                                seed_param="random_seed", jobs_param="thread_count",
                                                stops_early=True, wrapper_defaults={"early_stopping_rounds": 50})
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

# (why, parameter changes). A change that raises a GBDT's rounds brings early stopping (AutoGluon's patience for a
# small table) for a model that has none; one that has it keeps its own patience (agent.search.builtin).
Variation = tuple[str, Mapping[str, Any]]
# parameter -> (kind, low, high); kind is "float", "log" (float, log-uniform), "int", "int_log" or "share" (a share of
# the columns, sampled on a grid that holds its upper bound: agent.search.tuning).
SearchSpace = Mapping[str, tuple[str, float, float]]

_TREE_ENSEMBLE: tuple[Variation, ...] = (
    ("more trees", {"n_estimators": 600}),
    ("a third of the features per split", {"max_features": 0.33}),
    ("larger leaves against overfitting", {"min_samples_leaf": 3}),
)
_FOREST_SPACE: SearchSpace = {"max_features": ("share", 0.2, 1.0), "min_samples_leaf": ("int_log", 1, 20)}


# Table sizes by training rows, for the parameter sets below. 10,000 rows is where AutoGluon starts shortening
# early stopping's patience; above 100,000 rows a fit's time, not the data, is what limits a search.
SMALL, MEDIUM, LARGE = "small", "medium", "large"
SMALL_ROWS, LARGE_ROWS = 10_000, 100_000
# A forest on a larger table draws this many rows per tree (a bootstrap sample), and caps each tree at AutoGluon's
# 15,000 leaves: fit time, memory and model size stop growing with the rows.
FOREST_ROWS_PER_TREE = 20_000
FOREST_MAX_LEAVES = 15_000


def size_class(n_rows: int) -> str:
    return SMALL if n_rows <= SMALL_ROWS else MEDIUM if n_rows <= LARGE_ROWS else LARGE


def early_stopping_patience(n_rows: int) -> int:
    """Rounds without improvement before a GBDT stops, by AutoGluon's rule: 300 up to 10,000 training rows, then
    300 x 10,000 / rows, never below 20 (a large table's validation score is steady, so it stops sooner)."""
    return max(20, round(300 * min(1.0, SMALL_ROWS / max(n_rows, 1))))


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
    # The parameters a draft starts from, by size class (SMALL, MEDIUM, LARGE): what params_for builds on.
    sizes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Early stopping's patience, when not AutoGluon's rule: histogram GBDT keeps the trees it grew past its best.
    patience: int | None = None
    # How that patience shortens when the best round comes early (runtime.EarlyStopped): IN_EACH_FIT from the best
    # round so far (XGBoost and LightGBM, through their early-stopping callbacks), FROM_EARLIER_FOLDS from the trees
    # the CV's earlier folds kept (CatBoost, on every fold but the first); None: it does not.
    adaptive_patience: str | None = None
    # Parameters that act only on combinations of the categorical columns the model computes statistics on (those
    # handed to it as categories by the native_categorical step): a change of them alone changes nothing for a node
    # with no such column, nor, once the node combines pairs (a value of 2 or more), for one with a single such
    # column (CatBoost's max_ctr_complexity of 2 and 4 fit the same trees there on two real tables; 1 and 4 do not).
    combination_params: tuple[str, ...] = ()
    # (parameter, its library default): a categorical column of at most that many levels is one-hot encoded inside
    # the model, with no statistics (CatBoost's one_hot_max_size, 2; here 255 on a multiclass target).
    one_hot_levels: tuple[str, int] | None = None
    # (parameter, its library default, DEPTH or LEAVES): what sets a tree's size, a round's cost growing with it.
    tree_size: tuple[str, int, str] | None = None

    def variations_for(self, classification: bool) -> tuple[Variation, ...]:
        if classification or self.regression_variations is None:
            return self.variations
        return self.regression_variations

    def params_for(self, n_rows: int) -> dict[str, Any]:
        """The parameters a draft of this trainer starts from on a table of `n_rows` training rows: its size class's
        set, early stopping on each validation fold for a GBDT (with a cap on the trees, so the rounds cost what
        the fold needs), and for a forest on more than FOREST_ROWS_PER_TREE rows, that many rows per tree."""
        params = dict(self.sizes.get(size_class(n_rows), {}))
        if self.family == "gbdt":
            params["early_stopping_rounds"] = self.patience or early_stopping_patience(n_rows)
        if self.family == "forest" and n_rows > FOREST_ROWS_PER_TREE:
            params.update(bootstrap=True, max_samples=round(FOREST_ROWS_PER_TREE / n_rows, 4))
        return params


def _sized(small: Mapping[str, Any], medium: Mapping[str, Any], large: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {SMALL: dict(small), MEDIUM: dict(medium), LARGE: dict(large)}


IN_EACH_FIT, FROM_EARLIER_FOLDS = "in each fit", "from earlier folds"  # TrainerFacts.adaptive_patience
DEPTH, LEAVES = "depth", "leaves"  # TrainerFacts.tree_size: a tree's size as its depth or its leaves

# Forests: AutoGluon's 300 trees on small tables; fewer, leaf-capped trees as the rows grow (params_for adds the
# rows per tree).
_FOREST_SIZES = _sized({"n_estimators": 300}, {"n_estimators": 200, "max_leaf_nodes": FOREST_MAX_LEAVES},
                       {"n_estimators": 100, "max_leaf_nodes": FOREST_MAX_LEAVES})
# GBDTs stop early, so the rounds are a cap; AutoGluon's learning rate (0.05) up to 100,000 rows, and a faster one
# with larger trees above, where each round costs the most and more rows carry more leaves.
TRAINER_FACTS: dict[str, TrainerFacts] = {
    "baseline": TrainerFacts("baseline"),
    "linear": TrainerFacts(
        "linear", aliases=("ridge", "logistic_regression", "logreg", "logistic"),
        variations=(("weaker regularisation", {"C": 10.0}), ("stronger regularisation", {"C": 0.1})),
        regression_variations=(("weaker regularisation", {"alpha": 0.1}), ("stronger regularisation", {"alpha": 10.0}))),
    "random_forest": TrainerFacts("forest", "n_estimators", 300, seed_dependent=True, variations=_TREE_ENSEMBLE,
                                  search_space=_FOREST_SPACE, aliases=("rf", "randomforest"), sizes=_FOREST_SIZES),
    "extra_trees": TrainerFacts("forest", "n_estimators", 300, seed_dependent=True, variations=_TREE_ENSEMBLE,
                                search_space=_FOREST_SPACE, aliases=("et", "extratrees"), sizes=_FOREST_SIZES),
    "hist_gradient_boosting": TrainerFacts(
        "gbdt", "max_iter", 100, "learning_rate", 0.1, aliases=("hgb", "histgradientboosting"), patience=20,
        tree_size=("max_leaf_nodes", 31, LEAVES),
        variations=(("slower learning (early stopping finds the trees)",
                     {"learning_rate": 0.03, "max_iter": 3000, "early_stopping_rounds": 20}),
                    ("smaller, regularised trees", {"max_leaf_nodes": 15, "l2_regularization": 1.0}),
                    ("larger trees", {"max_leaf_nodes": 63, "min_samples_leaf": 10})),
        search_space={"learning_rate": ("log", 0.02, 0.3), "max_leaf_nodes": ("int_log", 15, 127),
                      "min_samples_leaf": ("int_log", 5, 100), "l2_regularization": ("log", 1e-3, 10.0),
                      "max_features": ("share", 0.4, 1.0)},
        sizes=_sized({"learning_rate": 0.05, "max_iter": 2000}, {"learning_rate": 0.1, "max_iter": 1000},
                     {"learning_rate": 0.1, "max_iter": 1000, "max_leaf_nodes": 63, "min_samples_leaf": 50})),
    "xgboost": TrainerFacts(
        "gbdt", "n_estimators", 400, "learning_rate", 0.05, seed_dependent=True, aliases=("xgb",), adaptive_patience=IN_EACH_FIT,
        tree_size=("max_depth", 6, DEPTH),
        variations=(("slower learning (early stopping finds the trees)",
                     {"n_estimators": 4000, "learning_rate": 0.025, "early_stopping_rounds": 300}),
                    ("shallower trees", {"max_depth": 4}),
                    ("deeper trees with heavier leaves", {"max_depth": 8, "min_child_weight": 3})),
        search_space={"learning_rate": ("log", 0.01, 0.3), "max_depth": ("int", 3, 10),
                      "min_child_weight": ("log", 0.5, 20.0), "subsample": ("float", 0.5, 1.0),
                      "colsample_bytree": ("share", 0.4, 1.0), "reg_lambda": ("log", 1e-3, 10.0)},
        sizes=_sized({"n_estimators": 2000, "learning_rate": 0.05}, {"n_estimators": 2000, "learning_rate": 0.05},
                     {"n_estimators": 1000, "learning_rate": 0.1, "max_depth": 8, "min_child_weight": 5})),
    "lightgbm": TrainerFacts(
        "gbdt", "n_estimators", 400, "learning_rate", 0.05, seed_dependent=True, aliases=("lgbm", "lgb"),
        adaptive_patience=IN_EACH_FIT, tree_size=("num_leaves", 31, LEAVES),
        variations=(("slower learning (early stopping finds the trees)",
                     {"n_estimators": 4000, "learning_rate": 0.025, "early_stopping_rounds": 300}),
                    ("fewer leaves, heavier leaves", {"num_leaves": 15, "min_child_samples": 40}),
                    ("more leaves", {"num_leaves": 127, "min_child_samples": 10}),
                    # One of AutoGluon's zero-shot LightGBM configurations: random split thresholds.
                    ("extremely randomised splits", {"extra_trees": True})),
        search_space={"learning_rate": ("log", 0.01, 0.3), "num_leaves": ("int_log", 15, 255),
                      "min_child_samples": ("int_log", 5, 100), "subsample": ("float", 0.5, 1.0),
                      "colsample_bytree": ("share", 0.4, 1.0), "reg_lambda": ("log", 1e-3, 10.0),
                      "cat_smooth": ("log", 1.0, 50.0)},
        sizes=_sized({"n_estimators": 2000, "learning_rate": 0.05, "num_leaves": 31, "min_child_samples": 10},
                     {"n_estimators": 2000, "learning_rate": 0.05, "num_leaves": 63, "min_child_samples": 20},
                     {"n_estimators": 1000, "learning_rate": 0.1, "num_leaves": 127, "min_child_samples": 50})),
    # CatBoost's own advice for speed (its "Speeding up the training" page): fewer combinations of categorical
    # features (max_ctr_complexity; its default of 4 made a 1,100-row fit 3.4x slower than 1 for +0.003 AUC), and
    # on larger tables a higher learning rate with fewer iterations, and fewer borders. Combinations come back as a
    # built-in change.
    "catboost": TrainerFacts(
        "gbdt", "iterations", 500, "learning_rate", 0.05, seed_dependent=True, aliases=("cat",),
        adaptive_patience=FROM_EARLIER_FOLDS, combination_params=("max_ctr_complexity",),
        one_hot_levels=("one_hot_max_size", 2), tree_size=("depth", 6, DEPTH),
        variations=(("combinations of up to 4 categorical features", {"max_ctr_complexity": 4}),
                    ("deeper trees", {"depth": 8}), ("shallower trees", {"depth": 4}),
                    ("stronger L2 on the leaves", {"l2_leaf_reg": 10.0}),
                    ("slower learning (early stopping finds the trees)",
                     {"learning_rate": 0.025, "iterations": 4000, "early_stopping_rounds": 300})),
        search_space={"learning_rate": ("log", 0.02, 0.3), "depth": ("int", 4, 10),
                      "l2_leaf_reg": ("log", 1.0, 10.0), "random_strength": ("log", 0.1, 10.0)},
        sizes=_sized({"iterations": 2000, "learning_rate": 0.05, "max_ctr_complexity": 2},
                     {"iterations": 2000, "learning_rate": 0.08, "max_ctr_complexity": 1},
                     {"iterations": 1000, "learning_rate": 0.15, "max_ctr_complexity": 1, "border_count": 128})),
}
_NO_FACTS = TrainerFacts("custom")
# The seed loop's population (agent.seedloop.variation); the tree search drafts in its own order
# (agent.search.builtin.DRAFT_FAMILIES).
SEED_TRAINERS = ("linear", "random_forest", "hist_gradient_boosting", "xgboost", "lightgbm", "catboost")


def trainer_facts(name: str) -> TrainerFacts:
    """What is known of a trainer by name; a user's own trainer has no facts."""
    return TRAINER_FACTS.get(name, _NO_FACTS)


def model_group(name: str) -> str:
    """"trees" for a forest or a GBDT, else the trainer's family ("linear"; "custom" for a user's own trainer): what
    a trick does to a model differs most between a linear model, which extrapolates, and trees, which average
    leaves (agent.memory reads measured effects by it)."""
    family = trainer_facts(name).family
    return "trees" if family in ("forest", "gbdt") else family


def trainers_of(*families: str) -> tuple[str, ...]:
    return tuple(name for name, facts in TRAINER_FACTS.items() if facts.family in families)


def trainer_alias(name: str) -> str:
    """The trainer a name from a write-up or card means ("lgbm" -> "lightgbm")."""
    lowered = name.lower()
    return next((trainer for trainer, facts in TRAINER_FACTS.items() if lowered in facts.aliases), lowered)
