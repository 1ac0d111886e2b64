"""A CV's pace (issue 25): after each fold the time spent projects the whole CV, and a CV that cannot finish within
its time cap stops there as over time, with that projection, instead of spending its whole cap; a CV within its cap
runs every fold with the scores an unpaced CV gives. On a real table."""

from __future__ import annotations

import math
import time

import pytest

from agent.candidate import SolutionCandidate
from agent.engine.compile import compile_spec
from agent.engine.dataset import Dataset
from agent.engine.fit import FIRST_FOLD_MARGIN, Pace, cross_fit, fold_values
from agent.engine.spec import ModelSpec, SolutionSpec, ValidationSpec
from agent.engine.trainers import steps_for, trainer_registry
from agent.evaluator import Evaluator
from agent.search.journal import OVER_TIME
from agent.search.nodes import Evaluated
from agent.verify.verifier import DeterministicVerifier
from tests.agent_fixtures import BROKEN_TRAINERS

TRAINERS = trainer_registry()
VALIDATION = ValidationSpec(n_splits=5, seed=0)


def forest(dataset: Dataset, pace: Pace | None = None):
    spec = SolutionSpec(steps_for("random_forest", TRAINERS), ModelSpec("random_forest", {"n_estimators": 60}), None,
                        VALIDATION)
    return cross_fit(compile_spec(spec, dataset.compile_context(0), TRAINERS), dataset, spec, pace=pace)


def test_a_cv_its_first_fold_projects_over_its_seconds_stops_there_and_one_within_them_runs_every_fold(credit):
    unpaced = forest(credit)
    hurried = Pace(seconds=1e-4)
    stopped = forest(credit, hurried)
    assert stopped.scored_folds == 1 and not stopped.complete
    assert hurried.projected > FIRST_FOLD_MARGIN * 1e-4  # what the whole CV would take, as its first fold says

    ample = Pace(seconds=3600)
    paced = forest(credit, ample)
    assert paced.complete and ample.projected == 0
    assert fold_values(paced, credit) == fold_values(unpaced, credit)


class Ticks:
    """A clock that reads the given times, one per call."""

    def __init__(self, *times: float):
        self.times = iter(times)

    def __call__(self) -> float:
        return next(self.times)


def test_the_first_fold_projects_with_a_margin_and_later_folds_from_their_own_mean():
    # 3 s for the first of five folds projects 15 s: within 1.6 x 10 s, as a first fold's one-off costs may inflate it.
    pace = Pace(10.0, clock=Ticks(0.0, 3.0, 4.5, 7.0))
    keep_going = pace.watch(5)
    assert keep_going(0, None, None)
    assert keep_going(1, None, None)  # 4.5 s spent, three folds left at 1.5 s each: 9 s
    assert not keep_going(2, None, None)  # 7 s spent, two left at the later folds' mean of 2 s: 11 s
    assert pace.projected == pytest.approx(11.0)

    first_fold = Pace(10.0, clock=Ticks(0.0, 3.3))
    assert not first_fold.watch(5)(0, None, None)  # 16.5 s: over the margin too
    assert first_fold.projected == pytest.approx(16.5)


def test_the_evaluator_reports_a_paced_node_over_time_with_its_projection_before_its_cap(credit):
    evaluator = Evaluator(5, 0, {**TRAINERS, **BROKEN_TRAINERS})
    slow = SolutionSpec((), ModelSpec("slow", {"seconds": 1.5}), None, evaluator.validation)  # 7.5 s for 5 folds
    cap = 5.0
    evidence = evaluator.evaluate(slow, credit, deadline=time.monotonic() + cap)
    assert evidence.status == OVER_TIME and 1 <= len(evidence.fold_values) < evidence.folds == 5
    assert evidence.elapsed < cap  # stopped on its pace, not killed at its cap
    assert evidence.projected_seconds >= 7.0  # five fits of 1.5 s
    assert "of 5 folds (" in evidence.error and "over its time cap of" in evidence.error

    verdict = DeterministicVerifier().verify(evidence, evaluator.baseline(credit), credit.metric_info)
    assert not verdict.valid and verdict.failure == OVER_TIME and verdict.score == -math.inf
    candidate = SolutionCandidate("slow", {"seconds": 1.5}, "a slow draft", steps=())
    node = Evaluated("draft", None, candidate, None, slow, evidence, "").node(0, verdict, 0.0, 3, len(credit.y))
    assert node.status == OVER_TIME and node.folds_scored == len(evidence.fold_values)
    # What a node on the same rows must get through: the whole CV, as projected, not the seconds it ran.
    assert node.first_cv_seconds == pytest.approx(evidence.projected_seconds)
    assert node.to_dict()["projected_seconds"] == pytest.approx(evidence.projected_seconds, abs=1e-3)
