"""The executable recipe catalogue: each recipe op as one atomic change to a SolutionCandidate.

A `Recipe` knows when it applies to a task (`applies` / `why_not`, from the TaskProfile and, for a few
checks that need values, a sample of train.csv) and how to apply itself to a candidate (`apply`):
  - "step" recipes insert their step where it belongs in the candidate's steps (the trainer's default
    steps are materialised first): composite-string splitting first, feature steps before imputation and
    encoding, encoders before the model, tfidf_text last (it replaces drop_text_columns and hands the
    model a sparse matrix). An op already present is not added twice: new params replace its params.
  - "target" recipes set the candidate's target transform.
  - "model" recipes change the trainer or its parameters.
Names, stages, descriptions and default parameters come from data/recipes.json; the ops there that are not
a change to one candidate (ensembles, searches, validation schemes, post-processing...) are in LEFT_OUT.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agent.candidate import SolutionCandidate
from agent.engine import runtime
from agent.engine.spec import SpecError, Step
from agent.engine.steps import BUILTIN_STEPS, TARGET_OPS, CompileContext
from agent.engine.trainers import (
    TRAINER_FACTS,
    default_steps,
    lookup_trainer,
    trainer_alias,
    trainer_registry,
    trainers_of,
)
from kb.config import DATA_DIR
from retrieval.metrics import CLASSIFICATION
from retrieval.profile import TaskProfile

RECIPES_PATH = DATA_DIR / "recipes.json"

# Ops of data/recipes.json that are not one change to one candidate, and why.
LEFT_OUT: dict[str, str] = {
    # The next four are carried out by the tree search, not by changing one candidate: it ends by combining the
    # best nodes from their out-of-fold predictions (agent.search.blending), each way a node that wins only on CV.
    "average_ensemble": "an ensemble of several candidates: the tree search's final blend",
    "rank_average_ensemble": "an ensemble of several candidates: the tree search's final rank average (AUC)",
    "stacking_linear": "a linear model on several candidates' out-of-fold predictions: the tree search's final stack",
    "hill_climbing_ensemble": "greedy selection on out-of-fold predictions: the tree search's final blend",
    "optuna_search": "a study over many candidates, not one change: the tree search runs its trials as nodes "
                     "(agent.search.tuning)",
    "validation_scheme": "changes how every candidate is scored, not a candidate (ValidationSpec)",
    "adversarial_validation": "a diagnosis of train/test shift that reads the test set, not a model change",
    "pseudo_labeling": "trains on test predictions: needs a fitted model and the test set inside the loop",
    "threshold_tuning": "post-processing of out-of-fold predictions, outside the pipeline",
    "optimized_rounding": "post-processing of out-of-fold predictions, outside the pipeline",
    "clip_predictions": "post-processing of predictions, outside the pipeline",
    "lag_features": "needs series/time order across rows; a row-wise pipeline step cannot build it leak-free",
    "rolling_features": "needs series/time order across rows; a row-wise pipeline step cannot build it leak-free",
    "outlier_removal": "drops training rows: a pipeline step cannot change the rows the model is fitted on",
    "drop_duplicates": "drops or merges training rows: a pipeline step cannot change the fitted rows",
    "add_original_data": "adds rows from another data set: a data change, not a candidate change",
    "permutation_feature_selection": "needs a fitted model's importances: a search over candidates",
    "holiday_features": "needs a holiday calendar (the holidays package) that solution.py cannot assume",
    "landmark_distances": "needs points of interest from outside the data; coordinate_rotation covers coordinates",
    "kmeans_features": "not implemented yet",
    "categorical_crosses": "not implemented yet",
}

GBDT_TRAINERS = trainers_of("gbdt")

# Where steps go. Feature steps sit before the first of these (imputation, encoding, scaling).
_ENCODING_OPS = ("missing_indicators", "impute_numeric", "impute_categorical", "target_encoding", "one_hot",
                 "ordinal_encoding", "native_categorical", "standard_scale")
_ENCODERS = ("one_hot", "ordinal_encoding", "native_categorical")
_FIRST = ("split_composite_string",)  # before drop_id_columns, so id-like composite keys are split, then dropped
_LAST = ("tfidf_text",)  # consumes the text columns, hands the model a sparse matrix
_REPLACES = {
    "tfidf_text": ("drop_text_columns",),
    "one_hot": ("ordinal_encoding", "native_categorical"),
    "ordinal_encoding": ("one_hot", "native_categorical"),
    "native_categorical": ("ordinal_encoding", "one_hot"),
}
_TASKS = ("binary", "multiclass", "regression")


@dataclass(frozen=True)
class Recipe:
    op: str
    stage: str
    description: str
    default_params: Mapping[str, Any]
    kind: str  # "step" | "target" | "model"
    condition: Callable[[TaskProfile], str | None] = field(default=lambda profile: None, repr=False, compare=False)
    accepted: frozenset[str] = field(default=frozenset(), repr=False, compare=False)  # parameter names it takes

    def applies(self, profile: TaskProfile) -> bool:
        return self.why_not(profile) is None

    def why_not(self, profile: TaskProfile) -> str | None:
        """One line on why the recipe does not fit this task; None when it does."""
        if profile.task_type not in _TASKS:
            return f"task type {profile.task_type}: recipes are for classification and regression"
        return self.condition(profile)

    def apply(self, candidate: SolutionCandidate, params: Mapping[str, Any] | None = None) -> SolutionCandidate:
        """The candidate with this one change made (the same candidate when it is already there)."""
        params = dict(params or {})
        unknown = set(params) - self.accepted
        if unknown:
            raise SpecError(f"recipe {self.op!r} has no parameter {', '.join(sorted(unknown))}; "
                            f"it takes {sorted(self.accepted) or 'none'}")
        _check_values(self.op, self.kind, params)
        if self.kind == "target":
            target = Step(self.op, params)
            return candidate if candidate.target_transform == target else replace(candidate, target_transform=target)
        if self.kind == "model":
            return _MODEL_OPS[self.op](candidate, params)
        return _with_step(candidate, Step(self.op, params))


# ---- applying

_EMPTY_CONTEXT = CompileContext("regression", (), pd.DataFrame(), np.zeros(0), None, 0)


def _check_values(op: str, kind: str, params: Mapping[str, Any]) -> None:
    """Refuse parameter values the op cannot compile (a leaky fit_on, an unknown analyzer...) when the recipe is
    applied, not later when the candidate is evaluated, so a caller can fall back to the defaults at once."""
    if kind == "target":
        TARGET_OPS[op].render(params, "MODEL")
    elif op in BUILTIN_STEPS:
        BUILTIN_STEPS[op].render(params, _EMPTY_CONTEXT)


def materialised_steps(candidate: SolutionCandidate) -> tuple[Step, ...]:
    """The candidate's steps, its trainer's defaults when it has none of its own."""
    if candidate.steps is not None:
        return tuple(candidate.steps)
    return tuple(default_steps(lookup_trainer(candidate.trainer, trainer_registry())))


def _with_step(candidate: SolutionCandidate, step: Step) -> SolutionCandidate:
    if step.op == "tfidf_text" and candidate.trainer == "hist_gradient_boosting":
        raise SpecError("tfidf_text gives a sparse matrix, which HistGradientBoosting cannot take; use tfidf_svd")
    steps = list(materialised_steps(candidate))
    for index, present in enumerate(steps):
        if present.op == step.op:
            if not step.params or dict(present.params) == dict(step.params):
                return candidate if candidate.steps is not None else replace(candidate, steps=tuple(steps))
            steps[index] = step
            return replace(candidate, steps=tuple(steps))
    return replace(candidate, steps=tuple(_insert(steps, step)))


def _insert(steps: list[Step], step: Step) -> list[Step]:
    ops = [present.op for present in steps]
    replaced = [index for index, op in enumerate(ops) if op in _REPLACES.get(step.op, ())]
    if replaced and step.op not in _LAST:
        steps[replaced[0]] = step
        return [present for index, present in enumerate(steps) if index not in replaced[1:]]
    steps = [present for present in steps if present.op not in _REPLACES.get(step.op, ())]
    ops = [present.op for present in steps]
    if step.op in _FIRST:
        position = 0
    elif step.op in _LAST:
        position = len(steps)
    elif step.op == "standard_scale":
        position = next((i for i, op in enumerate(ops) if op in _LAST), len(steps))
    elif step.op in ("target_encoding",):
        position = _first_of(ops, _ENCODERS + ("standard_scale",) + _LAST, len(steps))
    elif step.op in ("impute_numeric", "impute_categorical"):
        position = _first_of(ops, ("target_encoding",) + _ENCODERS + ("standard_scale",) + _LAST, len(steps))
    elif step.op in ("tfidf_svd", "text_stats") and "drop_text_columns" in ops:
        position = ops.index("drop_text_columns")  # adds features from the text, which is then dropped
    else:
        position = _first_of(ops, _ENCODING_OPS + _LAST, len(steps))
    return [*steps[:position], step, *steps[position:]]


def _first_of(ops: list[str], names: tuple[str, ...], default: int) -> int:
    return next((index for index, op in enumerate(ops) if op in names), default)


def _set_params(candidate: SolutionCandidate, changes: Mapping[str, Any]) -> SolutionCandidate:
    params = {**candidate.params, **changes}
    return candidate if params == dict(candidate.params) else replace(candidate, params=params)


def _require(candidate: SolutionCandidate, op: str, trainers: tuple[str, ...]) -> None:
    if candidate.trainer not in trainers:
        raise SpecError(f"recipe {op!r} is for {', '.join(trainers)} trainers, not {candidate.trainer!r}")


def _set_model(candidate: SolutionCandidate, params: Mapping[str, Any]) -> SolutionCandidate:
    name = trainer_alias(str(params.get("model", "xgboost")))
    trainers = trainer_registry()
    lookup_trainer(name, trainers)
    if name == candidate.trainer:
        return candidate
    moved = replace(candidate, trainer=name, params={})
    if candidate.steps is None:
        return moved
    # Keep the candidate's own steps (those no trainer adds by default) on the new trainer's defaults.
    default_ops = {step.op for trainer in trainers.values() for step in default_steps(trainer)}
    moved = replace(moved, steps=None)
    for step in candidate.steps:
        if step.op not in default_ops:
            moved = _with_step(moved, step)
    return moved


GBDT_PRESETS = {
    "default": {"learning_rate": 0.05, "n_estimators": 500, "num_leaves": 31, "max_depth": -1,
                "min_child_samples": 20, "subsample": 0.8, "colsample_bytree": 0.8},
    "small_data": {"learning_rate": 0.03, "n_estimators": 400, "num_leaves": 15, "max_depth": 4,
                   "min_child_samples": 10, "subsample": 0.8, "colsample_bytree": 0.8, "reg_lambda": 5.0},
    "large_data": {"learning_rate": 0.05, "n_estimators": 1000, "num_leaves": 255, "max_depth": -1,
                   "min_child_samples": 100, "subsample": 0.8, "colsample_bytree": 0.5},
    "regularized": {"learning_rate": 0.03, "n_estimators": 800, "num_leaves": 31, "max_depth": 6,
                    "min_child_samples": 40, "subsample": 0.7, "colsample_bytree": 0.7, "reg_alpha": 0.1,
                    "reg_lambda": 5.0},
    "deep": {"learning_rate": 0.03, "n_estimators": 1000, "num_leaves": 127, "max_depth": 10,
             "min_child_samples": 20, "subsample": 0.8, "colsample_bytree": 0.6},
    "shallow": {"learning_rate": 0.05, "n_estimators": 800, "num_leaves": 7, "max_depth": 3,
                "min_child_samples": 20, "subsample": 0.8, "colsample_bytree": 0.8},
}
# gbdt_params takes these beyond data/recipes.json's list (the cards use them).
GBDT_EXTRA_PARAMS = ("monotone_constraints", "tweedie_variance_power", "boosting_type", "alpha")
# objective -> (XGBoost objective, HistGradientBoosting loss); None: that library has no such loss.
_OBJECTIVES = {
    "regression": ("reg:squarederror", "squared_error"), "rmse": ("reg:squarederror", "squared_error"),
    "l2": ("reg:squarederror", "squared_error"), "mae": ("reg:absoluteerror", "absolute_error"),
    "l1": ("reg:absoluteerror", "absolute_error"), "huber": ("reg:pseudohubererror", None),
    "poisson": ("count:poisson", "poisson"), "tweedie": ("reg:tweedie", None),
    "gamma": ("reg:gamma", "gamma"), "quantile": ("reg:quantileerror", "quantile"),
}


def _gbdt_params(candidate: SolutionCandidate, params: Mapping[str, Any]) -> SolutionCandidate:
    """LightGBM-style parameters (the recipe's vocabulary), translated for the candidate's GBDT library."""
    _require(candidate, "gbdt_params", GBDT_TRAINERS)
    preset = params.get("preset", "default")
    if preset not in GBDT_PRESETS:
        raise SpecError(f"gbdt_params: preset={preset!r} is not known; use one of {list(GBDT_PRESETS)}")
    wanted = {**GBDT_PRESETS[preset], **{k: v for k, v in params.items() if k != "preset"}}
    objective = wanted.pop("objective", "auto")
    if objective not in ("auto", "binary", "multiclass", *_OBJECTIVES):
        raise SpecError(f"gbdt_params: objective={objective!r} is not supported; use auto or one of {list(_OBJECTIVES)}")
    depth = wanted.get("max_depth", -1)
    trainer = candidate.trainer
    if trainer == "lightgbm":
        changes = {k: v for k, v in wanted.items() if k != "alpha"}
        if objective not in ("auto",):
            changes["objective"] = objective
        if "alpha" in wanted:
            changes["alpha"] = wanted["alpha"]
        return _set_params(candidate, changes)
    if trainer == "catboost":
        changes = {"learning_rate": wanted.get("learning_rate"), "iterations": wanted.get("n_estimators"),
                   "depth": int(depth) if depth and depth > 0 else 6, "l2_leaf_reg": wanted.get("reg_lambda", 3.0)}
        return _set_params(candidate, {k: v for k, v in changes.items() if v is not None})
    xgb_objective, hgb_loss = _OBJECTIVES.get(objective, (None, None))
    if trainer == "xgboost":
        names = ("learning_rate", "n_estimators", "subsample", "colsample_bytree", "reg_alpha", "reg_lambda",
                 "monotone_constraints", "tweedie_variance_power")
        changes = {name: wanted[name] for name in names if name in wanted}
        if depth is None or depth <= 0:  # leaf-wise growth bounded by leaves, as LightGBM grows trees
            changes.update(max_depth=0, grow_policy="lossguide", max_leaves=int(wanted.get("num_leaves", 31)))
        else:
            changes["max_depth"] = int(depth)
        if xgb_objective is not None:
            changes["objective"] = xgb_objective
        if objective == "quantile":
            changes["quantile_alpha"] = float(wanted.get("alpha", 0.5))
        if wanted.get("boosting_type", "gbdt") == "dart":
            changes["booster"] = "dart"
        return _set_params(candidate, changes)
    # HistGradientBoosting
    if objective in _OBJECTIVES and hgb_loss is None:
        raise SpecError(f"gbdt_params: HistGradientBoosting has no {objective} loss; use xgboost")
    if wanted.get("boosting_type", "gbdt") != "gbdt":
        raise SpecError(f"gbdt_params: HistGradientBoosting has no boosting_type={wanted['boosting_type']!r}")
    changes = {"learning_rate": wanted.get("learning_rate"), "max_iter": int(wanted.get("n_estimators", 100)),
               "max_leaf_nodes": int(wanted.get("num_leaves", 31)),
               "max_depth": int(depth) if depth and depth > 0 else None,
               "min_samples_leaf": int(wanted.get("min_child_samples", 20)),
               "l2_regularization": float(wanted.get("reg_lambda", 0.0)),
               "max_features": float(wanted.get("colsample_bytree", 1.0))}
    if hgb_loss is not None:
        changes["loss"] = hgb_loss
    if objective == "quantile":
        changes["quantile"] = float(wanted.get("alpha", 0.5))
    if "monotone_constraints" in wanted:
        changes["monotonic_cst"] = wanted["monotone_constraints"]
    return _set_params(candidate, {k: v for k, v in changes.items() if v is not None or k == "max_depth"})


# loss -> trainer -> the parameters that make that trainer fit it.
_LOSSES = {
    "absolute_error": {"xgboost": {"objective": "reg:absoluteerror"}, "lightgbm": {"objective": "l1"},
                       "catboost": {"loss_function": "MAE"}, "hist_gradient_boosting": {"loss": "absolute_error"},
                       "linear": {"loss": "absolute_error"}},
}


def _loss_for_metric(candidate: SolutionCandidate, params: Mapping[str, Any]) -> SolutionCandidate:
    loss = params.get("loss", "absolute_error")
    if loss not in _LOSSES:
        raise SpecError(f"loss_for_metric: loss={loss!r} is not supported; use one of {list(_LOSSES)}")
    changes = _LOSSES[loss].get(candidate.trainer)
    if changes is None:  # forests: sklearn's absolute_error criterion costs O(n^2) per split
        raise SpecError(f"loss_for_metric: {candidate.trainer!r} has no practical {loss} loss; "
                        f"use one of {', '.join(_LOSSES[loss])}")
    kept = dict(candidate.params)
    if candidate.trainer == "linear":
        kept.pop("alpha", None)  # ridge's L2 strength means something else to QuantileRegressor
    params = {**kept, **changes}
    return candidate if params == dict(candidate.params) else replace(candidate, params=params)


def _class_weights(candidate: SolutionCandidate, params: Mapping[str, Any]) -> SolutionCandidate:
    mode = params.get("mode", "balanced")
    if mode != "balanced":
        raise SpecError(f"class_weights: mode={mode!r} is not supported; only 'balanced'")
    if candidate.trainer == "baseline":
        raise SpecError("class_weights: the baseline trainer has no model to weight")
    return _set_params(candidate, {"balance_classes": "balanced", "max_class_weight": float(params.get("max_weight", 50.0))})


def _stopping(candidate: SolutionCandidate, op: str, rounds: int, budget: int | None,
              learning_rate: float | None = None) -> SolutionCandidate:
    _require(candidate, op, ("hist_gradient_boosting", "xgboost", "lightgbm"))
    changes: dict[str, Any] = {} if learning_rate is None else {"learning_rate": float(learning_rate)}
    if candidate.trainer == "hist_gradient_boosting":
        trees = int(budget or max(int(candidate.params.get("max_iter", 100)), 1000))
        changes.update(early_stopping=True, n_iter_no_change=int(rounds), max_iter=trees)
    else:
        trees = int(budget or max(int(candidate.params.get("n_estimators", 400)), 2000))
        changes.update(early_stopping_rounds=int(rounds), n_estimators=trees)
    return _set_params(candidate, changes)


def _early_stopping(candidate: SolutionCandidate, params: Mapping[str, Any]) -> SolutionCandidate:
    if params.get("metric", "auto") != "auto":
        raise SpecError(f"early_stopping: metric={params['metric']!r} is not supported; only 'auto' (the model's loss)")
    return _stopping(candidate, "early_stopping", int(params.get("rounds", 100)), None)


def _low_lr_more_trees(candidate: SolutionCandidate, params: Mapping[str, Any]) -> SolutionCandidate:
    return _stopping(candidate, "low_lr_more_trees", int(params.get("early_stopping_rounds", 300)),
                     int(params.get("n_estimators", 20000)), params.get("learning_rate", 0.01))


def _native_categorical(candidate: SolutionCandidate, params: Mapping[str, Any]) -> SolutionCandidate:
    _require(candidate, "native_categorical", ("hist_gradient_boosting", "xgboost", "lightgbm"))
    changed = _with_step(candidate, Step("native_categorical", dict(params)))
    model = {
        "xgboost": {"enable_categorical": True, "max_cat_to_onehot": int(params.get("max_cat_to_onehot", 4))},
        "lightgbm": {"max_cat_to_onehot": int(params.get("max_cat_to_onehot", 4)),
                     "cat_smooth": float(params.get("cat_smooth", 10)),
                     "min_data_per_group": int(params.get("min_data_per_group", 50))},
    }.get(candidate.trainer, {})
    return _set_params(changed, model)


SEEDED_TRAINERS = tuple(name for name, facts in TRAINER_FACTS.items() if facts.seed_dependent)


def _seed_bagging(candidate: SolutionCandidate, params: Mapping[str, Any]) -> SolutionCandidate:
    _require(candidate, "seed_bagging", SEEDED_TRAINERS)
    if params.get("vary_fold_seed"):
        raise SpecError("seed_bagging: vary_fold_seed=True changes the folds every candidate is scored on; "
                        "seeds vary the model only")
    n_seeds = int(params.get("n_seeds", 3))
    if n_seeds < 2:
        raise SpecError(f"seed_bagging: n_seeds={n_seeds} averages nothing; use 2 or more")
    return _set_params(candidate, {"seed_bag": n_seeds})


_MODEL_OPS: dict[str, Callable[[SolutionCandidate, Mapping[str, Any]], SolutionCandidate]] = {
    "set_model": _set_model,
    "gbdt_params": _gbdt_params,
    "loss_for_metric": _loss_for_metric,
    "class_weights": _class_weights,
    "early_stopping": _early_stopping,
    "low_lr_more_trees": _low_lr_more_trees,
    "native_categorical": _native_categorical,
    "seed_bagging": _seed_bagging,
}


# ---- preconditions

@lru_cache(maxsize=16)
def _train_sample(path: str, mtime: float) -> pd.DataFrame:
    return runtime.normalise_frame(pd.read_csv(path, nrows=20000))


def train_sample(profile: TaskProfile) -> pd.DataFrame | None:
    """train.csv of the task (its first 20,000 rows), for preconditions that need values; None without one."""
    path = Path(profile.task_dir) / "train.csv"
    if not path.is_file():
        return None
    return _train_sample(str(path), path.stat().st_mtime)


def _features(profile: TaskProfile) -> pd.DataFrame | None:
    frame = train_sample(profile)
    if frame is None:
        return None
    return frame[[column.name for column in profile.columns if column.name in frame.columns]]


def _numeric(profile: TaskProfile, min_distinct: int = 3) -> list[str]:
    return [c.name for c in profile.columns if c.kind == "numeric" and c.cardinality >= min_distinct]


def _has(kind: str, what: str) -> Callable[[TaskProfile], str | None]:
    return lambda profile: None if profile.columns_of_kind(kind) else f"no {what} column"


def _categorical_over(levels: int) -> Callable[[TaskProfile], str | None]:
    def check(profile: TaskProfile) -> str | None:
        if any(c.cardinality > levels for c in profile.column_infos("categorical")):
            return None
        return f"no categorical column with more than {levels} levels"
    return check


def _target_values(profile: TaskProfile) -> pd.Series | None:
    frame = train_sample(profile)
    if frame is None or profile.target not in frame.columns:
        return None
    return pd.to_numeric(frame[profile.target], errors="coerce").dropna()


def _log_target(profile: TaskProfile) -> str | None:
    if profile.task_type != "regression":
        return "not a regression task"
    if profile.metric in ("rmsle",):
        return None
    target = _target_values(profile)
    if target is None or target.empty:
        return "target values unavailable"
    if target.min() < 0:
        return "the target has negative values (log needs non-negative values; try power_target)"
    if target.skew() <= 0.75:
        return f"the target is not right-skewed (skewness {target.skew():.2f} <= 0.75)"
    return None


def _power_target(profile: TaskProfile) -> str | None:
    if profile.task_type != "regression":
        return "not a regression task"
    target = _target_values(profile)
    if target is None or target.empty:
        return "target values unavailable"
    if abs(target.skew()) <= 0.75:
        return f"the target is not skewed (|skewness| {abs(target.skew()):.2f} <= 0.75)"
    return None


def _skewed_numeric(non_negative: bool) -> Callable[[TaskProfile], str | None]:
    def check(profile: TaskProfile) -> str | None:
        frame = _features(profile)
        names = _numeric(profile)
        if frame is None or not names:
            return "no numeric column with more than two values"
        for name in names:
            values = frame[name].dropna()
            if (not non_negative or values.min() >= 0) and abs(values.skew()) > 0.75:
                return None
        return f"no {'non-negative ' if non_negative else ''}numeric column with skewness above 0.75"
    return check


def _missing_columns(minimum: int, kinds: tuple[str, ...] = ("numeric", "categorical", "datetime", "text", "id"),
                     share: float = 0.0) -> Callable[[TaskProfile], str | None]:
    def check(profile: TaskProfile) -> str | None:
        missing = [c for c in profile.columns if c.kind in kinds and c.missing_share > share]
        if len(missing) >= minimum:
            return None
        return f"fewer than {minimum} {'/'.join(kinds) if len(kinds) < 5 else ''} column(s) with missing values".replace("  ", " ")
    return check


def _numeric_columns(minimum: int) -> Callable[[TaskProfile], str | None]:
    return lambda profile: None if len(_numeric(profile)) >= minimum else f"fewer than {minimum} numeric columns"


def _constant_columns(profile: TaskProfile) -> str | None:
    if any(c.cardinality <= 1 for c in profile.columns):
        return None
    frame = _features(profile)
    if frame is not None and len(frame):
        for name in frame.columns:
            if frame[name].value_counts(dropna=False, normalize=True).iloc[0] >= 0.999:
                return None
    return "no (near-)constant column"


def _rare_levels(profile: TaskProfile) -> str | None:
    frame = _features(profile)
    for column in profile.column_infos("categorical"):
        if column.cardinality > 10 and frame is not None and (frame[column.name].value_counts() < 10).any():
            return None
    return "no categorical column with a long tail of levels seen fewer than 10 times"


_PERIODIC = ("hour", "dayofweek", "weekday", "month", "dayofyear", "direction", "winddir", "bearing")


def _cyclical(profile: TaskProfile) -> str | None:
    if profile.columns_of_kind("datetime"):
        return None
    if any(c.kind == "numeric" and any(str(c.name).lower().endswith(word) for word in _PERIODIC) for c in profile.columns):
        return None
    return "no date column and no hour/day-of-week/month/direction column"


def _composite(profile: TaskProfile) -> str | None:
    frame = _features(profile)
    candidates = [c.name for c in profile.columns if c.kind in ("categorical", "id")]
    if frame is None or not candidates:
        return "no categorical or id-like string column"
    strings = frame[[name for name in candidates if not pd.api.types.is_numeric_dtype(frame[name])]]
    if strings.shape[1] and runtime.SplitComposite().fit(strings).splits_:
        return None
    return "no string column whose values split into a fixed number of delimited parts"


def _group_keys(profile: TaskProfile) -> str | None:
    keys = [c for c in profile.column_infos("categorical") if 3 <= c.cardinality <= profile.n_rows / 5]
    if not keys:
        return "no categorical key with at least 3 levels and repeated rows"
    return None if _numeric(profile) else "no numeric column to summarise by group"


def _coordinates(profile: TaskProfile) -> str | None:
    frame = _features(profile)
    if frame is None:
        return "no training data"
    numeric = frame[_numeric(profile)] if _numeric(profile) else frame.iloc[:, :0]
    lat = runtime._coordinate_column(numeric, None, runtime._LAT_NAMES)
    lon = runtime._coordinate_column(numeric, None, runtime._LON_NAMES)
    return None if lat is not None and lon is not None else "no latitude/longitude column pair"


def _heavy_tails(profile: TaskProfile) -> str | None:
    frame = _features(profile)
    for name in _numeric(profile, min_distinct=10):
        if frame is not None and frame[name].dropna().kurt() > 5:
            return None
    return "no heavy-tailed numeric column (kurtosis above 5)"


def _class_weights_condition(profile: TaskProfile) -> str | None:
    if profile.task_type not in CLASSIFICATION:
        return "not a classification task"
    if profile.class_balance is None or profile.class_balance >= 0.2:
        return f"classes are balanced enough (rarest class share {profile.class_balance:.2f} >= 0.2)"
    if profile.metric == "log_loss":
        return "scored by log loss, which weighting classes would miscalibrate"
    return None


def _native_categorical_condition(profile: TaskProfile) -> str | None:
    if any(2 < c.cardinality <= 250 for c in profile.column_infos("categorical")):
        return None
    return "no categorical column with 3 to 250 levels"


_CONDITIONS: dict[str, Callable[[TaskProfile], str | None]] = {
    "missing_indicators": _missing_columns(1, share=0.01),
    "impute_numeric": _missing_columns(1, ("numeric",)),
    "impute_categorical": _missing_columns(1, ("categorical",)),
    "drop_id_columns": lambda p: None if p.id_column or p.columns_of_kind("id") else "no id column",
    "drop_constant_columns": _constant_columns,
    "winsorize_features": _heavy_tails,
    "log_target": _log_target,
    "power_target": _power_target,
    "one_hot": lambda p: None if any(c.cardinality <= 15 for c in p.column_infos("categorical")) else "no categorical column with at most 15 levels",
    "ordinal_encoding": _has("categorical", "categorical"),
    "target_encoding": _categorical_over(50),
    "frequency_encoding": _categorical_over(10),
    "rare_level_grouping": _rare_levels,
    "datetime_parts": _has("datetime", "date/time"),
    "cyclical_encoding": _cyclical,
    "split_composite_string": _composite,
    "group_stats": _group_keys,
    "tfidf_text": _has("text", "free-text"),
    "tfidf_svd": _has("text", "free-text"),
    "text_stats": _has("text", "free-text"),
    "numeric_ratios": _numeric_columns(2),
    "numeric_interactions": _numeric_columns(2),
    "coordinate_rotation": _coordinates,
    "quantile_transform": _skewed_numeric(non_negative=False),
    "standard_scale": _numeric_columns(1),
    "log_features": _skewed_numeric(non_negative=True),
    "row_missing_count": _missing_columns(2),
    "binning": lambda p: None if _numeric(p, min_distinct=11) else "no numeric column with more than 10 values",
    "set_model": lambda p: None,
    "gbdt_params": lambda p: None,
    "loss_for_metric": lambda p: None if p.task_type == "regression" and p.metric == "mae"
    else "not a regression scored by mean absolute error (squared-error and log losses already match the others)",
    "class_weights": _class_weights_condition,
    "early_stopping": lambda p: None if p.n_rows >= 500 else "under 500 rows: a held-out share is too small to stop on",
    "low_lr_more_trees": lambda p: None,
    "native_categorical": _native_categorical_condition,
    "seed_bagging": lambda p: None,
}
_MODEL_KIND = set(_MODEL_OPS)


@lru_cache(maxsize=1)
def _catalogue() -> dict[str, Recipe]:
    specs = json.loads(Path(RECIPES_PATH).read_text(encoding="utf-8"))["ops"]
    recipes = {}
    for op, spec in specs.items():
        if op not in _CONDITIONS:
            continue
        if op in _MODEL_KIND:
            kind = "model"
            accepted = set(spec["params"]) | (set(BUILTIN_STEPS[op].defaults) if op in BUILTIN_STEPS else set())
            accepted |= set(GBDT_EXTRA_PARAMS) if op == "gbdt_params" else set()
        elif op in TARGET_OPS:
            kind, accepted = "target", set(TARGET_OPS[op].defaults)
        else:
            kind = "step"
            accepted = set(BUILTIN_STEPS[op].defaults) | set(BUILTIN_STEPS[op].fixed)
        missing = set(spec["params"]) - accepted
        assert not missing, f"{op}: recipe parameters {missing} are not accepted"  # the catalogue's own invariant
        recipes[op] = Recipe(op, spec["stage"], spec["description"], dict(spec["params"]), kind,
                             _CONDITIONS[op], frozenset(accepted))
    return recipes


def catalogue() -> dict[str, Recipe]:
    """Every executable recipe op, by name (names, stages, descriptions and defaults from data/recipes.json)."""
    return dict(_catalogue())


def applicable(profile: TaskProfile) -> list[Recipe]:
    """The recipes whose preconditions hold for this task, in catalogue order."""
    return [recipe for recipe in _catalogue().values() if recipe.applies(profile)]


def left_out() -> dict[str, str]:
    """Ops of data/recipes.json that are not in the catalogue, with the reason."""
    specs = json.loads(Path(RECIPES_PATH).read_text(encoding="utf-8"))["ops"]
    return {op: LEFT_OUT.get(op, "not implemented") for op in specs if op not in _catalogue()}


__all__ = ["Recipe", "catalogue", "applicable", "left_out", "materialised_steps", "LEFT_OUT", "GBDT_PRESETS"]
