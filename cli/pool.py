"""`agent curriculum` and `agent solve-all`: thin layers over curriculum.order and curriculum.solve_pool."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

from cli.memory import memory_store
from cli.options import CasebookError, LibraryDefault, count, print_table

if TYPE_CHECKING:
    from curriculum import Ranked
    from curriculum.state import RoundRecord

console = Console(soft_wrap=True)


def search_defaults():
    """SearchSettings, whose defaults `agent solve` and `agent solve-all` show (imported only when they are read)."""
    from agent.settings import SearchSettings

    return SearchSettings


def _rule_defaults():
    from curriculum import CurriculumSettings

    return CurriculumSettings()


def _pool_defaults():
    from curriculum import PoolSettings

    return PoolSettings


def rule_options(command):
    """-a, -b and -r of equation 7, for both commands."""
    for option in reversed((
        click.option("-a", "--structure-weight", "a", type=float, cls=LibraryDefault,
                     default=lambda: _rule_defaults().a, show_default=True,
                     help="a: weight of structure similarity (Diff±) beside description similarity (Sim±)."),
        click.option("-b", "--recency-weight", "b", type=float, cls=LibraryDefault,
                     default=lambda: _rule_defaults().b, show_default=True,
                     help="b: weight of the penalty b·exp(-λ) on a task chosen λ rounds ago."),
        click.option("-r", "--nearest", "r", type=click.IntRange(min=1), cls=LibraryDefault,
                     default=lambda: _rule_defaults().r, show_default=True,
                     help="r: how many of the most similar memories are averaged (top_r)."),
    )):
        command = option(command)
    return command


def _ranking_table(ranking: list[Ranked], title: str) -> Table:
    table = Table(title=title)
    table.add_column("#", justify="right")
    table.add_column("task", overflow="fold")
    for header in ("score", "Sim+", "a·Diff+", "Sim−", "a·Diff−", "b·e^−λ", "λ", "size"):
        table.add_column(header, justify="right")
    for item in ranking:
        terms = item.terms
        table.add_row(str(item.position), item.task.name, f"{item.score:+.4f}", f"{terms.sim_positive:.4f}",
                      f"{terms.diff_positive:.4f}", f"{terms.sim_negative:.4f}", f"{terms.diff_negative:.4f}",
                      f"{terms.recency:.4f}", "–" if terms.rounds_since is None else str(terms.rounds_since),
                      f"{item.task.size:,}", style="bold" if item.position == 1 else "")
    return table


@click.command("curriculum")
@click.argument("tasks_dir", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="An `agent solve-all` output folder: the tasks it solved are left out and λ counts its rounds.")
@rule_options
@click.option("--json", "as_json", is_flag=True, help="Print the order as one JSON object.")
@click.pass_context
def curriculum_command(ctx, tasks_dir, out, a, b, r, as_json):
    """Print the order in which `agent solve-all --curriculum` would take the tasks of TASKS_DIR next, with every
    term of equation 7 against the memories at --home. The first row is the next task; solve-all recomputes the
    order after every task, as the memories grow."""
    from agent.memory.store import MemoryStore
    from curriculum import CurriculumSettings, PoolError, load_pool, order
    from curriculum.solve_all import finished
    from curriculum.state import PoolState

    home = ctx.obj["home"]
    try:
        pool = load_pool(tasks_dir)
        state = PoolState.load(out) if out is not None else None
    except PoolError as error:
        raise CasebookError(str(error)) from error
    solved = {task.name for task in pool.tasks if out is not None and finished(out / task.name)}
    pending = [task for task in pool.tasks if task.name not in solved]
    # Reading creates nothing: without a case library in the home, the memories are empty.
    memory = MemoryStore(home, chroma_url=ctx.obj.get("chroma_url")) if MemoryStore.exists(home) else None
    memories = memory.tasks() if memory is not None else []
    next_round = state.next_round if state is not None else 1
    rounds_since = {name: next_round - last for name, last in state.last_chosen().items()} if state else {}
    ranking = order(pending, memory, memory.embedder if memories else None, CurriculumSettings(a, b, r), rounds_since)
    n_positive = sum(bool(task.solved) for task in memories)
    if as_json:
        click.echo(json.dumps({
            "tasks_dir": str(tasks_dir), "memory": {"positive": n_positive, "negative": len(memories) - n_positive},
            "settings": {"a": a, "b": b, "r": r}, "order": [item.to_dict() for item in ranking],
            "already_solved": sorted(solved),
            "skipped": [{"task_dir": str(item.task_dir), "reason": item.reason} for item in pool.skipped],
        }))
        return
    for item in pool.skipped:
        click.echo(f"skipped {item.task_dir}: {item.reason}", err=True)
    click.echo(f"memory at {home}: {n_positive} solved and {len(memories) - n_positive} failed tasks"
               + ("" if memories else " (empty: the structurally simplest task comes first)"))
    if solved:
        click.echo(f"already solved in {out}: {', '.join(sorted(solved))}")
    if not ranking:
        click.echo("every task of the pool is solved: nothing to order")
        return
    print_table(console, _ranking_table(ranking, f"curriculum for {tasks_dir} (a={a:g}, b={b:g}, r={r})"))


@click.command("solve-all")
@click.argument("tasks_dir", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder: one run folder per task, pool.json and pool.html (default: runs/<TASKS_DIR>-pool). "
                   "Running again with the same folder resumes.")
@click.option("--use-kb", is_flag=True, help="Let the knowledge base at --home guide each task's search.")
@click.option("--no-experience", is_flag=True,
              help="Leave out the experience packs (the bundled one and the ones added at --home) in every task's search.")
@click.option("--curriculum", "use_curriculum", is_flag=True,
              help="Take the tasks in the curriculum's order (equation 7, recomputed after every task); "
                   "without it, in a random order fixed by --seed.")
@click.option("--no-memory", is_flag=True,
              help="Neither read nor write the case library at --home (each task solved from scratch).")
@click.option("--time-budget-per-task", type=click.FloatRange(min=1), default=300.0, show_default=True,
              help="Seconds for each task's solve.")
@click.option("--steps", type=click.IntRange(min=0), cls=LibraryDefault, default=lambda: search_defaults().steps,
              show_default=True,
              help="Tree-search steps per task after the drafts; the time budget usually ends a search first.")
@click.option("--num-drafts", type=click.IntRange(min=1), cls=LibraryDefault,
              default=lambda: search_defaults().num_drafts, show_default=True,
              help="Initial drafts per task.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the random order and of each task's search.")
@click.option("--cv", type=click.IntRange(min=2), default=5, show_default=True, help="Cross-validation folds.")
@click.option("--redo", is_flag=True, help="Solve again the tasks that already have a submission in --out.")
@click.option("--max-attempts", type=click.IntRange(min=1), cls=LibraryDefault,
              default=lambda: _pool_defaults().max_attempts, show_default=True,
              help="Tries per task in this call: a task that ends without a submission stays in the pool.")
@rule_options
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
@click.option("--quiet", is_flag=True, help="No line per round.")
@click.option("--verbose", is_flag=True, help="Show the candidates' own warnings and library output.")
@click.pass_context
def solve_all_command(ctx, tasks_dir, out, use_kb, no_experience, use_curriculum, no_memory, time_budget_per_task, steps,
                      num_drafts, seed, cv, redo, max_attempts, a, b, r, as_json, quiet, verbose):
    """Solve every task folder in TASKS_DIR, one per round, and write pool.html.

    The memories at --home are read and written as each task is solved, so later tasks start from what earlier
    ones learned. Tasks already solved in --out are skipped unless --redo. Exit status 1 when a task is left
    without a submission.
    """
    from agent.execution.sandbox import verbose_candidates
    from agent.memory.experience import PackError, packs_in_use
    from agent.settings import SearchSettings, SolveSettings
    from agent.solve import KnowledgeBaseMissing, open_knowledge
    from curriculum import CurriculumSettings, PoolError, PoolSettings, solve_pool
    from curriculum.solve_all import finished
    from curriculum.state import FAILED, SOLVED

    home = ctx.obj["home"]
    out = out or Path("runs") / f"{tasks_dir.resolve().name}-pool"
    settings = PoolSettings(
        SolveSettings(SearchSettings(num_drafts=num_drafts, steps=steps, time_budget=time_budget_per_task,
                                     seed=seed), use_kb=use_kb, experience=not no_experience, cv=cv),
        curriculum=use_curriculum, use_memory=not no_memory, redo=redo, seed=seed,
        rule=CurriculumSettings(a, b, r), max_attempts=max_attempts)
    talk = not (quiet or as_json)

    def started(record: RoundRecord) -> None:
        chosen = next((row for row in record.ranking if row["task"] == record.task), None)
        why = f"curriculum score {chosen['score']:+.4f}" if chosen else "random order"
        again = f", try {record.attempt}" if record.attempt > 1 else ""
        click.echo(f"round {record.round}: {record.task} ({why}{again})", err=True)

    def ended(record: RoundRecord) -> None:
        if record.status in (SOLVED, FAILED):
            click.echo(f"  {record.status}: best CV {record.metric}={_number(record.best_cv_score)} (baseline "
                       f"{_number(record.baseline)}), {count(record.node_evaluations, 'node')}, {record.seconds:.0f} s",
                       err=True)
        else:
            click.echo(f"  {record.status}: {record.error}", err=True)

    try:
        kb = open_knowledge(home, chroma_url=ctx.obj.get("chroma_url")) if use_kb else None
        if not no_experience:  # a pack that cannot be read stops the pool before any task starts
            packs_in_use(home)
        memory = None if no_memory else memory_store(ctx)
        with verbose_candidates(verbose):
            result = solve_pool(tasks_dir, out, settings, memory=memory, kb=kb, kb_home=home,
                                on_round_start=started if talk else None, on_round=ended if talk else None)
    except (PoolError, KnowledgeBaseMissing, PackError) as error:
        raise CasebookError(str(error)) from error
    unsolved = sorted(task.name for task in result.pool.tasks if not finished(out / task.name))
    if as_json:
        click.echo(json.dumps({
            "out_dir": str(out), "report": str(result.report_path) if result.report_path else None,
            "already_solved": list(result.already_solved), "rounds": [record.to_dict() for record in result.rounds],
            "unsolved": unsolved,
            "skipped": [{"task_dir": str(item.task_dir), "reason": item.reason} for item in result.pool.skipped],
        }))
    else:
        for item in result.pool.skipped:
            click.echo(f"skipped {item.task_dir}: {item.reason}", err=True)
        if result.already_solved:
            click.echo(f"already solved, skipped: {', '.join(result.already_solved)} (--redo solves them again)")
        click.echo(f"pool folder: {out} ({'pool.html, ' if result.report_path else ''}pool.json, one folder per task)")
        click.echo(f"{len(result.pool.tasks) - len(unsolved)} of {count(len(result.pool.tasks), 'task')} solved"
                   + (f"; without a submission: {', '.join(unsolved)}" if unsolved else ""))
    if unsolved:
        sys.exit(1)


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"
