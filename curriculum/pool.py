"""A pool of task folders, ordered by equation 7 against the case library's memories.

The thin layer over curriculum.rule: it reads the pool, embeds the task and structure descriptions of the pool and
of the memories with the knowledge base's embedder, and hands the similarity matrices to the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from agent.memory.records import task_key
from agent.memory.text import description_text, structure_text
from curriculum.rule import CurriculumSettings, Similarities, Terms, rank, score
from kb.embedding import Embedder
from retrieval.profile import TRAIN_FILE, TaskProfile, TaskSetupError, profile_task


class MemoryTask(Protocol):
    """What the curriculum reads of one task in the case library (agent.memory.records.TaskMemory)."""

    task_key: str
    name: str
    description: str  # agent.memory.text.description_text
    structure: str  # agent.memory.text.structure_text
    solved: bool

    @property
    def failed(self) -> bool: ...  # tried and never solved


class MemoryView(Protocol):
    """The case library as the curriculum sees it (agent.memory.store.MemoryStore): solved tasks are the positive
    memory, tasks tried and never solved the negative."""

    def tasks(self) -> Sequence[MemoryTask]: ...


class PoolError(ValueError):
    """A pool folder that holds no task that can be set up."""


@dataclass(frozen=True)
class PoolTask:
    name: str
    task_dir: Path
    key: str  # the key its memories are stored under
    description: str
    structure: str
    size: int  # rows x columns x modalities (structural_size)
    profile: TaskProfile = field(repr=False, compare=False)

    @classmethod
    def from_profile(cls, profile: TaskProfile) -> PoolTask:
        return cls(profile.name, Path(profile.task_dir), task_key(profile.task_dir, profile.target),
                   description_text(profile), structure_text(profile), structural_size(profile), profile)


@dataclass(frozen=True)
class SkippedTask:
    task_dir: Path
    reason: str


@dataclass(frozen=True)
class Pool:
    tasks: tuple[PoolTask, ...]
    skipped: tuple[SkippedTask, ...]

    def task(self, name: str) -> PoolTask:
        return next(task for task in self.tasks if task.name == name)


@dataclass(frozen=True)
class Ranked:
    """One pool task in the order, with every term of its score."""

    position: int  # 1 is the next task
    task: PoolTask
    terms: Terms

    @property
    def score(self) -> float:
        return self.terms.score

    def to_dict(self) -> dict[str, Any]:
        terms = self.terms
        return {"position": self.position, "task": self.task.name, "task_dir": str(self.task.task_dir),
                "score": round(self.score, 6), "sim_positive": round(terms.sim_positive, 6),
                "diff_positive": round(terms.diff_positive, 6), "sim_negative": round(terms.sim_negative, 6),
                "diff_negative": round(terms.diff_negative, 6), "recency": round(terms.recency, 6),
                "rounds_since": terms.rounds_since, "size": self.task.size}


def structural_size(profile: TaskProfile) -> int:
    """rows x columns x modalities (tabular+text is 2): with empty memories the curriculum starts from the task where
    this is smallest. Rows and columns are what a solution's fit time grows with, and each extra modality adds a
    pipeline of its own, so the product orders tasks roughly by how hard they are to get right."""
    return profile.n_rows * profile.n_cols * len(profile.modality.split("+"))


def load_pool(tasks_dir: str | Path) -> Pool:
    """Every sub-folder of `tasks_dir` holding a train.csv is a task; one that cannot be set up is skipped with its
    reason, and the rest of the pool goes on."""
    tasks_dir = Path(tasks_dir)
    if not tasks_dir.is_dir():
        raise PoolError(f"{tasks_dir}: no such folder; pass a folder whose sub-folders are task folders")
    tasks, skipped = [], []
    for folder in sorted(path for path in tasks_dir.iterdir() if path.is_dir() and not path.name.startswith(".")):
        if not (folder / TRAIN_FILE).is_file():
            skipped.append(SkippedTask(folder, f"no {TRAIN_FILE}: not a task folder"))
            continue
        try:
            tasks.append(PoolTask.from_profile(profile_task(folder)))
        except TaskSetupError as error:
            skipped.append(SkippedTask(folder, str(error)))
    if not tasks:
        raise PoolError(f"{tasks_dir}: no task folder could be set up "
                        f"({'; '.join(item.reason for item in skipped) or 'it has no sub-folders'}); "
                        f"put one folder per task in it, each with {TRAIN_FILE} and test.csv")
    return Pool(tuple(tasks), tuple(skipped))


def similarities(tasks: Sequence[PoolTask], memories: Sequence[MemoryTask], embedder: Embedder) -> Similarities:
    """Equation 7's matrices: cosine similarities of the pool's descriptions and structures to the memories'; NaN
    where a memory is the pool task's own, so a task is never scored against itself."""
    if not memories or not tasks:
        return Similarities.empty(len(tasks))
    pool_descriptions = embedder.embed([task.description for task in tasks])
    pool_structures = embedder.embed([task.structure for task in tasks])
    memory_descriptions = embedder.embed([memory.description for memory in memories])
    memory_structures = embedder.embed([memory.structure for memory in memories])
    own = np.array([[memory.task_key == task.key for memory in memories] for task in tasks])
    description = np.where(own, np.nan, pool_descriptions @ memory_descriptions.T)  # the vectors are L2-normalised
    structure = np.where(own, np.nan, pool_structures @ memory_structures.T)
    solved = np.array([memory.solved for memory in memories], dtype=bool)
    failed = np.array([memory.failed for memory in memories], dtype=bool)
    return Similarities(description[:, solved], description[:, failed], structure[:, solved], structure[:, failed])


def order(tasks: Sequence[PoolTask], memory: MemoryView | None, embedder: Embedder | None,
          settings: CurriculumSettings | None = None,
          rounds_since: Mapping[str, int] | None = None) -> list[Ranked]:
    """The pool in equation 7's order, the next task first. `rounds_since` maps a task's name to the rounds since it
    was last chosen (absent: never tried). With no memory (or an empty one) nothing is embedded."""
    memories = list(memory.tasks()) if memory is not None else []
    if memories and embedder is None:
        raise ValueError("an embedder is needed to compare the pool with a non-empty memory")
    matrices = similarities(tasks, memories, embedder) if memories else Similarities.empty(len(tasks))
    rounds_since = rounds_since or {}
    terms = score(matrices, [rounds_since.get(task.name) for task in tasks], settings or CurriculumSettings())
    ranked = rank(terms, [task.size for task in tasks], [task.name for task in tasks])
    return [Ranked(position, tasks[i], terms[i]) for position, i in enumerate(ranked, start=1)]
