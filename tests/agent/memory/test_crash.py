"""kill -9 of a solve that is writing memories leaves complete memories only: every row a whole record, every task
row with its vectors, and a library the next run can read and write."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from agent.memory.records import SOLUTION, memory_from_dict
from agent.memory.store import MEMORY_FILE, MemoryStore
from retrieval.profile import profile_task
from tests.conftest import REPO

# A long solve with memory (many steps, a generous budget): it is killed long before it ends.
SOLVE = """
import sys
from pathlib import Path
from agent.memory.store import MemoryStore
from agent.settings import SearchSettings
from agent.solve import solve_task
from agent.settings import SolveSettings
from retrieval.profile import profile_task

task, home, out = sys.argv[1:4]
settings = SolveSettings(SearchSettings(num_drafts=1, steps=200, time_budget=600, seed=0), cv=3)
solve_task(profile_task(task), settings, Path(out), memory=MemoryStore(home))
"""


def _count(home) -> int:
    path = home / MEMORY_FILE
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as connection:
            return connection.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


def _solve_until(task_dir, home, out, done) -> None:
    """Run the solve in its own process group and kill -9 the whole group (the solve and its candidate workers)
    once `done()` holds."""
    process = subprocess.Popen([sys.executable, "-c", SOLVE, str(task_dir), str(home), str(out)], cwd=REPO,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not done() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stderr.close()


def _assert_whole(store: MemoryStore) -> None:
    assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    tasks = {task.task_key: task for task in store.tasks()}
    runs = {run["run_id"]: run for run in store.runs()}
    for row in store.db["memories"].rows:
        record = json.loads(row["record"])
        memory = memory_from_dict(record)  # every field a complete record needs is there
        assert memory.to_dict() == record
        assert memory.task_key in tasks and memory.run_id in runs
    for key, task in tasks.items():  # a task row is written after its vectors
        ids = [f"{key}:description", f"{key}:structure"]
        stored = store.collection.get(ids=ids, include=["documents"])
        assert sorted(stored["ids"]) == sorted(ids) and task.description in stored["documents"]


@pytest.mark.slow
def test_a_run_killed_mid_search_leaves_complete_memories_only(tasks, tmp_path, embedder):
    home = tmp_path / "home"
    task_dir = tasks["credit"].task_dir
    _solve_until(task_dir, home, tmp_path / "killed", lambda: _count(home) >= 2)
    store = MemoryStore(home, embedder=embedder)
    _assert_whole(store)
    assert store.list(kind=SOLUTION) == [] and [run["status"] for run in store.runs()] == ["running"]
    assert len(store.list()) >= 2

    # Killed again, this time while it starts up (loading, embedding, opening its run): still whole.
    started = time.monotonic()
    _solve_until(task_dir, home, tmp_path / "killed-early", lambda: time.monotonic() - started > 1.5)
    _assert_whole(store)

    # The next run reads and writes the same library.
    profile = profile_task(task_dir)
    recall = store.recall(profile, reuse_own=True)
    assert [similar.task.name for similar in recall.similar] == ["credit"]
    run_id = store.begin_run(profile)
    assert store.runs()[-1]["run_id"] == run_id and store.task(recall.similar[0].task.task_key).runs >= 2
