"""The case library's records: a change made again on another candidate, a spec fitted to another task's columns,
task keys that follow the data (not the folder), and every record through JSON and back."""

from __future__ import annotations

import shutil

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.engine.spec import Step
from agent.engine.trainers import steps_for, trainer_registry
from agent.memory.change import Change
from agent.memory.proposer import fit_to_task
from agent.memory.records import WORSE, NegativeMemory, PositiveMemory, TaskSignature, memory_from_dict, task_key
from agent.memory.text import error_class, failure_message, message_key, structure_text
from retrieval.profile import profile_task

TRAINERS = trainer_registry()
SKLEARN_ERROR = ("Traceback (most recent call last):\n  File \"fit.py\", line 3, in fit\n"
                 "sklearn.utils._param_validation.InvalidParameterError: The 'n_estimators' parameter of "
                 "RandomForestClassifier must be an int in the range [1, inf). Got -5 instead.")


def test_a_change_between_two_candidates_is_made_again_on_another():
    forest = SolutionCandidate("random_forest", {"max_depth": 8}, "", steps_for("random_forest", TRAINERS))
    encoder = "ordinal_encoding"  # the forest's encoder; a linear model one-hot encodes instead
    encoded = SolutionCandidate("random_forest", {"max_depth": 8, "n_estimators": 400}, "",
                                tuple(Step("target_encoding", {"smoothing": 20.0}) if step.op == encoder else step
                                      for step in forest.steps))
    change = Change.between(forest, encoded)
    assert change.removed == (encoder,) and change.added[0][0] == Step("target_encoding", {"smoothing": 20.0})
    assert change.params == {"n_estimators": 400} and change.op == "target_encoding"
    other = SolutionCandidate("random_forest", {"min_samples_leaf": 3}, "", steps_for("random_forest", TRAINERS))
    made = change.apply(other)
    assert [step.op for step in made.steps] == [step.op for step in encoded.steps]  # in the same place
    assert made.params == {"min_samples_leaf": 3, "n_estimators": 400}  # its own parameters kept
    linear = SolutionCandidate("linear", {}, "", steps_for("linear", TRAINERS))
    assert change.apply(linear) is None  # no ordinal codes there to replace
    switch = Change.between(forest, linear)
    assert switch.trainer == "linear" and switch.op == "trainer:linear" and switch.apply(other) == linear
    assert Change.from_dict(change.to_dict()) == change and Change.between(forest, forest) == Change()


def test_a_remembered_spec_drops_the_steps_that_name_columns_this_task_lacks(tasks):
    profile = profile_task(tasks["credit"].task_dir)
    remembered = SolutionCandidate("xgboost", {"max_depth": 4}, "", (
        Step("split_composite_string", {"column": "Ticket"}),  # a column of another table
        Step("numeric_ratios", {"pairs": [["Income", "Debt"], ["Income", "Cabin"]]}),
        Step("drop_id_columns"), Step("ordinal_encoding", {"mappings": {"Home": ["rent", "owner"]}})))
    fitted, dropped = fit_to_task(remembered, profile)
    assert [step.op for step in fitted.steps] == ["drop_id_columns", "ordinal_encoding"]
    assert dropped == ("split_composite_string (no column Ticket)", "numeric_ratios (no column Cabin)")
    assert fitted.params == {"max_depth": 4}


def test_a_task_is_its_training_data_and_target_wherever_its_folder_is(tasks, tmp_path):
    copy = shutil.copytree(tasks["attrition"].task_dir, tmp_path / "renamed")
    original, renamed = profile_task(tasks["attrition"].task_dir), profile_task(copy)
    assert task_key(copy, renamed.target) == task_key(tasks["attrition"].task_dir, original.target)
    assert task_key(copy, "Age") != task_key(copy, renamed.target)
    assert task_key(tasks["credit"].task_dir, "Status") != task_key(copy, renamed.target)
    text = structure_text(original)
    assert "binary class" in text and f"{original.n_rows:,} training rows" in text and "train.csv (" in text
    signature = TaskSignature.of(original)
    assert signature.size_bucket == "tiny" and dict(signature.column_kinds)["numeric"] > 5
    assert TaskSignature.from_dict(signature.to_dict()) == signature


def test_failures_compare_equal_across_tables_by_exception_and_message():
    assert error_class(SKLEARN_ERROR) == "InvalidParameterError"
    message = failure_message(SKLEARN_ERROR)
    assert message.startswith("sklearn.utils._param_validation.InvalidParameterError: The 'n_estimators'")
    assert message_key(message) == message_key(message.replace("-5", "-1").replace("n_estimators", "max_depth"))
    assert failure_message("", "CV score not better than the baseline") == "CV score not better than the baseline"


def test_memories_go_through_json_and_back(tasks):
    signature = TaskSignature.of(profile_task(tasks["attrition"].task_dir))
    trick = AppliedTrick("tab-seed-bagging", "Average the same model over several seeds", "cards.jsonl", None,
                         "seed_bagging", {"n_seeds": 3}, source_kind="card")
    change = Change(params={"n_seeds": 3})
    positive = PositiveMemory("a1", "k", "attrition", "r", signature, 4, "improve", "xgboost", "seed_bagging", change,
                              trick,
                              "roc_auc", 0.8, 0.81, 0.01, 0.0125, "plan")
    negative = NegativeMemory("a2", WORSE, "k", "attrition", "r", signature, "worse", 5, "improve", "xgboost",
                              ("drop_id_columns",), op="seed_bagging", change=change, trick=trick, metric="roc_auc",
                              delta=-0.01, gain=-0.0125)
    for memory in (positive, negative):
        assert memory_from_dict(memory.to_dict()) == memory
