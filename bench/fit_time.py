"""The fit-time model the search sizes its drafts by (issue 25, item 3), fitted on this machine from finished runs.

Every draft in the run folders' journals that finished all its folds (on every row, or on the exploration sample) is
one point: its model family, the rows its CV ran on, its folds, the table's columns and whether it has free text, and
its seconds. Per family, agent.search.fit_time.FamilyTime's four numbers are fitted by least squares on the log of
the seconds; a draft that ran over its cap counts only where the model expects less than that cap (its seconds are a
lower bound). The table says how many of those the model puts over their cap.

    python -m bench.fit_time RUNS_DIR [RUNS_DIR ...] [--write]

A family's output_power (its cost per class of a multiclass target) is bench/class_times.py's, its transfer (how
much other families' times on a table tell of its own) bench/table_factor.py's; both are kept as shipped.

RUNS_DIR is a folder of run folders, such as an experience build's work folder (`agent experience build POOL --out
pack.json` keeps them in pack.json.runs/). With --write, data/fit_times.json and the section "## Fit-time model of
the drafts (issue 25)" of bench/RESULTS.md are rewritten; the model then keeps the calibration fit's seconds timed
as it writes (agent.search.fit_time.calibration_seconds, the median of three), so run it on the machine that made
RUNS_DIR: a search on another machine scales the model by that fit's seconds there.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

import click
import numpy as np
from scipy.optimize import least_squares

from agent.search.fit_time import FIT_TIMES_FILE, FamilyTime, FitTimeModel, calibration_seconds
from bench.results import write_section
from bench.throughput_bench import REPO, code_stamp

SECTION = "## Fit-time model of the drafts (issue 25)"
MIN_POINTS = 10  # a family with fewer finished drafts gets no model (the search then never sizes its drafts)


@dataclass(frozen=True)
class Draft:
    family: str
    rows: int
    folds: int
    columns: int
    text: bool
    bag: int  # the model fitted this many times per fold (seed_bag)
    seconds: float
    finished: bool  # every fold scored; otherwise over its cap, and `seconds` is that cap


def drafts_of(run_dir: Path) -> list[Draft]:
    """The single-model drafts of one run folder's journal that finished or ran over time."""
    try:
        run = json.loads((run_dir / "run.json").read_text())
        nodes, task = run["journal"]["nodes"], run["task"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return []
    text = any(column["kind"] == "text" for column in task["columns"])
    found = []
    for node in nodes:
        if node["action"] != "draft" or node.get("members"):
            continue
        exploration = node.get("exploration")
        rows = exploration["rows"] if exploration else task["n_rows"]
        seconds = exploration["elapsed"] if exploration else node["elapsed"]
        finished = node["status"] in ("valid", "explored")
        if (finished or node["status"] == "over_time") and seconds > 0:
            folds = (node.get("spec") or {}).get("validation", {}).get("n_splits") or 5
            bag = int(node["candidate"].get("params", {}).get("seed_bag") or 1)
            found.append(Draft(node["candidate"]["trainer"], rows, folds, len(task["columns"]), text, bag, seconds,
                               finished))
    return found


def fit_family(drafts: list[Draft]) -> tuple[FamilyTime, float]:
    """The family's FamilyTime fitted on the log of its drafts' seconds, and the standard deviation of its log error
    on the finished ones. A draft over its cap is censored: it adds an error only where the model expects less than
    the cap it ran over (a one-sided residual, as a Tobit model counts a censored point)."""

    widest = max(draft.columns for draft in drafts)

    def residuals(values: np.ndarray) -> np.ndarray:
        fitted = FitTimeModel({"family": _family(values, widest)})
        expected = np.log([fitted.seconds("family", d.rows, d.columns, d.text, d.folds, d.bag) for d in drafts])
        error = expected - np.log([draft.seconds for draft in drafts])
        finished = np.array([draft.finished for draft in drafts])
        return np.where(finished, error, np.minimum(error, 0.0))

    result = least_squares(residuals, x0=[0.0, math.log(0.1), 0.5, 0.0])
    finished = np.array([draft.finished for draft in drafts])
    return _family(result.x, widest, digits=4), float(np.std(result.fun[finished]))


def _family(values: np.ndarray, widest: int, digits: int | None = None) -> FamilyTime:
    """FamilyTime from the fitted values: the log of the overhead, of the cost per 1k rows and of the text factor
    (each positive), and the column power; `widest` is the most columns it was measured on."""
    numbers = (math.exp(values[0]), math.exp(values[1]), float(values[2]), math.exp(values[3]))
    return FamilyTime(*(round(number, digits) if digits is not None else number for number in numbers), widest)


@click.command()
@click.argument("runs_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--write", is_flag=True, help="Rewrite data/fit_times.json and the RESULTS.md section.")
def main(runs_dirs: tuple[Path, ...], write: bool) -> None:
    drafts = [draft for runs in runs_dirs for run_dir in sorted(runs.iterdir()) if run_dir.is_dir()
              for draft in drafts_of(run_dir)]
    by_family: dict[str, list[Draft]] = {}
    for draft in drafts:
        by_family.setdefault(draft.family, []).append(draft)
    families, rows, shipped = {}, [], FitTimeModel.bundled()
    for name, found in sorted(by_family.items()):
        finished = [draft for draft in found if draft.finished]
        over = [draft for draft in found if not draft.finished]
        if len(finished) < MIN_POINTS:
            rows.append(f"| {name} | {len(finished)} | {len(over)} | – | – | – | – | – | too few finished drafts |")
            continue
        family, spread = fit_family(found)
        if shipped is not None and shipped.knows(name):  # bench/class_times.py and bench/table_factor.py fit them
            shipped_family = shipped.families[name]
            family = replace(family, output_power=shipped_family.output_power, transfer=shipped_family.transfer)
        families[name] = family
        model = FitTimeModel({name: family})
        caught = sum(model.seconds(name, d.rows, d.columns, d.text, d.folds, d.bag) > d.seconds for d in over)
        sizes = (f"{min(d.rows for d in finished):,}–{max(d.rows for d in finished):,} rows, up to "
                 f"{family.max_columns} columns")
        rows.append(f"| {name} | {len(finished)} | {len(over)} | {family.overhead:.2f} | {family.per_1k_rows:.3f} | "
                    f"{family.column_power:.2f} | {family.text_factor:.1f} | {spread:.2f} | {sizes}; over its cap: "
                    f"{caught} of {len(over)} |")
    measured = (f"{len(drafts)} drafts of {sum(1 for runs in runs_dirs for d in runs.iterdir() if d.is_dir())} run "
                f"folders, {platform.machine()} with {os.cpu_count()} cores, {date.today()}, "
                f"casebook {code_stamp(None)}")
    table = "\n".join(rows)
    section = f"""{SECTION}

`python -m bench.fit_time RUNS_DIR ...` ({measured}). A draft's node seconds (CV in its own process, probes and test
predictions included) = overhead + per 1k rows × rows/1000 × (columns/10)^power × (text factor if the table has free
text), rows counted as in a 5-fold CV and times a seed bag's fits, fitted per family on the log of the seconds of the drafts that finished every
fold, and on those that ran over their cap as lower bounds (an error only where it expects less than the cap). Log sd:
the standard deviation of the log error on the finished drafts (0.5 is a factor of 1.6). The last column says how many
of the drafts that ran over their cap the model puts over it.

| family | finished drafts | over time | overhead (s) | per 1k rows (s) | column power | text factor | log sd | measured on; over time caught |
|---|---:|---:|---:|---:|---:|---:|---:|---|
{table}
"""
    click.echo(section)
    if write:
        (REPO / "data" / FIT_TIMES_FILE).write_text(
            json.dumps(FitTimeModel(families, measured, round(statistics.median(
                calibration_seconds() for _ in range(3)), 5)).to_dict(), indent=1) + "\n", encoding="utf-8")
        write_section(REPO / "bench" / "RESULTS.md", section)


if __name__ == "__main__":
    main()
