"""Adaptive early-stopping patience against a fixed one (issue 25, item 2: GBDT early stopping on every node, cheap).

A GBDT draft stops once its validation fold has not improved for its patience: AutoGluon's 300 rounds up to 10,000
rows. When the best round comes early (60 trees kept at a learning rate of 0.05 is common on small tables), those 300
rounds are most of the fit. runtime.EarlyStopped waits PATIENCE_OFFSET + PATIENCE_RATE x the best round instead,
never more than the fixed patience: XGBoost and LightGBM from the best round so far, CatBoost from the most trees the
CV's earlier folds kept (its first fold waits the fixed patience). Here each GBDT family's draft (its parameters for the table's size) is
cross-validated (5 folds) through the Evaluator with the fixed patience (`patience_rate=0`) and with the adaptive
one: seconds, CV score and the trees kept. The tables are development and experience-pool ones, no evaluation table.

The two CVs train different numbers of rounds for the same kept trees, so together they also tell a node's cost
besides its rounds (preprocessing, binning, prediction) in rounds: agent.search.fit_time.FIXED_ROUNDS.

    python -m bench.patience [--tasks churn,hpc,...] [--pool DIR] [--write]

The measurements are kept in bench/agent_runs/patience.json; a run measures the tables not in it yet.
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
from agent.engine.runtime.wrappers import PATIENCE_RATE, patience_adapts
from agent.engine.trainers import builtin_trainers, steps_for, trainer_facts
from agent.evaluator import Evaluator
from agent.search.fit_time import FoldStopping
from bench.agent_bench import RUNS
from bench.change_times import measure_tables, table_bench_options, task_dataset
from bench.throughput_bench import REPO, code_stamp

SECTION = "## Adaptive early-stopping patience (issue 25)"
FAMILIES = ("lightgbm", "xgboost", "catboost")
CAP_SECONDS = 300.0
RUNS_FILE = RUNS / "patience.json"
WORSE = 0.01  # a score change, in per cent, below which a CV counts as worse
TASKS = ("churn,hpc,credit,diamonds,hotel,flchain,eligible_401k,check_times,covid_testing,bird_strike_phase,"
         "doctor_visits_german,gss_vocab,college_earnings,gender_pay")


def measure(name: str, measured: list[dict], pool: Path, root: Path) -> list[dict]:
    """Each GBDT family's draft on the table `name` not `measured` yet, with the fixed patience and with the adaptive
    one."""
    families = [family for family in FAMILIES
                if not any(item["task"] == name and item["family"] == family for item in measured)]
    if not families:
        return []
    dataset = task_dataset(name, pool, root)
    rows, greater = len(dataset.y), dataset.metric_info.greater_is_better
    evaluator = Evaluator(cv=5, random_state=0)
    trainers, measured = builtin_trainers(), []
    for family in families:
        draft = SolutionCandidate(family, trainer_facts(family).params_for(rows), "", steps_for(family, trainers))
        fixed = SolutionCandidate(family, {**draft.params, "patience_rate": 0.0}, "", draft.steps)
        evaluator.evaluate_candidate(draft, dataset, time.monotonic() + CAP_SECONDS)  # the fold cache, as a search's
        runs = {arm: evaluator.evaluate_candidate(candidate, dataset, time.monotonic() + CAP_SECONDS)[1]
                for arm, candidate in (("fixed", fixed), ("adaptive", draft))}
        if any(evidence.status != "ok" for evidence in runs.values()):
            click.echo(f"{name} {family}: a CV did not finish within {CAP_SECONDS:g} s", err=True)
            continue
        rounds = draft.params["early_stopping_rounds"]
        item = {"task": name, "rows": rows, "family": family, "metric": dataset.metric, "greater_is_better": greater,
                "patience": rounds, "code": code_stamp(None)}
        # Rounds a fold trained past its kept trees, on the mean over the folds, as the search's estimate counts them.
        stopping = FoldStopping(patience_adapts(rows / 5), 5)
        for (arm, evidence), candidate in zip(runs.items(), (fixed, draft)):
            kept = sum(evidence.stopped_rounds.values()) / max(len(evidence.stopped_rounds), 1)
            item[arm] = {"seconds": evidence.elapsed, "score": evidence.metric_value, "kept": kept,
                         "trained": kept + stopping.patience(candidate, kept)}
        measured.append(item)
        click.echo(row(item), err=True)
    return measured


def score_change(item: dict) -> float:
    """The adaptive CV score against the fixed one, in per cent of the fixed one, positive when better."""
    fixed, adaptive = item["fixed"]["score"], item["adaptive"]["score"]
    sign = 1.0 if item["greater_is_better"] else -1.0
    return sign * (adaptive - fixed) / abs(fixed) * 100 if fixed else 0.0


def fixed_rounds(item: dict) -> float | None:
    """A node's cost besides its rounds, in rounds, from the two CVs: seconds = c x (fixed + trained) for both. None
    when the two trained about as many rounds (no information) or the times disagree with the model."""
    fixed, adaptive = item["fixed"], item["adaptive"]
    if fixed["trained"] - adaptive["trained"] < 20 or fixed["seconds"] <= adaptive["seconds"]:
        return None
    return ((adaptive["seconds"] * fixed["trained"] - fixed["seconds"] * adaptive["trained"])
            / (fixed["seconds"] - adaptive["seconds"]))


def row(item: dict) -> str:
    fixed, adaptive = item["fixed"], item["adaptive"]
    rounds = fixed_rounds(item)
    return (f"| {item['task']} | {item['rows']:,} | {item['family']} | {item['metric']} | {fixed['kept']:.0f} | "
            f"{adaptive['kept']:.0f} | {fixed['seconds']:.2f} | {adaptive['seconds']:.2f} | "
            f"{adaptive['seconds'] / fixed['seconds']:.2f} | {fixed['score']:.4f} | {adaptive['score']:.4f} | "
            f"{score_change(item):+.3f} | {'' if rounds is None else f'{rounds:.0f}'} |")


def markdown(measured: list[dict]) -> str:
    summary = []
    for family in (*FAMILIES, "all"):
        items = [item for item in measured if family in ("all", item["family"])]
        if not items:
            continue
        ratios = [item["adaptive"]["seconds"] / item["fixed"]["seconds"] for item in items]
        changes = [score_change(item) for item in items]
        rounds = [value for value in map(fixed_rounds, items) if value is not None]
        summary.append(f"| {family} | {len(items)} | {math.exp(statistics.mean(map(math.log, ratios))):.2f} | "
                       f"{max(ratios):.2f} | {statistics.median(changes):+.3f} | {min(changes):+.3f} | "
                       f"{sum(change < -WORSE for change in changes)} | "
                       f"{statistics.median(rounds) if rounds else float('nan'):.0f} |")
    tasks = sorted({item["task"] for item in measured})
    return "\n".join([
        SECTION, "",
        f"`python -m bench.patience` ({date.today()}; {os.cpu_count()} cores; casebook "
        f"{', '.join(sorted({item['code'] for item in measured}))}; tables: {', '.join(tasks)}). Each GBDT family's "
        "draft cross-validated (5 folds) through the Evaluator, stopping after the fixed patience (AutoGluon's 300 "
        f"rounds up to 10,000 rows, fewer above) and after the adaptive one ({PATIENCE_RATE:g} x the best round + 20, "
        "at most the fixed one; CatBoost's from the trees its earlier folds kept, its first fold the fixed one). kept = mean trees kept per fold; score change = adaptive against fixed, per cent of "
        "the fixed CV score, positive when better; fixed cost in rounds = a node's cost besides its boosting rounds, "
        "solved from the two CVs (seconds proportional to fixed cost + rounds trained). Development and "
        f"experience-pool tables, no evaluation table; the measurements are kept in {RUNS_FILE.relative_to(REPO)}.",
        "", "| task | rows | family | metric | kept, fixed | kept, adaptive | seconds, fixed | seconds, adaptive | "
        "adaptive / fixed | CV, fixed | CV, adaptive | score change (%) | fixed cost (rounds) |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *(row(item) for item in measured), "",
        "| family | CVs | seconds, adaptive / fixed (geometric mean) | largest | score change, median (%) | "
        f"worst (%) | worse by over {WORSE:g}% | fixed cost, median (rounds) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|", *summary])


@click.command()
@table_bench_options(TASKS, "patience")
def main(tasks: str, pool: Path, root: Path, write: bool) -> None:
    measure_tables(RUNS_FILE, tasks, lambda name, measured: measure(name, measured, pool, root), markdown, write)


if __name__ == "__main__":
    main()
