"""Gradient boosting drafts on tables with a categorical column of many levels: integer codes or native category
splits (issue 25, item 3: drafts that can win).

Today LightGBM's drafts take a column of more than 32 levels as integer codes by frequency, and XGBoost's and
HistGradientBoosting's drafts take every categorical column as ordinal codes. On fresh-dec04's country_population
(a country's population from the country and the year) every GBDT draft scored RMSLE 0.09-2.4 where a forest on the
same codes reached 0.039: codes in an order unrelated to the target need one split per few levels. Here each
experience-pool table with a categorical column of 33-260 levels has its three GBDT drafts (their parameters for
the table's size) cross-validated (5 folds, capped) with today's encoding and with native category splits. Pool
tables only: no evaluation table.

    python -m bench.many_levels [--tasks life_expectancy,...] [--write]

The measurements are kept in bench/agent_runs/many_levels.json; a run measures the settings of each table not in it yet.
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
from agent.engine.trainers import NATIVE_SPLIT_PARAMS, builtin_trainers, steps_for, trainer_facts
from agent.evaluator import Evaluator
from bench.agent_bench import RUNS
from bench.change_times import measure_tables, table_bench_options
from bench.multiclass_ctr import pool_task_dir
from bench.throughput_bench import REPO, code_stamp
from retrieval.metrics import metric_info
from retrieval.profile import profile_task

SECTION = "## GBDT drafts on many-level categorical columns: codes or native splits (issue 25)"
CAP_SECONDS = 30.0
RUNS_FILE = RUNS / "many_levels.json"
TODAY, NATIVE = "today", "native"
# The native setting of each trainer: its categorical step and the model parameters it splits on categories with.
NATIVE_SETTINGS = {
    "lightgbm": (Step("native_categorical", {"codes_above": None}), NATIVE_SPLIT_PARAMS["lightgbm"]),
    "xgboost": (Step("native_categorical"), NATIVE_SPLIT_PARAMS["xgboost"]),
    "hist_gradient_boosting": (Step("native_categorical"), NATIVE_SPLIT_PARAMS["hist_gradient_boosting"]),
}
TASKS = ("life_expectancy,penn_gdp,contagious_diseases,texas_housing,covid_testing,baseball_home_runs,"
         "party_thermometer,ten_mile_race,mlb_wins,plane_seats,radon,pitch_type,financial_independence,drag_race,"
         "state_product,seat_belts,social_insure,storms")


def candidate_for(trainer: str, setting: str, rows: int) -> SolutionCandidate:
    params = dict(trainer_facts(trainer).params_for(rows))
    steps = steps_for(trainer, builtin_trainers())
    if setting == NATIVE:
        step, model = NATIVE_SETTINGS[trainer]
        old = "native_categorical" if trainer == "lightgbm" else "ordinal_encoding"
        steps, params = replace_step(steps, old, step), {**params, **model}
    return SolutionCandidate(trainer, params, "", steps)


def measure(name: str, pool: Path, root: Path, done: set[tuple[str, str]]) -> list[dict]:
    """The table's GBDT drafts under each (trainer, setting) not in `done`."""
    profile = profile_task(pool_task_dir(name, pool, root))
    dataset = Dataset.from_profile(profile)
    rows = len(dataset.y)
    levels = sorted((info.cardinality for info in profile.column_infos("categorical")), reverse=True)
    evaluator, measured = Evaluator(cv=5, random_state=0), []
    for trainer in NATIVE_SETTINGS:
        for setting in (TODAY, NATIVE):
            if (trainer, setting) in done:
                continue
            _, evidence = evaluator.evaluate_candidate(candidate_for(trainer, setting, rows), dataset,
                                                       time.monotonic() + CAP_SECONDS)
            finished = evidence.status == "ok"
            item = {"task": name, "rows": rows, "metric": dataset.metric, "categorical_levels": levels,
                    "trainer": trainer, "setting": setting, "status": evidence.status, "finished": finished,
                    "folds_scored": len(evidence.fold_values), "seconds": round(evidence.elapsed, 2),
                    "score": round(evidence.metric_value, 5) if finished else None, "code": code_stamp(None)}
            measured.append(item)
            click.echo(f"{name} {trainer} {setting}: {item['status']} {item['score']} in {item['seconds']} s", err=True)
    return measured


def gain(today: dict, native: dict) -> float | None:
    """native's score change against today's (> 0 better), relative to today's score."""
    if today["score"] is None or native["score"] is None or today["score"] == 0:
        return None
    sign = 1 if metric_info(today["metric"]).greater_is_better else -1
    return sign * (native["score"] - today["score"]) / abs(today["score"])


def markdown(measured: list[dict]) -> str:
    by_key = {(item["task"], item["trainer"], item["setting"]): item for item in measured}
    tasks = list(dict.fromkeys(item["task"] for item in measured))
    rows, summary = [], []
    for trainer in NATIVE_SETTINGS:
        gains = []
        for task in tasks:
            today, native = by_key.get((task, trainer, TODAY)), by_key.get((task, trainer, NATIVE))
            if today is None or native is None:
                continue
            change = gain(today, native)
            gains.append(change)
            many = [level for level in today["categorical_levels"] if level > 32]
            score = lambda item: "–" if item["score"] is None else f"{item['score']:.4g}"  # noqa: E731
            rows.append(f"| {task} | {today['rows']:,} | {', '.join(map(str, many))} | "
                        f"{round(0.8 * today['rows'] / max(many)):,} | {today['metric']} | {trainer} | "
                        f"{score(today)} ({today['seconds']:.1f} s) | {score(native)} ({native['seconds']:.1f} s) | "
                        f"{'–' if change is None else f'{change:+.2%}'} |")
        scored = [change for change in gains if change is not None]
        summary.append(f"| {trainer} | {len(gains)} | {len(scored)} | {sum(change > 0 for change in scored)} | "
                       f"{statistics.median(scored):+.2%} | {min(scored):+.2%} | {max(scored):+.2%} |"
                       if scored else f"| {trainer} | {len(gains)} | 0 | – | – | – | – |")
    return "\n".join([
        SECTION, "",
        f"`python -m bench.many_levels` ({date.today()}; {os.cpu_count()} cores; casebook "
        f"{', '.join(sorted({item['code'] for item in measured}))}). Each experience-pool table with a categorical "
        "column of more than 32 levels has its LightGBM, XGBoost and HistGradientBoosting drafts (their parameters for "
        f"the table's size) cross-validated through the Evaluator (5 folds, capped at {CAP_SECONDS:g} s; over it, no "
        "score): today's encoding (LightGBM: frequency codes for a column of more than 32 levels, native splits "
        "below; XGBoost and HistGradientBoosting: ordinal codes) against native category splits of up to 250 levels "
        "(the native_categorical step; XGBoost with enable_categorical). Rows per level: a fold's training rows per "
        "level of the table's largest such column. Gain: native's score change, relative to today's (> 0 better). "
        f"Experience-pool tables, no evaluation table; kept in {RUNS_FILE.relative_to(REPO)}.", "",
        "| task | rows | levels above 32 | rows per level | metric | trainer | today (s) | native (s) | gain |",
        "|---|---:|---|---:|---|---|---:|---:|---:|", *rows, "",
        "| trainer | tables | both scored | native better | median gain | least | most |",
        "|---|---:|---:|---:|---:|---:|---:|", *summary])


@click.command()
@table_bench_options(TASKS, "many-levels")
def main(tasks: str, pool: Path, root: Path, write: bool) -> None:
    measure_tables(RUNS_FILE, tasks, lambda name, measured: measure(
        name, pool, root, {(item["trainer"], item["setting"]) for item in measured if item["task"] == name}),
        markdown, write)


if __name__ == "__main__":
    main()
