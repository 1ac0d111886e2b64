"""The seed loop ("agentic AutoML"): evaluate a seed population, then reflect — propose, verify, keep the best.

Semantics:
  - the proposer's seed candidates are always evaluated;
  - `max_iterations` and `patience` bound only the reflection rounds that follow (`run.rounds`; `run.n_iterations`
    counts every attempt, seeds included);
  - a verified attempt that improves on the best resets patience, any other round uses one up;
  - a candidate that fails (raises, hangs, runs out of memory, scores NaN) scores -inf and the run goes on;
  - only an attempt with a valid verdict can become the best, and the best is refit on all the data.
Scores are greater-is-better throughout (an error metric is negated, as in scikit-learn's scorers);
`summary()` and verdict reasons show values in the metric's own units. The loop keeps no journal: its
`AttemptRecord`s are its record, the same record a tree search's nodes are read as (Journal.attempts).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from agent.candidate import AttemptRecord, EngineeringRun, SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.steps import StepOp
from agent.engine.trainers import Trainer
from agent.evaluator import Evaluator
from agent.execution.sandbox import DEFAULT_MEMORY_LIMIT
from agent.settings import DEFAULT_CANDIDATE_TIME_LIMIT
from agent.verify.verifier import DeterministicVerifier, Verifier


@runtime_checkable
class CandidateProposer(Protocol):
    """The seed loop's proposer: a seed population, then one candidate per reflection round from every attempt so far.

    Not the tree search's TreeProposer (agent.search.protocols), on purpose: this loop has no tree, so no journal of
    nodes to pass, no parent to improve or failed node to debug, and no hooks (deadline, observe, blend) to call; its
    history is the flat list of AttemptRecords. Folding it into TreeProposer would give every seed-loop proposer three
    actions it cannot answer, or every tree proposer a `seed` it has no use for."""

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
        used = sum(attempt.action == "reflection" for attempt in attempts)
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
        step_ops: Mapping[str, StepOp] | None = None,
        time_budget: float | None = None,
        candidate_time_limit: float = DEFAULT_CANDIDATE_TIME_LIMIT,
        memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
        on_attempt: Callable[[AttemptRecord], None] | None = None,
    ):
        self.proposer = proposer
        self.verifier = verifier if verifier is not None else DeterministicVerifier()
        self.max_iterations = max_iterations
        self.patience = patience
        self.time_budget = time_budget
        self.on_attempt = on_attempt
        # Rendered solutions must reproduce the CV score, so "no seed" still means a fixed one.
        self.evaluator = Evaluator(cv, 0 if random_state is None else random_state, trainers, step_ops,
                                   candidate_time_limit=candidate_time_limit, memory_limit=memory_limit)

    @property
    def trainers(self) -> Mapping[str, Trainer]:
        return self.evaluator.trainers

    def solve(self, dataset: Dataset) -> EngineeringRun:
        started = time.monotonic()
        deadline = started + self.time_budget if self.time_budget is not None else math.inf
        info = dataset.metric_info
        evaluator = self.evaluator
        baseline_score = evaluator.baseline(dataset)

        attempts: list[AttemptRecord] = []
        best: AttemptRecord | None = None

        def attempt(candidate: SolutionCandidate, phase: str) -> bool:
            """Evaluate, verify and record one candidate; True when it became the best."""
            nonlocal best
            spec, evidence = evaluator.evaluate_candidate(candidate, dataset, deadline)
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
            baseline_score=baseline_score, rounds=rounds, stop_reason=stop_reason,
        )
        if best is None:
            return run
        # early-stopping models refit with the trees their CV folds kept on average, so the refit is the model CV scored
        refit = evaluator.refit(best.spec, dataset, deadline, best.evidence.elapsed, best.evidence.stopped_rounds)
        return replace(run, best_candidate=best.candidate, best_score=best.score, best_spec=best.spec,
                       model=refit.model, test_prediction=refit.test_prediction, refit_error=refit.error)
