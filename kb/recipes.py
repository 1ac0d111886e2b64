"""The recipe vocabulary, data/recipes.json: the ops a trick can compile to, their parameters and who runs them.

Ingest compiles tricks into recipe refs ({"op", "params"}) with these names; the agent executes them. An op's
`executed_by` says how: "candidate" ops are one change to one solution candidate (agent.knowledge.recipes),
"search" ops are the tree search's own (its final blend, rank average or stack, its Optuna study), and an op
without it is knowledge the agent cannot run yet. `column_params` name the parameters whose values are
column names, which only a task that has those columns can use.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kb.config import data_path

RECIPES_PATH = data_path("recipes.json")  # data/recipes.json, as installed
EXECUTED_BY = ("candidate", "search")
# Ops whose knowledge is their parameters: with none, a trick of them only names a model (or, applied, is the op's
# defaults, which are not the trick).
NEEDS_PARAMS = ("gbdt_params", "set_model")


@dataclass(frozen=True)
class RecipeSpec:
    op: str
    stage: str
    description: str
    applies_when: str
    params: Mapping[str, Any]  # name -> default
    executed_by: str | None  # "candidate", "search", or None: the agent cannot run it yet
    column_params: tuple[str, ...] = ()

    @property
    def executable(self) -> bool:
        return self.executed_by is not None


@lru_cache(maxsize=1)
def _specs() -> dict[str, RecipeSpec]:
    path = RECIPES_PATH
    specs = {}
    for op, raw in json.loads(path.read_text(encoding="utf-8"))["ops"].items():
        executed_by = raw.get("executed_by")
        if executed_by not in (None, *EXECUTED_BY):
            raise ValueError(f"{path}: op {op!r} has executed_by={executed_by!r}; use one of {EXECUTED_BY} or leave it out")
        columns = tuple(raw.get("column_params") or ())
        if set(columns) - set(raw["params"]):
            raise ValueError(f"{path}: op {op!r} names column_params {sorted(set(columns) - set(raw['params']))} "
                             "that are not among its params")
        specs[op] = RecipeSpec(op, raw["stage"], raw["description"], raw.get("applies_when", ""),
                               dict(raw["params"]), executed_by, columns)
    return specs


def recipe_specs() -> dict[str, RecipeSpec]:
    """Every op of data/recipes.json, by name."""
    return dict(_specs())


def executable_ops() -> tuple[str, ...]:
    """The ops the agent can run, in file order."""
    return tuple(op for op, spec in _specs().items() if spec.executable)
