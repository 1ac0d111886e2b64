"""What a command shows while its user waits: in a terminal a live table, a spinner or a bar; into a pipe or a file,
plain lines a log keeps (rich would print nothing until the end there). All of it goes to stderr, so stdout holds
only the results, and a quiet console shows none of it."""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from agent.search.journal import Journal, Node

LOADING_MODEL = "loading the embedding model…"


def _model_load_hook(announce):
    """Announce the embedding model's load (seconds of silence otherwise) while the returned context is open."""
    from kb.embedding import on_model_load

    return on_model_load(lambda: announce(LOADING_MODEL))


def clock(seconds: float) -> str:
    """12 s, 4:05, 1:02:03."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


class Waiting:
    """One thing being done: a spinner in a terminal; `update` says what is being done now (into a pipe, a line, so
    the model's load is said there too)."""

    def __init__(self, console: Console, doing: str):
        self.console = console
        self.doing = doing
        self._status = console.status(doing) if console.is_terminal else None
        self._stack = ExitStack()

    def __enter__(self) -> Waiting:
        if self._status is not None:
            self._status.start()
        self._stack.enter_context(_model_load_hook(self.update))
        return self

    def update(self, doing: str) -> None:
        self.doing = doing
        if self._status is not None:
            self._status.update(doing)
        else:
            self.console.print(doing, highlight=False, soft_wrap=True)

    def __exit__(self, *exc_info) -> None:
        self._stack.close()
        if self._status is not None:
            self._status.stop()


class Bar:
    """Work with a known total: a bar in a terminal (`label`, done/total, what is being done, elapsed); into a pipe a
    line whenever what is being done changes and at each quarter of the total. Shown from the first update on, so an
    error before it stays one line."""

    def __init__(self, console: Console, label: str):
        self.console = console
        self._progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  TextColumn("{task.description}"), console=console, transient=True) \
            if console.is_terminal else None
        self._task = self._progress.add_task("", total=None) if self._progress is not None else None
        self._label = label
        self._doing = ""
        self._done, self._total = 0, None
        self._printed = 0  # into a pipe: done as of the last line
        self._stack = ExitStack()

    def __enter__(self) -> Bar:
        self._stack.enter_context(_model_load_hook(lambda doing: self.update(self._done, self._total, doing)))
        return self

    def update(self, done: int, total: int | None, doing: str = "") -> None:
        self._done, self._total = done, total
        if self._progress is not None:
            if not self._progress.live.is_started:
                self._progress.start()
            self._progress.update(self._task, completed=done, total=total, description=doing)
        elif doing != self._doing or self._quarter(done) > self._quarter(self._printed):
            self._printed = done
            self.console.print(f"{self._label} {done}/{'?' if total is None else total}: {doing}", highlight=False,
                               soft_wrap=True)
        self._doing = doing

    def _quarter(self, done: int) -> int:
        return 4 * done // self._total if self._total else 0

    def __exit__(self, *exc_info) -> None:
        self._stack.close()
        if self._progress is not None and self._progress.live.is_started:
            self._progress.stop()


class SolveProgress:
    """`agent solve` while it searches. In a terminal, the live table of nodes with the time spent and left under
    it; into a pipe or a file, one line per node: time spent and left, the node, its score and the best so far."""

    def __init__(self, console: Console, time_budget: float | None, metric: str):
        self.console = console
        self.time_budget = time_budget
        self.metric = metric
        self.started = time.monotonic()
        self.best: Node | None = None
        self.table = _node_table()
        self._live = Live(console=console, get_renderable=self._render, refresh_per_second=4) \
            if console.is_terminal else None

    def __enter__(self) -> SolveProgress:
        self.started = time.monotonic()
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._live is not None:
            self._live.stop()

    def clock(self) -> str:
        """"1:05 elapsed, 3:55 left" (the budget's), as the search keeps it."""
        elapsed = time.monotonic() - self.started
        left = f", {clock(self.time_budget - elapsed)} left" if self.time_budget is not None else ""
        return f"{clock(elapsed)} elapsed{left}"

    def best_text(self) -> str:
        if self.best is None:
            return "no verified node yet"
        return f"best {self.metric} {self.best.metric:.4f} (node {self.best.id})"

    def _render(self) -> Table:
        self.table.caption = f"{self.clock()}; {self.best_text()}"
        return self.table

    def on_node(self, node: Node, journal: Journal) -> None:
        improved = journal.improved(node)
        if improved:
            self.best = node
        _add_node_row(self.table, node, improved)
        if self._live is not None:
            self._live.refresh()
            return
        parent = "" if node.parent_id is None else f" of {node.parent_id}"
        score = "no score" if node.metric is None else f"{self.metric} {node.metric:.4f}"
        self.console.print(f"[{self.clock()}] node {node.id} ({node.action}{parent}, {node.candidate.trainer}): "
                           f"{score}, {node.status.replace('_', ' ')} in {node.elapsed:.1f} s; {self.best_text()}",
                           highlight=False, markup=False, soft_wrap=True)


def _node_table() -> Table:
    table = Table(title="solution tree")
    for header, width in (("node", 4), ("parent", 6), ("action", 7), ("trainer", 10), ("CV score", 8), ("status", 6),
                          ("s", 5)):
        table.add_column(header, min_width=width)
    table.add_column("plan", no_wrap=True, overflow="ellipsis", max_width=60)
    return table


def _add_node_row(table: Table, node: Node, improved: bool) -> None:
    style = "bold green" if improved else ("" if node.verified else "red")
    table.add_row(str(node.id), "–" if node.parent_id is None else str(node.parent_id), node.action,
                  node.candidate.trainer, "–" if node.metric is None else f"{node.metric:.4f}", node.status,
                  f"{node.elapsed:.1f}", node.plan, style=style)
