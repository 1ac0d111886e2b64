"""Options every casebook command shares."""

from __future__ import annotations

from pathlib import Path

import click

from kb.config import resolve_home


def _resolve(ctx: click.Context, param: click.Parameter, value: str | None) -> Path:
    return resolve_home(value)


# The knowledge-base folder: `kb` keeps its tricks there and `agent solve --use-kb` reads them from there.
home_option = click.option("--home", type=click.Path(file_okay=False), default=None, callback=_resolve,
                           help="Knowledge-base folder (default: $CASEBOOK_HOME, else ./.casebook).")
