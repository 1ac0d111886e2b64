"""`agent experience`: build an experience pack from a pool of tasks, add one to a home, show the packs in use and
the built-in changes they measured near a task.
A thin layer over curriculum.experience and agent.memory.experience."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli.options import CasebookError, LibraryDefault, count
from cli.pool import search_defaults


@click.group("experience")
def experience_command() -> None:
    """Experience packs: what casebook's own agent learned on a pool of real tables."""


@experience_command.command("build")
@click.argument("tasks_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "pack_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The pack file to write; its runs and case library go to FILE.runs/ (a second call resumes).")
@click.option("--time-budget-per-task", type=click.FloatRange(min=1), default=60.0, show_default=True)
@click.option("--steps", type=click.IntRange(min=0), cls=LibraryDefault, default=lambda: search_defaults().steps,
              help="Search steps per task after the drafts.")
@click.option("--max-tasks", type=click.IntRange(min=0), default=None,
              help="Solve at most this many tasks in this call, then write the pack of every task solved so far "
                   "(0: only write it); the next call goes on.")
@click.option("--no-kb", is_flag=True, help="Solve without the knowledge base at --home (on by default).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the pack's summary as one JSON object.")
@click.option("--quiet", is_flag=True, help="No line per task.")
@click.pass_context
def build_command(ctx, tasks_dir, pack_path, time_budget_per_task, steps, max_tasks, no_kb, seed, as_json, quiet):
    """Solve every task folder in TASKS_DIR (curriculum on) and export what was learned to --out."""
    from agent.settings import SearchSettings, SolveSettings
    from agent.solve import KnowledgeBaseMissing
    from curriculum import PoolError, PoolSettings
    from curriculum.experience import build_experience

    settings = PoolSettings(SolveSettings(SearchSettings(steps=steps, time_budget=time_budget_per_task, seed=seed),
                                          use_kb=not no_kb), seed=seed, max_rounds=max_tasks)
    command = (f"agent experience build {tasks_dir} --out {pack_path} --time-budget-per-task {time_budget_per_task:g} "
               f"--steps {steps} --seed {seed}" + (" --no-kb" if no_kb else ""))

    def ended(record) -> None:
        click.echo(f"round {record.round}: {record.task} {record.status} ({record.seconds:.0f} s)", err=True)

    try:
        pack = build_experience(tasks_dir, pack_path, settings, command=command, kb_home=ctx.obj["home"],
                                on_round=None if quiet or as_json else ended)
    except (PoolError, KnowledgeBaseMissing) as error:
        raise CasebookError(str(error)) from error
    _summary(pack_path, pack, as_json)


@experience_command.command("use")
@click.argument("pack_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
def use_command(ctx, pack_path):
    """Add a pack you built to this home: later `agent solve` runs use it beside the bundled one."""
    from agent.memory.experience import PackError, add_pack

    try:
        copy = add_pack(ctx.obj["home"], pack_path)
    except PackError as error:
        raise CasebookError(str(error)) from error
    click.echo(f"added {pack_path} as {copy}")


@experience_command.command("show")
@click.argument("pack_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@click.option("--json", "as_json", is_flag=True, help="Print each pack's summary as JSON.")
@click.pass_context
def show_command(ctx, pack_path, as_json):
    """The packs `agent solve` uses (the bundled one and the home's), or the pack PACK_PATH."""
    from agent.memory.experience import PackError, packs_in_use, read_pack

    try:
        packs = [(pack_path, read_pack(pack_path))] if pack_path else packs_in_use(ctx.obj["home"])
    except PackError as error:
        raise CasebookError(str(error)) from error
    if not packs:
        click.echo("no experience pack in use: this install ships none and the home has none "
                   "(`agent experience build POOL --out FILE`, then `agent experience use FILE`)")
    for path, pack in packs:
        _summary(path, pack, as_json)


@experience_command.command("changes")
@click.argument("task_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the measured changes as one JSON object.")
@click.pass_context
def changes_command(ctx, task_dir, as_json):
    """The built-in changes the packs in use measured on the pool tasks nearest TASK_DIR, for each model family in
    the order `agent solve` tries them."""
    from agent.memory.experience import PackError, change_gains_near, packs_in_use
    from agent.memory.records import TaskSignature
    from retrieval.profile import TaskSetupError, profile_task

    try:
        profile = profile_task(task_dir)
        packs = [pack for _, pack in packs_in_use(ctx.obj["home"])]
    except (TaskSetupError, PackError) as error:
        raise CasebookError(str(error)) from error
    changes = change_gains_near(packs, TaskSignature.of(profile)).changes() if packs else []
    if as_json:
        click.echo(json.dumps({"task": profile.name, "packs": len(packs),
                               "changes": [change.to_dict() for change in changes]}))
        return
    if not packs:
        click.echo("no experience pack in use: a node's built-in changes are tried in their built-in order")
        return
    click.echo(f"{profile.name}: {count(len(changes), 'built-in change')} measured on the nearest pool tasks; "
               "for each model family the search tries them in this order, then the ones never measured, then "
               "the ones that never beat their parent")
    for change in changes:
        what = ", ".join(f"{name}={value}" for name, value in change.params.items()) or change.op
        click.echo(f"  {change.trainer:<24} {what:<44} {change.evidence()}")


def _summary(path: Path, pack, as_json: bool) -> None:
    memories = pack.memories
    summary = {"file": str(path), **pack.header.to_dict(), "tasks": len(pack.tasks), "memories": len(memories),
               "portfolios": {kind: len(configs) for kind, configs in pack.portfolios.items()}}
    if as_json:
        click.echo(json.dumps(summary))
        return
    click.echo(f"{path}: {count(len(pack.tasks), 'task')}, {count(len(memories), 'memory', 'memories')}, "
               + ", ".join(f"{kind} portfolio of {n}" for kind, n in summary["portfolios"].items()))
    click.echo(f"  built with `{pack.header.built_with}` at {pack.header.commit} on {pack.header.date}")
