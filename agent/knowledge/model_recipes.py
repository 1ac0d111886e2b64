"""The model-level recipes: each changes a candidate's trainer or its parameters (MODEL_OPS).

A model op takes the candidate, the recipe's parameters and `place`, which adds a step where it belongs in the
candidate's steps (agent.knowledge.recipes), for the ops that also move or add steps. An op that does not fit
the candidate's trainer raises SpecError.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from agent.candidate import SolutionCandidate
from agent.engine.spec import SpecError, Step
from agent.engine.trainers import (
    NATIVE_SPLIT_PARAMS,
    TRAINER_FACTS,
    default_steps,
    lookup_trainer,
    trainer_alias,
    trainer_registry,
    trainers_of,
)

StepPlacer = Callable[[SolutionCandidate, Step], SolutionCandidate]
ModelOp = Callable[[SolutionCandidate, Mapping[str, Any], StepPlacer], SolutionCandidate]

GBDT_TRAINERS = trainers_of("gbdt")


def _set_params(candidate: SolutionCandidate, changes: Mapping[str, Any]) -> SolutionCandidate:
    params = {**candidate.params, **changes}
    return candidate if params == dict(candidate.params) else replace(candidate, params=params)


def _require(candidate: SolutionCandidate, op: str, trainers: tuple[str, ...]) -> None:
    if candidate.trainer not in trainers:
        raise SpecError(f"recipe {op!r} is for {', '.join(trainers)} trainers, not {candidate.trainer!r}")


def _set_model(candidate: SolutionCandidate, params: Mapping[str, Any], place: StepPlacer) -> SolutionCandidate:
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
            moved = place(moved, step)
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
MAX_TREES = 5000  # the most trees a learning rate stated without a tree count leads to
# gbdt_params takes these beyond data/recipes.json's list (the cards use them).
GBDT_EXTRA_PARAMS = ("monotone_constraints", "tweedie_variance_power", "alpha")
# objective -> (XGBoost objective, HistGradientBoosting loss); None: that library has no such loss.
_OBJECTIVES = {
    "regression": ("reg:squarederror", "squared_error"), "rmse": ("reg:squarederror", "squared_error"),
    "l2": ("reg:squarederror", "squared_error"), "mae": ("reg:absoluteerror", "absolute_error"),
    "l1": ("reg:absoluteerror", "absolute_error"), "huber": ("reg:pseudohubererror", None),
    "poisson": ("count:poisson", "poisson"), "tweedie": ("reg:tweedie", None),
    "gamma": ("reg:gamma", "gamma"), "quantile": ("reg:quantileerror", "quantile"),
}


def _gbdt_params(candidate: SolutionCandidate, params: Mapping[str, Any], place: StepPlacer) -> SolutionCandidate:
    """LightGBM-style parameters (the recipe's vocabulary), translated for the candidate's GBDT library."""
    _require(candidate, "gbdt_params", GBDT_TRAINERS)
    preset = params.get("preset", "default")
    if preset not in GBDT_PRESETS:
        raise SpecError(f"gbdt_params: preset={preset!r} is not known; use one of {list(GBDT_PRESETS)}")
    wanted = {**GBDT_PRESETS[preset], **{k: v for k, v in params.items() if k != "preset"}}
    if "learning_rate" in params and "n_estimators" not in params:
        # A learning rate stated without a tree count: the trees follow it as in the preset (rate x trees kept), and
        # early stopping finds the count within. At the preset's count a rate of 0.005 underfits (hotel: CV RMSE
        # 15.4 -> 21.6).
        rate, trees = GBDT_PRESETS[preset]["learning_rate"], GBDT_PRESETS[preset]["n_estimators"]
        wanted["n_estimators"] = min(MAX_TREES, max(1, round(trees * rate / float(params["learning_rate"]))))
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


def _loss_for_metric(candidate: SolutionCandidate, params: Mapping[str, Any], place: StepPlacer) -> SolutionCandidate:
    loss = params.get("loss", "absolute_error")
    if loss not in _LOSSES:
        raise SpecError(f"loss_for_metric: loss={loss!r} is not supported; use one of {list(_LOSSES)}")
    changes = _LOSSES[loss].get(candidate.trainer)
    if changes is None:  # forests: sklearn's absolute_error criterion costs O(n^2) per split
        raise SpecError(f"loss_for_metric: {candidate.trainer!r} has no practical {loss} loss; "
                        f"use one of {', '.join(_LOSSES[loss])}")
    kept = dict(candidate.params)
    if candidate.trainer == "linear":
        kept.pop("alpha", None)  # ridge's L2 strength was weighed against squared errors: the L1 fit starts afresh
    params = {**kept, **changes}
    return candidate if params == dict(candidate.params) else replace(candidate, params=params)


def _class_weights(candidate: SolutionCandidate, params: Mapping[str, Any], place: StepPlacer) -> SolutionCandidate:
    mode = params.get("mode", "balanced")
    if mode != "balanced":
        raise SpecError(f"class_weights: mode={mode!r} is not supported; only 'balanced'")
    if candidate.trainer == "baseline":
        raise SpecError("class_weights: the baseline trainer has no model to weight")
    return _set_params(candidate, {"balance_classes": "balanced", "max_class_weight": float(params.get("max_weight", 50.0))})


def _stopping(candidate: SolutionCandidate, op: str, rounds: int, budget: int | None,
              learning_rate: float | None = None) -> SolutionCandidate:
    """Early stopping on each CV validation fold (runtime.EarlyStopped), with the trees capped at `budget` (at least
    1,000, or 2,000 for the libraries that keep their best iteration, when not given)."""
    _require(candidate, op, GBDT_TRAINERS)
    changes: dict[str, Any] = {} if learning_rate is None else {"learning_rate": float(learning_rate)}
    facts = TRAINER_FACTS[candidate.trainer]
    floor = 1000 if candidate.trainer == "hist_gradient_boosting" else 2000
    trees = int(budget or max(int(candidate.params.get(facts.rounds_param, facts.default_rounds)), floor))
    changes.update({"early_stopping_rounds": int(rounds), facts.rounds_param: trees})
    return _set_params(candidate, changes)


def _early_stopping(candidate: SolutionCandidate, params: Mapping[str, Any], place: StepPlacer) -> SolutionCandidate:
    if params.get("metric", "auto") != "auto":
        raise SpecError(f"early_stopping: metric={params['metric']!r} is not supported; only 'auto' (the model's loss)")
    if "early_stopping_rounds" in candidate.params:
        # It stops early already: the trick would only change its patience. On the judge-nov29 bench's 30 kb and
        # both runs that was 70 nodes (137 s), 32 of them scoring exactly as their parent, 2 beating it.
        return candidate
    return _stopping(candidate, "early_stopping", int(params.get("rounds", 100)), None)


def _low_lr_more_trees(candidate: SolutionCandidate, params: Mapping[str, Any], place: StepPlacer) -> SolutionCandidate:
    return _stopping(candidate, "low_lr_more_trees", int(params.get("early_stopping_rounds", 300)),
                     int(params.get("n_estimators", 20000)), params.get("learning_rate", 0.01))


def _native_categorical(candidate: SolutionCandidate, params: Mapping[str, Any],
                        place: StepPlacer) -> SolutionCandidate:
    _require(candidate, "native_categorical", ("hist_gradient_boosting", "xgboost", "lightgbm", "catboost"))
    changed = place(candidate, Step("native_categorical", dict(params)))
    model = {
        "xgboost": {**NATIVE_SPLIT_PARAMS["xgboost"], "max_cat_to_onehot": int(params.get("max_cat_to_onehot", 4))},
        "lightgbm": {"max_cat_to_onehot": int(params.get("max_cat_to_onehot", 4)),
                     "cat_smooth": float(params.get("cat_smooth", 10)),
                     "min_data_per_group": int(params.get("min_data_per_group", 50))},
    }.get(candidate.trainer, {})
    return _set_params(changed, model)


SEEDED_TRAINERS = tuple(name for name, facts in TRAINER_FACTS.items() if facts.seed_dependent)


def _seed_bagging(candidate: SolutionCandidate, params: Mapping[str, Any], place: StepPlacer) -> SolutionCandidate:
    _require(candidate, "seed_bagging", SEEDED_TRAINERS)
    if params.get("vary_fold_seed"):
        raise SpecError("seed_bagging: vary_fold_seed=True changes the folds every candidate is scored on; "
                        "seeds vary the model only")
    n_seeds = int(params.get("n_seeds", 3))
    if n_seeds < 2:
        raise SpecError(f"seed_bagging: n_seeds={n_seeds} averages nothing; use 2 or more")
    return _set_params(candidate, {"seed_bag": n_seeds})


MODEL_OPS: dict[str, ModelOp] = {
    "set_model": _set_model,
    "gbdt_params": _gbdt_params,
    "loss_for_metric": _loss_for_metric,
    "class_weights": _class_weights,
    "early_stopping": _early_stopping,
    "low_lr_more_trees": _low_lr_more_trees,
    "native_categorical": _native_categorical,
    "seed_bagging": _seed_bagging,
}
