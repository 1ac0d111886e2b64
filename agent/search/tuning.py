"""A short Optuna search around a node: Agent K tunes its best solutions with Bayesian optimisation.

A study is centred on one verified node. Its steps, target transform and trainer stay; a seeded TPE
sampler proposes the trainer's hyperparameters, and every trial is a node of the tree: evaluated in
its own process, verified and journalled like any other node, so a trial that leaks or crashes is
caught the same way. The proposer asks a study for a trial when it improves one of the study's nodes
(its centre or an earlier trial), and `observe` tells the study each trial's verified score. A trial that
multi-fidelity CV stopped after its first folds is told pruned, its partial score its value at that step, as
Optuna's own pruners leave one: TPE ranks it below the completed trials and counts it towards its random start-up
trials. Told failed, it would be ignored, and a study whose trials mostly trail the best (442 of 675 trials on ten
120 s runs) would stay a random search.

Ranges follow common GBDT search spaces (learning rate log-uniform, leaves and minimum leaf sizes
log-uniform, row and column sampling in [0.5, 1] and [0.4, 1], L2 log-uniform); the cap on the trees
stays the centre's. A trial of a lower rate or larger trees costs more than its centre: the search
sizes it from the centre's CV (agent.search.fit_time.size_change) and skips one that would not
finish, which its study is told as a failed trial.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agent.candidate import SolutionCandidate
from agent.engine.trainers import trainer_facts

DEFAULT_TRIALS = 50


def tunable(candidate: SolutionCandidate) -> bool:
    return bool(trainer_facts(candidate.trainer).search_space)


SHARE_STEP = 0.05


def _suggest(trial, name: str, kind: str, low: float, high: float) -> Any:
    if kind in ("int", "int_log"):
        return trial.suggest_int(name, int(low), int(high), log=kind == "int_log")
    if kind == "share":
        # A share of the columns is rounded down to a count (scikit-learn: int(share * n)), so a continuous sample
        # below 1.0 never uses every column and, on a two-column table, always uses one: sampled on a grid that holds
        # its upper bound instead.
        return trial.suggest_float(name, low, high, step=SHARE_STEP)
    return trial.suggest_float(name, low, high, log=kind == "log")


def _key(candidate: SolutionCandidate) -> tuple[str, str]:
    return candidate.trainer, repr(sorted(candidate.params.items()))


@dataclass(eq=False)
class _Study:
    centre: int  # the node id the study is centred on
    candidate: SolutionCandidate  # the centre's candidate: a trial changes its hyperparameters only
    study: Any  # optuna.Study
    max_trials: int
    pending: dict[tuple[str, str], Any] = field(default_factory=dict)  # candidate key -> asked, untold trial

    @property
    def trials(self) -> int:
        return len(self.study.trials)


@dataclass(frozen=True)
class Trial:
    candidate: SolutionCandidate
    centre: int
    number: int  # 1 for a study's first trial
    params: Mapping[str, Any]


class Tuner:
    """Optuna studies around nodes of one search. Deterministic for a given seed."""

    def __init__(self, seed: int = 0):
        self._rng = random.Random(seed)
        self._studies: list[_Study] = []
        self._study_of: dict[int, _Study] = {}  # node id (a centre or a trial) -> its study

    def propose(self, node_id: int, candidate: SolutionCandidate, max_trials: int = DEFAULT_TRIALS) -> Trial | None:
        """The next trial of the study `node_id` belongs to (a new study centred on it otherwise); None when the
        trainer has no search space or the study has used its trials."""
        study = self._study_of.get(node_id)
        if study is None:
            if not tunable(candidate):
                return None
            study = self._new_study(node_id, candidate, max_trials)
        if study.trials >= study.max_trials:
            return None
        trial = study.study.ask()
        space = trainer_facts(study.candidate.trainer).search_space
        params = {name: _suggest(trial, name, *bounds) for name, bounds in space.items()}
        proposed = replace(study.candidate, params={**study.candidate.params, **params})
        study.pending[_key(proposed)] = trial
        return Trial(proposed, study.centre, study.trials, params)

    def observe(self, node_id: int, candidate: SolutionCandidate, score: float, valid: bool,
                stopped_after: int = 0) -> None:
        """Tell the study that asked for this candidate its verified score (maximised); others are ignored. A
        trial stopped after its first `stopped_after` folds is told pruned at that step, `score` their mean."""
        key = _key(candidate)
        for study in self._studies:
            trial = study.pending.pop(key, None)
            if trial is None:
                continue
            from optuna.trial import TrialState  # optuna is imported once a study exists

            if valid and math.isfinite(score):
                study.study.tell(trial, score)
            elif stopped_after > 0 and math.isfinite(score):
                trial.report(score, stopped_after)
                study.study.tell(trial, state=TrialState.PRUNED)
            else:
                study.study.tell(trial, state=TrialState.FAIL)
            self._study_of[node_id] = study
            return

    def studies(self) -> list[dict[str, Any]]:
        """Each study: its centre node, trials asked, trials told a score, trials told pruned, and the best score
        told."""
        from optuna.trial import TrialState

        summaries = []
        for study in self._studies:
            complete = [trial for trial in study.study.trials if trial.state == TrialState.COMPLETE]
            pruned = sum(trial.state == TrialState.PRUNED for trial in study.study.trials)
            summaries.append({"centre": study.centre, "trials": study.trials, "complete": len(complete),
                              "pruned": pruned, "best": max((trial.value for trial in complete), default=None)})
        return summaries

    def _new_study(self, node_id: int, candidate: SolutionCandidate, max_trials: int) -> _Study:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(seed=self._rng.randrange(2**31))
        study = _Study(node_id, candidate, optuna.create_study(direction="maximize", sampler=sampler), max_trials)
        self._studies.append(study)
        self._study_of[node_id] = study
        return study
