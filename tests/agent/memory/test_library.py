"""The case library across real solves: a second related task drafts from the first task's best spec and its plan
names the memory; a task's own memories are left out when it is solved again unless asked for; `agent memory`
lists, shows, exports and forgets them."""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import replace

import pytest
from click.testing import CliRunner

from agent.memory.proposer import MemoryTreeProposer, fit_to_task
from agent.memory.records import IMPROVEMENT, SETUP, SOLUTION, WORSE, task_key
from agent.memory.store import MemoryStore
from agent.search.builtin import BuiltinTreeProposer
from agent.search.fit_time import TableShape, carry_seconds
from agent.search.journal import DRAFT, Journal
from agent.solve import solve_task
from cli.agent import main
from retrieval.profile import profile_task
from tests.agent.memory.conftest import SHORT


def best_single(journal):
    return max((node for node in journal.valid_nodes if not node.members), key=lambda node: (node.score, -node.id))


@pytest.fixture(scope="module")
def library(tmp_path_factory, tasks, embedder):
    """A case library that has solved attrition with gradient boosting and forests (not the built-in proposer's
    first family, linear), so a draft taken from it cannot be mistaken for the built-in reference draft."""
    home = tmp_path_factory.mktemp("library")
    store = MemoryStore(home, embedder=embedder)
    first = solve_task(profile_task(tasks["attrition"].task_dir), SHORT, home / "runs" / "attrition",
                       proposer=BuiltinTreeProposer(families=("hist_gradient_boosting", "random_forest")),
                       memory=store)
    return store, first


def test_a_second_related_task_drafts_from_the_first_tasks_best_spec(library, tasks, tmp_path):
    store, first = library
    remembered = best_single(first.journal)
    assert remembered.candidate.trainer in ("hist_gradient_boosting", "random_forest")
    credit = profile_task(tasks["credit"].task_dir)
    second = solve_task(credit, SHORT, tmp_path / "credit", memory=store)
    draft = second.journal[0]
    expected, _ = fit_to_task(replace(remembered.candidate, rationale=""), credit)
    assert draft.action == DRAFT and draft.candidate.trainer == expected.trainer
    assert dict(draft.candidate.params) == dict(expected.params) and draft.candidate.steps == expected.steps
    # The plan names the memory: the task, how similar it is, the score it reached there.
    assert draft.plan.startswith("draft: from memory, the best single model of similar task attrition (similarity 0.")
    assert f"CV roc_auc={remembered.metric:.4f}" in draft.plan
    # The next draft is the built-in proposer's, as without memory: the reference family at defaults.
    assert second.journal[1].plan.startswith("draft: linear at defaults")
    # The second run's measurements are the library's now, each with its score change.
    measured = store.list(kind=[IMPROVEMENT, WORSE], task="credit")
    improvements = [node for node in second.journal if node.action == "improve" and not node.members and node.valid]
    assert len(measured) == len(improvements)
    for memory in measured:
        node = second.journal[memory.node_id]
        parent = second.journal[node.parent_id]
        assert memory.delta == pytest.approx(node.score - parent.score)
        assert (memory.kind == IMPROVEMENT) == (memory.delta > 0)
    assert store.task(task_key(credit.task_dir, credit.target)).solved


def test_a_remembered_spec_that_would_not_finish_within_a_nodes_cap_is_left_out_and_named(library, tasks):
    store, first = library
    remembered = best_single(first.journal)
    [solution] = store.list(kind=SOLUTION, task="attrition")
    assert solution.single_seconds == pytest.approx(remembered.elapsed) and solution.single_rows == remembered.scored_rows
    credit = profile_task(tasks["credit"].task_dir)
    signature = store.task(solution.task_key).signature
    expected = carry_seconds(solution.single_seconds, remembered.candidate.trainer,
                             signature.shape(solution.single_rows), TableShape.of(credit))
    recall = store.recall(credit)
    roomy = MemoryTreeProposer(BuiltinTreeProposer(), recall, node_seconds=expected * 2)
    assert roomy.draft(credit, Journal(), random.Random(0)).plan.startswith("draft: from memory")
    tight = MemoryTreeProposer(BuiltinTreeProposer(), recall, node_seconds=expected / 2)
    draft = tight.draft(credit, Journal(), random.Random(0))
    assert draft.plan.startswith("draft: linear at defaults")  # the built-in draft instead
    assert f"memory left out {remembered.candidate.trainer} from attrition (its CV took" in draft.plan
    assert f"over the {expected / 2:.1f} s a node may take" in draft.plan


def test_own_memories_are_left_out_unless_reused(library, tasks, tmp_path):
    store, first = library
    attrition = profile_task(tasks["attrition"].task_dir)
    own = task_key(attrition.task_dir, attrition.target)
    assert own not in {similar.task.task_key for similar in store.recall(attrition).similar}
    # The same table in another folder is the same task: still left out.
    copy = profile_task(shutil.copytree(tasks["attrition"].task_dir, tmp_path / "attrition-again"))
    assert own not in {similar.task.task_key for similar in store.recall(copy).similar}
    reused = store.recall(copy, reuse_own=True)
    mine = next(similar for similar in reused.similar if similar.task.task_key == own)
    assert mine.similarity == pytest.approx(1.0, abs=1e-3)
    assert dict(mine.solution.single_spec) == best_single(first.journal).spec.to_dict()

    one_draft = replace(SHORT, search=replace(SHORT.search, num_drafts=1, steps=0))
    again = solve_task(copy, one_draft, tmp_path / "again", memory=store)
    assert "similar task attrition" not in again.journal[0].plan
    reusing = solve_task(copy, one_draft, tmp_path / "reusing", memory=store, reuse_own_memory=True)
    assert reusing.journal[0].plan.startswith("draft: from memory, the best single model of similar task attrition")
    assert [run["reuse_own"] for run in store.runs(own)][-2:] == [0, 1]


def test_agent_memory_lists_shows_exports_and_forgets(library, tasks, tmp_path):
    store, first = library
    attrition = profile_task(tasks["attrition"].task_dir)
    key = task_key(attrition.task_dir, attrition.target)
    home = shutil.copytree(store.home, tmp_path / "home")  # the command forgets: on a copy
    runner = CliRunner()

    def agent(*args):
        result = runner.invoke(main, ["--home", str(home), "memory", *args])
        return result, (json.loads(result.output) if "--json" in args and result.exit_code == 0 else None)

    remembered = agent("list", "--tasks", "--json")[1]["tasks"]
    task = next(task for task in remembered if task["task_key"] == key)  # named after its latest folder
    assert task["solved"] and task["best_score"] >= first.journal.best().metric
    memories = agent("list", "--json")[1]["memories"]
    solution = next(memory for memory in memories if memory["kind"] == SOLUTION and memory["task_name"] == "attrition")
    _, shown = agent("show", solution["id"], "--json")
    assert shown["spec"] == first.journal.best().spec.to_dict() and "def build_model" in shown["solution"]
    result, _ = agent("list", "--kind", "solution")
    assert result.exit_code == 0 and solution["id"] in result.output
    exported = [json.loads(line) for line in agent("export")[0].output.splitlines()]
    assert len(exported) == len(remembered) + len(memories)
    result, forgotten = agent("forget", key, "--json")
    assert forgotten["memories_removed"] == sum(memory["task_key"] == key for memory in memories) > 0
    assert key not in [task["task_key"] for task in agent("list", "--tasks", "--json")[1]["tasks"]]
    result, _ = agent("show", solution["id"])
    assert result.exit_code == 2 and result.output.startswith("error: no memory")
    # `agent solve --memory` writes to the same library: a run, and a task that cannot be set up (no test.csv).
    solved = runner.invoke(main, ["--home", str(home), "solve", str(tasks["credit"].task_dir), "--memory", "--quiet",
                                  "--num-drafts", "1", "--steps", "0", "--cv", "3", "--out", str(tmp_path / "run")])
    assert solved.exit_code == 0, solved.output
    credit = profile_task(tasks["credit"].task_dir)
    assert [run["status"] for run in MemoryStore(home).runs(task_key(credit.task_dir, credit.target))][-1] == "solved"
    untestable = shutil.copytree(tasks["credit"].task_dir, tmp_path / "untestable")
    (untestable / "test.csv").unlink()
    failed = runner.invoke(main, ["--home", str(home), "solve", str(untestable), "--memory"])
    assert failed.exit_code == 2
    [setup] = MemoryStore(home).list(kind=SETUP)
    assert setup.task_name == "untestable" and "test.csv" in setup.message
    reuse = runner.invoke(main, ["--home", str(home), "solve", str(untestable), "--reuse-own-memory"])
    assert reuse.exit_code == 2
    missing = runner.invoke(main, ["--home", str(tmp_path / "nowhere"), "memory", "list"])
    assert missing.exit_code == 2 and "no case library in" in missing.output
    assert not (tmp_path / "nowhere").exists()  # reading creates nothing
