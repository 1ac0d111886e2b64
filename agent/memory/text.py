"""The case library in words: a task as the texts its embeddings are made of (its description, Agent K's Sim, and
its structure, Agent K's Diff), and a failure as the one line a negative memory keeps.

Sizes are words ("a small table of 1,234 rows") with the exact count beside them: the embedding model reads words
better. An error is the last line of a traceback that names an exception, and its key drops the particulars, so the
same error on another table compares equal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from retrieval.profile import TaskProfile

# Training rows in words (the size bucket of a signature, and the structure text).
_ROW_WORDS = ((1_000, "tiny"), (10_000, "small"), (100_000, "medium-sized"), (float("inf"), "large"))
_COLUMN_WORDS = ((10, "narrow"), (50, "medium-width"), (float("inf"), "wide"))
_KIND_WORDS = {"numeric": "numeric", "categorical": "categorical", "datetime": "date or time", "text": "free-text",
               "id": "identifier"}
_ERROR_CLASS = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b")
_MESSAGE_LIMIT = 300  # characters of an error's last line kept


def _word(count: float, words: tuple[tuple[float, str], ...]) -> str:
    return next(word for bound, word in words if count < bound)


# ---------------------------------------------------------------------------------------------- a task


def size_word(n_rows: int) -> str:
    """A table's training rows in one word: tiny (< 1,000), small, medium-sized, large (>= 100,000)."""
    return _word(n_rows, _ROW_WORDS)


def description_text(profile: TaskProfile) -> str:
    """The text behind a task's description embedding (Agent K's Sim): description.md, or a line naming the target."""
    return profile.description.strip() or f"{profile.name}: predict {profile.target} ({profile.task_type})."


def structure_text(profile: TaskProfile) -> str:
    """Files, sizes, rows, columns, column kinds and modality in plain words (Agent K's Diff)."""
    kinds: dict[str, list] = {}
    for column in profile.columns:
        kinds.setdefault(column.kind, []).append(column)
    parts = []
    for kind, columns in sorted(kinds.items(), key=lambda item: (-len(item[1]), item[0])):
        part = f"{len(columns)} {_KIND_WORDS.get(kind, kind)}"
        if kind == "categorical":
            part += f" (up to {max(column.cardinality for column in columns):,} levels)"
        parts.append(part)
    target = {"binary": "a binary class", "multiclass": "one of several classes",
              "regression": "a continuous number"}.get(profile.task_type, profile.task_type)
    if profile.class_balance is not None:
        target += f" (rarest class {profile.class_balance:.0%})"
    return (f"{profile.modality} data. A {size_word(profile.n_rows)} table: {profile.n_rows:,} training rows, "
            f"{profile.n_cols} columns ({_word(profile.n_cols, _COLUMN_WORDS)}); feature columns: "
            f"{', '.join(parts) or 'none'}; {profile.missing_share:.0%} of values missing. "
            f"The target is {target}. Files: {files_text(profile.task_dir, profile.files)}.")


def files_text(task_dir: str | Path, files: Sequence[str]) -> str:
    """The task's files with their sizes, e.g. "train.csv (120 KiB), test.csv (40 KiB)"."""
    sizes = []
    for name in files:
        path = Path(task_dir) / name
        if path.is_file():
            size = path.stat().st_size
            sizes.append(f"{name} ({size / 1024:,.0f} KiB)" if size >= 1024 else f"{name} ({size} bytes)")
    return ", ".join(sizes) or "none"


# ---------------------------------------------------------------------------------------------- a failure


def error_class(text: str) -> str | None:
    """The exception class a traceback ends with ("ValueError"), None when it names none (a timeout, a crash)."""
    found = _ERROR_CLASS.findall(text or "")
    return found[-1] if found else None


def error_message(text: str) -> str:
    """The line that says what went wrong: the last line naming an exception, else the last line."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    named = [line for line in lines if _ERROR_CLASS.search(line)]
    return (named[-1] if named else lines[-1] if lines else "")[:_MESSAGE_LIMIT]


def failure_message(error: str, output: str = "") -> str:
    """What a failed node's memory says went wrong: its error's line, else the verifier's reason."""
    return error_message(error) or error_message(output)


def message_key(message: str) -> str:
    """An error message without its particulars (quoted names, numbers), so the same error on another table
    compares equal."""
    text = re.sub(r"(['\"`]).*?\1", "<name>", message.lower())
    return re.sub(r"\d+(\.\d+)?", "<n>", text).strip()
