"""Benchmark: what knowledge adds, by source. Four arms of `agent solve` that differ only in the knowledge base:

    no_kb      the same tree search, with the same final blending and Optuna tuning, and no knowledge
    writeups   a KB of the shared Kaggle write-ups and paper summaries only (what `kb ingest solutions/` gives)
    cards      a KB of the bundled hand-written cards only
    both       write-ups, papers and cards

Each arm gets the same wall budget, runs as its own process and is scored on held-back answers. For the KB arms,
run.json's `tricks_by_source` gives the applied and the winning tricks by source kind (card, write-up, paper).

    python -m bench.ablation_bench [--tasks attrition,...,remote] [--time-budget 120]

The default tasks are the agent bench's (bench.agent_bench.DEFAULT_TASKS, tuned on while developing) and the held-out
ones (bench.tasks.HELD_OUT_TASKS, never looked at); the two are reported apart. Results are saved after every task
into bench/agent_runs/ablation-<budget>s.json, merged by task, so a long run can be split across processes with
--tasks. The "## Knowledge-source ablation" section of RESULTS.md is written from everything stored. The no_kb and
both arms on the agent bench's tasks are also the agent bench's no_kb and kb arms (same split, same command, same
KB), and are stored there too.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import click

from agent.engine.dataset import Dataset
from bench import agent_bench
from bench.agent_bench import (
    DEFAULT_TASKS,
    RUNS,
    SHARED,
    ArmResult,
    TaskResult,
    agent_solve,
    beats,
    build_task,
    held_back_score,
    load_runs,
    merge_runs,
    ratio,
    run_child,
    run_stamp,
    runs_path,
    search_summary,
)
from bench.results import write_section
from bench.tasks import HELD_OUT_TASKS
from kb.config import bundled_knowledge
from retrieval.profile import profile_task

BENCH = Path(__file__).resolve().parent
ARMS = ("no_kb", "writeups", "cards", "both")
SECTION = "## Knowledge-source ablation (issue 11)"


WRITTEN = ("write-up", "paper")  # the source kinds read from real text, against the hand-written cards


def knowledge_sources() -> dict[str, list[str]]:
    """What each KB arm ingests; "both" is also the agent bench's kb arm."""
    writeups = [str(SHARED / "corpus/kaggle_writeups"), str(SHARED / "corpus/kaggle_writeups_tabular"),
                str(SHARED / "corpus/papers/paper_summaries.json")]
    return {"writeups": writeups, "cards": [str(bundled_knowledge())], "both": [*writeups, str(bundled_knowledge())]}


def build_homes(root: Path, arms: tuple[str, ...] = ARMS) -> dict[str, Path]:
    """The knowledge bases of the KB arms among `arms`, ingested with the `kb` command as a user would."""
    sources = {arm: paths for arm, paths in knowledge_sources().items() if arm in arms}
    kb = str(Path(sys.executable).parent / "kb")
    homes = {}
    for arm, paths in sources.items():
        homes[arm] = root / f"home-{arm}"
        status, seconds, _ = run_child([kb, "--home", str(homes[arm]), "ingest", *paths, "--quiet"],
                                       root / f"ingest-{arm}.log")
        if status != 0:
            raise click.ClickException(f"ingest for {arm} failed; see {root / f'ingest-{arm}.log'}")
        print(f"ingested {arm} in {seconds:.0f} s", file=sys.stderr)
    return homes


def run_task(name: str, root: Path, homes: dict[str, Path], time_budget: float, stamp: str,
             arms_to_run: tuple[str, ...] = ARMS) -> dict:
    built = build_task(name, root)
    dataset = Dataset.from_profile(profile_task(built.task_dir))
    arms = {}
    for arm in arms_to_run:
        out = root / f"{name}-{arm}"
        home = homes.get(arm, root / "home-none")
        command = agent_solve(built.task_dir, out, time_budget, *(["--use-kb"] if arm in homes else []), home=home)
        out.parent.mkdir(parents=True, exist_ok=True)
        status, seconds, peak = run_child(command, root / f"{name}-{arm}.log")
        submission = out / "submission.csv"
        run = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
        arms[arm] = {"score": held_back_score(dataset, submission, built.answers_path) if submission.exists() else None,
                     "cv": run.get("best_cv_score"), "seconds": round(seconds, 1), "peak_mb": round(peak),
                     "nodes": run.get("n_attempts"), "tricks_by_source": run.get("tricks_by_source"),
                     "status": status, "ran": stamp, "search": search_summary(out / "run.json")}
        print(f"{name} {arm}: {arms[arm]['score']} in {seconds:.0f} s", file=sys.stderr)
    return {"task": name, "metric": dataset.metric, "greater_is_better": dataset.metric_info.greater_is_better,
            "n_train": len(dataset.X), "arms": arms}


def store_path(time_budget: float) -> Path:
    return RUNS / f"ablation-{time_budget:g}s.json"


def save(result: dict, time_budget: float) -> list[dict]:
    """Merge one task's result into the store (by task and arm: arms not run keep their stored result) and return
    everything stored, in bench order."""
    path = store_path(time_budget)
    stored = {r["task"]: r for r in (json.loads(path.read_text()) if path.exists() else [])}
    arms = {**stored.get(result["task"], {}).get("arms", {}), **result["arms"]}
    stored[result["task"]] = {**result, "arms": {arm: arms[arm] for arm in ARMS if arm in arms}}
    order = [*DEFAULT_TASKS, *HELD_OUT_TASKS]
    results = sorted(stored.values(), key=lambda r: order.index(r["task"]) if r["task"] in order else len(order))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2))
    return results


def as_task_result(result: dict, arms: dict[str, str] | None = None) -> TaskResult:
    """A stored task result as the agent bench's record; `arms` picks and renames arms (its name: the ablation's)."""
    picked = arms or {arm: arm for arm in result["arms"]}
    return TaskResult(result["task"], result["metric"], result["greater_is_better"], result["n_train"], tuple(
        ArmResult(name, a["score"], a["seconds"], a["peak_mb"], "" if a["status"] == 0 else f"exit {a['status']}",
                  a["ran"], a.get("search") or {})
        for name, a in ((name, result["arms"][arm]) for name, arm in picked.items())))


def as_agent_bench(result: dict) -> TaskResult:
    """The no_kb and both arms as the agent bench's no_kb and kb arms."""
    return as_task_result(result, {"kb": "both", "no_kb": "no_kb"})


def score_table(title: str, results: list[dict]) -> list[str]:
    lines = [title, "", "| task | metric | rows | " + " | ".join(ARMS) + " |", "|---|---|---:|" + "---:|" * len(ARMS)]
    for result in results:
        cells = [f"{a['score']:.4f}" if a["score"] is not None else "failed" for a in result["arms"].values()]
        lines.append(f"| {result['task']} | {result['metric']} {'↑' if result['greater_is_better'] else '↓'} | "
                     f"{result['n_train']} | " + " | ".join(cells) + " |")
    lines.append("")
    records = [as_task_result(r) for r in results]
    for arm in ("writeups", "cards", "both"):
        wins = sum(bool(beats(record, arm, "no_kb")) for record in records)
        ratios = [x for x in (ratio(record, arm, "no_kb") for record in records) if x is not None]
        mean = f"{sum(ratios) / len(ratios):.4f}" if ratios else "–"
        lines.append(f"- {arm} beats no_kb on {wins} of {len(results)} tasks; mean score ratio to no_kb "
                     f"(> 1 is better) {mean}.")
    return [*lines, ""]


def source_lines(results: list[dict]) -> list[str]:
    lines = ["| task | arm | applied card / write-up / paper | winning card / write-up / paper |", "|---|---|---|---|"]
    totals = {"applied": dict.fromkeys(("card", *WRITTEN), 0), "winning": dict.fromkeys(("card", *WRITTEN), 0)}
    written_wins = 0
    for result in results:
        for arm in ("writeups", "cards", "both"):
            counts = result["arms"][arm]["tricks_by_source"] or {}
            cells = [" / ".join(str(counts.get(side, {}).get(kind, 0)) for kind in ("card", *WRITTEN))
                     for side in ("applied", "winning")]
            lines.append(f"| {result['task']} | {arm} | {cells[0]} | {cells[1]} |")
            if arm == "both":
                for side in totals:
                    for kind in totals[side]:
                        totals[side][kind] += counts.get(side, {}).get(kind, 0)
                written_wins += any(counts.get("winning", {}).get(kind, 0) for kind in WRITTEN)
    applied = sum(totals["applied"].values())
    share = sum(totals["applied"][kind] for kind in WRITTEN) / applied if applied else 0.0
    return [*lines, "", f"- In the both arm, write-ups and papers supplied {share:.0%} of the applied tricks "
            f"({sum(totals['applied'][k] for k in WRITTEN)} of {applied}; target ≥ 30%).",
            f"- In the both arm, a write-up or paper trick is among the winning tricks on {written_wins} of "
            f"{len(results)} tasks (target: most tasks).", ""]


def section(results: list[dict], time_budget: float) -> str:
    ran = sorted({a["ran"] for r in results for a in r["arms"].values()})
    lines = [SECTION, "",
             f"`python -m bench.ablation_bench --time-budget {time_budget:g}`: real tables split 75/25 (bench/tasks.py, "
             "seed 0), scored on the held-back answers. The four arms differ only in the knowledge base: every arm "
             "has the same tree search, the same final blending, stacking and rank averaging, and the same Optuna "
             "tuning. writeups = the shared Kaggle write-ups and paper summaries (what `kb ingest solutions/` gives "
             "a user); cards = the bundled hand-written cards; both = all three. The agent retrieves the 40 best "
             "tricks with a recipe for the task, by one rule for every source. Ran "
             f"{', '.join(ran)}.", ""]
    tuned = [r for r in results if r["task"] not in HELD_OUT_TASKS]
    held_out = [r for r in results if r["task"] in HELD_OUT_TASKS]
    if tuned:
        lines += score_table("Agent bench tasks (tuned on while developing):", tuned)
    if held_out:
        lines += score_table("Held-out tasks (bench/tasks.py HELD_OUT_TASKS, never looked at while developing):",
                             held_out)
    lines += ["Wall seconds / peak MB per arm: " + "; ".join(
        f"{r['task']} " + ", ".join(f"{arm} {a['seconds']:.0f}/{a['peak_mb']}" for arm, a in r["arms"].items())
        for r in results) + ".", "",
        "Tricks by source kind, from each KB arm's run.json (a trick wins when it lies on the best node's lineage or "
        "in one of its ensemble members):", ""]
    if tuned:
        lines += ["Agent bench tasks:", "", *source_lines(tuned)]
    if held_out:
        lines += ["Held-out tasks:", "", *source_lines(held_out)]
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--tasks", default=",".join((*DEFAULT_TASKS, *HELD_OUT_TASKS)), show_default=True)
@click.option("--time-budget", type=float, default=120.0, show_default=True)
@click.option("--arms", default=",".join(ARMS), show_default=True,
              help="Comma-separated arms to run; the others keep their stored results.")
def main(tasks: str, time_budget: float, arms: str) -> None:
    chosen = tuple(arm.strip() for arm in arms.split(",") if arm.strip())
    if set(chosen) - set(ARMS):
        raise click.ClickException(f"unknown arms {sorted(set(chosen) - set(ARMS))}; choose from {', '.join(ARMS)}")
    if not (SHARED / "corpus").exists():
        raise click.ClickException(f"{SHARED}/corpus is absent: the write-up arms need the shared corpus")
    root = Path(tempfile.mkdtemp(prefix="ablation-"))
    results: list[dict] = []
    try:
        stamp = run_stamp()
        homes = build_homes(root, chosen)
        for name in tasks.split(","):
            result = run_task(name, root, homes, time_budget, stamp, chosen)
            results = save(result, time_budget)
            if name in DEFAULT_TASKS and {"no_kb", "both"} <= set(chosen):  # the agent bench's no_kb and kb arms
                store = runs_path(time_budget)
                store.write_text(json.dumps([asdict(r) for r in merge_runs(load_runs(store), [as_agent_bench(result)])],
                                            indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    write_section(BENCH / "RESULTS.md", section(results, time_budget))
    write_section(agent_bench.RESULTS, agent_bench.markdown(load_runs(runs_path(time_budget)), time_budget))


if __name__ == "__main__":
    main()
