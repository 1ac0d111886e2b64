"""What a multiclass target costs a draft beside its rows and columns (issue 25, item 3: drafts that cannot finish
are skipped up front).

The fit-time model (data/fit_times.json, bench/fit_time.py) was fitted on the drafts that finished within their cap;
on multiclass tables with categorical columns CatBoost's drafts seldom did (the experience pack holds no CatBoost
result on covid_testing, gss_vocab, pitch_type or verbal_aggression), so the model never saw their cost. Since a
multiclass CatBoost one-hot encodes its columns of up to 255 levels (bench/multiclass_ctr.py), every one here
finishes. Here each
family's draft (its parameters for the table's size) and the portfolio's CatBoost configuration with combinations of
two categorical features are cross-validated (5 folds) through the Evaluator, on multiclass experience-pool tables
and on binary and regression ones with as many categorical columns, and compared with the model's estimate. A CV
over its cap counts its seconds projected from the folds it scored (the cap itself when it scored none: a lower
bound). The tables are experience-pool ones: no evaluation table.

Per family, `output_power` (agent.search.fit_time.FamilyTime: the per-row cost times the classes ** output_power) is
fitted by least squares on the log of the seconds of the multiclass CVs that finished, the model's estimate scaled by
what the same family's CVs took against it on this bench's binary and regression tables (this machine's level that
day). The CVs over their cap are left out of the fit: before the one-hot encoding, counted as lower bounds (as bench/fit_time.py counts them),
the two CatBoost tables whose CV ran 7-20 times over any power's estimate (covid_testing's 85 clinics, pitch_type's 9
categorical columns: a cost of categorical levels the classes do not tell) pulled the power to 2.3, and every
finished multiclass CV was then overestimated (a log error of 1.0, against 0.4). The table shows how far under the
fitted power leaves them.

    python -m bench.class_times [--tasks covid_testing,...] [--pool DIR] [--write]

The measurements are kept in bench/agent_runs/class_times.json; a run measures the tables not in it yet. With
--write, CatBoost's output_power in data/fit_times.json and the section "## Multiclass drafts and the
fit-time model (issue 25)" of bench/RESULTS.md are rewritten.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

import click
import numpy as np
from scipy.optimize import least_squares

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.trainers import builtin_trainers, steps_for, trainer_facts
from agent.evaluator import Evaluator
from agent.search.fit_time import FIT_TIMES_FILE, FitTimeModel, TableShape
from agent.verify.findings import Evidence
from bench.agent_bench import RUNS
from bench.change_times import measure_tables, table_bench_options, task_profile
from bench.throughput_bench import REPO, code_stamp

SECTION = "## Multiclass drafts and the fit-time model (issue 25)"
CAP_SECONDS = 45.0
RUNS_FILE = RUNS / "class_times.json"
# The portfolio's CatBoost configuration (data/experience/pack.json, 576a03659af4): the draft that ran over its
# cap on the multiclass tables of the stall section's runs.
PORTFOLIO_CATBOOST = {"iterations": 2000, "learning_rate": 0.05, "max_ctr_complexity": 2,
                      "early_stopping_rounds": 300}
# The families whose fitted output_power --write ships. LightGBM's is measured and shown, not shipped: its drafts ran
# over their cap once in 229 pool drafts (the fit-time section), so a power could only skip drafts that finish.
SHIPPED = ("catboost",)
TASKS = ("covid_testing,verbal_aggression,gss_vocab,pitch_type,prostate_survival,wvs_poverty,tuna_brand,"
         "monica,unemployment_benefits,youth_activity,wives_hours,resume_callback")


def candidates(rows: int) -> list[tuple[str, SolutionCandidate]]:
    trainers = builtin_trainers()
    out = [(f"{family} draft", SolutionCandidate(family, trainer_facts(family).params_for(rows), "",
                                                 steps_for(family, trainers)))
           for family in ("catboost", "lightgbm")]
    out.append(("catboost portfolio", SolutionCandidate("catboost", dict(PORTFOLIO_CATBOOST), "",
                                                        steps_for("catboost", trainers))))
    return out


def measure(name: str, pool: Path, root: Path) -> list[dict]:
    profile = task_profile(name, pool, root)
    dataset = Dataset.from_profile(profile)
    shape, model = TableShape.of(profile), FitTimeModel.bundled()
    rows = len(dataset.y)
    classes = len(dataset.classes) if dataset.classification else 0
    evaluator, measured = Evaluator(cv=5, random_state=0), []
    for label, candidate in candidates(rows):
        _, evidence = evaluator.evaluate_candidate(candidate, dataset, time.monotonic() + CAP_SECONDS)
        folds = len(evidence.fold_values)
        finished = evidence.status == "ok"
        seconds = cv_seconds(evidence, CAP_SECONDS)
        item = {"task": name, "rows": rows, "columns": shape.columns, "text": shape.text,
                "categorical": len(profile.column_infos("categorical")), "task_type": profile.task_type,
                "classes": classes, "candidate": label, "family": candidate.trainer, "finished": finished,
                "folds_scored": folds, "seconds": round(seconds, 2),
                "expected": round(model.seconds(candidate.trainer, rows, shape.columns, shape.text), 2),
                "code": code_stamp(None)}
        measured.append(item)
        click.echo(row(item), err=True)
    return measured


def cv_seconds(evidence: Evidence, cap: float) -> float:
    """A 5-fold CV's seconds; one over its cap, projected from the folds it scored (the cap itself when it scored
    none: a lower bound)."""
    if evidence.status == "ok":
        return evidence.elapsed
    return max(evidence.elapsed, cap) * 5 / max(len(evidence.fold_values), 1)


def row(item: dict) -> str:
    seconds = f"{item['seconds']:.1f}" + ("" if item["finished"] else f" ({item['folds_scored']} folds)")
    return (f"| {item['task']} | {item['task_type']} | {item['classes'] or '–'} | {item['rows']:,} | "
            f"{item['columns']} | {item['categorical']} | {item['candidate']} | {seconds} | {item['expected']:.1f} | "
            f"{item['seconds'] / item['expected']:.2f} |")


def log_ratio(item: dict) -> float:
    return math.log(item["seconds"] / item["expected"])


def multiclass_factor(measured: list[dict], label: str) -> float | None:
    """How many times more than the model expects a multiclass table's CV of `label` takes, against the binary and
    regression tables' (the geometric means of measured / expected, divided); None without both."""
    multi = [log_ratio(item) for item in measured if item["candidate"] == label and item["task_type"] == "multiclass"]
    other = [log_ratio(item) for item in measured if item["candidate"] == label and item["task_type"] != "multiclass"]
    return math.exp(statistics.mean(multi) - statistics.mean(other)) if multi and other else None


def output_power(measured: list[dict], family: str, model: FitTimeModel) -> tuple[float, float, list[float]] | None:
    """The family's output_power fitted on its multiclass CVs that finished, the root mean square of their log
    error, and the log errors of those over their cap (negative: under their lower bound); None without finished
    multiclass and other CVs of the family."""
    items = [item for item in measured if item["family"] == family]
    multi = [item for item in items if item["task_type"] == "multiclass" and item["finished"]]
    other = [log_ratio(item) for item in items if item["task_type"] != "multiclass"]
    if not multi or not other:
        return None
    level = statistics.mean(other)

    def errors(power: float, items: list[dict]) -> np.ndarray:
        fitted = FitTimeModel({family: replace(model.families[family], output_power=power)})
        expected = np.log([fitted.seconds(family, item["rows"], item["columns"], item["text"],
                                          outputs=item["classes"]) for item in items]) + level
        return expected - np.log([item["seconds"] for item in items])

    power = round(float(least_squares(lambda values: errors(float(values[0]), multi), x0=[0.0]).x[0]), 3)
    over = [item for item in items if item["task_type"] == "multiclass" and not item["finished"]]
    return power, float(np.sqrt(np.mean(errors(power, multi) ** 2))), list(errors(power, over)) if over else []


def borrowed(measured: list[dict], model: FitTimeModel, lender: str = "lightgbm draft",
             borrower: str = "catboost draft") -> list[str]:
    """Whether one family's drafts on a table tell another's time there (agent.search.fit_time's table factor, when
    the other has not run yet): per table where both finished, each draft's measured / expected by the shipped model
    (its class term included), the correlation of their logs, and the root mean square log error of the borrower's
    ratio taken as 1 (the model alone) and as the lender's."""
    def ratio(item: dict) -> float:
        family = model.families[item["family"]]
        outputs = item["classes"] if item["task_type"] == "multiclass" else 1  # one output for a binary target
        return item["seconds"] / (item["expected"] * outputs ** family.output_power)

    pairs = {}
    for item in measured:
        if item["candidate"] in (lender, borrower) and item["finished"]:
            pairs.setdefault(item["task"], {})[item["candidate"]] = ratio(item)
    rows = [(task, both[lender], both[borrower]) for task, both in pairs.items() if len(both) == 2]
    lent, own = np.log([row[1] for row in rows]), np.log([row[2] for row in rows])
    return [f"| {task} | {lent_ratio:.2f} | {own_ratio:.2f} |" for task, lent_ratio, own_ratio in rows] + [
        "", f"{len(rows)} tables: correlation of the logs {np.corrcoef(lent, own)[0, 1]:.2f}; root mean square log "
        f"error of the {borrower}'s ratio taken as 1 (the model alone) {np.sqrt(np.mean(own ** 2)):.2f}, taken as the "
        f"{lender}'s {np.sqrt(np.mean((own - lent) ** 2)):.2f}."]


def markdown(measured: list[dict], powers: dict[str, tuple[float, float, list[float]]], model: FitTimeModel) -> str:
    labels = sorted({item["candidate"] for item in measured})
    summary = []
    for label in labels:
        items = [item for item in measured if item["candidate"] == label]
        factor = multiclass_factor(measured, label)
        over = sum(not item["finished"] for item in items if item["task_type"] == "multiclass")
        summary.append(f"| {label} | {sum(item['task_type'] == 'multiclass' for item in items)} | "
                       f"{sum(item['task_type'] != 'multiclass' for item in items)} | {over} | "
                       f"{'–' if factor is None else f'{factor:.2f}'} |")
    fitted = [f"| {family} | {power:.2f} | {3 ** power:.1f} | {8 ** power:.1f} | {spread:.2f} | "
              f"{', '.join(f'{error:+.1f}' for error in over) or '–'} |"
              for family, (power, spread, over) in sorted(powers.items())]
    return "\n".join([
        SECTION, "",
        f"`python -m bench.class_times` ({date.today()}; {os.cpu_count()} cores; casebook "
        f"{', '.join(sorted({item['code'] for item in measured}))}). Each draft cross-validated (5 folds) through the "
        f"Evaluator, capped at {CAP_SECONDS:g} s; over its cap, its seconds are projected from the folds it scored "
        "(the cap itself with none: a lower bound). expected = the bundled fit-time model's estimate (rows, columns, "
        f"text; no term for the classes). Experience-pool tables, no evaluation table; kept in "
        f"{RUNS_FILE.relative_to(REPO)}.",
        "", "| task | type | classes | rows | columns | categorical | draft | seconds | expected | measured / expected |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|", *(row(item) for item in measured), "",
        "Multiclass factor = the geometric mean of measured / expected on the multiclass tables over that on the "
        "binary and regression ones:", "",
        "| draft | multiclass tables | others | multiclass over the cap | multiclass factor |",
        "|---|---:|---:|---:|---:|", *summary, "",
        f"Fitted output power (shipped in data/fit_times.json for {', '.join(SHIPPED)}), on the multiclass CVs that "
        "finished; log error: the root mean "
        "square on those, and each over its cap against its lower bound (negative: the model expects less):", "",
        "| family | output power | 3 classes, times the per-row cost | 8 classes | log error, finished | "
        "log error, over the cap |",
        "|---|---:|---:|---:|---:|---|", *fitted, "",
        "Other families' drafts and a draft's time: per table, measured / expected by the shipped model (its class "
        "terms included) of the LightGBM and the CatBoost draft, where both finished:", "",
        "| task | lightgbm draft | catboost draft |", "|---|---:|---:|", *borrowed(measured, model)])


@click.command()
@table_bench_options(TASKS, "class-times")
def main(tasks: str, pool: Path, root: Path, write: bool) -> None:
    model = FitTimeModel.bundled()
    powers: dict[str, tuple[float, float, list[float]]] = {}

    def section(measured: list[dict]) -> str:
        for family in sorted({item["family"] for item in measured}):
            fitted = output_power(measured, family, model)
            if fitted is not None:
                powers[family] = fitted
        return markdown(measured, powers, model)

    measure_tables(RUNS_FILE, tasks, lambda name, measured: [] if any(item["task"] == name for item in measured)
                   else measure(name, pool, root), section, write)
    if write:
        families = {name: replace(family, output_power=powers[name][0]) if name in powers and name in SHIPPED
                    else family for name, family in model.families.items()}
        (REPO / "data" / FIT_TIMES_FILE).write_text(
            json.dumps(replace(model, families=families).to_dict(), indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
