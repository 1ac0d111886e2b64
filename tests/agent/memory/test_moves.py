"""How memories move the search: a debug step tries the repair that worked on the same failure of another task, and
an improve step ranks the retrieved tricks by their measured effect on similar tasks (help first, known harm
skipped), each plan saying which memory moved it."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.trainers import steps_for, trainer_registry
from agent.knowledge.proposer import KnowledgeTreeProposer
from agent.knowledge.recipes import catalogue
from agent.memory.proposer import MemoryTreeProposer, TrickAdvice
from agent.memory.recorder import RunContext, node_memories
from agent.memory.records import ERROR, TaskSignature, task_key
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import DEBUG, DRAFT, IMPROVE, VALID, Journal, Node
from agent.search.protocols import Proposal
from agent.search.repair import diagnose
from agent.solve import solve_task
from kb.config import bundled_knowledge
from kb.records import ScoredTrick, Trick
from retrieval.profile import profile_task
from tests.agent.memory.conftest import SHORT
from tests.agent_fixtures import tree_search

TRAINERS = trainer_registry()
BROKEN = SolutionCandidate("random_forest", {"n_estimators": -5}, "", steps_for("random_forest", TRAINERS))


class BrokenFirstDraft(BuiltinTreeProposer):
    """The built-in proposer, whose first draft is a forest with an impossible number of trees."""

    def draft(self, profile, journal, rng):
        if not journal.draft_nodes:
            return Proposal(BROKEN, "draft: a forest with a broken tree count")
        return super().draft(profile, journal, rng)


class FortyTreesRepair(BrokenFirstDraft):
    """... and whose repair is 40 trees (the built-in repair would drop the parameter: 100 trees)."""

    def debug(self, node, profile, journal, rng):
        return Proposal(replace(node.candidate, params={**node.candidate.params, "n_estimators": 40}),
                        f"debug node {node.id}: 40 trees")


def test_a_debug_step_tries_the_repair_that_worked_on_another_task_first(tasks, make_store):
    store = make_store()
    debugging = replace(SHORT, search=replace(SHORT.search, steps=1, debug_prob=1.0))
    attrition = profile_task(tasks["attrition"].task_dir)
    first = solve_task(attrition, debugging, store.home / "attrition", proposer=FortyTreesRepair(), memory=store)
    repaired = next(node for node in first.journal if node.action == DEBUG)
    assert repaired.valid and first.journal[repaired.parent_id].failure == ERROR
    [error] = store.list(kind=ERROR)
    assert error.error_class == "InvalidParameterError" and error.repair.change.params == {"n_estimators": 40}
    assert error.repair.node_id == repaired.id and error.trainer == "random_forest"

    credit = profile_task(tasks["credit"].task_dir)
    recall = store.recall(credit)
    assert [past.memory.id for past in recall.errors] == [error.id]
    proposer = MemoryTreeProposer(BrokenFirstDraft(), recall, drafts=0)
    search = tree_search(proposer, credit, Dataset.from_profile(credit),
                        replace(debugging, search=replace(debugging.search, num_drafts=1)))
    journal = search.run().journal
    broken, debug = journal[0], journal[1]
    assert broken.failure == ERROR and debug.action == DEBUG and debug.parent_id == broken.id
    assert debug.valid and debug.candidate.params == {"n_estimators": 40} and debug.candidate.steps == BROKEN.steps
    assert debug.plan.startswith(f"debug node {broken.id} (random_forest): from memory, the same failure (error: ")
    assert "on task attrition (similarity 0." in debug.plan and "repaired by: set n_estimators=40" in debug.plan
    # Without the memory the built-in diagnosis repairs it another way.
    _, builtin = diagnose(broken, credit, TRAINERS)
    assert builtin.params.get("n_estimators") != 40


def _cards() -> list[ScoredTrick]:
    """The bundled tabular trick cards with a recipe, in file order, as retrieval hands them over."""
    found = []
    for path in sorted(Path(bundled_knowledge()).glob("tabular*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            card = json.loads(line)
            if card.get("recipe"):
                found.append(ScoredTrick(Trick(card["id"], card["text"], card["stage"], tuple(card["labels"]),
                                               "solution", str(path), card["title"], recipe=card["recipe"]), 1.0))
    return found


def _node(node_id: int, parent: int | None, candidate: SolutionCandidate, score: float,
          trick: AppliedTrick | None = None) -> Node:
    return Node(node_id, parent, DRAFT if parent is None else IMPROVE, "plan", candidate, None, "", VALID, score, score,
                trick=trick)


def test_improve_steps_rank_tricks_by_their_measured_effect_on_similar_tasks(tasks, make_store):
    store = make_store()
    cards = _cards()
    by_id = {item.trick.id: item.trick for item in cards}

    def applied(trick_id: str) -> AppliedTrick:
        trick = by_id[trick_id]
        return AppliedTrick.of(trick, op=trick.recipe["op"], params=trick.recipe.get("params"))

    xgboost = SolutionCandidate("xgboost", {}, "", steps_for("xgboost", TRAINERS))
    attrition = profile_task(tasks["attrition"].task_dir)
    plain = KnowledgeTreeProposer(None, retrieved=cards)
    reference = _node(0, None, xgboost, 0.80)
    first_choice = plain.improve_with_trick(reference, attrition, Journal([reference]))
    assert first_choice.trick.id == "tab-seed-bagging"  # retrieval order, with no memory

    def measure(profile, trick_id: str, after: float, candidate: SolutionCandidate = xgboost) -> None:
        """An improvement node of `profile` applying the card's recipe, recorded as the search records it."""
        trick = applied(trick_id)
        changed = catalogue()[trick.op].apply(candidate, trick.params or None)
        run = RunContext(store.begin_run(profile), task_key(profile.task_dir, profile.target), profile.name,
                         TaskSignature.of(profile), profile.metric)
        parent, child = _node(0, None, candidate, 0.80), _node(1, 0, changed, after, trick)
        store.write_node(*node_memories(child, parent, run))

    def advised() -> tuple[TrickAdvice, Proposal]:
        advice = TrickAdvice(store.recall(attrition))
        proposer = KnowledgeTreeProposer(None, retrieved=cards)
        proposer.use_memory(advice)
        return advice, proposer.improve_with_trick(reference, attrition, Journal([reference]))

    credit, wage = profile_task(tasks["credit"].task_dir), profile_task(tasks["wage"].task_dir)
    measure(credit, "tab-seed-bagging", 0.79)  # seed bagging hurt on two similar tasks: skipped
    measure(wage, "tab-seed-bagging", 0.78)
    measure(wage, "tab-onehot-low-cardinality", 0.795)  # one-hot hurt once: last, not skipped
    advice, proposal = advised()
    assert advice.skip(applied("tab-seed-bagging")) and not advice.skip(applied("tab-onehot-low-cardinality"))
    assert proposal.trick.id not in ("tab-seed-bagging", "tab-onehot-low-cardinality")
    assert "; memory skipped trick tab-seed-bagging 'Average the same model over several seeds' (card, " in proposal.plan
    assert "it did not help on 2 similar task(s) (0 of 2 applications beat their parent" in proposal.plan

    measure(credit, "tab-gbdt-small-data", 0.83)  # the small-data preset helped: first
    advice, proposal = advised()
    assert proposal.trick.id == "tab-gbdt-small-data"
    assert "; memory: " in proposal.plan and "helped on 1 similar task(s)" in proposal.plan
    assert "on credit: roc_auc improved by 0.03" in proposal.plan
    def order(trick_id: str) -> int:
        return advice.order(applied(trick_id))[0]

    # Help first, then the unmeasured (another preset of the same op is another recipe), known harm last.
    assert (order("tab-gbdt-small-data"), order("tab-gbdt-large-data"), order("tab-onehot-low-cardinality")) == (0, 1, 2)

    # An effect measured on the node's own model family comes before the effect on any model.
    churn = profile_task(tasks["churn"].task_dir)
    linear = SolutionCandidate("linear", {}, "", steps_for("linear", TRAINERS))
    measure(credit, "tab-class-weights-imbalance", 0.84, linear)  # helped a linear model a lot
    measure(churn, "tab-class-weights-imbalance", 0.79)  # hurt gradient boosting a little
    weights = applied("tab-class-weights-imbalance")
    advice = TrickAdvice(store.recall(attrition))
    assert advice.order(weights)[0] == 0  # over both models it helped
    assert advice.for_trainer("linear").order(weights)[0] == 0 and advice.for_trainer("xgboost").order(weights)[0] == 2
    # A forest was never measured: its model group's (trees: the GBDT's harm) decides, not the linear model's help.
    assert advice.for_trainer("random_forest").order(weights)[0] == 2
    # Measured on a linear model only, a trick is untried for trees.
    measure(credit, "tab-winsorize-heavy-tails", 0.70, linear)
    advice = TrickAdvice(store.recall(attrition))
    clipped = applied("tab-winsorize-heavy-tails")
    assert advice.for_trainer("linear").order(clipped)[0] == 2 and advice.for_trainer("catboost").order(clipped)[0] == 1

    # The memory proposer hands the advice to the knowledge proposer it wraps.
    wrapped = KnowledgeTreeProposer(None, retrieved=cards)
    MemoryTreeProposer(wrapped, store.recall(attrition)).improve(reference, attrition, Journal([reference]),
                                                                 random.Random(0))
    assert wrapped.advice is not None and wrapped.advice.skip(applied("tab-seed-bagging"))
