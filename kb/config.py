"""Where casebook keeps its state, and the process-wide settings every entry point needs."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "CASEBOOK_HOME"
DEFAULT_HOME = Path(".casebook")

# Nothing may download model weights at run time: make a hub name fail at once.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "data"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The knowledge-base folder: explicit argument, else $CASEBOOK_HOME, else ./.casebook."""
    chosen = home if home is not None else os.environ.get(HOME_ENV) or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
