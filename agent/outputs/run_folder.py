"""The run folder an `agent solve` writes: submission.csv, solution.py, trace.jsonl and run.json (report.html is
agent.outputs.report's). Each writer takes records and writes one file; nothing here decides anything."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from agent.candidate import AttemptRecord, EngineeringRun
from agent.engine.dataset import Dataset
from agent.engine.trainers import Trainer
from agent.outputs.report import RUN_FILE, TRACE_FILE
from agent.outputs.solution import render_solution
from agent.search.journal import Journal, Node
from agent.search.protocols import FREE_CODE

SUBMISSION_FILE = "submission.csv"
SOLUTION_FILE = "solution.py"


class RunFolderError(ValueError):
    """An output folder that already holds a run."""


def open_trace(out_dir: Path) -> TextIO:
    """trace.jsonl, opened for a new run; a folder that already holds one is refused."""
    if (out_dir / TRACE_FILE).exists():
        raise RunFolderError(f"{out_dir}: already holds a run; pass another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    return open(out_dir / TRACE_FILE, "w", encoding="utf-8")


def trace_line(node: Node, attempt: AttemptRecord, llm: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One trace.jsonl line: the attempt as the seed loop records it, plus the node's place in the tree and where
    its trick came from (source kind: card, write-up or paper; file; competition), all None without a trick; with
    the LLM proposer, `llm`: what the LLM did towards the node (agent.llm.proposer.LLMStep)."""
    trick = node.trick
    extra = {"llm": dict(llm)} if llm is not None else {}
    return {
        **attempt.to_dict(), "node_id": node.id, "parent_id": node.parent_id, "action": node.action,
        "plan": node.plan, "trick": trick.to_dict() if trick else None, "node_status": node.status,
        "debug_depth": node.debug_depth, "trick_source_kind": (trick.source_kind or None) if trick else None,
        "trick_file": (trick.source or None) if trick else None, "trick_competition": trick.competition if trick else None,
        # The data its CV score comes from: every training row ("full") or the exploration sample ("sample").
        "scored_on": node.scored_on, "scored_rows": node.scored_rows,
        "exploration": node.exploration.to_dict() if node.exploration is not None else None,
        **extra,
    }


def write_trace_line(trace: TextIO, line: Mapping[str, Any]) -> None:
    trace.write(json.dumps(line) + "\n")
    trace.flush()  # a run that is stopped keeps every line written so far


def write_submission(out_dir: Path, dataset: Dataset, run: EngineeringRun) -> Path | None:
    """submission.csv from the refit model's test predictions; None when there are none."""
    if run.test_prediction is None:
        return None
    path = out_dir / SUBMISSION_FILE
    dataset.submission(run.test_prediction).to_csv(path, index=False)
    return path


def write_solution(out_dir: Path, dataset: Dataset, run: EngineeringRun, journal: Journal | None,
                   trainers: Mapping[str, Trainer], random_state: int, fold_average: bool = False) -> Path | None:
    """solution.py for the best spec, headed by where it came from; None when nothing was verified."""
    if run.best_spec is None:
        return None
    if journal is not None:
        best = journal.best()
        headline = (f"Node {best.id} of {len(journal)} in the solution tree ({best.action}: {best.plan}): "
                    f"CV {run.metric} = {best.metric:.6f}.")
    else:
        best = run.best_attempt
        headline = (f"Attempt {best.index} of {len(run.attempts)} ({best.candidate.rationale}): "
                    f"CV {run.metric} = {best.evidence.metric_value:.6f}.")
    path = out_dir / SOLUTION_FILE
    if run.best_spec.model.name == FREE_CODE:  # a script an LLM wrote: solution.py is that script
        path.write_text(f'"""Free code for task {dataset.name!r}, written by an LLM for casebook\'s agent.\n\n{headline}\n\n'
                        "It runs in a folder holding train.csv, test.csv, folds.csv and task.json as casebook writes "
                        f"them (free_code/node-{best.id}/ of this run folder), and writes oof.csv and "
                        'test_predictions.csv there; casebook scored oof.csv itself."""\n\n' + best.code,
                        encoding="utf-8")
        return path
    path.write_text(render_solution(run.best_spec, dataset, trainers, random_state, headline=headline,
                                    fold_average=fold_average), encoding="utf-8")
    return path


def write_run_record(out_dir: Path, record: Mapping[str, Any]) -> Path:
    path = out_dir / RUN_FILE
    path.write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    return path
