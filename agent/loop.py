"""The seed loop ("agentic AutoML"): evaluate a seed population, then reflect — propose, verify, keep the best.

Semantics:
  - the proposer's seed candidates are always evaluated;
  - `max_iterations` and `patience` bound only the reflection rounds that follow;
  - a verified attempt that improves on the best resets patience, any other round uses one up;
  - a candidate that fails (raises, hangs, runs out of memory, scores NaN) scores -inf and the run goes on;
  - only an attempt with a valid verdict can become the best, and the best is refit on all the data.
Scores are greater-is-better throughout (an error metric is negated, as in scikit-learn's scorers);
`summary()` and verdict reasons show values in the metric's own units.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from agent.engine import (
    Dataset,
    compile_spec,
    cross_validate,
    cross_validate_predictions,
    fit_and_predict,
    model_names,
)
from agent.models import Trainer, default_steps, lookup_trainer, trainer_registry
from agent.sandbox import DEFAULT_MEMORY_LIMIT, Limits, run_isolated
from agent.spec import ModelSpec, SolutionSpec, SpecError, Step, ValidationSpec
from agent.steps import StepOp
from agent.verifier import (
    DeterministicVerifier,
    Evidence,
    Inspection,
    Verdict,
    Verifier,
    inspect_candidate,
    natural,
    oriented,
)
from retrieval.metrics import metric_info

DEFAULT_CANDIDATE_TIME_LIMIT = 600.0


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


@dataclass(frozen=True)
class AttemptRecord:
    index: int
    phase: str  # "seed" or "reflection"
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
        return {
            "index": self.index, "phase": self.phase, "trainer": self.candidate.trainer,
            "rationale": self.candidate.rationale, "spec": self.spec.to_dict(),
            "status": self.evidence.status, "cv_score": json_number(self.evidence.metric_value),
            "fold_scores": [json_number(value) for value in self.evidence.fold_values],
            "score": json_number(self.verdict.score), "valid": self.verdict.valid, "verdict": self.verdict.reason,
            "notes": list(self.verdict.notes), "leaks": list(inspection.leaks),
            "ignored_columns": list(inspection.ignored_columns), "started": round(self.started, 3),
            "seconds": round(self.evidence.elapsed, 3), "improved": self.improved, "error": self.evidence.error,
        }


@dataclass(frozen=True, eq=False)
class EngineeringRun:
    attempts: tuple[AttemptRecord, ...]
    best_candidate: SolutionCandidate | None
    best_score: float  # greater is better; -inf when no attempt was verified
    model: Any  # the best pipeline refit on all training rows, or None
    metric: str
    baseline_score: float
    n_iterations: int  # reflection rounds run
    best_spec: SolutionSpec | None = None
    test_prediction: Any = None  # the refit model's test-set prediction, when the dataset has a test set
    refit_error: str = ""
    stop_reason: str = ""

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


@runtime_checkable
class CandidateProposer(Protocol):
    def seed(self, dataset: Dataset) -> Sequence[SolutionCandidate]:
        """The seed population, evaluated before any reflection."""

    def propose(self, dataset: Dataset, attempts: Sequence[AttemptRecord]) -> SolutionCandidate | None:
        """The next candidate given every attempt so far; None when it has nothing more to try."""


class SequenceProposer:
    """Fixed candidates: `seed`, then `reflections` one per round."""

    def __init__(self, seed: Sequence[SolutionCandidate], reflections: Sequence[SolutionCandidate] = ()):
        self.seed_candidates = tuple(seed)
        self.reflections = tuple(reflections)

    def seed(self, dataset: Dataset) -> Sequence[SolutionCandidate]:
        return self.seed_candidates

    def propose(self, dataset: Dataset, attempts: Sequence[AttemptRecord]) -> SolutionCandidate | None:
        used = sum(attempt.phase == "reflection" for attempt in attempts)
        return self.reflections[used] if used < len(self.reflections) else None


class AgenticAutoML:
    def __init__(
        self,
        proposer: CandidateProposer,
        verifier: Verifier | None = None,
        max_iterations: int = 8,
        patience: int = 3,
        cv: int = 5,
        random_state: int | None = None,
        trainers: Mapping[str, Trainer] | None = None,
        *,
        steps: Mapping[str, StepOp] | None = None,
        time_budget: float | None = None,
        candidate_time_limit: float = DEFAULT_CANDIDATE_TIME_LIMIT,
        memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
        on_attempt: Callable[[AttemptRecord], None] | None = None,
    ):
        self.proposer = proposer
        self.verifier = verifier if verifier is not None else DeterministicVerifier()
        self.max_iterations = max_iterations
        self.patience = patience
        self.cv = cv
        # Rendered solutions must reproduce the CV score, so "no seed" still means a fixed one.
        self.random_state = 0 if random_state is None else random_state
        self.trainers = trainer_registry(trainers)
        self.steps = dict(steps or {})
        self.time_budget = time_budget
        self.candidate_time_limit = candidate_time_limit
        self.memory_limit = memory_limit
        self.on_attempt = on_attempt

    def solve(self, dataset: Dataset) -> EngineeringRun:
        started = time.monotonic()
        deadline = started + self.time_budget if self.time_budget is not None else math.inf
        info = dataset.metric_info
        validation = ValidationSpec(n_splits=self.cv, seed=self.random_state)
        baseline_score = self.baseline(dataset, validation)

        attempts: list[AttemptRecord] = []
        best: AttemptRecord | None = None

        def attempt(candidate: SolutionCandidate, phase: str) -> bool:
            """Evaluate, verify and record one candidate; True when it became the best."""
            nonlocal best
            spec, evidence = self.evaluate(candidate, dataset, validation, deadline)
            verdict = self.verifier.verify(evidence, baseline_score, info)
            improved = verdict.valid and (best is None or verdict.score > best.score)
            record = AttemptRecord(len(attempts), phase, candidate, spec, evidence, verdict,
                                   time.monotonic() - started - evidence.elapsed, improved)
            attempts.append(record)
            if improved:
                best = record
            if self.on_attempt is not None:
                self.on_attempt(record)
            return improved

        stop_reason = ""
        for candidate in self.proposer.seed(dataset):
            if time.monotonic() >= deadline:
                stop_reason = "time budget used up during the seed population"
                break
            attempt(candidate, "seed")

        rounds, patience_left = 0, self.patience
        while not stop_reason:
            if rounds >= self.max_iterations:
                stop_reason = f"reached max_iterations={self.max_iterations}"
            elif patience_left <= 0:
                stop_reason = f"no improvement in {self.patience} rounds (patience)"
            elif time.monotonic() >= deadline:
                stop_reason = "time budget used up"
            else:
                candidate = self.proposer.propose(dataset, tuple(attempts))
                if candidate is None:
                    stop_reason = "the proposer has nothing more to try"
                else:
                    rounds += 1
                    patience_left = self.patience if attempt(candidate, "reflection") else patience_left - 1

        run = EngineeringRun(
            attempts=tuple(attempts), best_candidate=None, best_score=-math.inf, model=None, metric=dataset.metric,
            baseline_score=baseline_score, n_iterations=rounds, stop_reason=stop_reason,
        )
        if best is None:
            return run
        return self.refit(run, best.candidate, best.score, best.spec, dataset, deadline, best.evidence.elapsed)

    def baseline(self, dataset: Dataset, validation: ValidationSpec) -> float:
        """CV score of the trivial prior/mean model, oriented so that greater is better."""
        spec = SolutionCandidate("baseline", steps=()).to_spec(self.trainers, validation)
        values = cross_validate(self._compile(spec, dataset), dataset, spec)
        return oriented(float(np.mean(values)), dataset.metric_info)

    def evaluate(self, candidate: SolutionCandidate, dataset: Dataset, validation: ValidationSpec,
                 deadline: float) -> tuple[SolutionSpec, Evidence]:
        """Sandboxed CV and inspection of one candidate; one that cannot be built is error evidence."""
        try:
            spec = candidate.to_spec(self.trainers, validation)
        except SpecError as error:  # e.g. a proposer naming a trainer nobody registered
            spec = SolutionSpec(tuple(candidate.steps or ()), ModelSpec(candidate.trainer, dict(candidate.params)),
                                candidate.target_transform, validation)
            return spec, Evidence("error", error=f"SpecError: {error}", ignored_files=dataset.ignored_files)
        time_limit = min(self.candidate_time_limit, deadline - time.monotonic())
        return spec, self._evaluate(spec, dataset, time_limit)

    def refit(self, run: EngineeringRun, candidate: SolutionCandidate, score: float, spec: SolutionSpec,
              dataset: Dataset, deadline: float, cv_seconds: float) -> EngineeringRun:
        """The run with the best candidate refit on all rows and its test predictions.

        The refit happens even when the budget is spent: it gets what is left, but at least as long as
        the candidate's whole cross-validation took (one fit on all rows costs less than that)."""
        refit_limit = min(self.candidate_time_limit, max(deadline - time.monotonic(), cv_seconds))
        refit = run_isolated(_refit_job, spec, dataset, self._trainers_for(spec), self.steps,
                             self.random_state, limits=Limits(refit_limit, self.memory_limit))
        model, prediction = refit.value if refit.ok else (None, None)
        return replace(run, best_candidate=candidate, best_score=score, best_spec=spec, model=model,
                       test_prediction=prediction, refit_error=refit.error)

    def _compile(self, spec: SolutionSpec, dataset: Dataset):
        return compile_spec(spec, dataset.compile_context(self.random_state), self.trainers, self.steps)

    def _trainers_for(self, spec: SolutionSpec) -> dict[str, Trainer]:
        # Only the trainers in use travel to the child: others may not even be picklable.
        return {name: self.trainers[name] for name in model_names(spec) if name in self.trainers}

    def _evaluate(self, spec: SolutionSpec, dataset: Dataset, time_limit: float) -> Evidence:
        outcome = run_isolated(_evaluation_job, spec, dataset, self._trainers_for(spec), self.steps, self.random_state,
                               limits=Limits(time_limit, self.memory_limit))
        if not outcome.ok:
            return Evidence(outcome.status, error=outcome.error, ignored_files=dataset.ignored_files,
                            elapsed=outcome.elapsed)
        fold_values, predictions, inspection = outcome.value
        mean = float(np.mean(fold_values)) if fold_values else math.nan
        return Evidence("ok", mean, tuple(fold_values), inspection=inspection, ignored_files=dataset.ignored_files,
                        elapsed=outcome.elapsed, predictions=predictions)


def _evaluation_job(spec, dataset, trainers, steps, random_state) -> tuple[list[float], Any, Inspection]:
    """In the candidate's process: CV scores and out-of-fold predictions, then the leakage and data-usage inspection."""
    pipeline = compile_spec(spec, dataset.compile_context(random_state), trainers, steps)
    fold_values, predictions = cross_validate_predictions(pipeline, dataset, spec)
    return fold_values, predictions, inspect_candidate(spec, dataset, trainers, steps, random_state)


def _refit_job(spec, dataset, trainers, steps, random_state):
    pipeline = compile_spec(spec, dataset.compile_context(random_state), trainers, steps)
    return fit_and_predict(pipeline, dataset)


def json_number(value: float) -> float | None:
    """JSON has no infinities or NaN: a missing score is null."""
    return value if math.isfinite(value) else None
