"""How a recall is scored: the remembered tasks ranked by their similarity to the new one, and what their memories
measured, weighted by that similarity.

The store reads (agent.memory.store: the tasks, their cosines from the collection, their memories); this module
only ranks and weighs. A task's similarity is the mean cosine of its description and structure embeddings; the k
most similar tasks make the effects of tricks and ops, each task weighted by its similarity (at least MIN_WEIGHT:
cosines of unrelated tasks can be near 0); repaired errors come from every task, most similar first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from agent.engine.trainers import model_group
from agent.memory.records import (
    IMPROVEMENT,
    Effect,
    NegativeMemory,
    PastError,
    PositiveMemory,
    Recall,
    SimilarTask,
    SolutionMemory,
    TaskMemory,
    on_group,
    on_trainer,
    recipe_key,
)

SIMILAR_TASKS = 5  # similar tasks a recall returns; their measurements make the effects
MIN_WEIGHT = 0.05  # a similar task's least weight in the effects


class Similarity(NamedTuple):
    """How like the new task a remembered one is: cosines of their embeddings."""

    mean: float  # of the two below
    description: float
    structure: float


def most_similar(tasks: Iterable[TaskMemory], similarity: Mapping[str, Similarity],
                 solutions: Iterable[SolutionMemory], k: int = SIMILAR_TASKS) -> tuple[SimilarTask, ...]:
    """The k tasks most like the new one (ties by task key), each with its best solution among `solutions`."""
    best: dict[str, SolutionMemory] = {}
    for memory in solutions:
        if memory.task_key not in best or memory.oriented_score > best[memory.task_key].oriented_score:
            best[memory.task_key] = memory
    ranked = sorted(tasks, key=lambda task: (-similarity[task.task_key].mean, task.task_key))
    return tuple(SimilarTask(task, *similarity[task.task_key], best.get(task.task_key)) for task in ranked[:k])


def scored_recall(own: str, similar: Sequence[SimilarTask], measured: Iterable[PositiveMemory | NegativeMemory],
                  failures: Iterable[NegativeMemory], similarity: Mapping[str, Similarity], *,
                  reuse_own: bool) -> Recall:
    """The recall of task `own`: the effects `measured` on the `similar` tasks (improvements and WORSE memories)
    by trick, recipe and op, overall, per trainer and per model group; and the `failures` a debug step repaired."""
    weights = {task.task.task_key: max(task.similarity, MIN_WEIGHT) for task in similar}
    measured = list(measured)
    tricks = [memory for memory in measured if memory.trick is not None]
    trick_effects = _by_model(tricks, weights, lambda memory: memory.trick.id)
    recipe_effects = _by_model(tricks, weights, lambda memory: recipe_key(memory.trick))
    op_effects = _effects(measured, weights, lambda memory: memory.op)
    errors = tuple(sorted((PastError(memory, similarity[memory.task_key].mean) for memory in failures
                           if memory.repair is not None),
                          key=lambda error: (-error.similarity, error.memory.created_at)))
    return Recall(own, tuple(similar), trick_effects, recipe_effects, op_effects, errors, reuse_own)


def _by_model(memories: Sequence[PositiveMemory | NegativeMemory], weights: Mapping[str, float],
              key_of: Callable[[PositiveMemory | NegativeMemory], str]) -> dict[str, Effect]:
    """The effects by `key_of(memory)` over every model, on each trainer (on_trainer) and on each model group
    (on_group)."""
    return {**_effects(memories, weights, key_of),
            **_effects(memories, weights, lambda memory: on_trainer(key_of(memory), memory.trainer)),
            **_effects(memories, weights, lambda memory: on_group(key_of(memory), model_group(memory.trainer or "")))}


def _effects(memories: Iterable[PositiveMemory | NegativeMemory], weights: Mapping[str, float],
             key_of: Callable[[PositiveMemory | NegativeMemory], str | None]) -> dict[str, Effect]:
    """Measured effects grouped by `key_of(memory)` (None: not counted), similarity-weighted over the tasks."""
    groups: dict[str, list[PositiveMemory | NegativeMemory]] = {}
    for memory in memories:
        key = key_of(memory)
        if key is not None and memory.gain is not None and math.isfinite(memory.gain):
            groups.setdefault(key, []).append(memory)
    effects = {}
    for key, group in groups.items():
        weight = np.array([weights[memory.task_key] for memory in group])
        gains = np.array([memory.gain for memory in group])
        largest = max(group, key=lambda memory: abs(memory.gain))
        first = group[0]
        title = first.trick.title if first.trick is not None and first.trick.id == key else first.op
        effects[key] = Effect(key, first.trick.op if first.trick is not None else first.op, title, len(group),
                              sum(memory.kind == IMPROVEMENT for memory in group),
                              float(np.sum(weight * gains) / np.sum(weight)),
                              (largest.task_name, float(largest.delta), largest.metric),
                              tuple(dict.fromkeys(memory.task_name for memory in group)))
    return effects
