"""Where casebook keeps its state, and the process-wide settings every entry point needs."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

HOME_ENV = "CASEBOOK_HOME"
DEFAULT_HOME = Path(".casebook")

# Nothing may download model weights at run time: make a hub name fail at once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

# The files casebook reads at run time (taxonomy, competitions, recipes, bundled trick cards, the eval query set)
# live in the repository's data/ folder, which pyproject.toml installs as the package `casebook_data`: from the
# source tree through the editable install, from site-packages after `pip install .`.
DATA_PACKAGE = "casebook_data"


class DataNotInstalledError(RuntimeError):
    """casebook's data package cannot be found (an install that predates it, or casebook not installed)."""


def data_path(*parts: str) -> Path:
    """A file or folder of the installed data package, e.g. data_path("eval", "queries.jsonl")."""
    try:
        resource = resources.files(DATA_PACKAGE).joinpath(*parts)
    except ModuleNotFoundError:
        raise DataNotInstalledError(f"casebook's data package {DATA_PACKAGE!r} is not installed: reinstall casebook "
                                    "(`pip install -e .` in the repository, or `pip install .`)") from None
    if not isinstance(resource, Path):  # e.g. imported from a zip file: the store records real paths
        raise DataNotInstalledError(f"casebook's data must be installed as files, not inside {resource}")
    return resource


def bundled_knowledge() -> Path:
    """The folder of trick cards shipped with casebook (data/knowledge/*.jsonl): `kb ingest --bundled` reads it."""
    return data_path("knowledge")


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The knowledge-base folder: explicit argument, else $CASEBOOK_HOME, else ./.casebook."""
    chosen = home if home is not None else os.environ.get(HOME_ENV) or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
