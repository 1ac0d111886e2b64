"""Fitting a compiled pipeline: cross-validation with out-of-fold (and averaged test) predictions, and the refit on
every training row that keeps the number of trees early stopping chose in the folds.

`FoldCache` keeps files the candidates' processes of one run share: each fold's fitted preprocessing between nodes
(`FoldStore`: a node that changes only its model does not fit its features again), and the fold models of the
solutions worth keeping (`ModelStore`: the submission averages them, with no refit)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import pickle
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from agent.engine import runtime
from agent.engine.dataset import Dataset, DatasetError
from agent.engine.spec import SolutionSpec
from retrieval.profile import TRAIN_FILE


def check_folds(dataset: Dataset, n_splits: int) -> None:
    """DatasetError, naming the table and the fix, when the training rows cannot fill `n_splits` CV folds:
    fewer rows than folds or, for classification, a class with fewer rows than folds."""
    if dataset.task_dir is not None:
        table, option = str(dataset.task_dir / TRAIN_FILE), "--cv {}"
    else:
        table, option = "the training table", "cv={}"

    def fix(n: int) -> str:
        return f"use {option.format(n)} or more data" if n >= 2 else "use more data"

    n_rows = len(dataset.y)
    if n_rows < n_splits:
        raise DatasetError(f"{table} has {_rows(n_rows)}, fewer than the {n_splits} CV folds; {fix(n_rows)}")
    if dataset.classification and len(np.unique(dataset.y)) < 2 and dataset.dropped_classes:
        rare = dataset.dropped_classes
        fewest = round(min(rare.values()) * (n_rows / (1 - sum(rare.values()))))  # shares are of every training row
        raise DatasetError(f"{table}: of {dataset.target!r}, only class {dataset.classes[0]!r} has at least "
                           f"{n_splits} rows (the CV folds): {', '.join(repr(label) for label in rare)} "
                           f"{'have' if len(rare) > 1 else 'has'} fewer, which leaves nothing to learn; {fix(fewest)}")
    if dataset.classification:
        counts = np.bincount(np.asarray(dataset.y, dtype=int))
        smallest = int(np.argmin(counts))
        size = int(counts[smallest])
        if size < n_splits:
            label = dataset.classes[smallest] if dataset.classes is not None else smallest
            label = label.item() if isinstance(label, np.generic) else label
            raise DatasetError(f"{table}: class {label!r} of {dataset.target!r} has {_rows(size)}, fewer than the "
                               f"{n_splits} CV folds; {fix(size)}")


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def cross_validate(pipeline: Pipeline, dataset: Dataset, spec: SolutionSpec) -> list[float]:
    """The task metric on each validation fold, in the metric's own units."""
    return cross_validate_predictions(pipeline, dataset, spec)[0]


def cross_validate_predictions(pipeline: Pipeline, dataset: Dataset, spec: SolutionSpec) -> tuple[list[float], Any]:
    """(the metric on each validation fold, every training row's out-of-fold prediction)."""
    fitted = cross_fit(pipeline, dataset, spec)
    return fold_values(fitted, dataset), fitted.predictions


def cross_fit(pipeline: Pipeline, dataset: Dataset, spec: SolutionSpec, *, predict_test: bool = False,
              keep_models: bool = False, preprocessed: FoldStore | None = None,
              gate: FoldGate | None = None, pace: Pace | None = None,
              expected_trees: Mapping[str, float] | None = None) -> runtime.CrossFit:
    """The pipeline cross-fitted on the spec's folds (runtime.cross_fit: GBDTs stop early on each validation fold);
    with `predict_test`, the fold models' averaged test-set predictions too; with `keep_models`, the fold models;
    with `preprocessed`, each fold's fitted preprocessing read from (or saved to) a fold cache; with `pace`, stopped
    after the first fold from which its whole CV cannot finish within the pace's seconds (checked first); with
    `gate`, stopped after the first fold on which it can no longer beat the gate's bar; with `expected_trees`, its
    first fold's early stopping waits as if that many trees were kept before it (runtime.cross_fit)."""
    watchers = []
    if pace is not None:
        watchers.append(pace.watch(spec.validation.n_splits))
    if gate is not None:
        watchers.append(gate.watch(dataset))
    return runtime.cross_fit(
        pipeline, dataset.X, dataset.y, needs_proba=dataset.metric_info.needs_proba,
        classification=dataset.classification, n_splits=spec.validation.n_splits, seed=spec.validation.seed,
        X_test=dataset.X_test if predict_test else None, keep_models=keep_models, preprocessed=preprocessed,
        keep_going=(lambda fold, rows, prediction: all(watch(fold, rows, prediction) for watch in watchers))
        if watchers else None, expected_trees=expected_trees,
    )


# How far a node may trail the best node on the same folds and still go on, in standard deviations of a paired fold
# difference over the square root of the folds scored. bench/fold_spread.py replays finished runs (the experience
# pool's 30 s runs and six 120 s runs on pool tables, none of the evaluation tables): at 2, 181 of 877 improvements
# scored on every fold would have stopped, 11% of their CV time saved (23% in the 120 s runs); 3 of the 178 that beat
# the best would have stopped, by 0.01-0.19%. The best's own fold spread stopped 1 of them at any z from 1 to 3.
PRUNE_Z = 2.0
# Improvements scored on every fold that a run must have measured against their parents before their paired spread
# is trusted; until then the bound is the best node's own fold-to-fold spread (a median 8 times wider in the replays).
MIN_PAIRS = 3


def paired_spread(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> float | None:
    """The fold-to-fold standard deviation of the difference between an improvement and its parent on the same folds,
    the median over `pairs` (each the two nodes' fold scores); None with fewer than MIN_PAIRS that differ at all.
    Two nodes that share folds mostly rise and fall together, so their difference spreads far less than either
    score: this, not a fold spread, is the noise a gated node's paired difference carries."""
    spreads = [spread for child, parent in pairs
               if (spread := float(np.std(np.subtract(child, parent)))) > 0]
    return float(np.median(spreads)) if len(spreads) >= MIN_PAIRS else None


@dataclass(frozen=True)
class FoldGate:
    """Multi-fidelity CV: a node is scored fold by fold and stopped once its mean paired difference from the best
    node on the same folds (greater is better) falls below -z * spread / sqrt(folds scored). Every node of a run
    shares its folds (one seed), so the difference is paired; its spread is the run's measured paired spread
    (`paired_spread`), or the best node's own fold-to-fold spread before the run has measured one."""

    bar: tuple[float, ...]  # the best node's fold scores, greater is better
    greater_is_better: bool
    z: float = PRUNE_Z
    spread: float | None = None  # paired_spread's; None: the bar's fold-to-fold spread

    def allows(self, scores: Sequence[float], z: float | None = None) -> bool:
        """May a node whose first folds scored `scores` (greater is better) go on: is its mean paired difference from
        the bar above -z (the gate's own by default) standard errors?"""
        k = len(scores)
        spread = self.spread or float(np.std(self.bar)) or 1e-12
        trailing = float(np.mean([score - bar for score, bar in zip(scores, self.bar[:k], strict=True)]))
        return trailing >= -(self.z if z is None else z) * spread / np.sqrt(k)

    def watch(self, dataset: Dataset):
        """runtime.cross_fit's keep_going for one dataset: each fold's metric, oriented, against the bar."""
        sign = 1.0 if self.greater_is_better else -1.0
        metric = runtime.METRIC_FUNCTIONS[dataset.metric]
        scores: list[float] = []

        def keep_going(fold: int, valid_rows, prediction) -> bool:
            scores.append(sign * float(metric(dataset.y[valid_rows], prediction)))
            return self.allows(scores)

        return keep_going


# How far a CV's first fold may project its whole CV over its time cap before the CV is stopped there: a first fold
# carries one-off costs (a library's first use, CatBoost's patience before later folds follow the trees it kept), so
# five times it overshot the whole CV by up to 1.6 times, where that fold took over a second (17 CVs of finished
# nodes' specs, timed on the eight evaluation tables, their scores unread: 1.0-1.6 for CatBoost, up to 1.14 for the
# other families). After the second fold the later folds' mean overshot by up to 1.15 (1.32 on one LightGBM CV of
# 1.9 s, its folds' early stopping uneven), after the third by up to 1.08.
FIRST_FOLD_MARGIN = 1.6


@dataclass
class Pace:
    """A CV's time cap read fold by fold: after each fold, the seconds spent so far plus the folds left at the mean of
    the folds after the first (the first fold's own until there is one) project its whole run, and one projected over
    `seconds` (FIRST_FOLD_MARGIN times it after the first fold) is stopped there, not killed at its cap with every
    second of the cap spent. `projected` is that projection when it stopped the CV (0 otherwise): what the whole CV
    would have taken, which the fit-time model's correction for the table reads (agent.search.fit_time)."""

    seconds: float
    projected: float = 0.0
    clock: Callable[[], float] = time.perf_counter

    def watch(self, folds: int):
        """runtime.cross_fit's keep_going for a CV of `folds` folds starting now."""
        started = self.clock()
        first_fold = 0.0

        def keep_going(fold: int, valid_rows, prediction) -> bool:
            nonlocal first_fold
            spent, done = self.clock() - started, fold + 1
            first_fold = first_fold or spent
            per_fold = (spent - first_fold) / (done - 1) if done > 1 else spent
            projected = spent + (folds - done) * per_fold
            if projected > self.seconds * (FIRST_FOLD_MARGIN if done == 1 else 1.0):
                self.projected = projected
                return False
            return True

        return keep_going


# A quarter of the machine's memory at most, and 2 GiB: the folds of a few preprocessings of a large table.
FOLD_CACHE_BYTES = min(2 * 1024**3, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4)
# One solution's five fold models are kept up to this size. Pickled on two evaluation tables (4.7k and 22k rows),
# five GBDT fold models took 2-10 MB and a linear model's under 0.1 MB, while a forest's grow with the rows (350 MB
# to 1.5 GB): forests are not kept (agent.evaluator), and this cap catches what else grows (a large text step).
KEPT_MODELS_BYTES = 64 * 1024**2


class _Capped:
    """A file that refuses to grow past `limit` bytes (pickle.dump then stops with OverflowError)."""

    def __init__(self, file: Any, limit: float):
        self.file, self.left = file, limit

    def write(self, data: Any) -> int:
        self.left -= memoryview(data).nbytes
        if self.left < 0:
            raise OverflowError("over the size kept")
        return self.file.write(data)


def write_pickle(folder: Path, path: Path, value: Any, limit: float = math.inf) -> bool:
    """`value` pickled to `path` (written aside in `folder`, then renamed: a process reading it meanwhile sees the
    whole file or none); False, with nothing written, when it cannot be pickled, is over `limit` bytes or the disk
    is full."""
    written = None
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".writing-", delete=False) as file:
            written = Path(file.name)
            pickle.dump(value, _Capped(file, limit), protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(written, path)
        return True
    except (OSError, OverflowError, pickle.PicklingError, TypeError, AttributeError):
        if written is not None:
            written.unlink(missing_ok=True)
        return False


def preprocessing_key(spec: SolutionSpec, data: str, random_state: int) -> str:
    """What a spec's fitted preprocessing depends on, as a file name: the data (a token naming one Dataset), the
    steps, the folds and the seed. The model is left out, so nodes that differ only in their model share it."""
    described = json.dumps({"data": data, "steps": [step.to_dict() for step in spec.steps],
                            "validation": spec.validation.to_dict(), "random_state": random_state},
                           sort_keys=True, default=repr)
    return hashlib.sha256(described.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class FoldStore:
    """One preprocessing's folds in a FoldCache (runtime.cross_fit's `preprocessed`): each fold's fitted steps and
    the fit, validation and test rows they give, in a file of its own."""

    folder: Path
    key: str

    def load(self, fold: int) -> tuple | None:
        path = self._path(fold)
        try:
            with path.open("rb") as file:
                prepared = pickle.load(file)
            os.utime(path)  # recently used: pruned last
        except (OSError, EOFError, pickle.UnpicklingError):  # not cached, or pruned meanwhile
            return None
        return prepared

    def save(self, fold: int, prepared: tuple) -> None:
        write_pickle(self.folder, self._path(fold), prepared)  # not saved: a step that cannot be, a full disk

    def _path(self, fold: int) -> Path:
        return self.folder / f"{self.key}-{fold}.pkl"


@dataclass(frozen=True)
class ModelStore:
    """One solution's CV fold models in a FoldCache, in one file: saved by the candidate's process when the solution
    is worth keeping, read by the search's for the submission."""

    folder: Path
    key: str

    def save(self, models: Sequence[Any], limit: float = KEPT_MODELS_BYTES) -> bool:
        """The fold models saved, in fold order; False (nothing saved) when they cannot be or are over `limit`
        bytes."""
        return write_pickle(self.folder, self.folder / f"{self.key}-models.pkl", tuple(models), limit)

    def load(self) -> tuple[Any, ...] | None:
        """The fold models saved; None when they were not (or were pruned)."""
        try:
            with (self.folder / f"{self.key}-models.pkl").open("rb") as file:
                return pickle.load(file)
        except (OSError, EOFError, pickle.UnpicklingError):
            return None


class FoldCache:
    """Files shared by the candidates' processes of one run through a private folder (in memory, /dev/shm, where
    there is one), kept under `max_bytes` by `prune` (the least recently used go first): fitted preprocessing by CV
    fold (`store`) or solutions' fold models (`models`). Reading a fold back takes milliseconds where fitting it
    again took a tenth of a second or more (bench/RESULTS.md, "Fixed cost per node")."""

    def __init__(self, max_bytes: int = FOLD_CACHE_BYTES):
        shared_memory = Path("/dev/shm")
        self.folder = Path(tempfile.mkdtemp(prefix="casebook-folds-",
                                            dir=shared_memory if shared_memory.is_dir() else None))
        self.max_bytes = max_bytes
        weakref.finalize(self, shutil.rmtree, self.folder, True)  # the folder goes with the cache, or at exit

    def store(self, key: str) -> FoldStore:
        return FoldStore(self.folder, key)

    def models(self, key: str) -> ModelStore:
        return ModelStore(self.folder, key)

    def prune(self) -> None:
        """The least recently used folds removed until the rest fit in `max_bytes`."""
        files = []
        for path in self.folder.glob("*.pkl"):
            with contextlib.suppress(OSError):
                status = path.stat()
                files.append((status.st_mtime, status.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files, key=lambda file: file[0]):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size


def fold_values(fitted: runtime.CrossFit, dataset: Dataset) -> list[float]:
    """The task metric on each validation fold a cross-fit scored."""
    return runtime.fold_scores(fitted.predictions, dataset.y, fitted.folds[:fitted.scored_folds], dataset.metric)


def fit_and_predict(pipeline: Pipeline, dataset: Dataset,
                    rounds: Mapping[str, float] | None = None) -> tuple[Pipeline, Any]:
    """Fit on every training row, early-stopping models with the trees their CV folds kept (`rounds`, by path:
    runtime.CrossFit.stopped_rounds); predict the test set (probabilities when the metric needs them)."""
    fitted = runtime.refit(pipeline, dataset.X, dataset.y, dict(rounds or {}))
    if dataset.X_test is None:
        return fitted, None
    n_classes = len(dataset.classes) if dataset.classes is not None else None
    return fitted, runtime.predict_for_metric(fitted, dataset.X_test, dataset.metric_info.needs_proba, n_classes)
