"""The default proposer: a seed population of standard models, then variations around the best so far.

Knowledge-free on purpose: the knowledge base will drive proposals in a later issue. Every choice
is deterministic, so a run is repeatable for a given seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from agent.engine import Dataset
from agent.loop import AttemptRecord, SolutionCandidate
from agent.models import Trainer, trainer_registry
from agent.spec import Step

LOG_TARGET = Step("log_target")
SEED_TRAINERS = ("linear", "random_forest", "hist_gradient_boosting", "xgboost", "lightgbm", "catboost")
# Metrics on a log or relative scale: fitting log(1 + y) optimises (nearly) the metric itself.
_LOG_SCALE_METRICS = ("rmsle", "mape")

_TREE_ENSEMBLE = (
    ("more trees", {"n_estimators": 600}),
    ("a third of the features per split", {"max_features": 0.33}),
    ("larger leaves against overfitting", {"min_samples_leaf": 3}),
)
# (rationale, parameter changes) tried in order around the best candidate of each trainer.
VARIATIONS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "hist_gradient_boosting": (
        ("slower learning with more trees", {"learning_rate": 0.05, "max_iter": 300}),
        ("smaller, regularised trees", {"max_leaf_nodes": 15, "l2_regularization": 1.0}),
        ("larger trees", {"max_leaf_nodes": 63, "min_samples_leaf": 10}),
        ("many slow trees", {"learning_rate": 0.03, "max_iter": 600}),
    ),
    "xgboost": (
        ("more trees at half the learning rate", {"n_estimators": 800, "learning_rate": 0.025}),
        ("shallower trees", {"max_depth": 4}),
        ("deeper trees with heavier leaves", {"max_depth": 8, "min_child_weight": 3}),
    ),
    "lightgbm": (
        ("more trees at half the learning rate", {"n_estimators": 800, "learning_rate": 0.025}),
        ("fewer leaves", {"num_leaves": 15}),
    ),
    "catboost": (("deeper trees", {"depth": 8}), ("more iterations", {"iterations": 1000})),
    "random_forest": _TREE_ENSEMBLE,
    "extra_trees": _TREE_ENSEMBLE,
}
_LINEAR_VARIATIONS = {
    True: (("weaker regularisation", {"C": 10.0}), ("stronger regularisation", {"C": 0.1})),
    False: (("weaker regularisation", {"alpha": 0.1}), ("stronger regularisation", {"alpha": 10.0})),
}


class VariationProposer:
    """Seeds: linear, random forest, histogram GBM and the installed boosting libraries.
    Reflection: the next untried variation of the best verified candidate (then of the runner-up, ...)."""

    def __init__(self, trainers: Mapping[str, Trainer] | None = None, seed_trainers: Sequence[str] = SEED_TRAINERS):
        available = trainer_registry(trainers)
        self.seed_trainers = tuple(name for name in seed_trainers if name in available)

    def seed(self, dataset: Dataset) -> list[SolutionCandidate]:
        log_target = _fits_log_scale(dataset) and dataset.metric in _LOG_SCALE_METRICS
        transform = LOG_TARGET if log_target else None
        why = f" on log(1 + {dataset.target}), as {dataset.metric} scores relative errors" if log_target else ""
        return [SolutionCandidate(name, {}, f"seed: {name.replace('_', ' ')} at defaults{why}", target_transform=transform)
                for name in self.seed_trainers]

    def propose(self, dataset: Dataset, attempts: Sequence[AttemptRecord]) -> SolutionCandidate | None:
        tried = {attempt.spec.to_json() for attempt in attempts}
        ranked = sorted((a for a in attempts if a.verdict.valid), key=lambda a: a.score, reverse=True)
        for parent in ranked:
            for candidate in self._variations(parent, dataset):
                if replace(parent.spec, model=replace(parent.spec.model, params=dict(candidate.params)),
                           target_transform=candidate.target_transform).to_json() not in tried:
                    return candidate
        return None

    def _variations(self, parent: AttemptRecord, dataset: Dataset) -> list[SolutionCandidate]:
        base = parent.candidate
        options = _LINEAR_VARIATIONS[dataset.classification] if base.trainer == "linear" else VARIATIONS.get(base.trainer, ())
        variations = [replace(base, params={**base.params, **changes}, rationale=f"{base.trainer}: {why}")
                      for why, changes in options]
        if _fits_log_scale(dataset):
            flipped = None if base.target_transform else LOG_TARGET
            why = "model log(1 + target)" if flipped else "model the raw target"
            variations.append(replace(base, target_transform=flipped, rationale=f"{base.trainer}: {why}"))
        return variations


def _fits_log_scale(dataset: Dataset) -> bool:
    return dataset.task_type == "regression" and bool(np.min(dataset.y) >= 0)
