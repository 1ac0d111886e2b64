"""`agent` command line: a thin layer over agent.solve_task and agent.outputs.report."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from cli.experience import experience_command
from cli.memory import memory_command, memory_store
from cli.options import (
    CONTEXT_SETTINGS,
    LibraryChoice,
    LibraryDefault,
    chroma_url_option,
    count,
    home_option,
    process_started,
    version_option,
)
from cli.pool import curriculum_command, search_defaults, solve_all_command
from cli.progress import SolveProgress

# What `agent solve`'s process spends after solve_task's clock, which the budget must hold too (its start is counted:
# the budget runs from the process's start). Measured on a 2,876-row table (2026-11-29): the exit once the summary is
# printed (the candidates' warm worker stopped, native libraries' threads joined), 1.4 s, and 2.8 s with the
# knowledge base open (its embedding model and stores closed). Uncounted, 32 of 60 runs of 60 s ended after 60 s.
PROCESS_SECONDS, KNOWLEDGE_BASE_EXIT_SECONDS = 1.4, 1.4

if TYPE_CHECKING:
    from agent.search.journal import Journal
    from retrieval.profile import TaskProfile


def _executors():
    from agent.execution import executors

    return executors


def _user_errors() -> tuple[type[Exception], ...]:
    """The errors a user can fix: one line each, not a traceback."""
    from agent.engine.compile import NotRenderableError
    from agent.engine.dataset import DatasetError
    from agent.engine.spec import SpecError
    from agent.execution.executors import ExecutorError
    from agent.memory.experience import PackError
    from agent.outputs.report import RunDirError
    from agent.outputs.run_folder import RunFolderError
    from agent.solve import BudgetTooSmall, KnowledgeBaseMissing
    from kb.store import ChromaServerError
    from retrieval.profile import TaskSetupError

    return (TaskSetupError, DatasetError, SpecError, RunDirError, RunFolderError, NotRenderableError,
            KnowledgeBaseMissing, BudgetTooSmall, ExecutorError, ChromaServerError, PackError)


def _fail(error: Exception) -> None:
    click.echo(f"error: {error}", err=True)
    sys.exit(2)


@click.group(context_settings=CONTEXT_SETTINGS)
@version_option
@home_option
@chroma_url_option
@click.pass_context
def main(ctx: click.Context, home: Path, chroma_url: str | None) -> None:
    """casebook's ML engineering agent."""
    ctx.ensure_object(dict).update(home=home, chroma_url=chroma_url)
    if ctx.invoked_subcommand == "solve" and "process_started" in ctx.obj and not {"-h", "--help"} & set(sys.argv):
        # In its own process, the candidates' worker imports the modelling libraries while this one parses the
        # options, imports the agent and reads the task: started from solve_task, the first node waited for it. (The
        # group runs before the options are parsed, so a help request is read from argv.)
        from agent.execution import sandbox

        sandbox.warm_up()


def run() -> None:
    """`agent` as a process of its own (its console script, `python -m cli.agent`): a solve's budget runs from the
    process's start (process_started), which a command invoked inside another program (CliRunner) knows nothing of."""
    main(obj={"process_started": process_started()})


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
@click.option("--no-experience", is_flag=True,
              help="Leave out the experience packs (the bundled one and those `agent experience use` added at --home): "
                   "by default their portfolio gives the first drafts and their measured effects order the retrieved "
                   "tricks.")
@click.option("--memory/--no-memory", "use_memory", default=False, show_default=True,
              help="Let the case library at --home move the search (drafts from similar solved tasks' best specs, "
                   "tricks ranked by their measured effect, remembered repairs) and remember this run's nodes and "
                   "outcome. Off by default, so a plain solve depends only on its inputs and seed.")
@click.option("--reuse-own-memory", is_flag=True,
              help="With --memory: also use what earlier runs of this same task remembered (left out by default, "
                   "so solving a task again is not scored with what was learned on it).")
@click.option("--llm", "llm", default=None, metavar="MODEL",
              help="An Anthropic model id (e.g. claude-sonnet-5): the LLM writes the drafts, improvements and repairs "
                   "from the task, the retrieved tricks and the journal; needs ANTHROPIC_API_KEY. A step the LLM "
                   "cannot answer falls back to the offline proposer.")
@click.option("--llm-budget-usd", type=click.FloatRange(min=0), default=None, metavar="USD",
              help="With --llm: no more LLM calls once this much (estimated) is spent; the rest of the run is offline.")
@click.option("--allow-unisolated-code", is_flag=True,
              help="With --llm, on a machine without OS isolation (user namespaces and Landlock): let the LLM's "
                   "scripts run anyway, under the audit hook and resource limits only. Without it, free code is off "
                   "there and the run says so.")
@click.option("--time-budget", type=click.FloatRange(min=1), default=900.0, show_default=True,
              help="Seconds for the whole solve.")
@click.option("--steps", type=click.IntRange(min=0), cls=LibraryDefault, default=lambda: search_defaults().steps,
              show_default=True,
              help="Tree-search steps (improve / debug / draft) after the initial drafts; the time budget "
                   "usually ends the search first.")
@click.option("--num-drafts", type=click.IntRange(min=1), cls=LibraryDefault,
              default=lambda: search_defaults().num_drafts, show_default=True,
              help="Initial drafts (different model families, or different tricks with --use-kb).")
@click.option("--models", default=None, metavar="FAMILY,...",
              help="Only these model families, drafted in this order, e.g. lightgbm,catboost (default: every family: "
                   "linear, lightgbm, random_forest, catboost, hist_gradient_boosting, xgboost, extra_trees).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed of the search's choices (a run bounded by --steps with --in-order repeats "
                   "for it).")
@click.option("--cv", type=click.IntRange(min=2), default=5, show_default=True, help="Cross-validation folds.")
@click.option("--executor", type=LibraryChoice(lambda: _executors().EXECUTORS), cls=LibraryDefault,
              default=lambda: _executors().LOCAL, show_default=True,
              help="Where nodes are evaluated: this machine, or a Ray cluster (each node in the same sandbox there, "
                   "with its time and memory limits; a worker lost mid-node is a failed node).")
@click.option("--ray-address", default=None, metavar="ADDRESS",
              help="With --executor ray: the cluster, e.g. auto (one `ray start` began on this machine) or "
                   "ray://HOST:10001 (default: $RAY_ADDRESS, else such a local cluster, else a new one).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Nodes evaluated at once (default: one per core locally, at most 4; the cluster's CPUs with Ray), "
                   "one at a time until a node is verified; each worker takes the next proposal as soon as its node "
                   "is back.")
@click.option("--in-order", is_flag=True,
              help="With several workers, evaluate one batch of --workers proposals at a time and keep them in the "
                   "order drawn: the journal is the same for a given seed, steps and --workers, whichever node "
                   "finishes first (workers wait for the batch's slowest node).")
@click.option("--save-fold-models", is_flag=True,
              help="When the submission averages the CV fold models (the refit did not fit in the budget), fit them "
                   "again after the search and save them in model.pkl for `agent predict`; past the budget.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run folder (default: runs/<task>-<timestamp>/).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
@click.option("--quiet", "-q", is_flag=True,
              help="Nothing while it searches (by default: a live table in a terminal, else a line per node).")
@click.option("--verbose", is_flag=True,
              help="Show the candidates' own warnings and library output (scikit-learn, pandas, XGBoost, LightGBM); "
                   "hidden by default.")
@click.pass_context
def solve(ctx, task_dir, target, id_column, metric, positive_class, use_kb, no_experience, use_memory, reuse_own_memory, llm,
          llm_budget_usd, allow_unisolated_code, time_budget, steps, num_drafts, models, seed, cv, executor, ray_address,
          workers, in_order, save_fold_models, out, as_json, quiet, verbose):
    """Solve the competition task in TASK_DIR (train.csv, test.csv, description.md, sample_submission.csv).

    Writes submission.csv, solution.py, trace.jsonl, run.json and report.html to the run folder;
    the last line printed is the run's summary.
    """
    # The budget counts the process's start (when it is the command's own), the imports and profiling the task.
    started = ctx.obj.get("process_started", time.monotonic())
    from agent.execution.sandbox import verbose_candidates
    from agent.outputs.report import read_run
    from agent.settings import SearchSettings, SolveSettings
    from agent.solve import default_out_dir, solve_task
    from retrieval.profile import TaskSetupError, profile_task

    try:
        profile = profile_task(task_dir, target=target, id_column=id_column, metric=metric,
                               positive_class=positive_class)
    except TaskSetupError as error:
        if use_memory:  # the case library remembers a task that could not be set up
            memory_store(ctx).write_setup_failure(task_dir, str(error), target=target)
        _fail(error)
    if reuse_own_memory and not use_memory:
        _fail(click.UsageError("--reuse-own-memory needs --memory"))
    if llm_budget_usd is not None and llm is None:
        _fail(click.UsageError("--llm-budget-usd needs --llm MODEL"))
    from agent.search.builtin import DRAFT_FAMILIES

    families = tuple(name.strip() for name in models.split(",") if name.strip()) if models else None
    unknown = [name for name in families or () if name not in DRAFT_FAMILIES]
    if unknown or families == ():
        _fail(click.UsageError(f"--models: {', '.join(unknown) or 'none given'}; choose from {', '.join(DRAFT_FAMILIES)}"))
    if not as_json:
        click.echo(_describe_setup(profile, ctx.obj["home"] if use_kb else None, llm, llm_budget_usd,
                                   allow_unisolated_code))
    settings = SolveSettings(SearchSettings(num_drafts=num_drafts, steps=steps, time_budget=time_budget, seed=seed,
                                            in_order=in_order),
                             use_kb=use_kb, experience=not no_experience, cv=cv, llm=llm, llm_budget_usd=llm_budget_usd,
                             allow_unisolated_code=allow_unisolated_code, executor=executor,
                             ray_address=ray_address, workers=workers, models=families,
                             save_fold_models=save_fold_models)
    out_dir = out or default_out_dir(profile)
    progress = SolveProgress(Console(stderr=True, quiet=quiet or as_json), time_budget, profile.metric)
    try:
        with progress, verbose_candidates(verbose):
            result = solve_task(profile, settings, out_dir, on_node=progress.on_node, kb_home=ctx.obj["home"],
                                memory=memory_store(ctx) if use_memory else None,
                                reuse_own_memory=reuse_own_memory, chroma_url=ctx.obj["chroma_url"], started=started,
                                exit_seconds=PROCESS_SECONDS + (KNOWLEDGE_BASE_EXIT_SECONDS if use_kb else 0.0))
    except _user_errors() as error:
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
        llm_line = _describe_llm(read_run(result.out_dir)[0].get("llm"))
        if llm_line:
            click.echo(llm_line)
        click.echo(_describe_search(result.journal, run.stop_reason, read_run(result.out_dir)[0].get("final_fit")))
        written = [path.name for path in (result.submission_path, result.solution_path) if path is not None]
        click.echo(f"run folder: {result.out_dir} (report.html, trace.jsonl{''.join(', ' + name for name in written)})")
        click.echo(run.summary())
    if run.best_candidate is None:  # the submission is the trivial baseline
        sys.exit(1)


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report's path as JSON.")
@click.option("--screenshot", "take_screenshot", is_flag=True,
              help="Also save a PNG of the rendered page in RUN_DIR, as headless chromium shows it (needs chromium).")
def report(run_dir: Path, as_json: bool, take_screenshot: bool) -> None:
    """Re-render RUN_DIR/report.html from its run.json and trace.jsonl."""
    from agent.outputs.report import SCREENSHOT_FILE, RunDirError, ScreenshotError, read_run, screenshot, write_report

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


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.argument("csv_path", metavar="NEW_CSV", type=click.Path(path_type=Path))
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("predictions.csv"),
              show_default=True, help="Where to write the predictions, in submission.csv's shape.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
def predict(run_dir: Path, csv_path: Path, out_path: Path, as_json: bool) -> None:
    """Predict the rows of NEW_CSV with the model RUN_DIR saved (model.pkl): no CV, no refit.

    NEW_CSV has the columns train.csv had (the target may be absent); the predictions have
    submission.csv's columns, with NEW_CSV's ids in its order."""
    from agent.outputs.saved_model import ModelFileError, ModelInputError, predict_csv

    try:
        saved, predictions = predict_csv(run_dir, csv_path, out_path)
    except (ModelFileError, ModelInputError) as error:
        _fail(error)
    if as_json:
        click.echo(json.dumps({"predictions": str(out_path), "rows": len(predictions), "model": saved.how,
                               "node": saved.node}))
    else:
        node = f"node {saved.node}'s " if saved.node is not None else ""
        click.echo(f"wrote {out_path}: {count(len(predictions), 'row')} predicted by {node}model ({saved.how})")


def _describe_search(journal: Journal, stop_reason: str, final_fit: dict | None) -> str:
    """How many nodes the search could evaluate, on which rows, why it stopped and how the submission was made."""
    from agent.search.journal import BUGGY, DEAD, EXPLORED, OVER_TIME, SAMPLE, STOPPED_EARLY, VALID

    counts = Counter(node.status for node in journal)
    parts = [f"{counts[VALID]} on every row"]
    explored = [node.exploration.rows for node in journal if node.exploration is not None]
    if explored:
        parts.append(f"{len(explored)} first on a {explored[0]:,}-row sample ({counts[EXPLORED]} left there)")
    parts += [f"{counts[status]} {status.replace('_', ' ')}" for status in (STOPPED_EARLY, OVER_TIME, BUGGY, DEAD)
              if counts[status]]
    per_minute = journal.throughput()["nodes_per_minute"]
    line = (f"search: {count(len(journal), 'node')} evaluated ({', '.join(parts)})"
            + (f", {per_minute:.1f} a minute" if per_minute is not None else "")
            + f"; stopped: {stop_reason or 'blended'}")
    best = journal.best()
    if best is not None and best.scored_on == SAMPLE:
        line += f"; the best, node {best.id}, is scored on the sample only (its CV on every row did not fit)"
    return line + (f"; submission: {final_fit['how']}" if final_fit else "")


def _describe_setup(profile: TaskProfile, kb_home: Path | None, llm: str | None = None,
                    llm_budget_usd: float | None = None, allow_unisolated_code: bool = False) -> str:
    inferred = profile.inferred
    lines = [
        f"task {profile.name}: {profile.task_type} ({profile.modality}), {count(profile.n_rows, 'row')} x "
        f"{count(profile.n_cols, 'column')}",
        f"  target    {profile.target}  [{inferred.get('target', '')}]",
        f"  id        {profile.id_column}  [{inferred.get('id_column', '')}]",
        f"  metric    {profile.metric}  [{inferred.get('metric', '')}]",
        f"  task type {profile.task_type}  [{inferred.get('task_type', '')}]",
    ]
    if profile.positive_class is not None:
        lines.append(f"  positive  {profile.positive_class}  [{inferred.get('positive_class', '')}]")
    lines += [f"warning: {warning}" for warning in profile.warnings]
    if kb_home is not None:
        lines.append(f"  knowledge base {kb_home} (drafts and improvements from retrieved tricks)")
    if llm is not None:
        budget = f", budget ${llm_budget_usd:g}" if llm_budget_usd is not None else ""
        lines.append(f"  LLM       {llm} (plans each step{budget}; the offline proposer when it cannot)")
        from agent.execution import isolation
        from agent.solve import free_code_off

        found = isolation.probe()
        if found.available:
            lines.append(f"  free code isolated: {found.describe()}")
        elif allow_unisolated_code:
            lines.append(f"  free code NOT ISOLATED (--allow-unisolated-code): audit hook only; {found.why_not}")
        else:
            lines.append(f"  {free_code_off(False)}")
    return "\n".join(lines)


def _describe_llm(record: dict | None) -> str:
    """One line on what the LLM did: calls, tokens, estimated cost, fallbacks; "" without --llm."""
    if not record:
        return ""
    usage = record["usage"]
    cost = f"about ${usage['cost_usd']:.4f}" if usage["cost_usd"] is not None else "cost unknown (no price for it)"
    line = (f"LLM {record['model']}: {usage['calls']} calls, {usage['input_tokens']} input tokens "
            f"(+{usage['cache_read_input_tokens']} read from and {usage['cache_creation_input_tokens']} written to the "
            f"prompt cache), {usage['output_tokens']} output tokens, {cost}")
    if record["fallbacks"]:
        line += f"; {count(record['fallbacks'], 'step')} fell back to the offline proposer"
    if record["offline_since"]:
        line += f" (offline from then on: {record['offline_since']})"
    if record["free_code_off"]:
        line += f"; {record['free_code_off']}"
    return line


main.add_command(curriculum_command)
main.add_command(solve_all_command)
main.add_command(memory_command)
main.add_command(experience_command)

if __name__ == "__main__":
    run()
