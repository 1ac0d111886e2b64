"""`agent solve-all` as a library call: solve a pool of tasks one after another, the next task picked each round.

With `PoolSettings.curriculum` the next task is equation 7's argmax over the tasks not yet solved, recomputed after
every task against the memories the last one wrote (Agent K picks a task per round). Without it the tasks go in a
random order fixed by the seed. A task that ends without a submission stays in the pool and is tried again (with
the next seed) up to `max_attempts` times per call.

The output folder holds one run folder per task (`<out>/<task>/`, as `agent solve` writes it), the pool state
`pool.json` (every round: the task, why it was chosen, how it ended) and the pool report `pool.html`. Calling again
with the same folder resumes: a task whose run.json names a submission is skipped unless `redo`, and a round that
was interrupted is recorded as such and its partial run folder replaced.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agent.outputs.report import RUN_FILE
from agent.search.journal import Journal, Node
from agent.settings import SolveSettings
from agent.solve import open_knowledge, solve_task
from curriculum.pool import Pool, PoolError, PoolTask, load_pool, order
from curriculum.report import write_pool_report
from curriculum.rule import CurriculumSettings
from curriculum.state import ERROR, FAILED, INTERRUPTED, RUNNING, SOLVED, PoolState, RoundRecord
from kb.store import KnowledgeBase

if TYPE_CHECKING:
    from agent.memory.store import MemoryStore


@dataclass(frozen=True)
class PoolSettings:
    solve: SolveSettings = field(default_factory=SolveSettings)  # per task: its time budget is the budget per task
    curriculum: bool = False  # equation 7's order; otherwise a random order fixed by `seed`
    use_memory: bool = True  # read and write the case library (off: arm (c) of bench/transfer_bench.py)
    redo: bool = False  # solve tasks that already have a submission again
    seed: int = 0  # the random order's
    rule: CurriculumSettings = field(default_factory=CurriculumSettings)
    # Tries per task and call: a failed task stays in the pool, and is retried with another seed once the others
    # have had their turn; twice is enough to tell a bad draw from a task the agent cannot do.
    max_attempts: int = 2
    # Rounds in this call (None: until every task is solved or out of tries); a later call resumes, and 0 only
    # writes the report, so a long build can run in parts.
    max_rounds: int | None = None


@dataclass(frozen=True)
class PoolResult:
    out_dir: Path
    pool: Pool
    state: PoolState
    already_solved: tuple[str, ...]  # skipped because an earlier call solved them
    rounds: tuple[RoundRecord, ...]  # the rounds this call ran
    report_path: Path | None


def finished(run_dir: Path) -> bool:
    """A run folder whose run.json names a submission that exists."""
    try:
        outputs = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8")).get("outputs") or {}
    except (OSError, json.JSONDecodeError):
        return False
    return bool(outputs.get("submission")) and Path(outputs["submission"]).is_file()


def random_order(tasks: tuple[PoolTask, ...], seed: int) -> list[str]:
    names = sorted(task.name for task in tasks)
    random.Random(seed).shuffle(names)
    return names


def solve_pool(
    tasks_dir: str | Path,
    out_dir: str | Path,
    settings: PoolSettings = PoolSettings(),
    *,
    memory: MemoryStore | None = None,
    kb: KnowledgeBase | None = None,
    kb_home: Path | str | None = None,
    on_round_start: Callable[[RoundRecord], None] | None = None,
    on_round: Callable[[RoundRecord], None] | None = None,
    on_node: Callable[[Node, Journal], None] | None = None,
) -> PoolResult:
    """Solve every task of `tasks_dir` into `out_dir`, one per round, and write pool.json and pool.html.

    `memory` is the case library the solves read and write, and the curriculum compares the pool with (ignored
    unless `settings.use_memory`). `on_round_start` and `on_round` see each round before and after its solve;
    `on_node` each node of each solve.
    """
    tasks_dir, out_dir = Path(tasks_dir), Path(out_dir)
    pool = load_pool(tasks_dir)
    memory = memory if settings.use_memory else None
    if memory is not None:  # embedded once before any task's clock starts, so loading the embedding model is not
        # charged to the first task's budget (its recall embeds these same texts: cache hits)
        memory.embedder.embed([text for task in pool.tasks for text in (task.description, task.structure)])
    if settings.solve.use_kb:  # once for the pool, and an empty knowledge base stops it before any task starts
        kb = open_knowledge(kb_home, kb)
    state = _resume(PoolState.load(out_dir), tasks_dir, settings)
    done = set() if settings.redo else {task.name for task in pool.tasks if finished(out_dir / task.name)}
    already_solved = tuple(sorted(done))
    first_round = state.next_round
    state.save(out_dir)
    attempts: Counter[str] = Counter()
    shuffled = random_order(pool.tasks, settings.seed)
    while (settings.max_rounds is None or state.next_round - first_round < settings.max_rounds) and (
            candidates := [task for task in pool.tasks
                           if task.name not in done and attempts[task.name] < settings.max_attempts]):
        number = state.next_round
        if settings.curriculum:
            rounds_since = {name: number - last for name, last in state.last_chosen().items()}
            ranking = order(candidates, memory, memory.embedder if memory is not None else None, settings.rule,
                            rounds_since)
            chosen, ranking_rows = ranking[0].task, tuple(item.to_dict() for item in ranking)
        else:  # the first in the seed's order among the tasks tried least often in this call
            fewest = min(attempts[task.name] for task in candidates)
            names = {task.name for task in candidates if attempts[task.name] == fewest}
            chosen, ranking_rows = pool.task(next(name for name in shuffled if name in names)), ()
        attempts[chosen.name] += 1
        record = RoundRecord(number, chosen.name, "curriculum" if settings.curriculum else "random",
                             attempts[chosen.name], settings.solve.search.seed + attempts[chosen.name] - 1, RUNNING,
                             chosen.name, ranking_rows, started_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        state = state.with_round(record)
        state.save(out_dir)
        if on_round_start is not None:
            on_round_start(record)
        record = _solve(chosen, out_dir, settings, record, memory, kb, kb_home, on_node)
        state = state.with_round(record)
        state.save(out_dir)
        write_pool_report(out_dir)
        if record.status == SOLVED:
            done.add(chosen.name)
        if on_round is not None:
            on_round(record)
    report = write_pool_report(out_dir) if state.rounds else None
    return PoolResult(out_dir, pool, state, already_solved, tuple(r for r in state.rounds if r.round >= first_round),
                      report)


def _resume(state: PoolState | None, tasks_dir: Path, settings: PoolSettings) -> PoolState:
    """The state to go on from: a round left running by an interrupted call becomes interrupted."""
    settings_record = asdict(settings)
    if state is None:
        return PoolState(str(tasks_dir.resolve()), settings_record)
    if Path(state.tasks_dir) != tasks_dir.resolve():
        raise PoolError(f"{tasks_dir}: this output folder holds the pool of {state.tasks_dir}; "
                        "pass another --out, or the same tasks folder to resume")
    rounds = tuple(replace(r, status=INTERRUPTED) if r.status == RUNNING else r for r in state.rounds)
    return replace(state, settings=settings_record, rounds=rounds)


def _solve(task: PoolTask, out_dir: Path, settings: PoolSettings, record: RoundRecord, memory: MemoryStore | None,
           kb: KnowledgeBase | None, kb_home: Path | str | None,
           on_node: Callable[[Node, Journal], None] | None) -> RoundRecord:
    """One task's solve into `<out>/<task>/`; a task that cannot be set up is an error round, not the pool's end."""
    run_dir = out_dir / task.name
    if run_dir.exists():  # an earlier try (failed, interrupted, or --redo): replaced, never mixed with
        shutil.rmtree(run_dir)
    started = time.time()
    solve_settings = replace(settings.solve, search=replace(settings.solve.search, seed=record.seed))
    try:
        result = solve_task(task.profile, solve_settings, run_dir, on_node=on_node, kb=kb, kb_home=kb_home,
                            memory=memory)
    except ValueError as error:  # the agent's bad-input errors (a table too small for the folds, ...)
        return replace(record, status=ERROR, error=f"{type(error).__name__}: {error}",
                       seconds=round(time.time() - started, 1))
    run = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    return replace(record, status=SOLVED if result.submission_path is not None else FAILED, metric=run["metric"],
                   baseline=run["baseline"], best_cv_score=run["best_cv_score"], node_evaluations=run["n_attempts"],
                   seconds=run["seconds"], error="; ".join(result.notes) or None)

