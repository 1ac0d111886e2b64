"""`agent solve` as a library call: set up a task folder, run the search, write the run folder.

Orchestration only. The search is agent.search's tree search (AutoMind section 3.2), with the built-in
proposer, or with the knowledge proposer (agent.knowledge) when `use_kb` is set; with `llm` (a model id), the LLM
proposer (agent.llm) asks that model for each step and falls back on the other. With `experience` (on by default),
the experience packs in use (agent.memory.experience) draft first and order the retrieved tricks. The run folder is
agent.outputs'. The seed loop (agent.seedloop) is a Python API of its own, not a way to solve here.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from contextlib import closing
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from agent.candidate import EngineeringRun, json_number
from agent.engine.dataset import Dataset, DatasetError
from agent.engine.fit import check_folds
from agent.engine.runtime import ClassColumnsError
from agent.engine.screening import screen_wide_table
from agent.engine.spec import ValidationSpec
from agent.engine.trainers import trainer_registry
from agent.evaluator import Evaluator
from agent.execution import isolation, sandbox
from agent.execution.executors import make_executor
from agent.execution.sandbox import Limits, error_tail
from agent.knowledge.proposer import KnowledgeTreeProposer
from agent.llm.coder import FreeCoder
from agent.llm.proposer import LLMProposer
from agent.memory.experience import (
    PACK_VERSION,
    ChangeGains,
    ExperiencePack,
    change_gains_near,
    effects_near,
    packs_in_use,
    portfolio_drafts,
)
from agent.memory.portfolio_proposer import PortfolioProposer
from agent.memory.recorder import MemorySession
from agent.memory.records import TaskSignature
from agent.memory.store import MemoryStore
from agent.outputs.report import write_report
from agent.outputs.run_folder import (
    SOLUTION_FILE,
    SUBMISSION_FILE,
    AnytimeSubmission,
    SubmissionError,
    open_trace,
    submission_table,
    trace_line,
    write_atomically,
    write_run_record,
    write_solution,
    write_submission,
    write_trace_line,
)
from agent.outputs.saved_model import read_model_record, save_final_model
from agent.search.builtin import DRAFT_FAMILIES, BuiltinTreeProposer
from agent.search.clock import BudgetClock
from agent.search.final import FOLD_AVERAGE, KEPT_AND_REFIT, engineering_run
from agent.search.fit_time import FitTimeModel, calibration_seconds
from agent.search.journal import Journal, Node
from agent.search.protocols import TreeProposer
from agent.search.tree import TreeSearch
from agent.settings import SolveSettings
from agent.verify.verifier import natural
from kb.config import resolve_home
from kb.llm import LLMClient
from kb.store import KnowledgeBase
from retrieval.profile import SAMPLE_SUBMISSION_FILE, TaskProfile

FREE_CODE_DIR = "free_code"  # the run folder's folder for free code (the LLM's scripts and their inputs)
ERROR_FILE = "error.log"  # the traceback of an error that stopped the search (its anytime submission stays)


class KnowledgeBaseMissing(ValueError):
    """--use-kb with a knowledge base that holds no tricks."""


class BudgetTooSmall(ValueError):
    """A time budget that set-up leaves too little of for any node to finish."""


# The least a search needs once the task is set up: the first node on a small table (about 2 s, its worker's start
# included) and the outputs (agent.search.clock.OUTPUT_SECONDS).
MIN_SEARCH_SECONDS = 5.0


@dataclass(frozen=True)
class SolveResult:
    out_dir: Path
    run: EngineeringRun
    submission_path: Path | None  # None when no candidate was verified or the refit failed
    solution_path: Path | None
    report_path: Path
    notes: tuple[str, ...]
    journal: Journal  # the solution tree


def default_out_dir(profile: TaskProfile) -> Path:
    return Path("runs") / f"{profile.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def open_knowledge(home: Path | str | None = None, kb: KnowledgeBase | None = None,
                   chroma_url: str | None = None) -> KnowledgeBase:
    """The knowledge base for --use-kb (its vectors on the Chroma server at `chroma_url`, if given); an empty one
    is an error, not a silent fall-back."""
    where = kb.home if kb is not None else resolve_home(home)
    message = (f"the knowledge base in {where} is empty: run `kb ingest --bundled` (with the same --home) "
               "before `agent solve --use-kb`")
    if kb is None and not KnowledgeBase.exists(where):  # do not create a home just to find it empty
        raise KnowledgeBaseMissing(message)
    base = kb if kb is not None else KnowledgeBase(where, chroma_url=chroma_url)
    if base.count() == 0:
        raise KnowledgeBaseMissing(message)
    return base


def solve_task(
    profile: TaskProfile,
    settings: SolveSettings,
    out_dir: Path,
    *,
    proposer: TreeProposer | None = None,
    on_node: Callable[[Node, Journal], None] | None = None,
    kb: KnowledgeBase | None = None,
    kb_home: Path | str | None = None,
    memory: MemoryStore | None = None,
    reuse_own_memory: bool = False,
    chroma_url: str | None = None,
    started: float | None = None,
    exit_seconds: float = 0.0,
) -> SolveResult:
    """Solve the task into `out_dir`. With `settings.use_kb`, the knowledge base is `kb` or the one in `kb_home`.
    With `settings.experience` and no `proposer` passed, the experience packs in use (the bundled one and those added
    to `kb_home`) draft after the reference draft (agent.memory.portfolio_proposer) and order the retrieved tricks and
    each node's built-in changes by their measured effect.
    With `memory`, the case library moves the tree search (agent.memory.proposer) and keeps a memory of each node
    as it finishes and of the run; the task's own memories are left out unless `reuse_own_memory`.
    The time budget runs from `started` (a time.monotonic() value; default: now): a caller that read and profiled
    the task first passes when it began, so that its imports and the profiling count (they took 1-7 s of 60 s runs
    whose own clock had started at this call, and one such run ended at 63.5 s). The last `exit_seconds` of the
    budget are left to the caller for what follows this call: the command line's process exits in them."""
    started = time.monotonic() if started is None else started
    started_at = time.time() - (time.monotonic() - started)  # the same moment on the wall clock, for run.json
    sandbox.warm_up()  # the candidates' worker imports its libraries while the task is read
    # An experience pack that cannot be read stops the solve here, before anything is written (PackError). The
    # packs move casebook's own proposers only: a proposer the caller passed drafts as it is.
    packs = packs_in_use(resolve_home(kb_home)) if settings.experience and proposer is None else []
    signature = TaskSignature.of(profile)
    knowledge = None
    # Built-in changes in the order of their measured gain on the nearest pool tasks (None: today's order).
    change_gains = change_gains_near([pack for _, pack in packs], signature) if packs else None
    change_order = change_gains.order if change_gains is not None else None
    if proposer is None and settings.use_kb:
        base = open_knowledge(kb_home, kb, chroma_url)
        proposer = knowledge = KnowledgeTreeProposer(
            base, trick_prob=settings.search.trick_prob, families=settings.models or DRAFT_FAMILIES,
            trick_effects=effects_near([pack for _, pack in packs], signature) if packs else None,
            change_order=change_order)
    elif proposer is None:
        proposer = BuiltinTreeProposer(families=settings.models or DRAFT_FAMILIES, change_order=change_order)
    portfolio = PortfolioProposer(proposer, portfolio_drafts(packs, signature), families=settings.models,
                                  node_seconds=settings.search.node_seconds) if packs else None
    proposer = portfolio if portfolio is not None else proposer
    session = MemorySession(memory, profile, proposer, reuse_own=reuse_own_memory, node_seconds=settings.search.node_seconds) \
        if memory is not None else None
    proposer = session.proposer if session is not None else proposer
    # The whole solve's budget, set-up and outputs included: from its start, the proposers' set-up counted.
    clock = BudgetClock.starting(settings.search, started, kept=exit_seconds)
    # The CV's folds, decided once from the table as profiled: fewer than settings.cv on a large table.
    folds = settings.folds_for(profile.n_rows)
    try:
        dataset = Dataset.from_profile(profile, min_class_rows=folds)
        check_folds(dataset, folds)  # before the run folder exists, so a too-small table leaves nothing behind
        dataset, screening = screen_wide_table(dataset, settings.search.seed)
        check_submission_writer(dataset)  # a shape the writer cannot handle is found now, not after the budget
    except DatasetError as error:
        if memory is not None:  # the case library remembers a task that could not be set up
            memory.write_setup_failure(profile.task_dir, str(error), name=profile.name, target=profile.target)
        raise
    notes: list[str] = [screening.note] if screening is not None else []
    if screening is not None:  # the proposers see the columns the search learns from
        profile = replace(profile, columns=dataset.columns)
    if dataset.dropped_classes:
        rare = dataset.dropped_classes
        predicted = (f"each class's probability is its share of the training rows ("
                     f"{', '.join(f'{label!r}: {share:.4f}' for label, share in rare.items())})"
                     if dataset.metric_info.needs_proba else "so never predicted")
        notes.insert(0, f"{profile.task_dir / 'train.csv'}: left out the rows of class{'es' if len(rare) > 1 else ''} "
                        f"{', '.join(repr(label) for label in rare)} of {profile.target!r}: fewer rows than the "
                        f"{dataset.min_class_rows} CV folds, {predicted} (pass a smaller --cv to keep them)")
    if clock.left() < MIN_SEARCH_SECONDS:
        budget, spent = settings.search.time_budget, time.time() - started_at
        kept = f" and the {exit_seconds:.1f} s kept for the process's exit" if exit_seconds else ""
        raise BudgetTooSmall(f"--time-budget {budget:g} leaves {max(budget - spent - exit_seconds, 0):.1f} s after "
                             f"{spent:.1f} s of set-up{kept}, less than the {MIN_SEARCH_SECONDS:g} s a first node and "
                             f"the outputs need; give at least {math.ceil(spent + exit_seconds + MIN_SEARCH_SECONDS)} s")
    if settings.llm is not None:
        proposer = _llm_proposer(settings, proposer, dataset, out_dir, clock.deadline,
                                 ValidationSpec(n_splits=folds, seed=settings.search.seed))
    # before the run folder exists, so a Ray cluster that cannot be reached leaves nothing behind
    executor = make_executor(settings.executor, address=settings.ray_address, workers=settings.workers)
    settings = replace(settings, workers=executor.workers)  # run.json records how many nodes ran at once
    if session is not None:
        session.start()
    journal, final_fit, failure = Journal(), None, ""
    anytime = AnytimeSubmission(out_dir, dataset, trainer_registry())
    with open_trace(out_dir) as trace:

        def record_node(node: Node, journal: Journal) -> None:
            usage = proposer.take_usage()
            write_trace_line(trace, trace_line(node, journal, usage.to_dict() if usage is not None else None))
            if on_node is not None:
                on_node(node, journal)
            if session is not None:
                session.record(node)

        with closing(executor):
            # loading the data, joining Ray and leaving it come out of the search's budget
            search_clock = clock.from_now(executor.close_seconds)
            evaluator = Evaluator.for_solve(settings, folds, executor=executor)
            fit_times = machine_fit_times()
            search = TreeSearch(proposer, evaluator, profile, dataset, settings, clock=search_clock, journal=journal,
                                on_node=record_node, on_best=anytime.offer, script_dir=out_dir / FREE_CODE_DIR,
                                fit_times=fit_times.model if fit_times is not None else None)
            try:
                result = search.run()
                run, final_fit = result.run, result.final_fit
            except Exception as error:  # noqa: BLE001 - whatever broke, the run keeps its anytime submission
                failure = f"{type(error).__name__}: {error}"
                write_atomically(out_dir / ERROR_FILE, traceback.format_exc())
                run = engineering_run(journal, dataset.metric, _baseline_or_nan(evaluator, dataset), 0,
                                      f"stopped by an error: {failure}")

    submission_path, final_written = None, False
    if run.test_prediction is not None:
        try:
            submission_path, final_written = write_submission(out_dir, dataset, run.test_prediction), True
            anytime.node = journal.best()
            anytime.how = final_fit.how if final_fit is not None else "the best candidate refit on every row"
        except SubmissionError as error:
            notes.append(f"the final predictions make no valid submission ({error})")
    elif run.refit_error:
        notes.append(f"refitting the best candidate failed: {error_tail(run.refit_error, 1)}")
    if not final_written and anytime.node is not None:
        submission_path = out_dir / SUBMISSION_FILE
        notes.append(f"submission.csv is node {anytime.node.id}'s: its CV fold models' test predictions averaged")
    if submission_path is None:  # nothing verified: the checked trivial baseline, said loudly
        submission_path = anytime.baseline()
        notes.append("no node was verified within the budget: submission.csv holds the trivial baseline (class "
                     "shares or the mean target), not a model")
    if failure:
        notes.append(f"the search stopped on an error ({failure}; traceback in {ERROR_FILE})")
    if final_written:
        solution_path = write_solution(out_dir, dataset, run, journal, evaluator.trainers,
                                       fold_average=final_fit is not None and final_fit.how in (FOLD_AVERAGE, KEPT_AND_REFIT),
                                       refit_members=final_fit.refit_members if final_fit is not None else ())
    else:  # the anytime submission's node's, when it could be rendered
        solution_path = out_dir / SOLUTION_FILE if (out_dir / SOLUTION_FILE).is_file() else None
    model_path, model_note = save_final_model(out_dir, dataset, run, final_fit, anytime.node, final_written, evaluator,
                                              settings.save_fold_models)
    if model_note:
        notes.append(model_note)
    if session is not None:
        try:
            session.finish(run, journal, solution_path)
        except Exception as error:  # noqa: BLE001 - the submission stands; only the case library misses this run
            notes.append(f"the case library did not record this run ({type(error).__name__}: {error})")
    record = _run_record(profile, settings, folds, dataset, run, journal, proposer, notes, started_at, submission_path,
                         solution_path)
    # How the submission was made: a refit on every row, or the CV fold models averaged (agent.search.final).
    write_run_record(out_dir, {**record, "final_fit": final_fit.to_dict() if final_fit is not None else None,
                               "submission": anytime.record(), "error": failure or None,
                               "model": read_model_record(out_dir) if model_path is not None else None,
                               "screening": screening.to_dict() if screening is not None else None,
                               "fit_times": fit_times.to_dict() if fit_times is not None else None,
                               "experience": _experience_record(packs, portfolio, knowledge, change_gains)})
    return SolveResult(out_dir, run, submission_path, solution_path, write_report(out_dir), tuple(notes), journal)


@dataclass(frozen=True)
class MachineFitTimes:
    """The bundled fit-time model scaled to this machine (its `machine_seconds` are the calibration fit's here) and
    that fit's seconds on the model's own machine (None: unknown, the model unscaled), as run.json records them."""

    model: FitTimeModel
    reference_seconds: float | None

    def to_dict(self) -> dict[str, Any]:
        here, there = self.model.machine_seconds, self.reference_seconds
        return {"calibration_seconds": here, "reference_seconds": there,
                "machine_factor": round(here / there, 3) if here and there else None}


def machine_fit_times() -> MachineFitTimes | None:
    """The bundled fit-time model, scaled by the calibration fit timed now when the model knows its machine's (about
    0.2 s); None when this install ships no model."""
    model = FitTimeModel.bundled()
    if model is None:
        return None
    if model.machine_seconds is None:
        return MachineFitTimes(model, None)
    return MachineFitTimes(model.for_machine(calibration_seconds()), model.machine_seconds)


def check_submission_writer(dataset: Dataset) -> None:
    """DatasetError naming the file when the trivial baseline's predictions, written the way the final ones will be,
    make no valid submission: a shape the writer cannot handle is found before the search, not after the budget."""
    try:
        submission_table(dataset, dataset.baseline_prediction())
    except SubmissionError as error:
        sample = dataset.task_dir / SAMPLE_SUBMISSION_FILE if dataset.task_dir is not None else None
        where = sample if sample is not None and sample.is_file() else "the test set"
        fix = ("remove that column, or add training rows of its class" if isinstance(error.__cause__, ClassColumnsError)
               else "fix it so that it lists test.csv's ids in one column and the predictions in the others")
        raise DatasetError(f"{where}: a submission in its shape cannot be written ({error}); {fix}") from error


def _baseline_or_nan(evaluator: Evaluator, dataset: Dataset) -> float:
    """The trivial baseline's CV score for a search stopped by an error; NaN when scoring it fails too."""
    try:
        return evaluator.baseline(dataset)
    except Exception:  # noqa: BLE001 - the error that stopped the search is the one reported
        return math.nan


def _llm_proposer(settings: SolveSettings, offline: TreeProposer, dataset: Dataset, out_dir: Path,
                  deadline: float, validation: ValidationSpec) -> LLMProposer:
    """The LLM proposer over the offline one, with a free-code coder whose scripts run in the run folder's
    free_code/ (the tree search's nodes in node-<id>, the coder's step runs in plan-<n>) on the search's CV
    (`validation`); no call or script runs past `deadline` (the solve's)."""
    client = LLMClient(settings.llm, budget_usd=settings.llm_budget_usd, deadline=deadline)
    code_off = free_code_off(settings.allow_unisolated_code)
    if code_off is not None:
        return LLMProposer(client, offline, code_off=code_off)
    coder = FreeCoder(dataset, out_dir / FREE_CODE_DIR, Limits(settings.candidate_time_limit, settings.memory_limit),
                      validation, deadline, allow_unisolated=settings.allow_unisolated_code)
    return LLMProposer(client, offline, coder=coder)


def free_code_off(allow_unisolated: bool) -> str | None:
    """Why the LLM may not write scripts on this machine (no OS isolation, and not allowed without), or None."""
    found = isolation.probe()
    if found.available or allow_unisolated:
        return None
    return f"free code is off: this machine offers no OS isolation ({found.why_not}); --allow-unisolated-code " \
           "runs it under the audit hook only"


def _throughput_words(throughput: dict[str, Any]) -> str:
    per_minute = throughput["nodes_per_minute"]
    return (f"; {throughput['nodes']} nodes in {throughput['search_seconds']:.0f} s of search"
            + (f" ({per_minute:.1f} a minute)" if per_minute is not None else "")
            + f", {throughput['verified_full_cv']} verified on every fold, {throughput['stopped_early']} stopped early"
            + (f", {throughput['skipped']} drafts skipped as over time before they ran" if throughput.get("skipped")
               else ""))


def _experience_record(packs: list[tuple[Path, ExperiencePack]], portfolio: PortfolioProposer | None,
                       knowledge: KnowledgeTreeProposer | None,
                       change_gains: ChangeGains | None) -> dict[str, Any] | None:
    """run.json's `experience`: the packs the solve used and what came from them; None when it used none."""
    if not packs:
        return None
    return {"packs": [{"file": str(path), "version": PACK_VERSION, "commit": pack.header.commit,
                       "date": pack.header.date, "tasks": len(pack.tasks)} for path, pack in packs],
            "portfolio_drafts": portfolio.proposed if portfolio is not None else 0,
            "measured_tricks": knowledge.measured_tricks if knowledge is not None else 0,
            "reordered_tricks": knowledge.reordered_tricks if knowledge is not None else 0,
            # built-in changes measured on the nearest pool tasks, which the search tries in that order
            "measured_changes": len(change_gains.measured) if change_gains is not None else 0}


def _run_record(profile: TaskProfile, settings: SolveSettings, folds: int, dataset: Dataset, run: EngineeringRun,
                journal: Journal, proposer: TreeProposer, notes: list[str], started_at: float,
                submission_path: Path | None, solution_path: Path | None) -> dict[str, Any]:
    """run.json: set-up, settings, outcome and the journal."""
    info = dataset.metric_info
    best = journal.best()
    return {
        "task": {key: value for key, value in profile.to_dict().items() if key != "description"},
        "settings": asdict(settings),
        # the CV's folds: fewer than settings.cv asked for on a large table (SearchSettings.folds_for)
        "cv_folds": folds,
        "search": f"tree search ({' > '.join(type(link).__name__ for link in proposer.chain())})",  # outermost first
        "summary": run.summary() + _throughput_words(journal.throughput()),
        "metric": run.metric,
        "baseline": json_number(natural(run.baseline_score, info)),
        "best_cv_score": json_number(natural(run.best_score, info)),
        "best_spec": run.best_spec.to_dict() if run.best_spec else None,
        "best_node": best.id if best is not None else None,
        "n_attempts": len(run.attempts),
        "valid_attempts": run.valid_attempts,
        "n_iterations": run.n_iterations,
        "rounds": run.rounds,
        "stop_reason": run.stop_reason,
        "notes": notes,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started_at)),
        "seconds": round(time.time() - started_at, 1),
        "outputs": {name: str(path) if path else None
                    for name, path in (("submission", submission_path), ("solution", solution_path))},
        # Distinct tricks applied, and those on the best solution's lineage, by source kind (card, write-up, paper).
        "tricks_by_source": journal.tricks_by_source(),
        # Nodes, nodes verified on every fold, nodes stopped early by multi-fidelity CV, and nodes per minute.
        "throughput": journal.throughput(),
        # The LLM's model, price, budget, tokens and estimated cost, answers and fallbacks (None without --llm).
        "llm": proposer.usage_record(),
        "journal": journal.to_dict(),
    }
