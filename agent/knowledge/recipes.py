"""The executable recipe catalogue: each recipe op as one atomic change to a SolutionCandidate.

A `Recipe` knows when it applies to a task (`applies` / `why_not`, from the TaskProfile and, for a few
checks that need values, a sample of train.csv) and how to apply itself to a candidate (`apply`):
  - "step" recipes insert their step where it belongs in the candidate's steps (the trainer's default
    steps are materialised first): composite-string splitting first, feature steps before imputation and
    encoding, encoders before the model, tfidf_text last (it replaces drop_text_columns and hands the
    model a sparse matrix). An op already present is not added twice: new params replace its params.
  - "target" recipes set the candidate's target transform.
  - "model" recipes change the trainer or its parameters (agent.knowledge.model_recipes).
When a recipe applies is agent.knowledge.conditions.
Names, stages, descriptions and default parameters come from data/recipes.json (kb.recipes), where these ops say
`"executed_by": "candidate"`; the ops there that are not a change to one candidate (ensembles and searches, which
the tree search runs; validation schemes, post-processing...) are in LEFT_OUT with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from agent.candidate import SolutionCandidate
from agent.engine.spec import ENCODING_OPS, SpecError, Step
from agent.engine.steps import BUILTIN_STEPS, TARGET_OPS, CompileContext
from agent.engine.trainers import default_steps, lookup_trainer, trainer_registry
from agent.knowledge.conditions import CONDITIONS, PARAMS_FITS, Condition
from agent.knowledge.model_recipes import GBDT_EXTRA_PARAMS, GBDT_PRESETS, MODEL_OPS
from kb.recipes import RECIPES_PATH, recipe_specs
from retrieval.profile import TaskProfile

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
    condition: Condition = field(default=lambda profile: None, repr=False, compare=False)
    accepted: frozenset[str] = field(default=frozenset(), repr=False, compare=False)  # parameter names it takes
    column_params: tuple[str, ...] = field(default=(), repr=False, compare=False)  # parameters holding column names

    def for_task(self, params: Mapping[str, Any] | None, profile: TaskProfile) -> tuple[dict[str, Any], str]:
        """The parameters with the column names this task has, spelled as in its table (a trick read from another
        competition's write-up names that competition's columns); a column parameter naming a column the task does
        not have is left to the op's default, and the note says which. Parameters that serve another metric than the
        task's are left out too (conditions.PARAMS_FITS), with a note."""
        params, dropped = dict(params or {}), []
        spelling = {column.name.lower(): column.name for column in profile.columns}

        def own(value: Any) -> Any:
            if isinstance(value, str):
                return spelling.get(value.lower())
            if isinstance(value, list | tuple):
                names = [own(item) for item in value]
                return None if any(name is None for name in names) else type(value)(names)
            return value

        for name in self.column_params:
            if params.get(name) is None:
                continue
            found = own(params[name])
            if found is None:
                dropped.append(f"{name}={params.pop(name)!r}")
            else:
                params[name] = found
        notes = [f"the task has no column for {', '.join(dropped)}"] if dropped else []
        if self.op in PARAMS_FITS:
            params, note = PARAMS_FITS[self.op](params, profile)
            notes += [note] if note else []
        return params, "; ".join(notes)

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
            return MODEL_OPS[self.op](candidate, params, _with_step)
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
        position = _first_of(ops, ENCODING_OPS + _LAST, len(steps))
    return [*steps[:position], step, *steps[position:]]


def _first_of(ops: list[str], names: tuple[str, ...], default: int) -> int:
    return next((index for index, op in enumerate(ops) if op in names), default)


@lru_cache(maxsize=1)
def _catalogue() -> dict[str, Recipe]:
    recipes = {}
    for op, vocabulary in recipe_specs().items():
        # The catalogue's own invariant: the ops data/recipes.json says a candidate executes are those with a condition.
        assert (vocabulary.executed_by == "candidate") == (op in CONDITIONS), \
            f"{op}: executed_by={vocabulary.executed_by!r} in {RECIPES_PATH}, but {'a' if op in CONDITIONS else 'no'} condition"
        if op not in CONDITIONS:
            continue
        if op in MODEL_OPS:
            kind = "model"
            accepted = set(vocabulary.params) | (set(BUILTIN_STEPS[op].defaults) if op in BUILTIN_STEPS else set())
            accepted |= set(GBDT_EXTRA_PARAMS) if op == "gbdt_params" else set()
        elif op in TARGET_OPS:
            kind, accepted = "target", set(TARGET_OPS[op].defaults)
        else:
            kind = "step"
            accepted = set(BUILTIN_STEPS[op].defaults) | set(BUILTIN_STEPS[op].fixed)
        missing = set(vocabulary.params) - accepted
        assert not missing, f"{op}: recipe parameters {missing} are not accepted"  # the catalogue's own invariant
        recipes[op] = Recipe(op, vocabulary.stage, vocabulary.description, dict(vocabulary.params), kind,
                             CONDITIONS[op], frozenset(accepted), vocabulary.column_params)
    return recipes


def catalogue() -> dict[str, Recipe]:
    """Every executable recipe op, by name (names, stages, descriptions and defaults from data/recipes.json)."""
    return dict(_catalogue())


def applicable(profile: TaskProfile) -> list[Recipe]:
    """The recipes whose preconditions hold for this task, in catalogue order."""
    return [recipe for recipe in _catalogue().values() if recipe.applies(profile)]


def left_out() -> dict[str, str]:
    """Ops of data/recipes.json that are not in the catalogue, with the reason."""
    return {op: LEFT_OUT.get(op, "not implemented") for op in recipe_specs() if op not in _catalogue()}


__all__ = ["Recipe", "catalogue", "applicable", "left_out", "materialised_steps", "LEFT_OUT", "GBDT_PRESETS",
           "RECIPES_PATH"]
