"""A search change judged on development tables first: `agent solve` at --before REF and from this working tree, on
bench/tasks.py's development tables or experience-pool tables (never an evaluation table), each run its own process,
one at a time.

A change read from an evaluation table's run folder must be judged where it was not read; this is that first step,
before bench/throughput_bench.py or bench/experience_bench.py runs it on the evaluation tables. Per run: the held-back
score, wall seconds, and from the run folder the nodes evaluated, skipped (over time before they ran) and
verified on full CV, the best CV score, and each draft's fold seconds (trace.jsonl), so that two arms' same draft can
be compared fold by fold.

    python -m bench.dev_ab --before REF --tasks wage,hotel,credit --budget 60 --seeds 0,1 [--kb-home HOME]
        [--label LABEL]

With --kb-home (a home `kb ingest` filled), both arms run with --use-kb, each on a copy of it. Runs are saved to
bench/agent_runs/dev-ab-LABEL.json as each ends; a run already there (same task, budget, arm and seed, and for the
working tree the same code) is skipped, so an interrupted bench resumes. The table is printed, not written to
RESULTS.md: a reading of it goes there by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path

import click

from agent.engine.dataset import Dataset
from bench.agent_bench import RUNS, held_back_score
from bench.anytime_bench import AGENT_MAIN, measure_process
from bench.final_choice import task_folder
from bench.tasks import EVALUATION_TASKS
from bench.throughput_bench import REPO, add_worktree, code_stamp, remove_worktree, run_key, search_record, split
from retrieval.profile import profile_task


def draft_folds(run_dir: Path) -> list[dict]:
    """Each draft that ran: its model, when it started (search seconds), its status and its folds' fit seconds."""
    trace = run_dir / "trace.jsonl"
    drafts = []
    for line in trace.read_text(encoding="utf-8").splitlines() if trace.exists() else ():
        node = json.loads(line)
        if node.get("action") == "draft" and node.get("fit_seconds"):
            drafts.append({"trainer": node["trainer"], "started": node["started"], "status": node["node_status"],
                           "fit_seconds": node["fit_seconds"]})
    return drafts


def run_arm(task: str, arm: str, code: Path, seed: int, budget: float, root: Path, kb_home: Path | None) -> dict:
    task_dir = task_folder(task, root)
    answers = task_dir.parent / f"{task}.answers.csv"
    out = root / "runs" / run_key(task, budget, arm, seed).replace("@", "-")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    home = Path(tempfile.mkdtemp(prefix="home-", dir=out))
    options = []
    if kb_home is not None:
        shutil.copytree(kb_home, home, dirs_exist_ok=True)
        options.append("--use-kb")
    command = [*AGENT_MAIN, "--home", str(home), "solve", str(task_dir), "--time-budget", str(budget), "--seed",
               str(seed), "--out", str(out / "run"), "--quiet", *options]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(code)}
    measured = measure_process(command, code, env, out / "log.txt", hard_limit=budget * 3 + 120)
    submission = out / "run" / "submission.csv"
    dataset = Dataset.from_profile(profile_task(task_dir))
    score = held_back_score(dataset, submission, answers) if submission.exists() else None
    search = {key: value for key, value in search_record(out / "run").items() if key != "fold_scores"}
    return {"task": task, "budget": budget, "arm": arm, "seed": seed, "options": options, "wall": measured["wall"],
            "score": score, "greater_is_better": dataset.metric_info.greater_is_better, "metric": dataset.metric,
            "search": search, "drafts": draft_folds(out / "run")}


def table(runs: dict[str, dict]) -> str:
    cells: dict[tuple, list[dict]] = {}
    for record in runs.values():
        cells.setdefault((record["task"], record["budget"], record["arm"]), []).append(record)

    def mean(records: list[dict], read) -> str:
        values = [value for value in map(read, records) if value is not None]
        return f"{statistics.mean(values):.5g}" if values else "–"

    lines = ["| task | budget (s) | arm | runs | held-back score | best CV | nodes | skipped | verified on full CV | "
             "wall (s) |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (task, budget, arm), records in sorted(cells.items()):
        metric = f"{records[0]['metric']} {'↑' if records[0]['greater_is_better'] else '↓'}"
        lines.append(f"| {task} ({metric}) | {budget:g} | {arm} | {len(records)} | {mean(records, lambda r: r['score'])} | "
                     f"{mean(records, lambda r: r['search'].get('best_cv'))} | "
                     f"{mean(records, lambda r: r['search'].get('nodes'))} | "
                     f"{mean(records, lambda r: r['search'].get('skipped'))} | "
                     f"{mean(records, lambda r: r['search'].get('verified_full_cv'))} | "
                     f"{mean(records, lambda r: r['wall'])} |")
    return "\n".join(lines)


@click.command()
@click.option("--before", "before_revision", required=True, help="The git ref the `before` arm runs.")
@click.option("--tasks", required=True, help="Comma-separated development or experience-pool task names.")
@click.option("--budget", type=float, default=60.0, show_default=True)
@click.option("--seeds", default="0,1", show_default=True)
@click.option("--kb-home", type=click.Path(path_type=Path, exists=True, file_okay=False), default=None,
              help="A home with an ingested knowledge base: both arms run with --use-kb.")
@click.option("--root", type=click.Path(path_type=Path), default=Path(tempfile.gettempdir()) / "dev-ab",
              show_default=True)
@click.option("--label", default="latest", show_default=True)
def main(before_revision: str, tasks: str, budget: float, seeds: str, kb_home: Path | None, root: Path,
         label: str) -> None:
    names = split(tasks)
    held_out = sorted(set(names) & set(EVALUATION_TASKS))
    if held_out:
        raise click.UsageError(f"--tasks: {', '.join(held_out)} are evaluation tables; judge a change on "
                               "development or pool tables here, then on those with bench/throughput_bench.py")
    runs_file = RUNS / f"dev-ab-{label}.json"
    runs = json.loads(runs_file.read_text()) if runs_file.exists() else {}
    stamps = {"before": code_stamp(before_revision), "after": code_stamp(None)}
    before = add_worktree(before_revision, root)
    try:
        for seed in map(int, split(seeds)):
            for task in names:
                for arm, code in (("before", before), ("after", REPO)):
                    key = run_key(task, budget, arm, seed)
                    if runs.get(key, {}).get("code") == stamps[arm]:
                        continue
                    record = {**run_arm(task, arm, code, seed, budget, root, kb_home), "code": stamps[arm]}
                    runs[key] = record
                    runs_file.write_text(json.dumps(runs, indent=1) + "\n")
                    click.echo(f"{key}: score {record['score']}, {record['search'].get('verified_full_cv')} "
                               f"verified on full CV, wall {record['wall']:.1f} s", err=True)
    finally:
        remove_worktree(before)
    click.echo(table(runs))


if __name__ == "__main__":
    main()
