"""A CatBoost change told the trees it should keep, against one that is not (issue 25, item 2: cheap nodes).

CatBoost's early stopping cannot adapt its patience within a fit (runtime.EarlyStopped), so a CV's later folds wait
the adaptive patience of the trees its earlier folds kept, and its first fold waited the fixed 300 rounds: on a
12.9k-row multiclass table a change's first fold took about twice its later folds' seconds. A change of a measured
parent is now told the most trees it should keep (agent.search.fit_time.expected_trees: the parent's, scaled by
their learning rates, times CHANGE_TREES_MARGIN), and its first fold waits their adaptive patience. Here a CatBoost
draft is cross-validated (5 folds) through the Evaluator as a parent, then each built-in change of it twice, untold
and told: the first fold's seconds, the CV's, its score and the trees kept, and the sizing's estimate of the told CV
(fit_time.change_seconds) against what it took. Development tables only, no evaluation table.

    python -m bench.first_fold_patience [--tasks hpc,churn,...] [--write]

The measurements are kept in bench/agent_runs/first_fold_patience.json; a run measures the tables not in it yet.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from datetime import date
from pathlib import Path

import click

from agent.candidate import SolutionCandidate
from agent.engine.trainers import builtin_trainers, steps_for, trainer_facts
from agent.evaluator import Evaluator
from agent.search.fit_time import CHANGE_TREES_MARGIN, change_seconds, expected_trees
from bench.agent_bench import RUNS
from bench.change_times import SLOW, as_parent, changes, measure_tables, table_bench_options, task_dataset
from bench.patience import score_change
from bench.throughput_bench import REPO, code_stamp

SECTION = "## A CatBoost change's first fold, told the trees to expect (issue 25)"
CAP_SECONDS = 120.0
RUNS_FILE = RUNS / "first_fold_patience.json"
TASKS = "hpc,churn,credit,diamonds,hotel"


def measure(name: str, pool: Path, root: Path) -> list[dict]:
    """Each built-in change of a CatBoost draft on the table `name`, untold and told the trees to expect."""
    dataset = task_dataset(name, pool, root)
    rows, greater = len(dataset.y), dataset.metric_info.greater_is_better
    evaluator, trainers = Evaluator(cv=5, random_state=0), builtin_trainers()
    draft = SolutionCandidate("catboost", trainer_facts("catboost").params_for(rows), "",
                              steps_for("catboost", trainers))
    evaluator.evaluate_candidate(draft, dataset, time.monotonic() + CAP_SECONDS)  # the fold cache, as a search's
    _, evidence = evaluator.evaluate_candidate(draft, dataset, time.monotonic() + CAP_SECONDS)
    if evidence.status != "ok":
        click.echo(f"{name}: the CatBoost draft did not finish within {CAP_SECONDS:g} s ({evidence.status})", err=True)
        return []
    parent, measured = as_parent(draft, evidence, rows), []
    for why, change in changes("catboost", draft, dataset.classification):
        told = expected_trees(parent, change, rows)
        if why == SLOW or told is None or change.params.get("seed_bag"):  # nothing told, or no change of the trees
            continue
        item = {"task": name, "rows": rows, "change": why, "metric": dataset.metric, "greater_is_better": greater,
                "expected_trees": sum(told.values()) / len(told), "estimate": change_seconds(parent, change, rows),
                "code": code_stamp(None)}
        # bench.patience's arm names, which its score_change reads
        runs = {arm: evaluator.evaluate_candidate(change, dataset, time.monotonic() + CAP_SECONDS,
                                                  expected_trees=trees)[1]
                for arm, trees in (("fixed", None), ("adaptive", told))}
        if any(run.status != "ok" for run in runs.values()):
            click.echo(f"{name} {why}: a CV did not finish within {CAP_SECONDS:g} s", err=True)
            continue
        for arm, run in runs.items():
            item[arm] = {"seconds": run.elapsed, "first_fold": run.fit_seconds[0],
                         "later_folds": statistics.mean(run.fit_seconds[1:]), "score": run.metric_value,
                         "kept": sum(run.stopped_rounds.values()) / max(len(run.stopped_rounds), 1)}
        measured.append(item)
        click.echo(row(item), err=True)
    return measured


def row(item: dict) -> str:
    fixed, told = item["fixed"], item["adaptive"]
    return (f"| {item['task']} | {item['rows']:,} | {item['change']} | {item['metric']} | "
            f"{item['expected_trees']:.0f} | {fixed['kept']:.0f} | {told['kept']:.0f} | "
            f"{fixed['first_fold'] / fixed['later_folds']:.2f} | {told['first_fold'] / told['later_folds']:.2f} | "
            f"{fixed['seconds']:.2f} | {told['seconds']:.2f} | {told['seconds'] / fixed['seconds']:.2f} | "
            f"{score_change(item):+.3f} | {item['estimate'] / told['seconds']:.2f} |")


def _geometric_mean(values: list[float]) -> float:
    return math.exp(statistics.mean(map(math.log, values)))


def markdown(measured: list[dict]) -> str:
    ratios = [item["adaptive"]["seconds"] / item["fixed"]["seconds"] for item in measured]
    first = [item["adaptive"]["first_fold"] / item["fixed"]["first_fold"] for item in measured]
    changes_ = [score_change(item) for item in measured]
    estimates = [item["estimate"] / item["adaptive"]["seconds"] for item in measured]
    summary = (f"| {len(measured)} | {_geometric_mean(first):.2f} | {_geometric_mean(ratios):.2f} | "
               f"{max(ratios):.2f} | {statistics.median(changes_):+.3f} | {min(changes_):+.3f} | "
               f"{max(changes_):+.3f} | {_geometric_mean(estimates):.2f} |") if measured else ""
    tasks = sorted({item["task"] for item in measured})
    return "\n".join([
        SECTION, "",
        f"`python -m bench.first_fold_patience` ({date.today()}; {os.cpu_count()} cores; casebook "
        f"{', '.join(sorted({item['code'] for item in measured}))}; tables: {', '.join(tasks)}). A CatBoost draft "
        "cross-validated (5 folds) through the Evaluator as a parent, then each of its built-in changes twice, one CV "
        "at a time: untold (its first fold waits the fixed patience) and told the trees it should keep "
        f"(fit_time.expected_trees, the parent's scaled by the learning rates, times {CHANGE_TREES_MARGIN:g}: its "
        "first fold waits their adaptive patience). first / later = the first fold's fit seconds over the later "
        "folds' mean; score change = told against untold, per cent of the untold CV score, positive when better; "
        "estimate / told = fit_time.change_seconds from the parent's CV over the told CV's seconds. Development "
        f"tables, no evaluation table; the measurements are kept in {RUNS_FILE.relative_to(REPO)}.",
        "", "| task | rows | change | metric | trees expected | kept, untold | kept, told | first / later, untold | "
        "first / later, told | seconds, untold | seconds, told | told / untold | score change (%) | "
        "estimate / told |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *(row(item) for item in measured), "",
        "| changes | first fold, told / untold (geometric mean) | CV seconds, told / untold (geometric mean) | "
        "largest | score change, median (%) | worst (%) | best (%) | estimate / told (geometric mean) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|", summary])


@click.command()
@table_bench_options(TASKS, "first-fold-patience")
def main(tasks: str, pool: Path, root: Path, write: bool) -> None:
    measure_tables(RUNS_FILE, tasks, lambda name, measured: [] if any(item["task"] == name for item in measured)
                   else measure(name, pool, root), markdown, write)


if __name__ == "__main__":
    main()
