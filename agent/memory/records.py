"""The case library's records: what a task is (its key, its signature, `TaskMemory`), what worked on it (positive
memories), what failed (negative memories), and what a new task gets back (`Recall`, with the effects and past
errors the recall scored: agent.memory.recall). The texts a task is embedded by and a failure's line are
agent.memory.text; the change a memory measured is agent.memory.change.

Every record is a frozen dataclass that turns into JSON and back (`to_dict` / `from_dict`): the store keeps the
JSON. No record holds a test label, a test prediction or an out-of-fold prediction: scores are CV means, specs
are preprocessing and model parameters, error texts are the last line of a candidate's traceback.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.engine.spec import SolutionSpec
from agent.engine.trainers import model_group
from agent.memory.change import Change
from agent.memory.text import message_key, size_word
from agent.search.fit_time import TableShape
from ingest.loaders import file_sha256
from retrieval.metrics import describe_change
from retrieval.profile import TRAIN_FILE, TaskProfile

# Kinds of memory. Positive: a verified node that beat its parent, and a run's verified solution.
IMPROVEMENT, SOLUTION = "improvement", "solution"
# Negative: a node that failed to run or was rejected, a node that was rejected for leakage, a trick or change
# that did not beat its parent (by how much), a run that ended without a verified solution, a task that could not
# be set up.
ERROR, LEAKAGE, WORSE, NO_SOLUTION, SETUP = "error", "leakage", "worse", "no_solution", "setup"
POSITIVE_KINDS = (IMPROVEMENT, SOLUTION)
NEGATIVE_KINDS = (ERROR, LEAKAGE, WORSE, NO_SOLUTION, SETUP)
# What says the task itself failed (Agent K's negative memory of a task): forgotten once the task is solved.
TASK_FAILURES = (NO_SOLUTION, SETUP)


# ---------------------------------------------------------------------------------------------- the task


def task_key(task_dir: str | Path, target: str | None = None) -> str:
    """What identifies a task across runs and folders: train.csv's bytes and the target column. A copy of a table
    in another folder is the same task, so its memories stay its own (never leak); without a readable train.csv,
    the folder's name."""
    path = Path(task_dir) / TRAIN_FILE
    content = file_sha256(path) if path.is_file() else f"folder:{Path(task_dir).resolve().name}"
    return hashlib.sha256(f"{content}\0{target or ''}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TaskSignature:
    """What a memory says about the task it came from: what was to be predicted, how it was scored, what data."""

    labels: tuple[str, ...]
    task_type: str
    metric: str
    modality: str
    column_kinds: tuple[tuple[str, int], ...]  # (kind, number of feature columns of that kind), kinds sorted
    size_bucket: str  # the training rows in words: tiny (< 1,000), small, medium-sized, large (>= 100,000)
    n_rows: int
    n_cols: int

    @classmethod
    def of(cls, profile: TaskProfile) -> TaskSignature:
        counts: dict[str, int] = {}
        for column in profile.columns:
            counts[column.kind] = counts.get(column.kind, 0) + 1
        return cls(tuple(profile.labels), profile.task_type, profile.metric, profile.modality,
                   tuple(sorted(counts.items())), size_word(profile.n_rows), profile.n_rows, profile.n_cols)

    def shape(self, rows: int) -> TableShape:
        """The table as the fit-time model reads it, for a node scored on `rows` of its rows."""
        return TableShape(rows, sum(count for _, count in self.column_kinds), dict(self.column_kinds).get("text", 0) > 0)

    def to_dict(self) -> dict[str, Any]:
        return {"labels": list(self.labels), "task_type": self.task_type, "metric": self.metric,
                "modality": self.modality, "column_kinds": dict(self.column_kinds), "size_bucket": self.size_bucket,
                "n_rows": self.n_rows, "n_cols": self.n_cols}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskSignature:
        return cls(tuple(data.get("labels") or ()), data["task_type"], data["metric"], data.get("modality", ""),
                   tuple(sorted((data.get("column_kinds") or {}).items())), data.get("size_bucket", ""),
                   int(data.get("n_rows", 0)), int(data.get("n_cols", 0)))


@dataclass(frozen=True)
class TaskMemory:
    """One task as the case library knows it: what the curriculum embeds (description, structure) and how it went."""

    task_key: str
    name: str
    description: str  # agent.memory.text.description_text
    structure: str  # agent.memory.text.structure_text (for a task that could not be set up: its files)
    signature: TaskSignature | None  # None for a task that could not be set up
    solved: bool  # a run of it ended with a verified, refitted solution
    best_score: float | None = None  # the best verified CV score, in the metric's own units
    metric: str | None = None
    runs: int = 0  # runs started on it
    last_run_at: str | None = None  # when the latest run started (ISO 8601, UTC)

    @property
    def failed(self) -> bool:
        """Tried and never solved: the curriculum's negative memory."""
        return self.runs > 0 and not self.solved

    def to_dict(self) -> dict[str, Any]:
        return {"task_key": self.task_key, "name": self.name, "description": self.description,
                "structure": self.structure, "signature": self.signature.to_dict() if self.signature else None,
                "solved": self.solved, "failed": self.failed, "best_score": self.best_score, "metric": self.metric,
                "runs": self.runs, "last_run_at": self.last_run_at}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskMemory:
        signature = data.get("signature")
        return cls(data["task_key"], data["name"], data.get("description") or "", data.get("structure") or "",
                   TaskSignature.from_dict(signature) if signature else None, bool(data.get("solved")),
                   data.get("best_score"), data.get("metric"), int(data.get("runs") or 0), data.get("last_run_at"))


# ---------------------------------------------------------------------------------------------- memories


@dataclass(frozen=True)
class PositiveMemory:
    """A verified node that beat its verified parent: the trick (or built-in change) and by how much."""

    id: str
    task_key: str
    task_name: str
    run_id: str
    signature: TaskSignature
    node_id: int
    action: str  # improve
    trainer: str  # the node's model family (a trick's effect depends on it)
    op: str  # the trick's recipe op, else Change.op
    change: Change  # parent -> node
    trick: AppliedTrick | None  # the retrieved trick applied (op, params, source kind and file), if one
    metric: str
    score_before: float  # the parent's CV score, in the metric's own units
    score_after: float
    delta: float  # the change of the greater-is-better score (positive: better)
    gain: float  # delta relative to the parent's score: comparable across metrics and tables
    plan: str
    created_at: str = ""
    kind: str = IMPROVEMENT
    polarity = "positive"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "polarity": self.polarity, "task_key": self.task_key,
                "task_name": self.task_name, "run_id": self.run_id, "signature": self.signature.to_dict(),
                "node_id": self.node_id, "action": self.action, "trainer": self.trainer, "op": self.op,
                "change": self.change.to_dict(),
                "trick": self.trick.to_dict() if self.trick else None, "metric": self.metric,
                "score_before": self.score_before, "score_after": self.score_after, "delta": self.delta,
                "gain": self.gain, "plan": self.plan, "created_at": self.created_at}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PositiveMemory:
        return cls(data["id"], data["task_key"], data["task_name"], data["run_id"],
                   TaskSignature.from_dict(data["signature"]), int(data["node_id"]), data["action"], data["trainer"],
                   data["op"],
                   Change.from_dict(data["change"]), AppliedTrick.from_dict(data["trick"]) if data.get("trick") else None,
                   data["metric"], float(data["score_before"]), float(data["score_after"]), float(data["delta"]),
                   float(data["gain"]), data.get("plan", ""), data.get("created_at", ""))


@dataclass(frozen=True)
class SolutionMemory:
    """A run's verified solution: the best spec, the best single-model spec (drafts start from it: a blend is the
    search's own last step), its solution.py and its final CV score."""

    id: str
    task_key: str
    task_name: str
    run_id: str
    signature: TaskSignature
    metric: str
    score: float  # the best verified CV score, in the metric's own units
    oriented_score: float  # the same, greater is better
    spec: Mapping[str, Any]  # SolutionSpec.to_dict() of the best node
    single_spec: Mapping[str, Any]  # the best node that is not a combination
    single_score: float  # its CV score, in the metric's own units
    solution: str  # solution.py
    nodes: int  # nodes the run evaluated
    best_node: int
    created_at: str = ""
    # How long the best single model's CV took, on how many rows (0: not recorded), so that a draft from it can
    # be left out where it would not finish within a node's time cap.
    single_seconds: float = 0.0
    single_rows: int = 0
    kind: str = SOLUTION
    polarity = "positive"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "polarity": self.polarity, "task_key": self.task_key,
                "task_name": self.task_name, "run_id": self.run_id, "signature": self.signature.to_dict(),
                "metric": self.metric, "score": self.score, "oriented_score": self.oriented_score,
                "spec": dict(self.spec), "single_spec": dict(self.single_spec), "single_score": self.single_score,
                "solution": self.solution, "nodes": self.nodes, "best_node": self.best_node,
                "created_at": self.created_at, "single_seconds": self.single_seconds, "single_rows": self.single_rows}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SolutionMemory:
        return cls(data["id"], data["task_key"], data["task_name"], data["run_id"],
                   TaskSignature.from_dict(data["signature"]), data["metric"], float(data["score"]),
                   float(data["oriented_score"]), dict(data["spec"]), dict(data["single_spec"]),
                   float(data["single_score"]), data.get("solution", ""), int(data.get("nodes", 0)),
                   int(data.get("best_node", 0)), data.get("created_at", ""),
                   float(data.get("single_seconds", 0.0)), int(data.get("single_rows", 0)))

    @property
    def single_candidate(self) -> SolutionCandidate:
        spec = SolutionSpec.from_dict(self.single_spec)
        return SolutionCandidate(spec.model.name, dict(spec.model.params), "", spec.steps, spec.target_transform)


@dataclass(frozen=True)
class Repair:
    """The debug step that turned a failed node into a verified one."""

    node_id: int
    change: Change
    plan: str  # the debug node's plan (the diagnosis)
    score: float  # the repaired node's CV score, in the metric's own units

    def to_dict(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "change": self.change.to_dict(), "plan": self.plan, "score": self.score}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Repair:
        return cls(int(data["node_id"]), Change.from_dict(data["change"]), data.get("plan", ""), float(data["score"]))


@dataclass(frozen=True)
class NegativeMemory:
    """What failed: a node that failed to run or was rejected (ERROR, LEAKAGE; with the repair that worked, once
    one did), a trick or change that did not beat its parent (WORSE, by how much), a run without a verified
    solution (NO_SOLUTION), a task that could not be set up (SETUP)."""

    id: str
    kind: str  # one of NEGATIVE_KINDS
    task_key: str
    task_name: str
    run_id: str | None
    signature: TaskSignature | None  # None for SETUP
    message: str = ""  # what went wrong, in words (the error's last line, the verifier's reason, the set-up error)
    node_id: int | None = None
    action: str | None = None
    trainer: str | None = None
    ops: tuple[str, ...] = ()  # the failed candidate's steps
    candidate: SolutionCandidate | None = None  # the failed candidate (ERROR, LEAKAGE), without its rationale
    failure: str | None = None  # the verdict's failure kind (agent.verify.findings.FAILURES)
    error_class: str | None = None  # the exception class, when the run raised one
    failed_op: str | None = None  # the step that failed: the leak's op, else the op its repair changed
    op: str | None = None  # WORSE: the trick's recipe op, else Change.op
    change: Change | None = None  # WORSE: parent -> node
    trick: AppliedTrick | None = None  # WORSE: the trick that did not help
    metric: str | None = None
    delta: float | None = None  # WORSE: the change of the greater-is-better score (<= 0)
    gain: float | None = None  # WORSE: delta relative to the parent's score
    repair: Repair | None = None  # ERROR, LEAKAGE: the debug step that fixed it, once one did
    created_at: str = ""
    polarity = "negative"

    @property
    def message_key(self) -> str:
        return message_key(self.message)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "polarity": self.polarity, "task_key": self.task_key,
                "task_name": self.task_name, "run_id": self.run_id,
                "signature": self.signature.to_dict() if self.signature else None, "message": self.message,
                "node_id": self.node_id, "action": self.action, "trainer": self.trainer, "ops": list(self.ops),
                "candidate": {**self.candidate.to_dict(), "rationale": ""} if self.candidate else None,
                "failure": self.failure, "error_class": self.error_class, "failed_op": self.failed_op, "op": self.op,
                "change": self.change.to_dict() if self.change else None,
                "trick": self.trick.to_dict() if self.trick else None, "metric": self.metric, "delta": self.delta,
                "gain": self.gain, "repair": self.repair.to_dict() if self.repair else None,
                "created_at": self.created_at}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NegativeMemory:
        def optional(key: str, parse):
            return parse(data[key]) if data.get(key) is not None else None

        return cls(data["id"], data["kind"], data["task_key"], data["task_name"], data.get("run_id"),
                   optional("signature", TaskSignature.from_dict), data.get("message", ""), data.get("node_id"),
                   data.get("action"), data.get("trainer"), tuple(data.get("ops") or ()),
                   optional("candidate", SolutionCandidate.from_dict), data.get("failure"), data.get("error_class"),
                   data.get("failed_op"), data.get("op"), optional("change", Change.from_dict),
                   optional("trick", AppliedTrick.from_dict), data.get("metric"), data.get("delta"),
                   data.get("gain"), optional("repair", Repair.from_dict), data.get("created_at", ""))


Memory = PositiveMemory | SolutionMemory | NegativeMemory


def memory_from_dict(data: Mapping[str, Any]) -> Memory:
    kind = data["kind"]
    if kind == IMPROVEMENT:
        return PositiveMemory.from_dict(data)
    if kind == SOLUTION:
        return SolutionMemory.from_dict(data)
    if kind in NEGATIVE_KINDS:
        return NegativeMemory.from_dict(data)
    raise ValueError(f"unknown memory kind {kind!r}; expected one of {(*POSITIVE_KINDS, *NEGATIVE_KINDS)}")


# ---------------------------------------------------------------------------------------------- recall


@dataclass(frozen=True)
class SimilarTask:
    """A remembered task like the new one, with its best solution (None when it was never solved)."""

    task: TaskMemory
    similarity: float  # the mean of the two below
    description_similarity: float  # cosine of the description embeddings
    structure_similarity: float  # cosine of the structure embeddings
    solution: SolutionMemory | None

    def to_dict(self) -> dict[str, Any]:
        return {"task_key": self.task.task_key, "name": self.task.name, "similarity": round(self.similarity, 4),
                "description_similarity": round(self.description_similarity, 4),
                "structure_similarity": round(self.structure_similarity, 4), "solved": self.task.solved,
                "best_score": self.task.best_score, "metric": self.task.metric,
                "best_spec": dict(self.solution.single_spec) if self.solution else None}


@dataclass(frozen=True)
class Effect:
    """The measured effect of a trick or op on similar tasks: every time it was applied to a verified node."""

    key: str  # a trick id, or an op
    op: str
    title: str  # the trick's title, or the op
    applications: int
    helped: int  # applications that beat their parent
    mean_gain: float  # similarity-weighted mean relative change of the score (positive: better)
    best: tuple[str, float, str]  # (task name, delta, metric) of its largest effect in absolute value
    tasks: tuple[str, ...]  # the tasks it was measured on

    @property
    def helps(self) -> bool:
        return self.helped > 0 and self.mean_gain > 0

    def describe(self) -> str:
        name, delta, metric = self.best
        verb = "helped" if self.helps else "did not help"
        return (f"{verb} on {len(self.tasks)} similar task(s) ({self.helped} of {self.applications} applications "
                f"beat their parent, the score {describe_change(self.mean_gain, relative=True)} on average; on {name}: "
                f"{metric} {describe_change(delta)})")

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "op": self.op, "title": self.title, "applications": self.applications,
                "helped": self.helped, "mean_gain": self.mean_gain, "best": list(self.best), "tasks": list(self.tasks)}


@dataclass(frozen=True)
class PastError:
    """A remembered failure that a debug step repaired, and how like the new task its task was."""

    memory: NegativeMemory
    similarity: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.memory.id, "task": self.memory.task_name, "similarity": round(self.similarity, 4),
                "failure": self.memory.failure, "error_class": self.memory.error_class,
                "failed_op": self.memory.failed_op, "message": self.memory.message,
                "repair": self.memory.repair.to_dict() if self.memory.repair else None}


def recipe_key(trick: AppliedTrick) -> str:
    """A trick's recipe as a key: its op and parameters (another card or write-up may carry the same one)."""
    return f"{trick.op} {json.dumps(dict(trick.params), sort_keys=True, default=str)}"


def on_trainer(key: str, trainer: str) -> str:
    """The key of an effect measured on one trainer."""
    return f"{key} on {trainer}"


def on_group(key: str, group: str) -> str:
    """The key of an effect measured on one model group (agent.engine.trainers.model_group)."""
    return f"{key} on {group} models"


@dataclass(frozen=True)
class Recall:
    """What the case library gives a new task: similar tasks (most similar first) with their best specs, the
    measured effect of each trick (by trick id) and op over the similar tasks, and past errors with the repair
    that worked. A task's own memories are left out unless `reused_own`."""

    task_key: str
    similar: tuple[SimilarTask, ...] = ()
    # By trick id, by on_trainer(trick id, trainer) and by on_group(trick id, model group).
    trick_effects: Mapping[str, Effect] = field(default_factory=dict)
    # By recipe_key (the same recipe, whichever trick carried it), by on_trainer and by on_group of it.
    recipe_effects: Mapping[str, Effect] = field(default_factory=dict)
    op_effects: Mapping[str, Effect] = field(default_factory=dict)  # by op, built-in changes included
    errors: tuple[PastError, ...] = ()
    reused_own: bool = False

    def effect(self, trick: AppliedTrick, trainer: str | None = None) -> Effect | None:
        """The measured effect of a trick: of the trick itself, else of the same recipe (op and parameters) that
        another trick carried. For a node of `trainer`, as measured on that trainer, else on its model group: what a
        trick did to a linear model says little of trees (class weights may help one and hurt the other; a log
        target can wreck a linear model's predictions and help a GBDT's). Without a trainer, on any model."""
        for effects, key in ((self.trick_effects, trick.id), (self.recipe_effects, recipe_key(trick))):
            found = effects.get(key) if trainer is None else (
                effects.get(on_trainer(key, trainer)) or effects.get(on_group(key, model_group(trainer))))
            if found:
                return found
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"task_key": self.task_key, "reused_own": self.reused_own,
                "similar": [task.to_dict() for task in self.similar],
                "trick_effects": {key: effect.to_dict() for key, effect in self.trick_effects.items()},
                "recipe_effects": {key: effect.to_dict() for key, effect in self.recipe_effects.items()},
                "op_effects": {key: effect.to_dict() for key, effect in self.op_effects.items()},
                "errors": [error.to_dict() for error in self.errors]}
