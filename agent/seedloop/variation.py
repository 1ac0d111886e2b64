"""The default proposer: a seed population of standard models, then variations around the best so far.

Knowledge-free on purpose: the knowledge base will drive proposals in a later issue. Every choice
is deterministic, so a run is repeatable for a given seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from agent.candidate import AttemptRecord, SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.steps import LOG_TARGET
from agent.engine.trainers import SEED_TRAINERS, Trainer, trainer_facts, trainer_registry

# Metrics on a log or relative scale: fitting log(1 + y) optimises (nearly) the metric itself.


class VariationProposer:
    """Seeds: linear, random forest, histogram GBM and the installed boosting libraries.
    Reflection: the next untried variation of the best verified candidate (then of the runner-up, ...)."""

    def __init__(self, trainers: Mapping[str, Trainer] | None = None, seed_trainers: Sequence[str] = SEED_TRAINERS):
        available = trainer_registry(trainers)
        self.seed_trainers = tuple(name for name in seed_trainers if name in available)

    def seed(self, dataset: Dataset) -> list[SolutionCandidate]:
        log_target = _fits_log_scale(dataset) and dataset.metric_info.log_scale
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
        options = trainer_facts(base.trainer).variations_for(dataset.classification)
        variations = [replace(base, params={**base.params, **changes}, rationale=f"{base.trainer}: {why}")
                      for why, changes in options]
        if _fits_log_scale(dataset):
            flipped = None if base.target_transform else LOG_TARGET
            why = "model log(1 + target)" if flipped else "model the raw target"
            variations.append(replace(base, target_transform=flipped, rationale=f"{base.trainer}: {why}"))
        return variations


def _fits_log_scale(dataset: Dataset) -> bool:
    return dataset.task_type == "regression" and bool(np.min(dataset.y) >= 0)
