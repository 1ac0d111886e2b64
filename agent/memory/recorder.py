"""One solve's link to the case library (`MemorySession`): the recall and the run's task row on a worker thread
while the data loads, the memory proposer around the solve's proposer, a memory per node as it finishes (the
search's `on_node`), and the run's outcome at the end.

`node_memories` turns a finished node into memories:
- a failed node: an ERROR memory (LEAKAGE when the verifier found a leak), with its exception and message;
- a verified debug node whose parent failed: the repair that worked, added to the parent's error memory;
- a verified improvement of a verified parent: a positive memory when it beat the parent, a WORSE memory when
  not, with the trick (or built-in change) and the score change.
Drafts and the search's own combinations (blends) are not measurements of a trick, so they leave no node memory;
the run's best solution is the run's memory.
"""

from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from agent.candidate import EngineeringRun
from agent.memory.change import Change
from agent.memory.proposer import MemoryTreeProposer
from agent.memory.records import (
    ERROR,
    IMPROVEMENT,
    LEAKAGE,
    NO_SOLUTION,
    SOLUTION,
    WORSE,
    Memory,
    NegativeMemory,
    PositiveMemory,
    Recall,
    Repair,
    SolutionMemory,
    TaskSignature,
    task_key,
)
from agent.memory.store import MemoryStore, memory_id
from agent.memory.text import error_class, error_message, failure_message
from agent.search.journal import DEBUG, IMPROVE, STOPPED_EARLY, Journal, Node
from agent.search.protocols import FREE_CODE, TreeProposer
from agent.verify import findings
from retrieval.metrics import metric_info
from retrieval.profile import TaskProfile


@dataclass(frozen=True)
class RunContext:
    """What every memory of one run says about where it came from."""

    run_id: str
    task_key: str
    task_name: str
    signature: TaskSignature
    metric: str


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _failure_kind(node: Node) -> str:
    return LEAKAGE if node.failure == findings.LEAKAGE else ERROR


def node_memories(node: Node, parent: Node | None, run: RunContext) -> tuple[list[Memory], list[tuple[str, Repair]]]:
    """(memories, repairs of earlier error memories: (their id, the repair)) of one finished node."""
    if node.members or node.skipped:  # the search's own final combination; a draft never run
        return [], []
    if node.status == STOPPED_EARLY:  # not a failure: a change measured on the folds it was scored on
        return _change_memories(node, parent, run, _partial_score(parent, node.folds_scored, run.metric))
    if not node.valid:
        leaks = [finding for finding in node.findings if finding.leak]
        kind = _failure_kind(node)
        return [NegativeMemory(
            memory_id(run.run_id, node.id, kind), kind, run.task_key, run.task_name, run.run_id, run.signature,
            failure_message(node.error, node.output), node.id, node.action, node.candidate.trainer,
            tuple(step.op for step in node.candidate.steps or ()), replace(node.candidate, rationale=""),
            node.failure, error_class(node.error), leaks[0].op if leaks else None, metric=run.metric,
            created_at=_now())], []
    if parent is None or parent.members:
        return [], []
    if node.action == DEBUG and not parent.valid:
        repair = Repair(node.id, Change.between(parent.candidate, node.candidate), node.plan, float(node.metric))
        return [], [(memory_id(run.run_id, parent.id, _failure_kind(parent)), repair)]
    return _change_memories(node, parent, run, parent.score)


def _partial_score(parent: Node | None, folds: int, metric: str) -> float:
    """The parent's greater-is-better CV score on its first `folds` folds, the ones a node stopped early was scored
    on (-inf when the parent's fold scores are not known)."""
    if parent is None or parent.evidence is None or len(parent.evidence.fold_values) < folds or folds == 0:
        return -math.inf
    mean = sum(parent.evidence.fold_values[:folds]) / folds
    return mean if metric_info(metric).greater_is_better else -mean


def _change_memories(node: Node, parent: Node | None, run: RunContext,
                     parent_score: float) -> tuple[list[Memory], list[tuple[str, Repair]]]:
    """An improvement's effect against its parent's score on the same folds: a positive memory, or a WORSE one."""
    if parent is None or parent.members or node.action != IMPROVE or not parent.valid:
        return [], []
    if not (math.isfinite(node.score) and math.isfinite(parent_score)):
        return [], []
    change = Change.between(parent.candidate, node.candidate)
    parent_metric = parent_score if metric_info(run.metric).greater_is_better else -parent_score  # its own units
    delta = node.score - parent_score
    gain = delta / max(abs(parent_score), 1e-12)
    op = node.trick.op if node.trick is not None else change.op
    if delta > 0:
        return [PositiveMemory(
            memory_id(run.run_id, node.id, IMPROVEMENT), run.task_key, run.task_name, run.run_id, run.signature,
            node.id, node.action, node.candidate.trainer, op, change, node.trick, run.metric, float(parent_metric),
            float(node.metric),
            delta, gain, node.plan, _now())], []
    return [NegativeMemory(
        memory_id(run.run_id, node.id, WORSE), WORSE, run.task_key, run.task_name, run.run_id, run.signature,
        f"{op} did not beat its parent: CV {run.metric} {parent_metric:.6g} -> {node.metric:.6g}"
        + (f" (on the first {node.folds_scored} of {node.folds} folds)" if node.status == STOPPED_EARLY else ""),
        node.id,
        node.action, node.candidate.trainer, tuple(step.op for step in node.candidate.steps or ()), op=op,
        change=change, trick=node.trick, metric=run.metric, delta=delta, gain=gain, created_at=_now())], []


def run_outcome(run: RunContext, result: EngineeringRun, journal: Journal,
                solution_path: Path | None) -> SolutionMemory | NegativeMemory:
    """The run's memory: its verified, refitted solution, or why it has none."""
    best = journal.best()
    if best is not None and result.test_prediction is not None:
        # Drafts start from the best single model in the spec vocabulary (a free-code script only when nothing else);
        # the best itself when no node was scored on every row (a large table whose CV on every row never fitted).
        singles = [node for node in journal.valid_nodes if not node.members] or [best]
        single = max([node for node in singles if node.candidate.trainer != FREE_CODE] or singles,
                     key=lambda node: (node.score, -node.id))
        solution = solution_path.read_text(encoding="utf-8") if solution_path is not None else ""
        return SolutionMemory(memory_id(run.run_id, SOLUTION), run.task_key, run.task_name, run.run_id, run.signature,
                              run.metric, float(best.metric), float(best.score), best.spec.to_dict(),
                              single.spec.to_dict(),
                              float(single.metric), solution, len(journal), best.id, _now(), float(single.elapsed),
                              single.scored_rows or run.signature.n_rows)
    if best is not None:
        reason = f"refitting the best node failed: {error_message(result.refit_error)}"
    else:
        reason = f"no node was verified ({result.stop_reason or 'the search ended'})"
    return NegativeMemory(memory_id(run.run_id, NO_SOLUTION), NO_SOLUTION, run.task_key, run.task_name, run.run_id,
                          run.signature, reason, metric=run.metric, created_at=_now())


class MemorySession:
    """The case library's part in one tree-search solve (see the module docstring)."""

    def __init__(self, store: MemoryStore, profile: TaskProfile, inner: TreeProposer, *, reuse_own: bool = False,
                 node_seconds: float | None = None):
        self.store = store
        self.profile = profile
        self.reuse_own = reuse_own
        self.key = task_key(profile.task_dir, profile.target)
        self._nodes: dict[int, Node] = {}
        self._opening: Future[tuple[RunContext, Recall]] | None = None
        self.proposer = MemoryTreeProposer(inner, lambda: self.recall, node_seconds=node_seconds)

    def start(self) -> None:
        """Recall and open the run on a worker thread (embedding the task takes seconds; the search's baseline
        runs meanwhile). Called once the task is set up, so a task that fails set-up opens no run."""
        if self._opening is None:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="casebook-memory")
            self._opening = pool.submit(self._open)
            pool.shutdown(wait=False)  # the thread ends with its one job

    def _open(self) -> tuple[RunContext, Recall]:
        recall = self.store.recall(self.profile, reuse_own=self.reuse_own)  # before this run's task row is written
        run_id = self.store.begin_run(self.profile, reuse_own=self.reuse_own)
        profile = self.profile
        return RunContext(run_id, self.key, profile.name, TaskSignature.of(profile), profile.metric), recall

    @property
    def run(self) -> RunContext:
        self.start()
        return self._opening.result()[0]

    @property
    def recall(self) -> Recall:
        self.start()
        return self._opening.result()[1]

    def record(self, node: Node) -> None:
        """The search's on_node: the node's memories, in one transaction."""
        self._nodes[node.id] = node
        parent = self._nodes.get(node.parent_id) if node.parent_id is not None else None
        memories, repairs = node_memories(node, parent, self.run)
        if memories or repairs:
            self.store.write_node(memories, repairs)

    def finish(self, result: EngineeringRun, journal: Journal,
               solution_path: Path | None) -> SolutionMemory | NegativeMemory:
        outcome = run_outcome(self.run, result, journal, solution_path)
        self.store.write_run(self.run.run_id, outcome)
        return outcome
