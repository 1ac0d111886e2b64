"""The curriculum: which task of a pool to solve next, by similarity and difficulty to the case library's memories
(Agent K's equation 7), and solving a whole pool in that order.

    from agent.memory.store import MemoryStore
    from curriculum import CurriculumSettings, PoolSettings, load_pool, order, solve_pool
    memory = MemoryStore("~/.casebook")
    ranked = order(load_pool("tasks").tasks, memory, memory.embedder, CurriculumSettings())   # the next task first
    result = solve_pool("tasks", "runs/pool", PoolSettings(curriculum=True), memory=memory)

Modules: rule (equation 7 over similarity matrices), pool (the pool's tasks and their order against the memories),
state (pool.json), solve_all (the pool's rounds), report (pool.html).
"""

from curriculum.pool import MemoryView, Pool, PoolError, PoolTask, Ranked, load_pool, order
from curriculum.report import write_pool_report
from curriculum.rule import CurriculumSettings
from curriculum.solve_all import PoolResult, PoolSettings, solve_pool

__all__ = ["CurriculumSettings", "MemoryView", "Pool", "PoolError", "PoolResult", "PoolSettings", "PoolTask", "Ranked",
           "load_pool", "order", "solve_pool", "write_pool_report"]
