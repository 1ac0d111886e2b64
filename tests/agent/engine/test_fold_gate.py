"""Multi-fidelity CV (issue 25): a node that trails the best node on the same folds by more than the bound allows is
stopped after its first folds; a node as good as the best runs every fold with the scores an ungated CV gives; the
run's paired spread (improvements against their parents) is tighter than a fold spread. On a real table."""

from __future__ import annotations

import numpy as np

from agent.engine.compile import compile_spec
from agent.engine.dataset import Dataset
from agent.engine.fit import MIN_PAIRS, FoldGate, cross_fit, fold_values, paired_spread
from agent.engine.spec import ModelSpec, SolutionSpec, ValidationSpec
from agent.engine.trainers import steps_for, trainer_facts, trainer_registry

TRAINERS = trainer_registry()
VALIDATION = ValidationSpec(n_splits=5, seed=0)


def fitted(trainer: str, dataset: Dataset, gate: FoldGate | None = None, **params):
    spec = SolutionSpec(steps_for(trainer, TRAINERS), ModelSpec(trainer, params), None, VALIDATION)
    pipeline = compile_spec(spec, dataset.compile_context(0), TRAINERS)
    return cross_fit(pipeline, dataset, spec, predict_test=True, gate=gate)


def test_a_node_far_behind_the_best_stops_after_its_first_folds_and_one_level_with_it_runs_them_all(credit):
    best = fitted("lightgbm", credit, **trainer_facts("lightgbm").params_for(len(credit.y)))
    assert best.complete and best.scored_folds == 5
    bar = tuple(fold_values(best, credit))  # roc_auc: greater is better
    gate = FoldGate(bar, greater_is_better=True)

    # A forest of two stumps trails a tuned LightGBM by far more than LightGBM's own fold spread.
    weak = fitted("random_forest", credit, gate, n_estimators=2, max_depth=1)
    assert not weak.complete and weak.scored_folds <= 2
    assert len(fold_values(weak, credit)) == weak.scored_folds
    assert np.mean(fold_values(weak, credit)) < np.mean(bar[:weak.scored_folds])

    same = fitted("lightgbm", credit, gate, **trainer_facts("lightgbm").params_for(len(credit.y)))
    assert same.complete and fold_values(same, credit) == list(bar)
    np.testing.assert_array_equal(same.test_prediction, best.test_prediction)


def test_the_bound_widens_with_the_spread_and_narrows_with_the_folds_scored():
    bar = (0.80, 0.82, 0.78, 0.81, 0.79)  # a fold spread of about 0.014
    gate = FoldGate(bar, greater_is_better=True, z=1.0)
    assert gate.allows([0.79])  # 0.01 behind on one fold: within one spread
    assert not gate.allows([0.78])  # 0.02 behind on one fold
    assert gate.allows([0.795, 0.81])  # 0.0075 behind on average over two folds: within 0.014 / sqrt(2) = 0.01
    assert not gate.allows([0.785, 0.805])  # 0.015 behind over two folds
    assert FoldGate(bar, greater_is_better=True, z=3.0).allows([0.78])  # a wider bound lets it go on
    assert not FoldGate(bar, greater_is_better=True, z=3.0, spread=0.005).allows([0.78])  # a tighter spread does not


def test_changes_of_one_node_differ_from_it_by_less_than_its_fold_spread_and_that_spread_stops_a_worse_change(credit):
    params = trainer_facts("lightgbm").params_for(len(credit.y))
    bar = tuple(fold_values(fitted("lightgbm", credit, **params), credit))
    changes = ({"num_leaves": 15}, {"min_child_samples": 40}, {"colsample_bytree": 0.6}, {"reg_lambda": 5.0})
    pairs = [(fold_values(fitted("lightgbm", credit, **{**params, **change}), credit), bar) for change in changes]
    spread = paired_spread(pairs)
    # The folds' own difficulty moves a node and its changes together: their difference spreads far less.
    assert spread is not None and spread < np.std(bar) / 2
    assert paired_spread(pairs[:MIN_PAIRS - 1]) is None  # too few changes measured to trust their spread

    # Six times the learning rate trails the node on every fold, by less than its fold spread.
    too_fast = {**params, "learning_rate": 0.3}
    assert fitted("lightgbm", credit, FoldGate(bar, greater_is_better=True), **too_fast).complete
    stopped = fitted("lightgbm", credit, FoldGate(bar, greater_is_better=True, spread=spread), **too_fast)
    assert not stopped.complete and stopped.scored_folds <= 2


def test_the_evaluator_reports_a_stopped_node_and_the_verifier_never_calls_it_valid(credit):
    from agent.evaluator import Evaluator
    from agent.verify.findings import STOPPED_EARLY
    from agent.verify.verifier import DeterministicVerifier

    evaluator = Evaluator(5, 0, TRAINERS)
    lightgbm = SolutionSpec(steps_for("lightgbm", TRAINERS),
                            ModelSpec("lightgbm", trainer_facts("lightgbm").params_for(len(credit.y))), None,
                            evaluator.validation)
    best = evaluator.evaluate(lightgbm, credit)
    assert not best.stopped_early and len(best.fold_values) == best.folds == 5
    weak = SolutionSpec(steps_for("random_forest", TRAINERS),
                        ModelSpec("random_forest", {"n_estimators": 2, "max_depth": 1}), None, evaluator.validation)
    stopped = evaluator.evaluate(weak, credit, gate=FoldGate(best.fold_values, greater_is_better=True))
    assert stopped.stopped_early and stopped.status == "ok"
    verdict = DeterministicVerifier().verify(stopped, evaluator.baseline(credit), credit.metric_info)
    assert not verdict.valid and verdict.failure == STOPPED_EARLY
    assert f"stopped after {len(stopped.fold_values)} of 5 folds" in verdict.reason
