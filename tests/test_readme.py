"""README.md's examples run as a new user would run them: every `python` and `bash` block, top to bottom, in an empty
folder with a knowledge-base home of its own, each block a fresh process (blocks share only the files they write).
Other fences (`console`, plain) are illustrations. The blocks are read with pytest-codeblocks' parser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_codeblocks import extract_from_file

from tests.conftest import REPO

README = REPO / "README.md"
RUNNABLE = ("python", "bash")
BLOCK_TIMEOUT = 240  # seconds; the examples use budgets of about 20 s


def runnable_blocks():
    return [block for block in extract_from_file(README) if block.syntax in RUNNABLE]


def test_the_readme_has_a_short_quick_start_that_runs():
    text = README.read_text()
    quick_start = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert len(quick_start.strip().splitlines()) <= 15
    assert "```python" in quick_start and "CASEBOOK_HOME" in quick_start
    assert runnable_blocks()[0].lineno < text[:text.index("\n## What it is")].count("\n")


@pytest.mark.slow
def test_every_readme_example_runs_in_a_fresh_folder(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    environment = {**os.environ, "CASEBOOK_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1",
                   # the interpreter running the tests, its commands (kb, agent) and this checkout's code
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                   "PYTHONPATH": str(REPO)}
    environment.pop("ANTHROPIC_API_KEY", None)  # the README's examples work offline
    for block in runnable_blocks():
        command = [sys.executable, "-c", block.code] if block.syntax == "python" else \
            ["bash", "-euo", "pipefail", "-c", block.code]
        done = subprocess.run(command, cwd=folder, env=environment, capture_output=True, text=True,
                              timeout=BLOCK_TIMEOUT)
        assert done.returncode == 0, (f"README.md line {block.lineno} ({block.syntax}) exited {done.returncode}:\n"
                                      f"{block.code}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n"
                                      f"{done.stderr[-3000:]}")
    assert not (folder / ".casebook").exists()  # every example used the home it was given
