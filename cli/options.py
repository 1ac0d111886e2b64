"""Options every casebook command shares."""

from __future__ import annotations

from pathlib import Path

import click

from kb.config import resolve_home
from kb.store import resolve_chroma_url


def _resolve(ctx: click.Context, param: click.Parameter, value: str | None) -> Path:
    return resolve_home(value)


def _resolve_chroma_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
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
