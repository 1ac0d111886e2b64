"""The submission from a refit on every row or from the CV fold models' average (issue 25): what does the refit buy?

The search keeps back the refit's estimate (agent.search.clock.refit_reserve: the top nodes' refits, up to a quarter
of the budget) so that the submission can come from the best node refit on every row; when the refit does not fit,
the CV fold models' test predictions averaged stand in (agent.search.final.final_fit), at no cost. On a table where
the time kept back is large (a blend of CatBoost nodes), it is time the search does not spend on nodes. This bench
scores both submissions of finished runs on the held-back answers: for each run folder, the best node's members are
cross-validated again (the run's folds and seed, their test predictions averaged per fold model, combined as the
node combines them) and refit on every row with the trees their folds kept, and both predictions are scored.

The run folders are a throughput or experience bench's: ROOT/runs/<task>-<budget>-<arm>-<seed>/run, with the task
folder and its answers in ROOT/tasks/.

    python -m bench.refit_or_average --root /tmp/throughput-bench [--runs 'GLOB'] [--write]

The measurements are kept in bench/agent_runs/refit_or_average.json; a run folder measured already is not run again.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import click

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.spec import SolutionSpec
from agent.evaluator import Evaluator
from agent.search.final import fold_average, refit_rounds
from bench.agent_bench import RUNS
from bench.final_choice import held
from bench.results import write_section
from bench.throughput_bench import code_stamp
from retrieval.profile import profile_task

SECTION = "## The submission from a refit or the fold models' average (issue 25)"
RUNS_FILE = RUNS / "refit_or_average.json"
CV_SECONDS = 600.0  # each member's CV and the refit: no budget, only a cap against a hung fit


def measure(run_dir: Path, tasks: Path) -> dict:
    """Both submissions of the run folder's best node, scored on the held-back answers."""
    record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    task = record["task"]["name"]
    dataset = Dataset.from_profile(profile_task(tasks / task))
    nodes = {node["id"]: node for node in record["journal"]["nodes"]}
    best = nodes[record["best_node"]]
    members = best["members"] or [best["id"]]
    evaluator = Evaluator(cv=record["cv_folds"], random_state=record["settings"]["search"]["seed"])
    evidence = [evaluator.evaluate_candidate(SolutionCandidate.from_dict(nodes[member]["candidate"]), dataset,
                                             time.monotonic() + CV_SECONDS, predict_test=True)[1]
                for member in members]
    predictions = [item.test_prediction for item in evidence]
    spec = SolutionSpec.from_dict(best["spec"])
    refit = evaluator.fit_all_rows(spec, dataset, CV_SECONDS, refit_rounds(evidence, combined=bool(best["members"])))
    answers = tasks / f"{task}.answers.csv"
    return {"run": run_dir.parent.name, "task": task, "metric": dataset.metric,
            "greater_is_better": dataset.metric_info.greater_is_better, "members": len(members),
            "submitted": (record.get("final_fit") or {}).get("how"),
            "fold_average": held(dataset, answers, fold_average(spec, predictions, dataset.classification)),
            "refit": held(dataset, answers, refit.test_prediction), "refit_seconds": round(refit.seconds, 2),
            "code": code_stamp(None)}


def ratio(row: dict) -> float:
    """The fold average's score to the refit's, > 1 when the fold average is better."""
    average, refit = row["fold_average"], row["refit"]
    return average / refit if row["greater_is_better"] else refit / average


def markdown(rows: list[dict]) -> str:
    lines = [SECTION, "", "`python -m bench.refit_or_average` (agent code " + ", ".join(sorted({r["code"] for r in rows}))
             + "). Each run folder's best node (a combination: its members), its submission made two ways and scored "
             "on the held-back answers: the CV fold models' test predictions averaged, and the refit on every row "
             "with the trees the folds kept. Ratio: the fold average's score to the refit's, > 1 when the fold "
             "average is better.", "",
             "| run | metric | members | submitted | fold average | refit | refit (s) | ratio |",
             "|---|---|---:|---|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['run']} | {row['metric']} | {row['members']} | {row['submitted']} | "
                     f"{row['fold_average']:.5f} | {row['refit']:.5f} | {row['refit_seconds']:.1f} | {ratio(row):.5f} |")
    ratios = [ratio(row) for row in rows]
    lines += ["", f"Over {len(rows)} runs: mean ratio {statistics.fmean(ratios):.5f}, median "
              f"{statistics.median(ratios):.5f}; the fold average better in {sum(r > 1 for r in ratios)}, the refit "
              f"in {sum(r < 1 for r in ratios)}."]
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="A bench's root: runs/ and tasks/ beneath it.")
@click.option("--runs", "pattern", default="*", show_default=True, help="Which run folders under ROOT/runs.")
@click.option("--write", is_flag=True, help="Rewrite this bench's section of bench/RESULTS.md.")
def main(root: Path, pattern: str, write: bool) -> None:
    measured = json.loads(RUNS_FILE.read_text(encoding="utf-8")) if RUNS_FILE.is_file() else {}
    for run_dir in sorted(path for path in (root / "runs").glob(f"{pattern}/run") if (path / "run.json").is_file()):
        record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        key = f"{run_dir.parent.name}@{record['started_at']}"
        if key in measured or record.get("best_node") is None:
            continue
        measured[key] = measure(run_dir, root / "tasks")
        RUNS_FILE.write_text(json.dumps(measured, indent=1), encoding="utf-8")
        click.echo(f"{run_dir.parent.name}: fold average {measured[key]['fold_average']:.5f}, "
                   f"refit {measured[key]['refit']:.5f}")
    text = markdown(list(measured.values()))
    click.echo(text)
    if write:
        write_section(Path(__file__).with_name("RESULTS.md"), text)


if __name__ == "__main__":
    main()
