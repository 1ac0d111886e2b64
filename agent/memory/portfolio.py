"""A zero-shot portfolio from pool results (TabRepo's greedy selection, as AutoGluon's presets ship it): the K
single-model configurations that together leave the least normalised error over the pool's tasks, and their order
for a new task by the nearest pool tasks."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A configuration a task never tried counts as bad as its trivial baseline: the greedy step then prefers
# configurations measured on many tasks, which is what lets a portfolio transfer.
UNTRIED_ERROR = 1.0


def config_key(spec: Mapping[str, Any]) -> str:
    """A short stable name of a single-model spec's configuration: its steps, model and target transform (not its
    validation, which depends on the task's size)."""
    what = {key: spec.get(key) for key in ("steps", "model", "target_transform")}
    return hashlib.sha1(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:12]


def normalised_error(score: float, best: float, baseline: float) -> float:
    """0 for the task's best score, 1 for its trivial baseline (or worse), on greater-is-better scores."""
    span = best - baseline
    if not math.isfinite(span) or span <= 0:
        return 0.0 if score >= best else UNTRIED_ERROR
    return min(max((best - score) / span, 0.0), UNTRIED_ERROR)


@dataclass(frozen=True)
class PortfolioChoice:
    config: str
    mean_error: float  # the pool's mean normalised error once this configuration joined the portfolio


def select_portfolio(errors: Mapping[str, Mapping[str, float]], size: int) -> list[PortfolioChoice]:
    """Greedy forward selection: each step adds the configuration that most lowers the mean over tasks of the
    best normalised error among the chosen ones. `errors` maps task -> configuration -> normalised error."""
    if not errors:
        return []
    configs = sorted({config for by_config in errors.values() for config in by_config})
    best_so_far = {task: UNTRIED_ERROR for task in errors}
    chosen: list[PortfolioChoice] = []
    while configs and len(chosen) < size:
        def mean_with(config: str) -> float:
            return sum(min(best_so_far[task], by_config.get(config, UNTRIED_ERROR))
                       for task, by_config in errors.items()) / len(errors)

        pick = min(configs, key=lambda config: (mean_with(config), config))
        mean = mean_with(pick)
        if chosen and mean >= chosen[-1].mean_error:
            break  # nothing left lowers the error: a longer portfolio would only cost time
        for task, by_config in errors.items():
            best_so_far[task] = min(best_so_far[task], by_config.get(pick, UNTRIED_ERROR))
        chosen.append(PortfolioChoice(pick, mean))
        configs.remove(pick)
    return chosen


def nearest(vector: Sequence[float], vectors: Mapping[str, Sequence[float]], k: int) -> list[str]:
    """The k tasks whose profile vectors are closest (Euclidean) to `vector`, nearest first."""
    def distance(name: str) -> float:
        return math.dist(vector, vectors[name])

    return sorted(vectors, key=lambda name: (distance(name), name))[:k]


def order_for(portfolio: Sequence[str], errors: Mapping[str, Mapping[str, float]], neighbours: Sequence[str]) -> list[str]:
    """The portfolio's configurations, the ones with the least mean error on the neighbouring tasks first; the
    portfolio's own order breaks ties (and orders everything when no neighbour is known)."""
    rank = {config: position for position, config in enumerate(portfolio)}
    if not neighbours:
        return list(portfolio)

    def error_near(config: str) -> float:
        return sum(errors.get(task, {}).get(config, UNTRIED_ERROR) for task in neighbours) / len(neighbours)

    return sorted(portfolio, key=lambda config: (error_near(config), rank[config]))
