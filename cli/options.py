"""What every casebook command shares: options, the one-line error, and defaults read from the library lazily.

Nothing here imports the library at import time, so `agent -h`, `kb -h` and `--version` answer without loading
pandas, scikit-learn or chromadb; a command imports what it needs when it runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# -h as well as --help, on every command and group below the one that sets it (click passes it down).
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}

# The installed distribution's version (importlib.metadata), as `pip show casebook` reports it.
version_option = click.version_option(package_name="casebook", message="%(prog)s (casebook) %(version)s")


class CasebookError(click.ClickException):
    """Printed as one line `error: ...`, exit status 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def process_started() -> float:
    """When this process started, as a time.monotonic() value (from /proc: its start in clock ticks since boot, and
    the uptime), so that a command's time budget counts the interpreter's start-up and the imports before the
    command runs: reading `agent solve`'s option defaults imports scikit-learn and pandas, 1.9 s alone and 7 s with
    two solves and four other busy processes on 2 cores. Now, where /proc cannot tell."""
    try:
        stat = Path("/proc/self/stat").read_text(encoding="ascii")
        uptime = float(Path("/proc/uptime").read_text(encoding="ascii").split()[0])
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime; the name before ")" may hold spaces
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.monotonic()
    return time.monotonic() - age if 0.0 <= age < 3600.0 else time.monotonic()


def count(n: int, noun: str, plural: str | None = None) -> str:
    """"1 trick", "2 tricks", "1 memory" / "3 memories" (pass the plural when adding an s does not make it)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def print_table(console: Console, table: Table) -> None:
    """A table whole: into a pipe or a file at its natural width (rich would assume 80 columns and cut names), in a
    terminal at the terminal's width, where the columns that hold names and ids fold rather than cut."""
    if not console.is_terminal:  # Console.print never widens past its console: a console as wide as the table
        from rich.console import Console

        natural = console.measure(table, options=console.options.update_width(10_000)).maximum
        console = Console(file=console.file, width=max(console.width, natural))
    console.print(table)


class LibraryDefault(click.Option):
    """An option whose default is a function that reads it from the library. It is called when the command runs or
    shows its own help (which then prints the value, not "(dynamic)"), never when a group lists its commands."""

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return super().get_default(ctx, call=True)


class LibraryChoice(click.Choice):
    """A choice among names the library defines, read when first needed (see LibraryDefault)."""

    def __init__(self, load: Callable[[], Iterable[str]]):
        self._load = load
        self.case_sensitive = True

    @cached_property
    def choices(self) -> tuple[str, ...]:
        return tuple(self._load())


def _resolve(ctx: click.Context, param: click.Parameter, value: str | None) -> Path:
    from kb.config import resolve_home

    return resolve_home(value)


def _resolve_chroma_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from kb.store import resolve_chroma_url

    return resolve_chroma_url(value)


# The knowledge-base folder: `kb` keeps its tricks there and `agent solve --use-kb` reads them from there.
home_option = click.option("--home", type=click.Path(file_okay=False), default=None, callback=_resolve,
                           help="Knowledge-base folder (default: $CASEBOOK_HOME, else ./.casebook).")

# Where the home's vectors live: embedded in the home, or on a Chroma server (`chroma run`) that several machines
# can share; the sqlite catalog stays in the home either way.
chroma_url_option = click.option(
    "--chroma-url", default=None, metavar="URL", callback=_resolve_chroma_url,
    help="A Chroma server (`chroma run --path DIR --port 8000`) for the vector index, e.g. http://host:8000 "
         "(default: $CASEBOOK_CHROMA_URL, else embedded in the home).")
