"""`agent experience build` on a pool of tiny real tasks: the pack holds every solved task with its portfolio, its
header names the command, commit and date, an interrupted build resumes without solving a task twice (and a call
of no rounds writes the pack of what is solved so far), and the
pool's memories stay in the build's own case library."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from agent.memory.experience import packs_in_use, read_pack
from agent.settings import SearchSettings, SolveSettings
from cli.agent import main
from curriculum import PoolError, PoolSettings
from curriculum.experience import POOL_MEMORY, build_experience, work_folder
from tests.curriculum.conftest import Interrupted

TWO_DRAFTS = SolveSettings(SearchSettings(num_drafts=2, steps=1, time_budget=60), cv=3)




@pytest.mark.slow  # three real solves and the case library's embedding model
def test_a_build_resumes_and_exports_every_solved_task_with_a_portfolio(pool_dir, tmp_path, embedder):
    pack_path = tmp_path / "pack.json"

    def stop(record):
        raise Interrupted

    with pytest.raises(Interrupted):
        build_experience(pool_dir, pack_path, PoolSettings(TWO_DRAFTS), command="test", embedder=embedder,
                         on_round=stop)
    assert not pack_path.exists()
    first = (work_folder(pack_path) / "concrete" / "run.json").stat().st_mtime_ns

    # A call of no rounds writes the pack of what the interrupted call solved, and solves nothing.
    so_far = build_experience(pool_dir, pack_path, PoolSettings(TWO_DRAFTS, max_rounds=0), command="test",
                              embedder=embedder)
    assert [task.name for task in so_far.tasks] == ["concrete"] and read_pack(pack_path).to_dict() == so_far.to_dict()
    other_budget = SolveSettings(replace(TWO_DRAFTS.search, time_budget=90), cv=3)
    with pytest.raises(PoolError, match="solved its tasks at 60 s each"):  # one pack, one budget per task
        build_experience(pool_dir, pack_path, PoolSettings(other_budget), command="test", embedder=embedder)

    pack = build_experience(pool_dir, pack_path, PoolSettings(TWO_DRAFTS), command="agent experience build test",
                            embedder=embedder)
    assert (work_folder(pack_path) / "concrete" / "run.json").stat().st_mtime_ns == first  # resumed, not redone
    assert sorted(task.name for task in pack.tasks) == ["attrition", "concrete", "credit"]
    assert pack.portfolios["classification"] and pack.portfolios["regression"]
    assert read_pack(pack_path).to_dict() == pack.to_dict()  # what was written reads back whole
    header = json.loads(pack_path.read_text())["header"]
    assert header["built_with"] == "agent experience build test" and header["commit"] and header["date"][:2] == "20"
    assert (work_folder(pack_path) / POOL_MEMORY).is_dir()
    assert sorted(task.name for task in pack.library_tasks) == ["attrition", "concrete", "credit"]
    assert "solution" in {memory.kind for memory in pack.memories}
    home = tmp_path / "home"
    runner = CliRunner()
    added = runner.invoke(main, ["--home", str(home), "experience", "use", str(pack_path)])
    assert added.exit_code == 0, added.output
    shown = runner.invoke(main, ["--home", str(home), "experience", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    summaries = [json.loads(line) for line in shown.output.splitlines()]
    [added_pack] = [s for s in summaries if s["file"].startswith(str(home))]  # beside the bundled pack, if any
    assert added_pack["tasks"] == 3 and added_pack["built_with"] == "agent experience build test"
    # The pack's entries are listed apart from the home's own runs, which it never joins.
    listed = json.loads(runner.invoke(main, ["--home", str(home), "memory", "list", "--experience", "--json"]).stdout)
    in_use = packs_in_use(home)  # the bundled pack's entries, if any, and this one's
    assert len(pack.memories) > 0 and len(listed["memories"]) == sum(len(found.memories) for _, found in in_use)
    assert {memory["id"] for memory in listed["memories"]} >= {memory.id for memory in pack.memories}
    own = runner.invoke(main, ["--home", str(home), "memory", "list"])
    assert own.exit_code != 0 and "no case library" in own.output


def test_adding_a_file_that_is_not_a_pack_is_one_line_naming_it(tmp_path):
    notes = tmp_path / "notes.json"
    notes.write_text("[]")
    result = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "experience", "use", str(notes)])
    assert result.exit_code != 0
    [line] = [line for line in result.output.splitlines() if line.strip()]
    assert "notes.json" in line and "agent experience build" in line
    assert not (tmp_path / "home" / "experience").exists()
