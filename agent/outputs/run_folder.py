"""The run folder an `agent solve` writes: submission.csv, solution.py, trace.jsonl and run.json (report.html is
agent.outputs.report's). Each writer takes records and writes one file; nothing here decides anything.

submission.csv, solution.py and run.json are written atomically (a temporary file renamed over the old one), and
`AnytimeSubmission` keeps a valid submission on disk from the first verified node on, so a run killed at any moment
leaves one."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from agent.candidate import EngineeringRun
from agent.engine.compile import NotRenderableError
from agent.engine.dataset import Dataset
from agent.engine.spec import SpecError
from agent.engine.trainers import Trainer
from agent.outputs.report import RUN_FILE, TRACE_FILE
from agent.outputs.solution import render_solution
from agent.search.journal import Journal, Node
from agent.search.protocols import FREE_CODE

SUBMISSION_FILE = "submission.csv"
SOLUTION_FILE = "solution.py"
BASELINE_SOURCE = "the trivial baseline (class shares or the mean): no node was verified"


class RunFolderError(ValueError):
    """An output folder that already holds a run."""


class SubmissionError(ValueError):
    """Predictions that do not make a valid submission; the message says what is wrong with them."""


def open_trace(out_dir: Path) -> TextIO:
    """trace.jsonl, opened for a new run; a folder that already holds one is refused."""
    if (out_dir / TRACE_FILE).exists():
        raise RunFolderError(f"{out_dir}: already holds a run; pass another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    return open(out_dir / TRACE_FILE, "w", encoding="utf-8")


def trace_line(node: Node, journal: Journal, llm: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One trace.jsonl line, read from the journal: the node as the seed loop records an attempt (Journal.attempt),
    plus its place in the tree and where its trick came from (source kind: card, write-up or paper; file;
    competition), all None without a trick; with the LLM proposer, `llm`: what the LLM did towards the node
    (agent.llm.proposer.LLMStep)."""
    trick = node.trick
    extra = {"llm": dict(llm)} if llm is not None else {}
    return {
        **journal.attempt(node).to_dict(), "node_id": node.id, "parent_id": node.parent_id, "action": node.action,
        "plan": node.plan, "trick": trick.to_dict() if trick else None, "node_status": node.status,
        "debug_depth": node.debug_depth, "trick_source_kind": (trick.source_kind or None) if trick else None,
        "trick_file": (trick.source or None) if trick else None, "trick_competition": trick.competition if trick else None,
        # The data its CV score comes from: every training row ("full") or the exploration sample ("sample").
        "scored_on": node.scored_on, "scored_rows": node.scored_rows,
        "exploration": node.exploration.to_dict() if node.exploration is not None else None,
        # Its fidelity: the CV folds scored, of the run's; fewer when multi-fidelity CV stopped it early, or when its
        # first folds projected its whole CV over its time cap (then that projection, in seconds).
        "folds_scored": node.folds_scored, "folds": node.folds, "projected_seconds": node.projected_seconds,
        # What the proposer asked for, when the search ran it sized to its time cap (a higher learning rate).
        "proposed": node.proposed.to_dict() if node.proposed is not None else None,
        **extra,
    }


def write_trace_line(trace: TextIO, line: Mapping[str, Any]) -> None:
    trace.write(json.dumps(line) + "\n")
    trace.flush()  # a run that is stopped keeps every line written so far


def write_atomically(path: Path, text: str | bytes) -> Path:
    """Write `text` (or bytes) to a temporary file beside `path`, then rename it over `path`: a reader, or a run
    killed at any moment, sees the old file or the new one whole, never a part."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if isinstance(text, bytes):
        temporary.write_bytes(text)
    else:
        temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
    return path


def submission_table(dataset: Dataset, prediction: Any) -> pd.DataFrame:
    """The submission for test-set predictions, checked against sample_submission.csv (ids and their order, columns,
    no missing value, labels among the training classes, probabilities in [0, 1]); SubmissionError if invalid."""
    try:
        frame = dataset.submission(prediction)
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise SubmissionError(str(error)) from error
    problems = dataset.submission_problems(frame)
    if problems:
        raise SubmissionError("; ".join(problems))
    return frame


def write_submission(out_dir: Path, dataset: Dataset, prediction: Any) -> Path:
    """submission.csv from test-set predictions, checked (submission_table) and written atomically."""
    return write_atomically(out_dir / SUBMISSION_FILE, submission_table(dataset, prediction).to_csv(index=False))


def write_solution(out_dir: Path, dataset: Dataset, run: EngineeringRun, journal: Journal | None,
                   trainers: Mapping[str, Trainer], fold_average: bool = False,
                   refit_members: Sequence[int] = ()) -> Path | None:
    """solution.py for the best spec, headed by where it came from (render_solution: how its submission is made);
    None when nothing was verified."""
    if run.best_spec is None:
        return None
    if journal is not None:
        return write_node_solution(out_dir, dataset, journal.best(), len(journal), trainers, fold_average,
                                   refit_members)
    best = run.best_attempt
    headline = (f"Attempt {best.index} of {len(run.attempts)} ({best.candidate.rationale}): "
                f"CV {run.metric} = {best.evidence.metric_value:.6f}.")
    return write_atomically(out_dir / SOLUTION_FILE, render_solution(
        run.best_spec, dataset, trainers, headline=headline, fold_average=fold_average))


def write_node_solution(out_dir: Path, dataset: Dataset, node: Node, nodes: int, trainers: Mapping[str, Trainer],
                        fold_average: bool = False, refit_members: Sequence[int] = ()) -> Path:
    """solution.py for a node of the solution tree (of `nodes` nodes), headed by where it came from."""
    headline = (f"Node {node.id} of {nodes} in the solution tree ({node.action}: {node.plan}): "
                f"CV {dataset.metric} = {node.metric:.6f}.")
    path = out_dir / SOLUTION_FILE
    if node.candidate.trainer == FREE_CODE:  # a script an LLM wrote: solution.py is that script
        return write_atomically(path, (
            f'"""Free code for task {dataset.name!r}, written by an LLM for casebook\'s agent.\n\n{headline}\n\n'
            "It runs in a folder holding train.csv, test.csv, folds.csv and task.json as casebook writes "
            f"them (free_code/node-{node.id}/ of this run folder), and writes oof.csv and "
            'test_predictions.csv there; casebook scored oof.csv itself."""\n\n' + node.code))
    return write_atomically(path, render_solution(node.spec, dataset, trainers, headline=headline,
                                                  fold_average=fold_average, refit_members=refit_members))


def write_run_record(out_dir: Path, record: Mapping[str, Any]) -> Path:
    return write_atomically(out_dir / RUN_FILE, json.dumps(record, indent=2, default=str))


class AnytimeSubmission:
    """submission.csv and solution.py kept on disk from the first verified node on. `offer` replaces them whenever a
    better node comes, with its CV fold models' averaged test predictions (no refit needed), and run.json says which
    node they came from until the run's own record replaces it. A crash, a kill or a spent budget at any moment
    leaves the last valid submission."""

    def __init__(self, out_dir: Path, dataset: Dataset, trainers: Mapping[str, Trainer]):
        self.out_dir, self.dataset, self.trainers = out_dir, dataset, trainers
        self.started = time.time()
        self.node: Node | None = None
        self.how = ""  # how the standing submission was made; "" while there is none
        self.errors: list[str] = []  # offers that could not be written, and why

    def offer(self, node: Node, prediction: Any) -> bool:
        """Write `node`'s predictions as the submission, and its solution.py (averaging its fold models), when it
        beats the standing one; False when it does not, or when they make no valid submission (the reason is kept in
        `errors`). Offered as it is appended, the node is the tree's last: solution.py's headline counts node.id + 1."""
        if self.node is not None and node.score <= self.node.score:
            return False
        try:
            write_submission(self.out_dir, self.dataset, prediction)
        except (SubmissionError, OSError) as error:
            self.errors.append(f"node {node.id}: {error}")
            return False
        self.node, self.how = node, "CV fold models averaged"
        try:
            write_node_solution(self.out_dir, self.dataset, node, node.id + 1, self.trainers, fold_average=True)
        except (NotRenderableError, SpecError, KeyError, TypeError, ValueError) as error:
            self.errors.append(f"node {node.id}: solution.py not rendered ({error})")
        write_run_record(self.out_dir, {"status": "running", "seconds": round(time.time() - self.started, 1),
                                        "submission": self.record()})
        return True

    def baseline(self) -> Path:
        """The trivial model's submission (class shares or the mean), for a run that verified no node."""
        path = write_submission(self.out_dir, self.dataset, self.dataset.baseline_prediction())
        self.node, self.how = None, BASELINE_SOURCE
        return path

    @property
    def written(self) -> bool:
        return bool(self.how)

    def record(self) -> dict[str, Any]:
        """run.json's `submission`: the node it came from (None for the baseline), its CV score and how it was made."""
        metric = self.node.metric if self.node is not None else None
        return {"node": self.node.id if self.node is not None else None,
                "cv_score": metric if metric is not None and math.isfinite(metric) else None,
                "how": self.how, "errors": list(self.errors)}
