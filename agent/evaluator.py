"""The evaluator: what every search uses to score solutions (the tree search and the seed loop alike).

`evaluate` cross-validates a spec in its own process, under a time and a memory limit, and runs the
leakage and data-usage probes beside the CV; the result is `Evidence` for a verifier to judge. A run stopped at
its time limit is OVER_TIME evidence (the budget's verdict, not the candidate's error). With `predict_test`, the
CV's fold models also predict the test set, and their average comes back with the evidence: a submission that
needs no refit. `baseline` scores the trivial prior/mean model, and `fit_all_rows` fits the chosen spec on every
training row, with the number of trees early stopping chose in its folds, and predicts the test set. Scores are
greater-is-better throughout (an error metric is negated). What a search proposes becomes a spec on the evaluator's
folds (`spec_of` a candidate, `blend_spec` of member specs), and its Python source (`pipeline_code`); `sample` draws
the rows a large table is explored on, every class filling the folds. The tree search knows all this by its
protocol (agent.search.protocols.TreeEvaluator), and solve_task builds the evaluator (`for_solve`).

A node that changes only the model of an earlier one reuses what depends on its preprocessing alone: each fold's
fitted steps (agent.engine.fit.FoldCache, on this machine's executor) and the probes' inspection.

A CV asked to (`keep_above`) keeps its fold models when, run on every fold, its mean score is at least that: a GBDT's
or a linear model's, whose size does not grow with the rows (a forest's does: 350 MB to 1.5 GB for five on 4.7k-22k rows). Its
evidence names them (Evidence.fold_models) and `kept_fold_models` reads them back: the submission averages them, with
no refit (agent.search.final).
"""

from __future__ import annotations

import math
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.candidate import Refit, SolutionCandidate
from agent.engine.compile import (
    NotRenderableError,
    compile_spec,
    ensemble_members,
    ensemble_spec,
    model_names,
    render_model,
)
from agent.engine.dataset import Dataset
from agent.engine.fit import (
    FoldCache,
    FoldGate,
    FoldStore,
    ModelStore,
    Pace,
    check_folds,
    cross_fit,
    cross_validate,
    fit_and_predict,
    fold_values,
    preprocessing_key,
)
from agent.engine.spec import ModelSpec, SolutionSpec, SpecError, ValidationSpec
from agent.engine.steps import StepOp
from agent.engine.trainers import Trainer, trainer_facts, trainer_registry
from agent.execution.executors import Executor, LocalExecutor
from agent.execution.free_code import PROBE_LEAK, PROBE_NOT_DETERMINISTIC, ScriptRun, run_script
from agent.execution.sandbox import DEFAULT_MEMORY_LIMIT, Limits, run_isolated
from agent.settings import DEFAULT_CANDIDATE_TIME_LIMIT, SolveSettings
from agent.verify.findings import (
    LEAK_TARGET,
    NOT_DETERMINISTIC,
    OVER_TIME,
    TIMEOUT,
    Evidence,
    Finding,
    Inspection,
)
from agent.verify.probes import inspect_candidate
from agent.verify.verifier import oriented

# Inspections kept for reuse: a run's distinct preprocessings are far fewer.
INSPECTIONS_KEPT = 256
# The model families whose fold models a CV may keep: their size follows the trees and leaves or the columns, not
# the rows.
KEPT_FAMILIES = ("gbdt", "linear")


@dataclass(frozen=True, eq=False)
class FoldModels:
    """A spec's CV fold models: for each ensemble member (or the one model), its fold models in fold order; empty
    when the fit failed."""

    members: tuple[tuple[Any, ...], ...]
    error: str = ""
    seconds: float = 0.0


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
        executor: Executor | None = None,
        reuse_preprocessing: bool = True,
        allow_unisolated_code: bool = False,
    ):
        self.cv = cv
        self.random_state = random_state
        self.trainers = trainer_registry(trainers)
        self.step_ops = dict(step_ops or {})  # the user's own step ops, beside the built-in ones
        self.candidate_time_limit = candidate_time_limit
        self.memory_limit = memory_limit
        # Where `evaluate` runs its jobs (this machine, or a Ray cluster); the refit stays on this machine, which
        # writes the outputs from its model.
        self.executor = executor if executor is not None else LocalExecutor()
        # Folds in files on this machine; a Ray cluster's workers do not share them.
        self.fold_cache = FoldCache() if reuse_preprocessing and isinstance(self.executor, LocalExecutor) else None
        self.model_cache = FoldCache() if isinstance(self.executor, LocalExecutor) else None  # kept fold models
        self.reuse_preprocessing = reuse_preprocessing
        self.allow_unisolated_code = allow_unisolated_code  # free code where the OS offers no isolation
        self._inspections: dict[str, Inspection] = {}  # preprocessing_key -> the probes' inspection
        self._data_tokens: weakref.WeakKeyDictionary[Dataset, str] = weakref.WeakKeyDictionary()

    @classmethod
    def for_solve(cls, settings: SolveSettings, folds: int, trainers: Mapping[str, Trainer] | None = None,
                  step_ops: Mapping[str, StepOp] | None = None, executor: Executor | None = None) -> Evaluator:
        """The evaluator a solve with `settings` scores its table with: on `folds` CV folds (the table's, by
        SolveSettings.folds_for), its seed the search's, its limits the settings'."""
        return cls(folds, settings.search.seed, trainers, step_ops,
                   candidate_time_limit=settings.candidate_time_limit, memory_limit=settings.memory_limit,
                   executor=executor, allow_unisolated_code=settings.allow_unisolated_code)

    @property
    def validation(self) -> ValidationSpec:
        return ValidationSpec(n_splits=self.cv, seed=self.random_state)

    def spec_of(self, candidate: SolutionCandidate) -> SolutionSpec:
        """The spec this evaluator runs for the candidate: its trainer's, on this evaluator's folds; SpecError when
        the candidate cannot be built (e.g. a trainer nobody registered)."""
        return candidate.to_spec(self.trainers, self.validation)

    def blend_spec(self, members: Sequence[SolutionSpec], weights: Sequence[float], *, intercept: float = 0.0,
                   link: str | None = None) -> SolutionSpec:
        """The spec this evaluator runs for a blend of member specs (agent.engine.compile.ensemble_spec), on its
        folds: a weighted average, or with a `link` a linear stack with an intercept."""
        return ensemble_spec(members, weights, self.validation, intercept=intercept, link=link)

    def sample(self, dataset: Dataset, rows: int) -> Dataset:
        """`rows` of the dataset's training rows, each class enough for this evaluator's folds, drawn with its seed
        (Dataset.sample): the rows a large table is explored on."""
        return dataset.sample(rows, self.cv, self.random_state)

    def pipeline_code(self, spec: SolutionSpec, dataset: Dataset) -> str:
        """The Python source of the spec's pipeline, as this evaluator compiles it; "" when it cannot be rendered."""
        try:
            return render_model(spec, dataset, self.trainers, self.random_state, self.step_ops)
        except (NotRenderableError, SpecError, KeyError, TypeError, ValueError):
            return ""

    def baseline(self, dataset: Dataset) -> float:
        """CV score of the trivial prior/mean model, oriented so that greater is better; DatasetError when the
        training rows are too few for the CV folds."""
        spec = self.spec_of(SolutionCandidate("baseline", steps=()))
        check_folds(dataset, self.cv)
        pipeline = compile_spec(spec, dataset.compile_context(self.random_state), self.trainers, self.step_ops)
        return oriented(float(np.mean(cross_validate(pipeline, dataset, spec))), dataset.metric_info)

    def evaluate_candidate(self, candidate: SolutionCandidate, dataset: Dataset, deadline: float, *,
                           predict_test: bool = False, gate: FoldGate | None = None,
                           keep_above: float | None = None,
                           expected_trees: Mapping[str, float] | None = None) -> tuple[SolutionSpec, Evidence]:
        """The candidate's spec and its evidence (see evaluate); a candidate that cannot be built is error
        evidence."""
        try:
            spec = self.spec_of(candidate)
        except SpecError as error:  # e.g. a proposer naming a trainer nobody registered
            spec = SolutionSpec(tuple(candidate.steps or ()), ModelSpec(candidate.trainer, dict(candidate.params)),
                                candidate.target_transform, self.validation)
            return spec, Evidence("error", error=f"SpecError: {error}", ignored_files=dataset.ignored_files,
                                  rows=len(dataset.y))
        return spec, self.evaluate(spec, dataset, deadline, predict_test=predict_test, gate=gate,
                                   keep_above=keep_above, expected_trees=expected_trees)

    def evaluate(self, spec: SolutionSpec, dataset: Dataset, deadline: float = math.inf, *,
                 predict_test: bool = False, gate: FoldGate | None = None, keep_above: float | None = None,
                 expected_trees: Mapping[str, float] | None = None) -> Evidence:
        """Sandboxed CV and inspection of one spec, stopped at `deadline` (a time.monotonic() value); with
        `predict_test`, the fold models' averaged test-set predictions too; with `gate`, scored fold by fold and
        stopped once it cannot beat the gate's bar (Evidence.stopped_early); with `keep_above`, its fold models kept
        (_keeps_models_of) when its CV, run on every fold, scores at least that on the mean (greater is better); with
        `expected_trees`, its first fold's early stopping knows the trees it should keep (fit.cross_fit)."""
        time_limit = min(self.candidate_time_limit, deadline - time.monotonic())
        told = dict(expected_trees or {})
        key = self._preprocessing_key(spec, dataset)
        inspection = self._inspections.get(key) if key is not None else None
        store = self.fold_cache.store(key) if key is not None and self.fold_cache is not None else None
        models = (self.model_cache.models(uuid.uuid4().hex)
                  if keep_above is not None and self._keeps_models_of(spec) else None)
        outcome = self.executor.run(_evaluation_job, spec, self.executor.share(dataset), self._trainers_for(spec),
                                    self.step_ops, self.random_state, predict_test, store, inspection is None, gate,
                                    time_limit, models, keep_above, told,
                                    limits=Limits(time_limit, self.memory_limit))
        for cache in (self.fold_cache, self.model_cache):
            if cache is not None:
                cache.prune()
        rows = len(dataset.y)
        if outcome.status == TIMEOUT:
            return Evidence(OVER_TIME, error=f"over time: stopped at its time cap of {max(time_limit, 0.0):.1f} s "
                                             f"({outcome.error})", ignored_files=dataset.ignored_files,
                            elapsed=outcome.elapsed, rows=rows)
        if not outcome.ok:
            return Evidence(outcome.status, error=outcome.error, ignored_files=dataset.ignored_files,
                            elapsed=outcome.elapsed, rows=rows)
        values, predictions, test_prediction, rounds, seconds, inspected, projected, kept, job_seconds = outcome.value
        overhead = max(outcome.elapsed - job_seconds, 0.0)
        if projected:
            return Evidence(OVER_TIME, fold_values=tuple(values),
                            error=f"over time: stopped after {len(values)} of {spec.validation.n_splits} folds "
                                  f"({outcome.elapsed:.1f} s), which project about {projected:.1f} s for all, over "
                                  f"its time cap of {max(time_limit, 0.0):.1f} s", ignored_files=dataset.ignored_files,
                            elapsed=outcome.elapsed, rows=rows, fit_seconds=tuple(seconds),
                            folds=spec.validation.n_splits, projected_seconds=projected, overhead_seconds=overhead)
        if inspection is None:
            inspection = inspected
            if key is not None and len(self._inspections) < INSPECTIONS_KEPT:
                self._inspections[key] = inspection
        mean = float(np.mean(values)) if values else math.nan
        return Evidence("ok", mean, tuple(values), inspection=inspection, ignored_files=dataset.ignored_files,
                        elapsed=outcome.elapsed, predictions=predictions, test_prediction=test_prediction, rows=rows,
                        fit_seconds=tuple(seconds), stopped_rounds=rounds, folds=spec.validation.n_splits,
                        fold_models=models.key if kept else "", overhead_seconds=overhead,
                        expected_trees=told)

    def _keeps_models_of(self, spec: SolutionSpec) -> bool:
        """May a CV of `spec` keep its fold models: on this machine, every model of it of KEPT_FAMILIES."""
        return self.model_cache is not None and all(trainer_facts(name).family in KEPT_FAMILIES
                                                    for name in model_names(spec))

    def kept_fold_models(self, key: str) -> tuple[Any, ...] | None:
        """The fold models a CV kept (its Evidence.fold_models), in fold order; None when they were not kept (or
        were pruned since)."""
        return self.model_cache.models(key).load() if self.model_cache is not None and key else None

    def evaluate_script(self, source: str, dataset: Dataset, run_folder: Path,
                        deadline: float = math.inf) -> tuple[Evidence, ScriptRun]:
        """A free-code script run confined in `run_folder` and scored by the engine itself on this evaluator's folds
        (agent.execution.free_code.run_script), stopped at `deadline`: its evidence (the leakage probe's result as a
        finding), and the run, which holds the script's test predictions."""
        time_limit = min(self.candidate_time_limit, deadline - time.monotonic())
        run = run_script(source, dataset, run_folder, Limits(time_limit, self.memory_limit), self.validation,
                         allow_unisolated=self.allow_unisolated_code)
        findings = {
            PROBE_LEAK: (Finding(LEAK_TARGET, message="the script's out-of-fold predictions change when only the "
                                                      "validation fold's targets change: it learns from the target "
                                                      "outside the CV folds"),),
            PROBE_NOT_DETERMINISTIC: (Finding(NOT_DETERMINISTIC, message="the script does not repeat itself, so "
                                                                         "leakage was not checked"),),
        }.get(run.leak_probe, ())
        status = OVER_TIME if run.status == TIMEOUT else run.status
        return Evidence(status, run.metric_value, run.fold_values, run.error, Inspection(findings),
                        dataset.ignored_files, run.elapsed, predictions=run.oof, test_prediction=run.test_prediction,
                        rows=len(dataset.y)), run

    def refit(self, spec: SolutionSpec, dataset: Dataset, deadline: float, cv_seconds: float,
              rounds: Mapping[str, float] | None = None) -> Refit:
        """The spec fitted on all rows, with its test predictions, for a search that does not budget its refit (the
        seed loop): it gets what is left, but at least as long as the spec's whole cross-validation took (one fit
        on all rows costs less than that)."""
        return self.fit_all_rows(spec, dataset, max(deadline - time.monotonic(), cv_seconds), rounds)

    def fit_all_rows(self, spec: SolutionSpec, dataset: Dataset, time_limit: float,
                     rounds: Mapping[str, float] | None = None) -> Refit:
        """The spec fitted on every training row within `time_limit` seconds, early-stopping models with the number
        of trees their CV folds kept (`rounds`, Evidence.stopped_rounds), and its test predictions."""
        outcome = run_isolated(_refit_job, spec, dataset, self._trainers_for(spec), self.step_ops,
                               self.random_state, dict(rounds or {}),
                               limits=Limits(min(self.candidate_time_limit, time_limit), self.memory_limit))
        model, prediction = outcome.value if outcome.ok else (None, None)
        return Refit(model, prediction, outcome.error, outcome.elapsed)

    def fit_fold_models(self, spec: SolutionSpec, dataset: Dataset, time_limit: float) -> FoldModels:
        """The spec's CV fold models fitted again within `time_limit` seconds, each ensemble member on its own folds
        as its node's CV fitted it: the models whose averaged test predictions a fold-average submission holds."""
        outcome = run_isolated(_fold_models_job, spec, dataset, self._trainers_for(spec), self.step_ops,
                               self.random_state,
                               limits=Limits(min(self.candidate_time_limit, time_limit), self.memory_limit))
        return FoldModels(outcome.value if outcome.ok else (), outcome.error, outcome.elapsed)

    def _preprocessing_key(self, spec: SolutionSpec, dataset: Dataset) -> str | None:
        """What the spec's fitted preprocessing and inspection depend on (fit.preprocessing_key); None when a step
        is the user's own, which may not repeat itself, or when nothing is reused."""
        if not self.reuse_preprocessing or any(step.op in self.step_ops for step in spec.steps):
            return None
        token = self._data_tokens.setdefault(dataset, uuid.uuid4().hex)  # this very Dataset, for as long as it lives
        return preprocessing_key(spec, token, self.random_state)

    def _trainers_for(self, spec: SolutionSpec) -> dict[str, Trainer]:
        # Only the trainers in use travel to the child: others may not even be picklable.
        return {name: self.trainers[name] for name in model_names(spec) if name in self.trainers}


def _evaluation_job(spec, dataset, trainers, step_ops, random_state, predict_test, store: FoldStore | None,
                    inspect: bool, gate: FoldGate | None, time_limit: float, models: ModelStore | None,
                    keep_above: float | None, expected_trees: Mapping[str, float]):
    """In the candidate's process: CV scores, out-of-fold (and averaged test) predictions, the trees early stopping
    kept and each fold's fit seconds (each fold's preprocessing from `store` when an earlier node fitted it), then
    the leakage and data-usage inspection unless an earlier node with the same preprocessing had it (None); for
    a CV its folds showed cannot finish within `time_limit` (stopped there, not inspected), its projected seconds
    (0 otherwise); and whether its fold models were saved to `models`: when its CV ran every fold and scored at
    least `keep_above` on the mean; and its own seconds, the rest of what the caller waited being its fixed cost.
    `expected_trees`: what its first fold's early stopping starts from (fit.cross_fit)."""
    started = time.perf_counter()
    pipeline = compile_spec(spec, dataset.compile_context(random_state), trainers, step_ops)
    pace = Pace(time_limit - (time.perf_counter() - started))
    fitted = cross_fit(pipeline, dataset, spec, predict_test=predict_test and dataset.X_test is not None,
                       keep_models=models is not None, preprocessed=store, gate=gate, pace=pace,
                       expected_trees=expected_trees)
    values = fold_values(fitted, dataset)
    kept = (models is not None and fitted.complete
            and oriented(float(np.mean(values)), dataset.metric_info) >= keep_above and models.save(fitted.models))
    fitted.models.clear()  # not held through the inspection's fits
    inspection = (inspect_candidate(spec, dataset, trainers, step_ops, random_state)
                  if inspect and not pace.projected else None)
    return (values, fitted.predictions, fitted.test_prediction, fitted.stopped_rounds, fitted.fit_seconds, inspection,
            pace.projected, kept, time.perf_counter() - started)


def _fold_models_job(spec, dataset, trainers, step_ops, random_state):
    context = dataset.compile_context(random_state)
    return tuple(tuple(cross_fit(compile_spec(member, context, trainers, step_ops), dataset, member,
                                 keep_models=True).models)
                 for member in ensemble_members(spec) or [spec])


def _refit_job(spec, dataset, trainers, step_ops, random_state, rounds):
    pipeline = compile_spec(spec, dataset.compile_context(random_state), trainers, step_ops)
    return fit_and_predict(pipeline, dataset, rounds)
