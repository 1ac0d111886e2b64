"""The fit-time model against this machine: how many times its seconds a draft takes here, and the calibration fit's
reference seconds the model ships with (agent.search.fit_time: `FitTimeModel.machine_seconds`, `calibration_seconds`).

The model (data/fit_times.json) was fitted from drafts run on one machine. Each session here may get another: on
2026-12-03 AutoGluon fitted the same models in 1.6-2.4 times the seconds of 2026-11-27's machine. A search scales the
model by the calibration fit's seconds on its machine over those on the model's, so the model must carry the
latter. For a model whose machine was not calibrated, this bench infers them: each family's draft the model knows
(its parameters for the table's size, 5-fold CV with test predictions, as a search drafts it) is cross-validated
through the Evaluator on experience-pool tables, two at a time as a search runs them on two cores, each capped at
CAP_SECONDS; the machine factor is the geometric mean of measured / expected over the CVs that finished, and the
reference is the calibration fit's seconds here (the median of its timings before and after the tables) over that
factor. Pool tables only: no evaluation table.

    python -m bench.machine_factor [--tasks police_trust,...] [--pool DIR] [--root DIR] [--write]

The measurements are kept in bench/agent_runs/machine_factor.json (a table in it is not measured again: remove the
file on another machine). With --write, data/fit_times.json's machine_seconds and the section "## The fit-time model
on this machine (issue 25)" of bench/RESULTS.md are rewritten.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import date
from pathlib import Path

import click

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.trainers import builtin_trainers, steps_for, trainer_facts
from agent.evaluator import Evaluator
from agent.execution.executors import LocalExecutor
from agent.search.fit_time import FIT_TIMES_FILE, FitTimeModel, TableShape, calibration_seconds
from bench.agent_bench import RUNS
from bench.change_times import measure_tables, table_bench_options
from bench.class_times import cv_seconds
from bench.final_choice import task_folder
from bench.throughput_bench import REPO, code_stamp
from retrieval.profile import profile_task

SECTION = "## The fit-time model on this machine (issue 25)"
CAP_SECONDS = 45.0
RUNS_FILE = RUNS / "machine_factor.json"
TASKS = ("police_trust,head_injury,rotterdam,dengue,saratoga,scottish_attainment,uk_employment,"
         "restaurant_inspections,eco_apples,hmda")


def measure(name: str, pool: Path, root: Path, model: FitTimeModel) -> list[dict]:
    """Each family's draft on table `name`, two CVs at a time; a multiclass table is left out (the model's class
    term is bench/class_times.py's)."""
    profile = profile_task(pool / name if (pool / name / "train.csv").is_file() else task_folder(name, root))
    if profile.task_type == "multiclass":
        return [{"task": name, "skipped": "multiclass"}]
    dataset = Dataset.from_profile(profile)
    shape, rows, trainers = TableShape.of(profile), len(dataset.y), builtin_trainers()
    evaluator = Evaluator(cv=5, random_state=0, executor=LocalExecutor(workers=2))
    families = sorted(model.families)

    def cross_validate(family: str) -> dict:
        candidate = SolutionCandidate(family, trainer_facts(family).params_for(rows), "", steps_for(family, trainers))
        _, evidence = evaluator.evaluate_candidate(candidate, dataset, time.monotonic() + CAP_SECONDS,
                                                   predict_test=True)
        return {"task": name, "rows": rows, "columns": shape.columns, "text": shape.text,
                "task_type": profile.task_type, "family": family, "finished": evidence.status == "ok",
                "folds_scored": len(evidence.fold_values), "seconds": round(cv_seconds(evidence, CAP_SECONDS), 2),
                "expected": round(model.seconds(family, rows, shape.columns, shape.text), 2),
                "code": code_stamp(None)}

    with ThreadPoolExecutor(2) as pool_of_two:
        measured = list(pool_of_two.map(cross_validate, families))
    for item in measured:
        click.echo(row(item), err=True)
    return measured


def row(item: dict) -> str:
    seconds = f"{item['seconds']:.1f}" + ("" if item["finished"] else f" ({item['folds_scored']} folds)")
    return (f"| {item['task']} | {item['task_type']} | {item['rows']:,} | {item['columns']} | "
            f"{'yes' if item['text'] else 'no'} | {item['family']} | {seconds} | {item['expected']:.1f} | "
            f"{item['seconds'] / item['expected']:.2f} |")


def machine_factor(measured: list[dict]) -> tuple[float, int]:
    """The geometric mean of measured / expected over the CVs that finished, and how many they are."""
    logs = [math.log(item["seconds"] / item["expected"]) for item in measured if item.get("finished")]
    return (math.exp(statistics.mean(logs)) if logs else 1.0), len(logs)


def markdown(measured: list[dict], calibrations: list[float], factor: float, count: int, reference: float) -> str:
    timed = [item for item in measured if "family" in item]
    families = sorted({item["family"] for item in timed})
    by_family = []
    for family in families:
        own, finished = machine_factor([item for item in timed if item["family"] == family])
        over = sum(not item["finished"] for item in timed if item["family"] == family)
        by_family.append(f"| {family} | {finished} | {over} | {own:.2f} |")
    skipped = ", ".join(item["task"] for item in measured if "skipped" in item) or "none"
    return "\n".join([
        SECTION, "",
        f"`python -m bench.machine_factor` ({date.today()}; {os.cpu_count()} cores; casebook "
        f"{', '.join(sorted({item['code'] for item in timed}))}). Each family's draft that the bundled fit-time model "
        f"knows, cross-validated (5 folds, test predictions) through the Evaluator, two at a time, capped at "
        f"{CAP_SECONDS:g} s (over it: seconds projected from the folds scored). expected = the bundled model's "
        f"estimate. Experience-pool tables, no evaluation table (multiclass left out: {skipped}); kept in "
        f"{RUNS_FILE.relative_to(REPO)}.",
        "", "| task | type | rows | columns | text | family | seconds | expected | measured / expected |",
        "|---|---|---:|---:|---|---|---:|---:|---:|", *(row(item) for item in timed), "",
        "| family | finished | over the cap | measured / expected (geometric mean) |", "|---|---:|---:|---:|",
        *by_family, "",
        f"Machine factor (all {count} finished CVs): {factor:.2f}. Calibration fit here (agent.search.fit_time."
        f"calibration_seconds, timed before and after the tables): "
        f"{', '.join(f'{seconds * 1000:.1f}' for seconds in calibrations)} ms, median "
        f"{statistics.median(calibrations) * 1000:.1f} ms. Reference seconds for the bundled model "
        f"(median / factor): {reference * 1000:.1f} ms."])


@click.command()
@table_bench_options(TASKS, "machine-factor")
def main(tasks: str, pool: Path, root: Path, write: bool) -> None:
    shipped = FitTimeModel.bundled()
    model = replace(shipped, machine_seconds=None)  # the model's own seconds, unscaled
    calibrations = [calibration_seconds()]
    found: dict = {}

    def section(measured: list[dict]) -> str:
        calibrations.append(calibration_seconds())
        factor, count = machine_factor(measured)
        found["reference"] = statistics.median(calibrations) / factor
        return markdown(measured, calibrations, factor, count, found["reference"])

    measure_tables(RUNS_FILE, tasks, lambda name, measured: [] if any(item["task"] == name for item in measured)
                   else measure(name, pool, root, model), section, write)
    if write:
        (REPO / "data" / FIT_TIMES_FILE).write_text(
            json.dumps(replace(shipped, machine_seconds=round(found["reference"], 5)).to_dict(), indent=1) + "\n",
            encoding="utf-8")


if __name__ == "__main__":
    main()
