"""`agent solve` as a library call: set up a task folder, run the tree search, write the run folder.

The search is agent.tree's (AutoMind section 3.2): BuiltinTreeProposer without the knowledge base,
KnowledgeTreeProposer with it (`use_kb`). Passing a seed-loop `CandidateProposer` runs the seed loop
(agent.loop.AgenticAutoML) instead.

A run folder holds submission.csv, solution.py (the best node), trace.jsonl (one line per node or
attempt), run.json (set-up, settings, outcome and, for a tree search, the journal) and report.html.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from agent.engine import Dataset, submission
from agent.loop import AgenticAutoML, AttemptRecord, CandidateProposer, EngineeringRun, json_number
from agent.render import render_solution
from agent.report import RUN_FILE, TRACE_FILE, write_report
from agent.sandbox import DEFAULT_MEMORY_LIMIT
from agent.verifier import natural
from agent.tree import Journal, Node, SearchSettings, TreeProposer, TreeSearch, trace_line
from retrieval.profile import TaskProfile

SUBMISSION_FILE = "submission.csv"
SOLUTION_FILE = "solution.py"
_DEFAULT_SEARCH = SearchSettings()


class RunFolderError(ValueError):
    """An output folder that already holds a run."""


class KnowledgeBaseMissing(ValueError):
    """--use-kb with a knowledge base that holds no tricks."""


@dataclass(frozen=True)
class SolveSettings:
    time_budget: float | None = 900.0  # seconds for the whole solve; None: unbounded
    steps: int = _DEFAULT_SEARCH.steps  # tree-search steps after the drafts (seed loop: reflection rounds)
    seed: int = 0
    use_kb: bool = False
    cv: int = 5
    patience: int = 3  # the seed loop only (a CandidateProposer passed to solve_task); the tree search runs its steps
    candidate_time_limit: float = 600.0
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT
    # The tree search's policy (agent.tree.SearchSettings); `steps` counts the steps after the drafts.
    num_drafts: int = _DEFAULT_SEARCH.num_drafts
    debug_prob: float = _DEFAULT_SEARCH.debug_prob
    max_debug_depth: int = _DEFAULT_SEARCH.max_debug_depth
    greedy_prob: float = _DEFAULT_SEARCH.greedy_prob
    trick_prob: float = _DEFAULT_SEARCH.trick_prob

    def search_settings(self) -> SearchSettings:
        return SearchSettings(num_drafts=self.num_drafts, debug_prob=self.debug_prob,
                              max_debug_depth=self.max_debug_depth, greedy_prob=self.greedy_prob,
                              trick_prob=self.trick_prob, steps=self.steps, time_budget=self.time_budget,
                              seed=self.seed)


@dataclass(frozen=True)
class SolveResult:
    out_dir: Path
    run: EngineeringRun
    submission_path: Path | None  # None when no candidate was verified or the refit failed
    solution_path: Path | None
    report_path: Path
    notes: tuple[str, ...]
    journal: Journal | None = None  # the solution tree (None for a seed-loop run)


def default_out_dir(profile: TaskProfile) -> Path:
    return Path("runs") / f"{profile.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def open_knowledge(home: Path | str | None = None, kb=None):
    """The knowledge base for --use-kb; an empty one is an error, not a silent fall-back."""
    from kb.config import resolve_home
    from kb.store import KnowledgeBase

    where = kb.home if kb is not None else resolve_home(home)
    message = (f"the knowledge base in {where} is empty: run `kb ingest data/knowledge` (with the same --home) "
               "before `agent solve --use-kb`")
    if kb is None and not (Path(where) / "catalog.db").is_file():  # do not create a home just to find it empty
        raise KnowledgeBaseMissing(message)
    base = kb if kb is not None else KnowledgeBase(where)
    if base.count() == 0:
        raise KnowledgeBaseMissing(message)
    return base


def knowledge_proposer(settings: SolveSettings, home: Path | str | None = None, kb=None) -> TreeProposer:
    base = open_knowledge(home, kb)
    try:
        from agent.search_proposers import KnowledgeTreeProposer

        return KnowledgeTreeProposer(base, trick_prob=settings.trick_prob, embedder=base.embedder)
    except ImportError as error:  # the executable recipe catalogue (agent.recipes) is not there
        raise KnowledgeBaseMissing(f"--use-kb needs the recipe catalogue agent/recipes.py, which could not be "
                                   f"imported ({error})") from error


def solve_task(
    profile: TaskProfile,
    settings: SolveSettings,
    out_dir: Path,
    *,
    proposer: CandidateProposer | TreeProposer | None = None,
    on_attempt: Callable[[AttemptRecord], None] | None = None,
    on_node: Callable[[Node, AttemptRecord], None] | None = None,
    kb: Any = None,
    kb_home: Path | str | None = None,
) -> SolveResult:
    """Solve the task into `out_dir`. With `settings.use_kb`, the knowledge base is `kb` or the one in `kb_home`."""
    started = time.time()
    if (out_dir / TRACE_FILE).exists():
        raise RunFolderError(f"{out_dir}: already holds a run; pass another --out")
    seed_loop = proposer is not None and isinstance(proposer, CandidateProposer)
    if proposer is None:
        if settings.use_kb:
            proposer = knowledge_proposer(settings, kb_home, kb)
        else:
            from agent.search_proposers import BuiltinTreeProposer

            proposer = BuiltinTreeProposer()
    out_dir.mkdir(parents=True, exist_ok=True)
    dataset = Dataset.from_profile(profile)
    notes: list[str] = []
    journal = None

    with open(out_dir / TRACE_FILE, "w", encoding="utf-8") as trace:
        def record(attempt: AttemptRecord, line: dict | None = None) -> None:
            trace.write(json.dumps(line if line is not None else attempt.to_dict()) + "\n")
            trace.flush()
            if on_attempt is not None:
                on_attempt(attempt)

        def record_node(node: Node, attempt: AttemptRecord) -> None:
            record(attempt, trace_line(node, attempt))
            if on_node is not None:
                on_node(node, attempt)

        if seed_loop:
            automl = AgenticAutoML(
                proposer, max_iterations=settings.steps, patience=settings.patience, cv=settings.cv,
                random_state=settings.seed, time_budget=settings.time_budget,
                candidate_time_limit=settings.candidate_time_limit, memory_limit=settings.memory_limit,
                on_attempt=record,
            )
            run = automl.solve(dataset)
            trainers = automl.trainers
        else:
            search_settings = settings.search_settings()
            if settings.time_budget is not None:  # loading the data came out of the same budget
                spent = time.time() - started
                search_settings = replace(search_settings, time_budget=max(settings.time_budget - spent, 1.0))
            search = TreeSearch(proposer, search_settings, cv=settings.cv,
                                candidate_time_limit=settings.candidate_time_limit,
                                memory_limit=settings.memory_limit, on_node=record_node)
            result = search.run(profile, dataset)
            run, journal, trainers = result.run, result.journal, result.trainers

    submission_path = solution_path = None
    if run.test_prediction is not None:
        submission_path = out_dir / SUBMISSION_FILE
        submission(dataset, run.test_prediction).to_csv(submission_path, index=False)
    elif run.refit_error:
        notes.append(f"refitting the best candidate failed, so no submission was written: {run.refit_error}")
    if run.best_spec is not None:
        if journal is not None:
            best = journal.best()
            headline = (f"Node {best.id} of {len(journal)} in the solution tree ({best.action}: {best.plan}): "
                        f"CV {run.metric} = {best.metric:.6f}.")
        else:
            best = run.best_attempt
            headline = (f"Attempt {best.index} of {len(run.attempts)} ({best.candidate.rationale}): "
                        f"CV {run.metric} = {best.evidence.metric_value:.6f}.")
        solution_path = out_dir / SOLUTION_FILE
        solution_path.write_text(render_solution(run.best_spec, dataset, trainers, settings.seed,
                                                 headline=headline), encoding="utf-8")

    info = dataset.metric_info
    record_of_run = {
        "task": {key: value for key, value in profile.to_dict().items() if key != "description"},
        "settings": asdict(settings),
        "search": "seed loop" if seed_loop else f"tree search ({type(proposer).__name__})",
        "summary": run.summary(),
        "metric": run.metric,
        "baseline": natural(run.baseline_score, info),
        "best_cv_score": json_number(natural(run.best_score, info)),
        "best_spec": run.best_spec.to_dict() if run.best_spec else None,
        "best_node": journal.best().id if journal is not None and journal.best() is not None else None,
        "n_attempts": len(run.attempts),
        "valid_attempts": run.valid_attempts,
        "n_iterations": run.n_iterations,
        "stop_reason": run.stop_reason,
        "notes": notes,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        "outputs": {name: str(path) if path else None
                    for name, path in (("submission", submission_path), ("solution", solution_path))},
        "journal": journal.to_dict() if journal is not None else None,
    }
    (out_dir / RUN_FILE).write_text(json.dumps(record_of_run, indent=2, default=str), encoding="utf-8")
    return SolveResult(out_dir, run, submission_path, solution_path, write_report(out_dir), tuple(notes), journal)
