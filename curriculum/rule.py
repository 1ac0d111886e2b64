"""Agent K's curriculum rule (equation 7) as a pure function over similarity matrices.

For a pool of tasks, the next task is

    argmax_i  top_r(Sim+)_i + a*top_r(Diff+)_i - top_r(Sim-)_i - a*top_r(Diff-)_i - b*exp(-lambda_i)

- Sim+ / Sim- (pool x memory): cosine similarity of a pool task's description to the descriptions of the tasks in
  the positive (solved) and the negative (failed) memory;
- Diff+ / Diff-: the same for the natural-language descriptions of the tasks' structure
  (agent.memory.text.structure_text);
- top_r: the mean of the r largest values of a row; a row with fewer than r known values averages those it has,
  and a row with none (an empty memory) contributes 0;
- lambda_i: rounds since task i was last chosen; a task never tried gets no penalty.

A NaN similarity means "not comparable": the caller puts NaN where a memory entry belongs to the pool task itself,
so a task is scored against what was learned on *other* tasks, and the recency term alone decides when a task that
failed is tried again.

Ties (every score is 0 when the memories are empty) go to the structurally simplest task, then to the name, so an
empty case library starts from the smallest table and the order is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CurriculumSettings:
    # Weight of structure similarity. The structure texts are templated (files, rows, column kinds), so their
    # cosines crowd together: on bench/transfer_bench.py's pool of 12 related tables they lie in 0.86-1.00 (sd
    # 0.036) where the descriptions' lie in 0.40-0.91 (sd 0.12), and a task's top_3 spreads 2.7 times less across
    # the pool (sd 0.025 against 0.068). a = 2.5 gives structure about the same say in the order as the description:
    # the description decides which tricks transfer, the structure whether a past task's best spec does.
    a: float = 2.5
    # A task chosen in the last round loses b*exp(-1) = 0.37, two rounds ago 0.14, three 0.05. On that pool the
    # similarity terms of the tasks spread over about 0.2 each, so a task that just failed yields to the untried
    # ones for a round or two, then competes again on similarity alone.
    b: float = 1.0
    # The three nearest memories: one near-duplicate alone does not decide (r=1), and a large r averages towards
    # the memory's mean, which is nearly the same for every task of a related pool.
    r: int = 3

    def __post_init__(self) -> None:
        if self.r < 1:
            raise ValueError(f"r must be at least 1, got {self.r}")


@dataclass(frozen=True)
class Similarities:
    """The four pool x memory matrices of equation 7 (cosine similarities; NaN where not comparable)."""

    sim_positive: np.ndarray  # descriptions, against the positive memory
    sim_negative: np.ndarray  # descriptions, against the negative memory
    diff_positive: np.ndarray  # structures, against the positive memory
    diff_negative: np.ndarray  # structures, against the negative memory

    @classmethod
    def empty(cls, n_tasks: int) -> Similarities:
        """No memories at all."""
        nothing = np.zeros((n_tasks, 0))
        return cls(nothing, nothing, nothing, nothing)

    def __post_init__(self) -> None:
        rows = {matrix.shape[0] for matrix in (self.sim_positive, self.sim_negative, self.diff_positive,
                                               self.diff_negative)}
        if len(rows) != 1 or self.sim_positive.shape != self.diff_positive.shape \
                or self.sim_negative.shape != self.diff_negative.shape:
            raise ValueError("the similarity matrices must have one row per pool task, and the description and "
                             "structure matrices of one memory the same columns")

    @property
    def n_tasks(self) -> int:
        return self.sim_positive.shape[0]


@dataclass(frozen=True)
class Terms:
    """Every term of one task's score, as equation 7 adds them up (the weights a and b already applied)."""

    sim_positive: float
    diff_positive: float  # a * top_r(Diff+)
    sim_negative: float
    diff_negative: float  # a * top_r(Diff-)
    recency: float  # b * exp(-lambda); 0 for a task never tried
    rounds_since: int | None  # lambda; None for a task never tried

    @property
    def score(self) -> float:
        return self.sim_positive + self.diff_positive - self.sim_negative - self.diff_negative - self.recency


def top_r(matrix: np.ndarray, r: int) -> np.ndarray:
    """Per row, the mean of the r largest values, ignoring NaN; 0 for a row with no value."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.shape[1] == 0:
        return np.zeros(matrix.shape[0])
    ordered = -np.sort(np.where(np.isnan(matrix), np.inf, -matrix), axis=1)[:, :r]  # largest first, NaN last
    known = np.isfinite(ordered)
    counts = known.sum(axis=1)
    sums = np.where(known, ordered, 0.0).sum(axis=1)
    return np.divide(sums, counts, out=np.zeros(len(counts)), where=counts > 0)


def recency_penalty(rounds_since: int | None, b: float) -> float:
    return 0.0 if rounds_since is None else b * math.exp(-rounds_since)


def score(similarities: Similarities, rounds_since: Sequence[int | None], settings: CurriculumSettings) -> list[Terms]:
    """The terms of equation 7 for every pool task, in pool order."""
    if len(rounds_since) != similarities.n_tasks:
        raise ValueError(f"{len(rounds_since)} rounds-since values for {similarities.n_tasks} pool tasks")
    sim_positive = top_r(similarities.sim_positive, settings.r)
    sim_negative = top_r(similarities.sim_negative, settings.r)
    diff_positive = top_r(similarities.diff_positive, settings.r)
    diff_negative = top_r(similarities.diff_negative, settings.r)
    return [Terms(float(sim_positive[i]), settings.a * float(diff_positive[i]), float(sim_negative[i]),
                  settings.a * float(diff_negative[i]), recency_penalty(lam, settings.b), lam)
            for i, lam in enumerate(rounds_since)]


def rank(terms: Sequence[Terms], sizes: Sequence[float], names: Sequence[str]) -> list[int]:
    """Pool indices, the next task first: highest score, then the structurally simplest, then by name."""
    return sorted(range(len(terms)), key=lambda i: (-round(terms[i].score, 12), sizes[i], names[i]))
