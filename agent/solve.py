"""`agent solve` as a library call: set up a task folder, run the seed loop, write the run folder.

A run folder holds submission.csv, solution.py (the best node), trace.jsonl (one line per attempt),
run.json (set-up, settings, outcome) and report.html.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from agent.engine import Dataset, submission
from agent.loop import AgenticAutoML, AttemptRecord, CandidateProposer, EngineeringRun, json_number
from agent.proposer import VariationProposer
from agent.render import render_solution
from agent.report import RUN_FILE, TRACE_FILE, write_report
from agent.sandbox import DEFAULT_MEMORY_LIMIT
from agent.verifier import natural
from retrieval.profile import TaskProfile

SUBMISSION_FILE = "submission.csv"
SOLUTION_FILE = "solution.py"
KB_NOT_YET = ("--use-kb is recorded, but knowledge-driven proposals arrive in a later issue: "
              "this run used the knowledge-free proposer")


class RunFolderError(ValueError):
    """An output folder that already holds a run."""


@dataclass(frozen=True)
class SolveSettings:
    time_budget: float | None = 900.0  # seconds for the whole solve; None: unbounded
    steps: int = 8  # reflection rounds after the seed population
    seed: int = 0
    use_kb: bool = False
    cv: int = 5
    patience: int = 3
    candidate_time_limit: float = 600.0
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT


@dataclass(frozen=True)
class SolveResult:
    out_dir: Path
    run: EngineeringRun
    submission_path: Path | None  # None when no candidate was verified or the refit failed
    solution_path: Path | None
    report_path: Path
    notes: tuple[str, ...]


def default_out_dir(profile: TaskProfile) -> Path:
    return Path("runs") / f"{profile.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def solve_task(
    profile: TaskProfile,
    settings: SolveSettings,
    out_dir: Path,
    *,
    proposer: CandidateProposer | None = None,
    on_attempt: Callable[[AttemptRecord], None] | None = None,
) -> SolveResult:
    if (out_dir / TRACE_FILE).exists():
        raise RunFolderError(f"{out_dir}: already holds a run; pass another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    dataset = Dataset.from_profile(profile)
    started = time.time()
    notes = [KB_NOT_YET] if settings.use_kb else []

    with open(out_dir / TRACE_FILE, "w", encoding="utf-8") as trace:
        def record(attempt: AttemptRecord) -> None:
            trace.write(json.dumps(attempt.to_dict()) + "\n")
            trace.flush()
            if on_attempt is not None:
                on_attempt(attempt)

        automl = AgenticAutoML(
            proposer if proposer is not None else VariationProposer(),
            max_iterations=settings.steps, patience=settings.patience, cv=settings.cv, random_state=settings.seed,
            time_budget=settings.time_budget, candidate_time_limit=settings.candidate_time_limit,
            memory_limit=settings.memory_limit, on_attempt=record,
        )
        run = automl.solve(dataset)

    submission_path = solution_path = None
    if run.test_prediction is not None:
        submission_path = out_dir / SUBMISSION_FILE
        submission(dataset, run.test_prediction).to_csv(submission_path, index=False)
    elif run.refit_error:
        notes.append(f"refitting the best candidate failed, so no submission was written: {run.refit_error}")
    if run.best_spec is not None:
        best = run.best_attempt
        headline = (f"Attempt {best.index} of {len(run.attempts)} ({best.candidate.rationale}): "
                    f"CV {run.metric} = {best.evidence.metric_value:.6f}.")
        solution_path = out_dir / SOLUTION_FILE
        solution_path.write_text(render_solution(run.best_spec, dataset, automl.trainers, settings.seed,
                                                 headline=headline), encoding="utf-8")

    info = dataset.metric_info
    record_of_run = {
        "task": {key: value for key, value in profile.to_dict().items() if key != "description"},
        "settings": asdict(settings),
        "summary": run.summary(),
        "metric": run.metric,
        "baseline": natural(run.baseline_score, info),
        "best_cv_score": json_number(natural(run.best_score, info)),
        "best_spec": run.best_spec.to_dict() if run.best_spec else None,
        "n_attempts": len(run.attempts),
        "valid_attempts": run.valid_attempts,
        "n_iterations": run.n_iterations,
        "stop_reason": run.stop_reason,
        "notes": notes,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        "outputs": {name: str(path) if path else None
                    for name, path in (("submission", submission_path), ("solution", solution_path))},
    }
    (out_dir / RUN_FILE).write_text(json.dumps(record_of_run, indent=2, default=str), encoding="utf-8")
    return SolveResult(out_dir, run, submission_path, solution_path, write_report(out_dir), tuple(notes))
