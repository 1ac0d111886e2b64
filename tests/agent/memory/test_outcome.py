"""A run's own memory when no node was scored on every row: on a 55,000-row table of the experience pool
(lecture_ratings) at 30 s no CV on every row fitted, the best node was scored on the exploration sample only, and
remembering the run raised `max() arg is an empty sequence` after its submission was written."""

from __future__ import annotations

import numpy as np

from agent.candidate import EngineeringRun, SolutionCandidate
from agent.engine.spec import ModelSpec, SolutionSpec
from agent.memory.recorder import RunContext, run_outcome
from agent.memory.records import NO_SOLUTION, SolutionMemory, TaskSignature
from agent.search.journal import EXPLORED, OVER_TIME, SAMPLE, Exploration, Journal, Node

SIGNATURE = TaskSignature((), "multiclass", "accuracy", "tabular", (("categorical", 6),), "medium-sized", 55_124, 8)
RUN = RunContext("run", "task", "lecture_ratings", SIGNATURE, "accuracy")


def node(node_id, trainer, status, metric):
    spec = SolutionSpec((), ModelSpec(trainer))
    return Node(node_id, None, "draft", f"draft: {trainer}", SolutionCandidate(trainer, None, "", ()), spec, "", status,
                metric, metric if metric is not None else -np.inf, elapsed=3.4, scored_on=SAMPLE, scored_rows=20_000,
                exploration=Exploration(20_000, metric, metric if metric is not None else -np.inf, 3.4, False))


def test_a_run_whose_best_was_scored_on_the_sample_only_is_remembered_as_its_solution():
    journal = Journal([node(0, "lightgbm", EXPLORED, 0.267), node(1, "random_forest", OVER_TIME, None)])
    assert journal.best().id == 0 and not journal.valid_nodes
    result = EngineeringRun((), None, 0.267, None, "accuracy", 0.2397, test_prediction=np.zeros(3))
    memory = run_outcome(RUN, result, journal, None)
    assert isinstance(memory, SolutionMemory)
    assert memory.best_node == 0 and memory.single_spec["model"]["name"] == "lightgbm"
    assert memory.single_rows == 20_000  # its time was measured on the sample's rows

    nothing = run_outcome(RUN, EngineeringRun((), None, -np.inf, None, "accuracy", 0.2397), Journal(), None)
    assert nothing.kind == NO_SOLUTION
