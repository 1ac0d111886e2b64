"""casebook's ML engineering agent: point it at a task folder, or give it DataFrames, and it returns a verified solution.

    from agent import Predictor
    predictor = Predictor(label="Attrition", time_budget=60).fit(train_df)
    predictor.predict(new_df)

    from agent import SolveSettings, solve_task
    from retrieval.profile import profile_task
    result = solve_task(profile_task("runs/attrition"), SolveSettings(use_kb=True), Path("runs/attrition-solution"))

Stages, each a sub-package: engine (specs, steps, trainers, the runtime solutions carry, the sandbox),
verify (leakage probes and the verifier), search (the solution tree), knowledge (tricks as recipes),
outputs (the run folder) and seedloop (the seed card's loop). agent.evaluator scores specs for every search;
agent.settings holds the settings a solve is given, frozen and passed whole.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.predictor import Predictor
    from agent.settings import SearchSettings, SolveSettings
    from agent.solve import SolveResult, solve_task

# Each name is imported on first use (PEP 562), not with the package: a sub-package's import (agent.evaluator in the
# candidates' worker, agent.settings for the command line's defaults) then skips the predictor and the case library,
# 0.9 s of the worker's 2.5 s of imports before its first candidate could start.
_EXPORTS = {"Predictor": "agent.predictor", "SearchSettings": "agent.settings", "SolveSettings": "agent.settings",
            "SolveResult": "agent.solve", "solve_task": "agent.solve"}

__all__ = ["Predictor", "SearchSettings", "SolveResult", "SolveSettings", "solve_task"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agent' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
