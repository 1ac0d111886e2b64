"""`agent memory`: the case library's command line over agent.memory.store.MemoryStore, and how its tasks and
memories are listed (the tables, a memory in one line, the export). The home is `agent`'s own --home
(`agent --home DIR memory list`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from cli.options import CasebookError, LibraryChoice, count, print_table

if TYPE_CHECKING:
    from agent.memory.records import Memory, TaskMemory
    from agent.memory.store import MemoryStore

out = Console(soft_wrap=True)


def memory_store(ctx: click.Context) -> MemoryStore:
    """The case library of `agent`'s --home (its vectors on --chroma-url's server, if one), made if need be."""
    from agent.memory.store import MemoryStore

    return MemoryStore(ctx.obj["home"], chroma_url=ctx.obj.get("chroma_url"))


def _store(ctx: click.Context) -> MemoryStore:
    """The home's case library; reading commands never create one."""
    from agent.memory.store import MEMORY_FILE, MemoryStore

    home = ctx.obj["home"]
    if not MemoryStore.exists(home):
        raise CasebookError(f"no case library in {home} (no {MEMORY_FILE}): run `agent --home {home} solve TASK "
                            "--memory` first, or pass the --home that holds one")
    return memory_store(ctx)


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _kind(memory: Memory) -> str:
    """The memory's kind for a reader: a change that did not beat its parent and left the score as it was is "no
    change" rather than "worse" (it is still kind worse to --kind and --json)."""
    from agent.memory.records import WORSE

    return "no change" if memory.kind == WORSE and memory.delta == 0 else memory.kind


def _what(memory: Memory) -> str:
    """One line on a memory: what was applied or what went wrong, and the score change."""
    from agent.memory.records import SolutionMemory
    from retrieval.metrics import describe_change

    if isinstance(memory, SolutionMemory):
        return (f"best {memory.spec['model']['name']} CV {memory.metric}={memory.score:.4f} "
                f"({count(memory.nodes, 'node')})")
    record = memory.to_dict()
    if record.get("delta") is not None:  # the change of the greater-is-better score: words follow the metric's way
        relative = f" ({abs(record['gain']):.2%})" if record["delta"] else ""
        return f"{record['op']}: {record['metric']} {describe_change(record['delta'])}{relative}"
    repair = " [repaired]" if record.get("repair") else ""
    return f"{record.get('failure') or memory.kind}: {record.get('message', '')}{repair}"


def _kinds() -> tuple[str, ...]:
    from agent.memory.records import NEGATIVE_KINDS, POSITIVE_KINDS

    return (*POSITIVE_KINDS, *NEGATIVE_KINDS)


@click.group("memory")
def memory_command() -> None:
    """The case library: what worked (positive memories) and what failed (negative memories) on earlier tasks."""


@memory_command.command("list")
@click.option("--kind", "kinds", type=LibraryChoice(_kinds), multiple=True,
              help="Only memories of this kind (repeatable).")
@click.option("--polarity", type=click.Choice(["positive", "negative"]), default=None)
@click.option("--task", default=None, help="Only the memories of this task (its name or key).")
@click.option("--tasks", "list_tasks", is_flag=True, help="List the remembered tasks instead of the memories.")
@click.option("--experience", "from_experience", is_flag=True,
              help="The experience packs' entries (the bundled pack and the ones `agent experience use` added) "
                   "instead of this home's own runs.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_command(ctx, kinds, polarity, task, list_tasks, from_experience, as_json):
    """Memories (oldest first), or with --tasks the remembered tasks and whether each was solved."""
    tasks, memories, where = _experience(ctx) if from_experience else _own(ctx)
    chosen = [memory for memory in memories
              if (not kinds or memory.kind in kinds) and (not polarity or memory.polarity == polarity)
              and (not task or task in (memory.task_name, memory.task_key))]
    if list_tasks:
        if as_json:
            _print_json({"tasks": [item.to_dict() for item in tasks]})
            return
        table = Table(title=f"tasks in {where}")
        for header in ("task", "key", "solved", "best CV", "runs", "last run"):
            table.add_column(header, overflow="fold")
        for item in tasks:
            best = f"{item.metric}={item.best_score:.4f}" if item.best_score is not None else "–"
            table.add_row(item.name, item.task_key, "yes" if item.solved else "no", best, str(item.runs),
                          item.last_run_at or "–")
        print_table(out, table)
        return
    if as_json:
        _print_json({"memories": [memory.to_dict() for memory in chosen]})
        return
    table = Table(title=f"{len(chosen)} of {count(len(memories), 'memory', 'memories')} ({count(len(tasks), 'task')}, "
                        f"{sum(item.solved for item in tasks)} solved) in {where}")
    for header in ("id", "kind", "task", "node", "what"):
        table.add_column(header, overflow="fold")  # an id cut short could not be given to `agent memory show`
    for memory in chosen:
        node = getattr(memory, "node_id", None)
        style = "green" if memory.polarity == "positive" else "red"
        table.add_row(memory.id, _kind(memory), memory.task_name, "–" if node is None else str(node), _what(memory),
                      style=style)
    print_table(out, table)


def _own(ctx: click.Context) -> tuple[list[TaskMemory], list[Memory], str]:
    """The home's case library: its tasks, its memories (oldest first) and where it is."""
    from agent.memory.store import MEMORY_FILE

    store = _store(ctx)
    return store.tasks(), store.list(), str(store.home / MEMORY_FILE)


def _experience(ctx: click.Context) -> tuple[list[TaskMemory], list[Memory], str]:
    """The experience packs in use: their pool tasks, their memories and which files they are."""
    from agent.memory.experience import PackError, packs_in_use

    try:
        packs = packs_in_use(ctx.obj["home"])
    except PackError as error:
        raise CasebookError(str(error)) from None
    if not packs:
        raise CasebookError("no experience pack in use: this install ships none and the home has none; build one "
                            "with `agent experience build POOL --out FILE`, then `agent experience use FILE`")
    return ([task for _, pack in packs for task in pack.library_tasks],
            [memory for _, pack in packs for memory in pack.memories], ", ".join(str(path) for path, _ in packs))


@memory_command.command("show")
@click.argument("memory_id")
@click.option("--json", "as_json", is_flag=True, help="The whole record, solution.py included.")
@click.pass_context
def show_command(ctx, memory_id, as_json):
    """One memory, with where it came from."""
    from agent.memory.store import UnknownMemoryError

    try:
        memory = _store(ctx).show(memory_id)
    except UnknownMemoryError as error:
        raise CasebookError(str(error)) from None
    record = memory.to_dict()
    if as_json:
        _print_json(record)
        return
    for key, value in record.items():
        if key == "solution" and value:
            value = f"{len(value.splitlines())} lines (--json prints it)"
        out.print(f"[bold]{key}[/]: {json.dumps(value, default=str) if isinstance(value, dict | list) else value}",
                  highlight=False)


@memory_command.command("forget")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def forget_command(ctx, target, as_json):
    """Forget one memory (by id) or a whole task (by name or key): its memories, runs and embeddings."""
    from agent.memory.store import UnknownMemoryError

    try:
        removed = _store(ctx).forget(target)
    except UnknownMemoryError as error:
        raise CasebookError(str(error)) from None
    if as_json:
        _print_json({"forgotten": target, "memories_removed": removed})
    else:
        out.print(f"forgot {target}: {count(removed, 'memory', 'memories')} removed", highlight=False)


@memory_command.command("export")
@click.option("--json", "as_json", is_flag=True, help="One JSON object {tasks, memories} instead of JSON lines.")
@click.pass_context
def export_command(ctx, as_json):
    """Every task (kind "task") and every memory, one JSON object per line."""
    store = _store(ctx)
    records = [{"kind": "task", **task.to_dict()} for task in store.tasks()] + [m.to_dict() for m in store.list()]
    if as_json:
        _print_json({"tasks": [r for r in records if r["kind"] == "task"],
                     "memories": [r for r in records if r["kind"] != "task"]})
        return
    for record in records:
        click.echo(json.dumps(record, ensure_ascii=False, default=str))
