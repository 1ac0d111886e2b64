"""The evaluator: what every search uses to score solutions (the tree search and the seed loop alike).

`evaluate` cross-validates a spec in its own process, under a time and a memory limit, and runs the
leakage and data-usage probes beside the CV; the result is `Evidence` for a verifier to judge.
`baseline` scores the trivial prior/mean model, and `refit` fits the chosen spec on every training row
and predicts the test set. Scores are greater-is-better throughout (an error metric is negated).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent.candidate import SolutionCandidate
from agent.engine.compile import compile_spec, model_names
from agent.engine.dataset import Dataset
from agent.engine.fit import check_folds, cross_validate, cross_validate_predictions, fit_and_predict
from agent.engine.sandbox import DEFAULT_MEMORY_LIMIT, Limits, run_isolated
from agent.engine.spec import ModelSpec, SolutionSpec, SpecError, ValidationSpec
from agent.engine.steps import StepOp
from agent.engine.trainers import Trainer, trainer_registry
from agent.verify.findings import Evidence, Inspection
from agent.verify.probes import inspect_candidate
from agent.verify.verifier import oriented

DEFAULT_CANDIDATE_TIME_LIMIT = 600.0


@dataclass(frozen=True, eq=False)
class Refit:
    """The chosen spec fitted on every training row; model and prediction are None when the refit failed."""

    model: Any
    test_prediction: Any  # None too when the dataset has no test set
    error: str = ""


class Evaluator:
    def __init__(
        self,
        cv: int = 5,
        random_state: int = 0,
        trainers: Mapping[str, Trainer] | None = None,
        step_ops: Mapping[str, StepOp] | None = None,
        *,
        candidate_time_limit: float = DEFAULT_CANDIDATE_TIME_LIMIT,
        memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
    ):
        self.cv = cv
        self.random_state = random_state
        self.trainers = trainer_registry(trainers)
        self.step_ops = dict(step_ops or {})  # the user's own step ops, beside the built-in ones
        self.candidate_time_limit = candidate_time_limit
        self.memory_limit = memory_limit

    @property
    def validation(self) -> ValidationSpec:
        return ValidationSpec(n_splits=self.cv, seed=self.random_state)

    def baseline(self, dataset: Dataset) -> float:
        """CV score of the trivial prior/mean model, oriented so that greater is better; DatasetError when the
        training rows are too few for the CV folds."""
        check_folds(dataset, self.cv)
        spec = SolutionCandidate("baseline", steps=()).to_spec(self.trainers, self.validation)
        pipeline = compile_spec(spec, dataset.compile_context(self.random_state), self.trainers, self.step_ops)
        return oriented(float(np.mean(cross_validate(pipeline, dataset, spec))), dataset.metric_info)

    def evaluate_candidate(self, candidate: SolutionCandidate, dataset: Dataset,
                           deadline: float) -> tuple[SolutionSpec, Evidence]:
        """The candidate's spec and its evidence; a candidate that cannot be built is error evidence."""
        try:
            spec = candidate.to_spec(self.trainers, self.validation)
        except SpecError as error:  # e.g. a proposer naming a trainer nobody registered
            spec = SolutionSpec(tuple(candidate.steps or ()), ModelSpec(candidate.trainer, dict(candidate.params)),
                                candidate.target_transform, self.validation)
            return spec, Evidence("error", error=f"SpecError: {error}", ignored_files=dataset.ignored_files)
        return spec, self.evaluate(spec, dataset, deadline)

    def evaluate(self, spec: SolutionSpec, dataset: Dataset, deadline: float = math.inf) -> Evidence:
        """Sandboxed CV and inspection of one spec, stopped at `deadline` (a time.monotonic() value)."""
        time_limit = min(self.candidate_time_limit, deadline - time.monotonic())
        outcome = run_isolated(_evaluation_job, spec, dataset, self._trainers_for(spec), self.step_ops,
                               self.random_state, limits=Limits(time_limit, self.memory_limit))
        if not outcome.ok:
            return Evidence(outcome.status, error=outcome.error, ignored_files=dataset.ignored_files,
                            elapsed=outcome.elapsed)
        fold_values, predictions, inspection = outcome.value
        mean = float(np.mean(fold_values)) if fold_values else math.nan
        return Evidence("ok", mean, tuple(fold_values), inspection=inspection, ignored_files=dataset.ignored_files,
                        elapsed=outcome.elapsed, predictions=predictions)

    def refit(self, spec: SolutionSpec, dataset: Dataset, deadline: float, cv_seconds: float) -> Refit:
        """The spec fitted on all rows, with its test predictions.

        The refit happens even when the budget is spent: it gets what is left, but at least as long as
        the spec's whole cross-validation took (one fit on all rows costs less than that)."""
        refit_limit = min(self.candidate_time_limit, max(deadline - time.monotonic(), cv_seconds))
        outcome = run_isolated(_refit_job, spec, dataset, self._trainers_for(spec), self.step_ops,
                               self.random_state, limits=Limits(refit_limit, self.memory_limit))
        model, prediction = outcome.value if outcome.ok else (None, None)
        return Refit(model, prediction, outcome.error)

    def _trainers_for(self, spec: SolutionSpec) -> dict[str, Trainer]:
        # Only the trainers in use travel to the child: others may not even be picklable.
        return {name: self.trainers[name] for name in model_names(spec) if name in self.trainers}


def _evaluation_job(spec, dataset, trainers, step_ops, random_state) -> tuple[list[float], Any, Inspection]:
    """In the candidate's process: CV scores and out-of-fold predictions, then the leakage and data-usage inspection."""
    pipeline = compile_spec(spec, dataset.compile_context(random_state), trainers, step_ops)
    fold_values, predictions = cross_validate_predictions(pipeline, dataset, spec)
    return fold_values, predictions, inspect_candidate(spec, dataset, trainers, step_ops, random_state)


def _refit_job(spec, dataset, trainers, step_ops, random_state):
    pipeline = compile_spec(spec, dataset.compile_context(random_state), trainers, step_ops)
    return fit_and_predict(pipeline, dataset)
