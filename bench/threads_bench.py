"""How many threads a GBDT node should use on this machine (issue 25, item 2: thread settings tuned for the cores).

Every node runs in its own sandboxed process with native threads limited to one (agent.execution.sandbox); XGBoost
and CatBoost are handed the machine's cores, LightGBM one thread (its threads spin-wait for busy cores). Here each
family's draft (its parameters for the table's size, early stopping as drafted) is cross-validated through the
Evaluator, as the search evaluates a node, with 1 and with 2 threads, on evaluation tables of different sizes:
first on a quiet machine, then with one other process keeping a core busy (another job, a second worker), each
stopped at a minute. The median of --repeats runs of each, the two thread counts alternating so both see the same load; the CV score must
not change with the threads.

    python -m bench.threads_bench [--tasks smoke_ban,census_income] [--repeats 2] [--write]

With --write, the section "## Threads per GBDT node (issue 25)" of bench/RESULTS.md is rewritten.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import click

from agent.engine.spec import ModelSpec, SolutionSpec, ValidationSpec
from agent.engine.trainers import builtin_trainers, steps_for, trainer_facts
from agent.evaluator import Evaluator
from agent.verify.findings import OVER_TIME
from bench.results import write_section
from bench.throughput_bench import REPO, code_stamp, evaluation_task, split

SECTION = "## Threads per GBDT node (issue 25)"
FAMILIES = ("lightgbm", "xgboost", "catboost")
BUSY = "while True: pass"  # one core kept busy, as another job or a second worker would
CAP_SECONDS = 60.0  # a node's time cap here: LightGBM's threads spin-wait for a busy core, and can take minutes


def draft_spec(family: str, rows: int, threads: int) -> SolutionSpec:
    trainer = builtin_trainers()[family]
    params = {**trainer_facts(family).params_for(rows), trainer.jobs_param or "n_jobs": threads}
    return SolutionSpec(steps_for(family, builtin_trainers()), ModelSpec(family, params), None, ValidationSpec(n_splits=5, seed=0))


def timed(evaluator: Evaluator, spec: SolutionSpec, dataset, repeats: int) -> tuple[float | None, float | None]:
    """The median seconds of `repeats` evaluations and the CV score; (None, None) once one runs over CAP_SECONDS."""
    seconds, scores = [], set()
    for _ in range(repeats):
        evidence = evaluator.evaluate(spec, dataset, time.monotonic() + CAP_SECONDS)
        if evidence.status != "ok":
            assert evidence.status == OVER_TIME, evidence.error
            return None, None
        seconds.append(evidence.elapsed)
        scores.add(round(evidence.metric_value, 10))
    return statistics.median(seconds), scores.pop()


def cell(seconds: float | None) -> str:
    return f"{seconds:.2f}" if seconds is not None else f"> {CAP_SECONDS:g}"


def speedup(one: float | None, two: float | None) -> str:
    if one is None or two is None:
        return "–" if one is None and two is None else ("< 1/3" if two is None else "> 3")
    return f"{one / two:.2f}×"


@click.command()
@click.option("--tasks", default="smoke_ban,census_income", show_default=True)
@click.option("--repeats", default=2, show_default=True)
@click.option("--root", type=click.Path(path_type=Path), default=Path(tempfile.gettempdir()) / "threads-bench",
              show_default=True)
@click.option("--write", is_flag=True, help="Rewrite the RESULTS.md section.")
def main(tasks: str, repeats: int, root: Path, write: bool) -> None:
    rows_out = []
    for name in split(tasks):
        _, _, dataset = evaluation_task(name, root)
        rows = len(dataset.y)
        evaluator = Evaluator(cv=5, random_state=0)
        for family in FAMILIES:
            evaluator.evaluate(draft_spec(family, rows, 1), dataset)  # the fold cache and inspection, as a parent's
            measured = {}
            for load in ("quiet", "busy"):
                burner = subprocess.Popen([sys.executable, "-c", BUSY]) if load == "busy" else None
                try:
                    for threads in (1, 2):
                        measured[load, threads] = timed(evaluator, draft_spec(family, rows, threads), dataset, repeats)
                        click.echo(f"{name} {family} {load} {threads} thread(s): {measured[load, threads]}", err=True)
                finally:
                    if burner is not None:
                        burner.kill()
            same = len({score for _, score in measured.values() if score is not None}) == 1
            cells = []
            for load in ("quiet", "busy"):
                one, two = measured[load, 1][0], measured[load, 2][0]
                cells += [cell(one), cell(two), speedup(one, two)]
            rows_out.append(f"| {name} | {rows:,} | {family} | {' | '.join(cells)} | {'yes' if same else 'NO'} |")
            click.echo(rows_out[-1])
    section = "\n".join([
        SECTION, "",
        f"`python -m bench.threads_bench` ({date.today()}; {os.cpu_count()} cores; median of {repeats} runs; casebook "
        f"{code_stamp(None)}). "
        "A node's seconds through the Evaluator (5-fold CV of the family's draft in its sandboxed process, the fold "
        "cache and probes reused as for a parent's change): with 1 and 2 threads, on a quiet machine and with one "
        "other process keeping a core busy, each stopped at a minute (> 60); speed-up = 1 thread / 2 threads.", "",
        "| task | rows | family | quiet, 1 thread (s) | quiet, 2 threads (s) | speed-up | busy, 1 thread (s) | "
        "busy, 2 threads (s) | speed-up | same CV score |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|", *rows_out])
    click.echo(section)
    if write:
        write_section(REPO / "bench" / "RESULTS.md", section)


if __name__ == "__main__":
    main()
