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

from agent.predictor import Predictor
from agent.settings import SearchSettings, SolveSettings
from agent.solve import SolveResult, solve_task

__all__ = ["Predictor", "SearchSettings", "SolveResult", "SolveSettings", "solve_task"]
