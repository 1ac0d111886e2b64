"""`agent` command line: a thin layer over agent.solve_task and agent.outputs.report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.live import Live
from rich.table import Table

from agent.candidate import AttemptRecord
from agent.engine.compile import NotRenderableError
from agent.engine.dataset import DatasetError
from agent.engine.sandbox import verbose_candidates
from agent.engine.spec import SpecError
from agent.outputs.report import SCREENSHOT_FILE, RunDirError, ScreenshotError, read_run, screenshot, write_report
from agent.outputs.run_folder import RunFolderError
from agent.search.journal import Node
from agent.search.policy import SearchSettings
from agent.solve import KnowledgeBaseMissing, SolveSettings, default_out_dir, solve_task
from cli.options import home_option
from retrieval.profile import TaskProfile, TaskSetupError, profile_task

_USER_ERRORS = (TaskSetupError, DatasetError, SpecError, RunDirError, RunFolderError, NotRenderableError,
                KnowledgeBaseMissing)


def _fail(error: Exception) -> None:
    click.echo(f"error: {error}", err=True)
    sys.exit(2)


@click.group()
@home_option
@click.pass_context
def main(ctx: click.Context, home: Path) -> None:
    """casebook's ML engineering agent."""
    ctx.obj = {"home": home}


@main.command()
@click.argument("task_dir", type=click.Path(path_type=Path))
@click.option("--target", default=None, help="Target column (default: inferred from train/test/sample submission).")
@click.option("--id", "id_column", default=None, help="Id column (default: inferred).")
@click.option("--metric", default=None, help="Metric name, e.g. roc_auc, rmse, rmsle (default: from description.md).")
@click.option("--positive-class", default=None, metavar="LABEL",
              help="Binary tasks: the label whose probability is submitted (default: from description.md and "
                   "sample_submission.csv, else the conventional label such as 1/yes/true, else the minority class).")
@click.option("--use-kb", is_flag=True,
              help="Let the knowledge base at --home guide the tree search: drafts composed from retrieved tricks, "
                   "improvements that apply one trick at a time. Without it the search uses built-in changes only.")
@click.option("--time-budget", type=click.FloatRange(min=1), default=900.0, show_default=True,
              help="Seconds for the whole solve.")
@click.option("--steps", type=click.IntRange(min=0), default=SearchSettings.steps, show_default=True,
              help="Tree-search steps (improve / debug / draft) after the initial drafts; the time budget "
                   "usually ends the search first.")
@click.option("--num-drafts", type=click.IntRange(min=1), default=SearchSettings.num_drafts, show_default=True,
              help="Initial drafts (different model families, or different tricks with --use-kb).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed (runs are deterministic for it).")
@click.option("--cv", type=click.IntRange(min=2), default=5, show_default=True, help="Cross-validation folds.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run folder (default: runs/<task>-<timestamp>/).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
@click.option("--quiet", is_flag=True, help="No live table of attempts.")
@click.option("--verbose", is_flag=True,
              help="Show the candidates' own warnings and library output (scikit-learn, pandas, XGBoost, LightGBM); "
                   "hidden by default.")
@click.pass_context
def solve(ctx, task_dir, target, id_column, metric, positive_class, use_kb, time_budget, steps, num_drafts, seed, cv,
          out, as_json, quiet, verbose):
    """Solve the competition task in TASK_DIR (train.csv, test.csv, description.md, sample_submission.csv).

    Writes submission.csv, solution.py, trace.jsonl, run.json and report.html to the run folder;
    the last line printed is the run's summary.
    """
    try:
        profile = profile_task(task_dir, target=target, id_column=id_column, metric=metric,
                               positive_class=positive_class)
    except TaskSetupError as error:
        _fail(error)
    if not as_json:
        click.echo(_describe_setup(profile, ctx.obj["home"] if use_kb else None))
    settings = SolveSettings(SearchSettings(num_drafts=num_drafts, steps=steps, time_budget=time_budget, seed=seed),
                             use_kb=use_kb, cv=cv)
    out_dir = out or default_out_dir(profile)
    table = _node_table()
    live = Live(table, console=Console(stderr=True, quiet=quiet or as_json), refresh_per_second=4)

    def show(node: Node, attempt: AttemptRecord) -> None:
        _add_node_row(table, node, attempt)
        live.refresh()

    try:
        with live, verbose_candidates(verbose):
            result = solve_task(profile, settings, out_dir, on_node=show, kb_home=ctx.obj["home"])
    except _USER_ERRORS as error:
        _fail(error)
    run = result.run
    if as_json:
        click.echo(json.dumps({
            **read_run(result.out_dir)[0],
            "run_dir": str(result.out_dir), "report": str(result.report_path),
        }, default=str))
    else:
        for note in result.notes:
            click.echo(f"note: {note}")
        click.echo(f"run folder: {result.out_dir} (report.html, trace.jsonl"
                   f"{', submission.csv, solution.py' if result.submission_path else ''})")
        click.echo(run.summary())
    if result.submission_path is None:
        sys.exit(1)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report's path as JSON.")
@click.option("--screenshot", "take_screenshot", is_flag=True,
              help=f"Also save a PNG of the rendered page to RUN_DIR/{SCREENSHOT_FILE} (needs chromium).")
def report(run_dir: Path, as_json: bool, take_screenshot: bool) -> None:
    """Re-render RUN_DIR/report.html from its run.json and trace.jsonl."""
    try:
        path = write_report(run_dir)
        summary = read_run(run_dir)[0]["summary"]
        png = screenshot(path, run_dir / SCREENSHOT_FILE) if take_screenshot else None
    except (RunDirError, ScreenshotError) as error:
        _fail(error)
    if as_json:
        click.echo(json.dumps({"report": str(path), "summary": summary,
                               **({"screenshot": str(png)} if png else {})}))
    else:
        click.echo(f"wrote {path}" + (f" and {png}" if png else ""))
        click.echo(summary)


def _describe_setup(profile: TaskProfile, kb_home: Path | None) -> str:
    inferred = profile.inferred
    lines = [
        f"task {profile.name}: {profile.task_type} ({profile.modality}), {profile.n_rows} rows x {profile.n_cols} columns",
        f"  target    {profile.target}  [{inferred.get('target', '')}]",
        f"  id        {profile.id_column}  [{inferred.get('id_column', '')}]",
        f"  metric    {profile.metric}  [{inferred.get('metric', '')}]",
        f"  task type {profile.task_type}  [{inferred.get('task_type', '')}]",
    ]
    if profile.positive_class is not None:
        lines.append(f"  positive  {profile.positive_class}  [{inferred.get('positive_class', '')}]")
    if kb_home is not None:
        lines.append(f"  knowledge base {kb_home} (drafts and improvements from retrieved tricks)")
    return "\n".join(lines)


def _node_table() -> Table:
    table = Table(title="solution tree")
    for header, width in (("node", 4), ("parent", 6), ("action", 7), ("trainer", 10), ("CV score", 8), ("status", 6),
                          ("s", 5)):
        table.add_column(header, min_width=width)
    table.add_column("plan", no_wrap=True, overflow="ellipsis", max_width=60)
    return table


def _add_node_row(table: Table, node: Node, attempt: AttemptRecord) -> None:
    style = "bold green" if attempt.improved else ("" if node.valid else "red")
    table.add_row(str(node.id), "–" if node.parent_id is None else str(node.parent_id), node.action,
                  node.candidate.trainer, "–" if node.metric is None else f"{node.metric:.4f}", node.status,
                  f"{node.elapsed:.1f}", node.plan, style=style)


if __name__ == "__main__":
    main()
