"""Blending verified solutions from their out-of-fold predictions.

Every evaluated node keeps its out-of-fold (OOF) predictions, made on the same folds, so a blend can
be scored without fitting anything: the blend of the members' OOF predictions is the OOF prediction
of the blended model. Weights come from greedy ensemble selection with replacement (Caruana et al.,
2004; AutoGluon's weighted ensemble works the same way): start from the best member, repeatedly add
the member whose addition most improves the metric, keep the best blend seen. Weights are counts, so
they are non-negative and sum to one, and a member that never helps gets weight 0.

The blend is itself a solution (agent.engine.ensemble_spec): refit, rendered and submitted like any
other. Only metrics scored on probabilities or on regression values can be blended; label metrics
(accuracy, F1 on labels) cannot be averaged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agent import runtime
from agent.verifier import oriented
from retrieval.metrics import MetricInfo, metric_info

DEFAULT_ROUNDS = 25  # AutoGluon uses 25 rounds of selection too


@dataclass(frozen=True)
class Blend:
    weights: tuple[float, ...]  # one per candidate member, in the order given; 0 for members left out
    fold_values: tuple[float, ...]  # the metric on each validation fold of the blended OOF predictions
    predictions: np.ndarray  # the blended OOF predictions

    @property
    def members(self) -> tuple[int, ...]:
        """Positions of the members with a positive weight."""
        return tuple(index for index, weight in enumerate(self.weights) if weight > 0)

    @property
    def metric_value(self) -> float:
        return float(np.mean(self.fold_values))


def blendable(metric: str, task_type: str) -> bool:
    """Predictions that can be averaged: class probabilities, or regression values."""
    return metric_info(metric).needs_proba or task_type == "regression"


def _score(info: MetricInfo, y: np.ndarray, prediction: np.ndarray) -> float:
    return oriented(float(runtime.METRIC_FUNCTIONS[info.name](y, prediction)), info)


def hill_climb(predictions: Sequence[np.ndarray], y: np.ndarray, metric: str,
               rounds: int = DEFAULT_ROUNDS) -> np.ndarray:
    """Greedy ensemble selection with replacement; the weights of the best blend seen (summing to 1)."""
    info = metric_info(metric)
    stacked = np.asarray(predictions, dtype=float)  # members x rows (x classes)
    singles = [_score(info, y, p) for p in stacked]
    counts = np.zeros(len(stacked))
    first = int(np.argmax(singles))
    counts[first], total, current = 1, stacked[first].copy(), singles[first]
    best_counts, best_score = counts.copy(), current
    for _ in range(rounds):
        n = counts.sum()
        scores = [_score(info, y, (total + member) / (n + 1)) for member in stacked]
        pick = int(np.argmax(scores))
        counts[pick] += 1
        total += stacked[pick]
        if scores[pick] > best_score:
            best_counts, best_score = counts.copy(), scores[pick]
    return best_counts / best_counts.sum()


def blend(predictions: Sequence[np.ndarray], y: np.ndarray, metric: str, folds, rounds: int = DEFAULT_ROUNDS) -> Blend:
    """Hill-climbed weights over `predictions` (OOF on `folds`), with the blend's per-fold metric."""
    stacked = np.asarray(predictions, dtype=float)
    weights = hill_climb(stacked, y, metric, rounds)
    blended = np.tensordot(weights, stacked, axes=1)
    return Blend(tuple(float(w) for w in weights), tuple(runtime.fold_scores(blended, y, folds, metric)), blended)
