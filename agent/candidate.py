"""The records passed between stages: a solution candidate, the trick behind a change, one evaluated attempt, and
the outcome of a run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.engine.spec import ModelSpec, SolutionSpec, Step, ValidationSpec
from agent.engine.trainers import Trainer, default_steps, lookup_trainer
from agent.verify.findings import Evidence, Verdict
from agent.verify.verifier import natural
from kb.records import CARD, PAPER, SOURCE_KINDS, WRITE_UP, source_kind  # noqa: F401 - the agent's records name them too
from retrieval.metrics import metric_info


@dataclass(frozen=True)
class SolutionCandidate:
    trainer: str
    params: Mapping[str, Any] = field(default_factory=dict)
    rationale: str = ""
    steps: tuple[Step, ...] | None = None  # None: the trainer's default preprocessing
    target_transform: Step | None = None  # a target op, e.g. Step("log_target")

    def to_spec(self, trainers: Mapping[str, Trainer], validation: ValidationSpec) -> SolutionSpec:
        steps = self.steps if self.steps is not None else default_steps(lookup_trainer(self.trainer, trainers))
        return SolutionSpec(tuple(steps), ModelSpec(self.trainer, dict(self.params)), self.target_transform, validation)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trainer": self.trainer, "params": dict(self.params), "rationale": self.rationale,
            "steps": None if self.steps is None else [step.to_dict() for step in self.steps],
            "target_transform": self.target_transform.to_dict() if self.target_transform else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SolutionCandidate:
        return cls(
            data["trainer"], dict(data.get("params") or {}), data.get("rationale", ""),
            None if data.get("steps") is None else tuple(Step.from_dict(item) for item in data["steps"]),
            Step.from_dict(data["target_transform"]) if data.get("target_transform") else None,
        )


@dataclass(frozen=True)
class AttemptRecord:
    """One evaluated candidate: the seed loop's record, and the tree search's nodes read the same way
    (agent.search.journal.Journal.attempts) for the trace and the card's run."""

    index: int  # the tree search: the node's id
    action: str  # how it was made: "seed" or "reflection" in the seed loop, "draft", "improve" or "debug" in the tree
    candidate: SolutionCandidate
    spec: SolutionSpec
    evidence: Evidence
    verdict: Verdict
    started: float  # seconds since the run started
    improved: bool  # became the new best

    @property
    def score(self) -> float:
        return self.verdict.score

    @property
    def error(self) -> str:
        return self.evidence.error

    def to_dict(self) -> dict[str, Any]:
        inspection = self.evidence.inspection
        return {  # "phase": trace.jsonl's key for the action since the seed loop's first runs
            "index": self.index, "phase": self.action, "trainer": self.candidate.trainer,
            "rationale": self.candidate.rationale, "spec": self.spec.to_dict(),
            "status": self.evidence.status, "cv_score": json_number(self.evidence.metric_value),
            "fold_scores": [json_number(value) for value in self.evidence.fold_values],
            "score": json_number(self.verdict.score), "valid": self.verdict.valid, "verdict": self.verdict.reason,
            "notes": list(self.verdict.notes), "leaks": list(inspection.leaks),
            "ignored_columns": list(inspection.ignored_columns), "started": round(self.started, 3),
            "seconds": round(self.evidence.elapsed, 3), "improved": self.improved, "error": self.evidence.error,
            "fit_seconds": [round(value, 3) for value in self.evidence.fit_seconds],
            "overhead_seconds": round(self.evidence.overhead_seconds, 3),
            # the trees early stopping kept (the folds' mean) and those its first fold was told to expect, by path
            "kept_trees": {path: round(value, 1) for path, value in self.evidence.stopped_rounds.items()},
            "expected_trees": {path: round(value, 1) for path, value in self.evidence.expected_trees.items()},
        }


@dataclass(frozen=True, eq=False)
class EngineeringRun:
    attempts: tuple[AttemptRecord, ...]
    best_candidate: SolutionCandidate | None
    best_score: float  # greater is better; -inf when no attempt was verified
    model: Any  # the best pipeline refit on all training rows, or None
    metric: str
    baseline_score: float
    rounds: int = 0  # reflection rounds run (the tree search: its steps after the drafts)
    best_spec: SolutionSpec | None = None
    test_prediction: Any = None  # the refit model's test-set prediction, when the dataset has a test set
    refit_error: str = ""
    stop_reason: str = ""

    @property
    def n_iterations(self) -> int:
        """Every attempt: the seed population, reflection rounds, drafts, improvements and blends."""
        return len(self.attempts)

    @property
    def valid_attempts(self) -> int:
        return sum(attempt.verdict.valid for attempt in self.attempts)

    @property
    def best_attempt(self) -> AttemptRecord | None:
        return next((attempt for attempt in reversed(self.attempts) if attempt.improved), None)

    def summary(self) -> str:
        info = metric_info(self.metric)
        head = f"Agentic AutoML: {len(self.attempts)} attempts ({self.valid_attempts} verified); "
        baseline = f"(baseline {natural(self.baseline_score, info):.4f})"
        if self.best_candidate is None:
            return head + f"no verified candidate {baseline}"
        return head + f"best={self.best_candidate.trainer} {self.metric}={natural(self.best_score, info):.4f} {baseline}"


def json_number(value: float) -> float | None:
    """JSON has no infinities or NaN: a missing score is null."""
    return value if math.isfinite(value) else None




# Where a trick came from (AppliedTrick.source_kind): a hand-written trick card (the bundled data/knowledge/*.jsonl
# or any other card file), a competition write-up, or a paper.
# A trick's source kind (card, write-up or paper) is the knowledge base's rule, so `kb stats` counts as runs do.
trick_source_kind = source_kind


@dataclass(frozen=True)
class AppliedTrick:
    """The knowledge behind a change: which trick, from where, and the executable op it became."""

    id: str
    title: str = ""
    source: str = ""
    competition: str | None = None
    op: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    related: tuple[str, ...] = ()  # further tricks composed with this one in the same step (a draft)
    source_kind: str = ""  # CARD, WRITE_UP or PAPER (trick_source_kind); "" when not known
    related_kinds: tuple[str, ...] = ()  # the source kind of each trick in `related`, in the same order

    @classmethod
    def of(cls, trick: Any, *, title: str = "", op: str = "", params: Mapping[str, Any] | None = None,
           related: tuple[Any, ...] | list[Any] = ()) -> AppliedTrick:
        """The trick as applied: a kb.records.Trick (`related`: more Tricks, or AppliedTricks, composed with it)."""
        return cls(trick.id, title or trick.title or trick.text[:80], trick.source, trick.competition, op,
                   dict(params or {}), tuple(item.id for item in related),
                   trick_source_kind(trick.kind, trick.source),
                   tuple(item.source_kind if isinstance(item, AppliedTrick) else
                         trick_source_kind(item.kind, item.source) for item in related))

    @property
    def ids(self) -> tuple[str, ...]:
        return (self.id, *self.related)

    @property
    def sources(self) -> tuple[tuple[str, str], ...]:
        """(trick id, source kind) for this trick and each related one ("" where the kind is not known)."""
        kinds = (self.source_kind, *self.related_kinds)
        return tuple((trick_id, kinds[index] if index < len(kinds) else "") for index, trick_id in enumerate(self.ids))

    def describe(self) -> str:
        origin = f"competition {self.competition}" if self.competition else (self.source or "the knowledge base")
        kind = f"{self.source_kind}, " if self.source_kind else ""
        return f"trick {self.id} '{self.title or self.op}' ({kind}{origin})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "params": dict(self.params), "related": list(self.related),
                "related_kinds": list(self.related_kinds)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AppliedTrick:
        data = dict(data)
        if "source_kind" not in data and data.get("source"):  # written before tricks kept it: papers never
            data["source_kind"] = trick_source_kind("solution", data["source"])  # reached the agent then
            data["related_kinds"] = ("",) * len(data.get("related") or ())
        return cls(**{**data, "params": dict(data.get("params") or {}), "related": tuple(data.get("related") or ()),
                      "related_kinds": tuple(data.get("related_kinds") or ())})


@dataclass(frozen=True, eq=False)
class Refit:
    """The chosen spec fitted on every training row; model and prediction are None when the refit failed."""

    model: Any
    test_prediction: Any  # None too when the dataset has no test set
    error: str = ""
    seconds: float = 0.0
