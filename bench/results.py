"""bench/RESULTS.md: each benchmark owns one `## ...` section and rewrites only that one."""

from __future__ import annotations

from pathlib import Path


def write_section(path: Path, section: str) -> None:
    """Replace the section of RESULTS.md with `section`'s title line (or append it), leaving every other as it is."""
    title = section.split("\n", 1)[0]
    section = section.rstrip("\n") + "\n\n"  # one blank line before the next section
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    start = text.find(title + "\n")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        following = text.find("\n## ", start + len(title))
        text = text[:start] + section + ("" if following == -1 else text[following + 1:])
    path.write_text(text, encoding="utf-8")
