"""What a multiclass CatBoost pays for its categorical statistics, and what cheaper settings give up (issue 25,
item 3: a node's time where it can still win).

On a multiclass target CatBoost's target statistics (CTRs) of a categorical column are one per class, on every
permutation it boosts with, so a table's categorical levels and classes multiply its cost: the section "Multiclass
drafts and the fit-time model" measured drafts 23-72 times the fit-time model's estimate on covid_testing, gss_vocab
and pitch_type, and happiness's portfolio draft ran 3-4 times over its estimate after it was sized. Here each
multiclass experience-pool table's CatBoost draft (its parameters for the table's size) is cross-validated (5 folds,
capped) with target statistics for every categorical column (CatBoost's own default, the drafts' until this bench
chose otherwise) and with one setting changed from CatBoost's "Speeding up the training" and "Categorical features"
pages, recording its seconds and its CV score. The tables are experience-pool ones: no evaluation table.

    python -m bench.multiclass_ctr [--tasks covid_testing,...] [--write]

The measurements are kept in bench/agent_runs/multiclass_ctr.json; a run measures the settings of each table not in it yet.
"""

from __future__ import annotations

import os
import statistics
import time
from datetime import date
from pathlib import Path

import click

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.spec import Step, replace_step
from agent.engine.trainers import builtin_trainers, steps_for, trainer_facts
from agent.evaluator import Evaluator
from bench.agent_bench import RUNS
from bench.change_times import measure_tables, table_bench_options
from bench.pool_tasks import write_pool_task
from bench.throughput_bench import REPO, code_stamp
from retrieval.metrics import metric_info
from retrieval.profile import profile_task

SECTION = "## A multiclass CatBoost's categorical statistics (issue 25)"
CAP_SECONDS = 30.0
RUNS_FILE = RUNS / "multiclass_ctr.json"
BASELINE = "target statistics (one-hot up to 2 levels)"
# One change each, from CatBoost's documentation: categorical columns of few levels one-hot encoded instead of given
# target statistics (one_hot_max_size; its CPU default is 2), and plain boosting (no ordered permutations for the
# statistics). Statistics that do not depend on the target (simple_ctr=["Counter"]) cannot be tried: scikit-learn's
# clone of the model, which every CV fold makes, rejects CatBoost's list parameters.
SETTINGS = {BASELINE: {"one_hot_max_size": 2}, "one-hot up to 16 levels": {"one_hot_max_size": 16},
            "one-hot up to 255 levels": {"one_hot_max_size": 255},
            "plain boosting": {"boosting_type": "Plain"}}
# A column of more levels than this becomes integer codes by frequency (NativeCategories' codes_above, as LightGBM's
# drafts have it), the others one-hot: tried because pitch_type's draft, its 205-level column one-hot encoded, still
# ran over (its cost turned out to be elsewhere: bench/RESULTS.md).
CODES_ABOVE = {f"one-hot up to {levels} levels, frequency codes above": levels for levels in (16, 64)}
SETTINGS |= {label: {"one_hot_max_size": 255} for label in CODES_ABOVE}
TASKS = "covid_testing,verbal_aggression,gss_vocab,pitch_type,prostate_survival,wvs_poverty"


def pool_task_dir(name: str, pool: Path, root: Path) -> Path:
    """The pool's task folder of `name` when `pool` holds it, else one written under `root`."""
    if (pool / name / "train.csv").is_file():
        return pool / name
    write_pool_task(name, root)
    return root / name


def measure(name: str, pool: Path, root: Path, done: set[str]) -> list[dict]:
    """The table's CatBoost draft under each of SETTINGS not in `done`."""
    profile = profile_task(pool_task_dir(name, pool, root))
    dataset = Dataset.from_profile(profile)
    rows = len(dataset.y)
    base = SolutionCandidate("catboost", trainer_facts("catboost").params_for(rows), "",
                             steps_for("catboost", builtin_trainers()))
    levels = sorted((info.cardinality for info in profile.column_infos("categorical")), reverse=True)
    evaluator, measured = Evaluator(cv=5, random_state=0), []
    for label, setting in SETTINGS.items():
        if label in done:
            continue
        steps = base.steps if label not in CODES_ABOVE else \
            replace_step(base.steps, "native_categorical", Step("native_categorical", {"codes_above": CODES_ABOVE[label]}))
        candidate = SolutionCandidate("catboost", {**base.params, **setting}, "", steps)
        _, evidence = evaluator.evaluate_candidate(candidate, dataset, time.monotonic() + CAP_SECONDS)
        folds = len(evidence.fold_values)
        finished = evidence.status == "ok"
        item = {"task": name, "rows": rows, "classes": len(dataset.classes), "metric": dataset.metric,
                "categorical_levels": levels, "setting": label, "status": evidence.status, "finished": finished,
                "folds_scored": folds,
                "seconds": round(evidence.elapsed if finished else
                                 max(evidence.elapsed, CAP_SECONDS) * 5 / max(folds, 1), 2),
                "score": round(evidence.metric_value, 5) if finished else None, "code": code_stamp(None)}
        measured.append(item)
        click.echo(row(item, None), err=True)
    return measured


def row(item: dict, baseline: dict | None) -> str:
    seconds = f"{item['seconds']:.1f}" + ("" if item["finished"] else f" ({item['folds_scored']} folds)")
    score = "–" if item["score"] is None else f"{item['score']:.4f}"
    if baseline is None or baseline is item:
        speed = change = "–"
    else:
        speed = f"{baseline['seconds'] / item['seconds']:.1f}×" + ("" if baseline["finished"] else " or more")
        change = "–" if item["score"] is None or baseline["score"] is None else \
            f"{(item['score'] - baseline['score']) * (1 if metric_info(item['metric']).greater_is_better else -1):+.4f}"
    levels = ", ".join(str(level) for level in item["categorical_levels"]) or "none"
    return (f"| {item['task']} | {item['classes']} | {item['rows']:,} | {levels} | {item['metric']} | "
            f"{item['setting']} | {seconds} | {score} | {speed} | {change} |")


def markdown(measured: list[dict]) -> str:
    baselines = {item["task"]: item for item in measured if item["setting"] == BASELINE}
    summary = []
    for label in SETTINGS:
        if label == BASELINE:
            continue
        pairs = [(baselines[item["task"]], item) for item in measured if item["setting"] == label]
        speedups = [before["seconds"] / after["seconds"] for before, after in pairs]
        scored = [(after["score"] - before["score"]) * (1 if metric_info(after["metric"]).greater_is_better else -1)
                  for before, after in pairs if before["score"] is not None and after["score"] is not None]
        summary.append(f"| {label} | {len(pairs)} | {sum(after['finished'] for _, after in pairs)} | "
                       f"{statistics.median(speedups):.1f}× | {min(speedups):.1f}× | "
                       f"{len(scored)} | {sum(change >= 0 for change in scored)} | "
                       f"{', '.join(f'{change:+.4f}' for change in scored) or '–'} |")
    return "\n".join([
        SECTION, "",
        f"`python -m bench.multiclass_ctr` ({date.today()}; {os.cpu_count()} cores; casebook "
        f"{', '.join(sorted({item['code'] for item in measured}))}). Each multiclass pool table's CatBoost draft "
        f"cross-validated (5 folds) through the Evaluator, capped at {CAP_SECONDS:g} s, with target statistics for "
        "every categorical column (one_hot_max_size=2, CatBoost's CPU default and the drafts' before this bench) and "
        "with one setting changed; over its cap, its seconds are projected from the folds it scored (the cap itself with "
        "none: a lower bound, and no score). Levels: each categorical column's distinct values. Gain: the score "
        f"change against target statistics (> 0 better). Experience-pool tables, no evaluation table; kept in "
        f"{RUNS_FILE.relative_to(REPO)}.", "",
        "| task | classes | rows | categorical levels | metric | setting | seconds | CV score | faster | gain |",
        "|---|---:|---:|---|---|---|---:|---:|---:|---:|",
        *(row(item, baselines.get(item["task"])) for item in measured), "",
        "| setting | tables | finished | median speed-up | least | both scored | gain ≥ 0 | gains |",
        "|---|---:|---:|---:|---:|---:|---:|---|", *summary])


@click.command()
@table_bench_options(TASKS, "multiclass-ctr")
def main(tasks: str, pool: Path, root: Path, write: bool) -> None:
    measure_tables(RUNS_FILE, tasks, lambda name, measured: measure(
        name, pool, root, {item["setting"] for item in measured if item["task"] == name}), markdown, write)


if __name__ == "__main__":
    main()
