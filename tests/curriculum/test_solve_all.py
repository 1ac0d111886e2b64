"""`solve-all` on a pool of tiny real tasks: it resumes after an interruption (between tasks and in the middle of
one), updates the memories between tasks and recomputes the order, keeps a task that fails in the pool without
stopping the others, and writes pool.json and pool.html."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from agent.memory.store import MemoryStore
from agent.settings import SearchSettings, SolveSettings
from bench.tasks import write_task_folder
from cli.agent import main
from curriculum import PoolSettings, solve_pool
from curriculum.state import ERROR, INTERRUPTED, SOLVED, STATE_FILE, PoolState
from tests.curriculum.conftest import Interrupted

# One draft and no further step: each task takes a few seconds, and the pool's machinery is what is tested. The
# budget only has to cover a cold start (loading the embedding model for the memories' recall).
TINY = SolveSettings(SearchSettings(num_drafts=1, steps=0, time_budget=60), cv=3)




@pytest.mark.slow  # three real solves with the case library, and its first recall loads the embedding model
def test_solve_all_resumes_after_an_interruption_and_learns_between_tasks(pool_dir, tmp_path, embedder):
    out = tmp_path / "out"
    memory = MemoryStore(tmp_path / "home", embedder=embedder)
    settings = PoolSettings(TINY, curriculum=True)

    def stop(record):
        raise Interrupted

    with pytest.raises(Interrupted):
        solve_pool(pool_dir, out, settings, memory=memory, on_round=stop)
    state = PoolState.load(out)
    assert [(r.round, r.task, r.status) for r in state.rounds] == [(1, "concrete", SOLVED)]  # the smallest first
    assert [task.name for task in memory.tasks() if task.solved] == ["concrete"]
    first_run = (out / "concrete" / "run.json").stat().st_mtime_ns

    result = solve_pool(pool_dir, out, settings, memory=memory)
    assert result.already_solved == ("concrete",)
    assert [(r.round, r.status) for r in result.rounds] == [(2, SOLVED), (3, SOLVED)]
    assert (out / "concrete" / "run.json").stat().st_mtime_ns == first_run  # skipped, not solved again
    assert sorted(task.name for task in memory.tasks() if task.solved) == ["attrition", "concrete", "credit"]
    # Round 2 compared the pool with what round 1 wrote; round 3 also with round 2's task.
    second, third = result.rounds
    assert {row["task"] for row in second.ranking} == {"credit", "attrition"}
    assert all(row["sim_positive"] > 0 and row["diff_positive"] > 0 for row in second.ranking)
    assert third.ranking[0]["sim_positive"] != second.ranking[-1]["sim_positive"]  # the order was recomputed

    again = solve_pool(pool_dir, out, settings, memory=memory)
    assert again.rounds == () and set(again.already_solved) == {"concrete", "credit", "attrition"}
    page = (out / "pool.html").read_text()
    assert page.count('<tr class="solved">') == 3 and "<svg" in page and "concrete/report.html" in page
    memory.close()


@pytest.mark.slow  # four real solves (one interrupted) and two failed set-ups
def test_a_task_interrupted_midway_is_solved_again_and_a_task_that_fails_stays_in_the_pool(pool_dir, tmp_path):
    pool = tmp_path / "tasks"
    pool.mkdir()
    (pool / "credit").symlink_to(pool_dir / "credit", target_is_directory=True)
    (pool / "concrete").symlink_to(pool_dir / "concrete", target_is_directory=True)
    # Set-up works, but the rare class has too few rows for three CV folds.
    frame = pd.DataFrame({"x": [float(i) for i in range(12)], "y": ["a"] * 10 + ["b"] * 2})
    write_task_folder(frame, "y", pool / "tiny", description="Predict y.", metric="roc_auc")
    out = tmp_path / "out"
    settings = PoolSettings(TINY, use_memory=False, seed=5)
    nodes = []

    def stop_in_second_task(node, attempt):
        nodes.append(node)
        if len(nodes) == 2:
            raise Interrupted

    with pytest.raises(Interrupted):
        solve_pool(pool, out, settings, on_node=stop_in_second_task)
    interrupted = PoolState.load(out).rounds[-1]
    assert interrupted.status == "running" and (out / interrupted.task / "trace.jsonl").is_file()

    result = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "solve-all", str(pool), "--out", str(out),
                                       "--time-budget-per-task", "60", "--num-drafts", "1", "--steps", "0",
                                       "--cv", "3", "--seed", "5", "--no-memory", "--json"])
    assert result.exit_code == 1, result.output  # tiny is left without a submission
    data = json.loads(result.output)
    assert data["unsolved"] == ["tiny"]
    state = PoolState.load(out)
    assert next(r for r in state.rounds if r.round == interrupted.round).status == INTERRUPTED
    assert data["already_solved"] == ["concrete"] and interrupted.task == "credit"  # seed 5: concrete, credit, tiny
    assert sorted(r.task for r in state.rounds if r.status == SOLVED) == ["concrete", "credit"]
    assert (out / "credit" / "submission.csv").is_file()
    tiny = [r for r in state.rounds if r.task == "tiny"]
    assert len(tiny) == 2 and all(r.status == ERROR and "CV folds" in r.error for r in tiny)  # tried twice
    assert not (tmp_path / "home").exists()  # --no-memory: nothing written
    assert json.loads((out / STATE_FILE).read_text())["rounds"][-1]["task"] == "tiny"  # retried after the others
