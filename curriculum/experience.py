"""`agent experience build` as a library call: solve a pool of tasks (curriculum on) with a case library of its
own, then export what it learned as an experience pack (agent.memory.experience).

The pool's runs and case library live in a work folder beside the pack (`<pack>.runs/` unless given), so that an
interrupted build resumes where it stopped (solve_pool skips the tasks already solved) and a user's own memories
never mix with the pool's."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from agent.memory.experience import ExperiencePack, PackHeader, build_pack, write_pack
from agent.memory.store import MemoryStore
from agent.outputs.report import RUN_FILE
from curriculum.pool import PoolError
from curriculum.solve_all import PoolSettings, finished, solve_pool
from curriculum.state import RoundRecord
from kb.embedding import Embedder

POOL_MEMORY = "memory"


def work_folder(pack_path: Path) -> Path:
    return pack_path.with_name(pack_path.name + ".runs")


def casebook_commit() -> str:
    """The commit casebook runs from, "unknown" outside a git checkout."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def solved_budget(work_dir: Path) -> float | None:
    """The budget per task the build in `work_dir` solved its tasks at, None before its first task."""
    for run_file in sorted(work_dir.glob(f"*/{RUN_FILE}")):
        return float(json.loads(run_file.read_text(encoding="utf-8"))["settings"]["search"]["time_budget"])
    return None


def export_pack(work_dir: Path, header: PackHeader, *, embedder: Embedder | None = None) -> ExperiencePack:
    """The pack of a finished (or partly finished) pool build in `work_dir`: every solved task's run.json and the
    pool's case library."""
    with MemoryStore(work_dir / POOL_MEMORY, embedder=embedder) as store:
        tasks, memories = store.tasks(), store.list()
    runs = [(json.loads((work_dir / task.name / RUN_FILE).read_text(encoding="utf-8")), task.signature)
            for task in sorted(tasks, key=lambda task: task.name)
            if task.signature is not None and finished(work_dir / task.name)]
    return build_pack(runs, tasks, memories, header)


def build_experience(tasks_dir: str | Path, pack_path: str | Path, settings: PoolSettings, *, command: str,
                     work_dir: Path | None = None, embedder: Embedder | None = None, kb_home: Path | str | None = None,
                     on_round: Callable[[RoundRecord], None] | None = None) -> ExperiencePack:
    """Solve the pool in `tasks_dir` (curriculum on, its own case library, the knowledge base at `kb_home` when
    `settings.solve.use_kb`), then write its pack to `pack_path`: of every task solved so far, when
    `settings.max_rounds` stops the call early."""
    pack_path = Path(pack_path)
    work = work_dir or work_folder(pack_path)
    earlier = solved_budget(work)
    if earlier is not None and earlier != settings.solve.search.time_budget:  # a pack's header states one budget
        raise PoolError(f"{work}: this build solved its tasks at {earlier:g} s each; go on with a budget per task of "
                        f"{earlier:g} s (--time-budget-per-task {earlier:g}), or build into another --out")
    # Without the packs in use: a pack measures the pool's own searches, not another pack's portfolio replayed on them.
    settings = replace(settings, curriculum=True, use_memory=True, solve=replace(settings.solve, experience=False))
    with MemoryStore(work / POOL_MEMORY, embedder=embedder) as store:
        solve_pool(tasks_dir, work, settings, memory=store, kb_home=kb_home, on_round=on_round)
    header = PackHeader(command, casebook_commit(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        str(tasks_dir), float(settings.solve.search.time_budget or 0))
    pack = export_pack(work, header, embedder=embedder)
    write_pack(pack, pack_path)
    return pack
