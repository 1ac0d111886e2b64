"""What a tree-search proposer is (TreeProposer, and the optional BlendingProposer and ObservingProposer), and
the proposals it returns.

The final combination (blend, stack, rank average) is the search's own step (agent.search.tree): every search ends
with it when the metric can be blended. A BlendingProposer only names the knowledge behind it (provenance).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.search.journal import Journal, Node
from retrieval.profile import TaskProfile

# The trainer name of a free-code node: its solution is a script (Proposal.script), not a spec of the vocabulary.
FREE_CODE = "free_code"


@dataclass(frozen=True)
class Proposal:
    candidate: SolutionCandidate
    plan: str
    trick: AppliedTrick | None = None
    # Free code (agent.llm's coder): a script the tree runs confined and scores itself (Evaluator.evaluate_script);
    # the candidate is then SolutionCandidate(FREE_CODE, steps=()), a record of what the node is.
    script: str | None = None


@dataclass(frozen=True)
class BlendProposal:
    """Blend verified nodes: the search combines `members` (node ids) from their OOF predictions, each way that
    fits the metric (agent.search.blending.blends); every combination is a node that wins only on CV. `trick` is
    the retrieved ensembling trick the plan names, if any: provenance, not what made the search blend."""

    members: tuple[int, ...]
    plan: str
    trick: AppliedTrick | None = None


@runtime_checkable
class TreeProposer(Protocol):
    """Proposes the next solution for each kind of step; None when it has nothing (more) to offer."""

    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None: ...

    def improve(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None: ...

    def debug(self, node: Node, profile: TaskProfile, rng: random.Random) -> Proposal | None: ...


@runtime_checkable
class BlendingProposer(Protocol):
    """A proposer that can name the knowledge behind the search's final combination (the knowledge proposer: a
    retrieved ensembling trick). Provenance only: the search combines its best nodes with or without it."""

    def blend_trick(self, profile: TaskProfile, journal: Journal) -> AppliedTrick | None: ...


@runtime_checkable
class TimedProposer(Protocol):
    """A proposer whose proposals take time of their own (an LLM's calls): the search tells it, before each
    proposal, when the search must end (its deadline less the time kept for the final fit and the outputs)."""

    def set_deadline(self, deadline: float) -> None: ...


@runtime_checkable
class ObservingProposer(Protocol):
    """A proposer that learns from each verified node (its Optuna studies, agent.search.tuning)."""

    def observe(self, node: Node) -> None: ...
