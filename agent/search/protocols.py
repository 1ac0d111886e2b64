"""What a tree-search proposer is (`TreeProposer`, one protocol every proposer inherits), how proposers compose
(`WrappingProposer`: a proposer around another), and what they return (`Proposal`, `BlendProposal`, `StepUsage`);
and what the search asks of the evaluator it is given (`TreeEvaluator`).

Every proposer answers the three actions with the same arguments (the journal passed to each) and inherits the
optional hooks with no-op defaults, so the search calls them on any proposer without asking what it is. A proposer
around another (the case library's, the LLM's) is a `WrappingProposer`: it hands on every hook it does not answer
itself, and `find` looks along the chain for a proposer of a given kind (the knowledge proposer under the wrappers).

The final combination (blend, stack, rank average) is the search's own step (agent.search.tree): every search ends
with it when the metric can be blended. `blend_trick` only names the knowledge behind it (provenance).

The seed loop's proposer (agent.seedloop.loop.CandidateProposer) is another algorithm and stays apart: see there.
"""

from __future__ import annotations

import random
from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from agent.candidate import AppliedTrick, Refit, SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.fit import FoldGate
from agent.engine.spec import SolutionSpec, ValidationSpec
from agent.engine.trainers import Trainer, trainer_registry
from agent.execution.executors import Executor
from agent.execution.free_code import ScriptRun
from agent.search.journal import Journal, Node
from agent.verify.findings import Evidence
from kb.llm import Usage
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
    # Whether the search may raise the candidate's learning rate to fit its time cap (agent.search.fit_time.
    # size_change); False for an Optuna trial, whose study chose the rate and is told the score of what it asked for.
    rate_may_rise: bool = True


@dataclass(frozen=True)
class BlendProposal:
    """Blend verified nodes: the search combines `members` (node ids) from their OOF predictions, each way that
    fits the metric (agent.search.blending.blends); every combination is a node that wins only on CV. `trick` is
    the retrieved ensembling trick the plan names, if any: provenance, not what made the search blend."""

    members: tuple[int, ...]
    plan: str
    trick: AppliedTrick | None = None


@dataclass(frozen=True)
class StepUsage:
    """What a proposer spent towards one node: an LLM's tokens and cost, the kind of answer it gave (None when the
    node is an offline proposer's), and why it fell back (None when it did not). A trace line's `llm` entry."""

    usage: Usage = field(default_factory=Usage)
    answer: str | None = None
    fallback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.usage.to_dict(), "answer": self.answer, "fallback": self.fallback}


class TreeEvaluator(Protocol):
    """What the tree search asks of its evaluator (agent.evaluator.Evaluator, which solve_task builds from the
    settings): scores on this run's CV folds, greater is better, each as `Evidence` for the verifier; the final fit.
    The search knows the evaluator by this protocol only, as AIDE's agent knows its interpreter by a callback."""

    trainers: Mapping[str, Trainer]
    executor: Executor  # its `workers`: how many nodes a step evaluates at once

    @property
    def validation(self) -> ValidationSpec: ...

    def spec_of(self, candidate: SolutionCandidate) -> SolutionSpec: ...

    def blend_spec(self, members: Sequence[SolutionSpec], weights: Sequence[float], *, intercept: float = 0.0,
                   link: str | None = None) -> SolutionSpec: ...

    def sample(self, dataset: Dataset, rows: int) -> Dataset: ...

    def pipeline_code(self, spec: SolutionSpec, dataset: Dataset) -> str: ...

    def baseline(self, dataset: Dataset) -> float: ...

    def evaluate_candidate(self, candidate: SolutionCandidate, dataset: Dataset, deadline: float, *,
                           predict_test: bool = False, gate: FoldGate | None = None, keep_above: float | None = None,
                           expected_trees: Mapping[str, float] | None = None) -> tuple[SolutionSpec, Evidence]: ...

    def evaluate(self, spec: SolutionSpec, dataset: Dataset, deadline: float = ..., *,
                 predict_test: bool = False, gate: FoldGate | None = None, keep_above: float | None = None,
                 expected_trees: Mapping[str, float] | None = None) -> Evidence: ...

    def kept_fold_models(self, key: str) -> tuple[Any, ...] | None: ...

    def evaluate_script(self, source: str, dataset: Dataset, run_folder: Path,
                        deadline: float = ...) -> tuple[Evidence, ScriptRun]: ...

    def fit_all_rows(self, spec: SolutionSpec, dataset: Dataset, time_limit: float,
                     rounds: Mapping[str, float] | None = None) -> Refit: ...


P = TypeVar("P", bound="TreeProposer")


class TreeProposer(Protocol):
    """Proposes the next solution for each kind of step; None when it has nothing (more) to offer.

    Inherit it: the three actions are the proposer's own, and every hook below has a no-op default."""

    # The trainers its proposals may name; empty: the built-in ones (agent.engine.trainers.trainer_registry).
    trainers: Mapping[str, Trainer] = MappingProxyType({})

    # ---- the three actions

    @abstractmethod
    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None: ...

    @abstractmethod
    def improve(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None: ...

    @abstractmethod
    def debug(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None: ...

    # ---- hooks

    def set_deadline(self, deadline: float) -> None:
        """When the search must end (its deadline less the time kept for the final fit and the outputs), told
        before each proposal: a proposer whose proposals take time of their own (an LLM's calls) ends them by it."""

    def observe(self, node: Node) -> None:
        """A node the search recorded: a proposer that learns from them (Optuna studies, refused scripts) does."""

    def blend_trick(self, profile: TaskProfile, journal: Journal) -> AppliedTrick | None:
        """The retrieved ensembling trick the search's final combination names (provenance: it blends anyway)."""
        return None

    def start_reading(self, profile: TaskProfile) -> None:
        """Start reading what is slow to read (the knowledge base) on a worker thread, so that the read overlaps the
        first evaluation."""

    def reading(self) -> Future[Any] | None:
        """The read start_reading began, while it is still going (None once it is done, or when there is none): it
        takes a core of its own, so the search runs one node at a time until it ends."""
        return None

    def use_memory(self, advice: Any) -> None:
        """The case library's measured effects of tricks on similar tasks (agent.memory.proposer.TrickAdvice), for a
        proposer that ranks retrieved tricks."""

    # ---- metering

    def take_usage(self) -> StepUsage | None:
        """What the proposer spent towards the next node the search records; None when it spends nothing to meter
        (an offline proposer: the node's trace line has no `llm` entry)."""
        return None

    def usage_record(self) -> dict[str, Any] | None:
        """What the proposer spent in the run, run.json's `llm` section; None when it spends nothing to meter."""
        return None

    # ---- the chain

    def chain(self) -> Iterator[TreeProposer]:
        """This proposer, then the ones it wraps, outermost first."""
        yield self

    def find(self, kind: type[P]) -> P | None:
        """The first proposer along the chain that is a `kind` (the knowledge proposer under the LLM's and the case
        library's), None when there is none."""
        return next((proposer for proposer in self.chain() if isinstance(proposer, kind)), None)


class WrappingProposer(TreeProposer):
    """A proposer around `inner`: what it does not answer itself, the inner proposer does (every action and hook)."""

    def __init__(self, inner: TreeProposer):
        self.inner = inner
        self.trainers = trainer_registry(inner.trainers)

    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        return self.inner.draft(profile, journal, rng)

    def improve(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        return self.inner.improve(node, profile, journal, rng)

    def debug(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        return self.inner.debug(node, profile, journal, rng)

    def set_deadline(self, deadline: float) -> None:
        self.inner.set_deadline(deadline)

    def observe(self, node: Node) -> None:
        self.inner.observe(node)

    def blend_trick(self, profile: TaskProfile, journal: Journal) -> AppliedTrick | None:
        return self.inner.blend_trick(profile, journal)

    def start_reading(self, profile: TaskProfile) -> None:
        self.inner.start_reading(profile)

    def reading(self) -> Future[Any] | None:
        return self.inner.reading()

    def use_memory(self, advice: Any) -> None:
        self.inner.use_memory(advice)

    def take_usage(self) -> StepUsage | None:
        return self.inner.take_usage()

    def usage_record(self) -> dict[str, Any] | None:
        return self.inner.usage_record()

    def chain(self) -> Iterator[TreeProposer]:
        yield self
        yield from self.inner.chain()
