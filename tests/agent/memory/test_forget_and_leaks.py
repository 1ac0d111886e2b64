"""Forgetting and never leaking: a task that failed (set-up, a run without a verified solution) loses its negative
entries once a later run solves it, other tasks keep theirs; nothing stored holds a test label or a test
prediction."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from agent.candidate import SolutionCandidate
from agent.engine.dataset import DatasetError
from agent.memory.records import ERROR, NO_SOLUTION, SETUP, SOLUTION, task_key
from agent.search.builtin import BuiltinTreeProposer
from agent.search.protocols import Proposal
from agent.solve import solve_task
from retrieval.profile import profile_task
from tests.agent.memory.conftest import SHORT


class OnlyBroken(BuiltinTreeProposer):
    """Drafts one forest with an impossible number of trees and cannot repair it: the run verifies nothing."""

    def draft(self, profile, journal, rng):
        if journal.draft_nodes:
            return None
        candidate = SolutionCandidate("random_forest", {"n_estimators": -5})
        return Proposal(candidate, "draft: a forest with a broken tree count")

    def debug(self, node, profile, journal, rng):
        return None


def test_negative_entries_go_when_the_task_is_later_solved(tasks, make_store, tmp_path):
    store = make_store()
    attrition, credit = profile_task(tasks["attrition"].task_dir), profile_task(tasks["credit"].task_dir)
    failing = replace(SHORT, search=replace(SHORT.search, num_drafts=1, steps=0))
    with pytest.raises(DatasetError):  # more CV folds than the rarest class has rows: the task cannot be set up
        solve_task(attrition, replace(failing, cv=200), tmp_path / "too-many-folds", memory=store)
    for profile in (attrition, credit):
        failed = solve_task(profile, failing, tmp_path / f"broken-{profile.name}", proposer=OnlyBroken(), memory=store)
        assert failed.journal.best() is None
    kinds = {(memory.task_name, memory.kind) for memory in store.list(polarity="negative")}
    assert kinds == {("attrition", SETUP), ("attrition", ERROR), ("attrition", NO_SOLUTION), ("credit", ERROR),
                     ("credit", NO_SOLUTION)}
    key = task_key(attrition.task_dir, attrition.target)
    assert store.task(key).failed and store.task(key).runs == 2  # what the curriculum reads as negative memory

    solved = solve_task(attrition, failing, tmp_path / "solved", memory=store)  # one draft, the built-in's
    assert solved.journal.best() is not None
    task = store.task(key)
    assert task.solved and not task.failed and task.best_score == pytest.approx(solved.journal.best().metric)
    remaining = {(memory.task_name, memory.kind) for memory in store.list(polarity="negative")}
    assert not {kind for name, kind in remaining if name == "attrition"} & {SETUP, NO_SOLUTION, ERROR}
    assert {("credit", ERROR), ("credit", NO_SOLUTION)} <= remaining  # another task's failures stay
    assert [memory.task_name for memory in store.list(kind=SOLUTION)] == ["attrition"]


def _numbers(text: str) -> set[float]:
    """Every decimal number with at least four decimals in `text`, rounded to six."""
    return {round(float(match), 6) for match in re.findall(r"-?\d+\.\d{4,}", text)}


def test_memory_never_holds_a_test_label_or_a_test_prediction(tasks, make_store, tmp_path):
    store = make_store()
    wage = profile_task(tasks["wage"].task_dir)
    result = solve_task(wage, SHORT, tmp_path / "wage", memory=store)
    assert result.submission_path is not None and store.list(kind=SOLUTION)
    answers = pd.read_csv(tasks["wage"].answers_path)["wage"].to_numpy(dtype=float)
    predictions = pd.read_csv(result.submission_path)["wage"].to_numpy(dtype=float)
    # Wages carry many decimals (dollars from a log scale), so a stored copy of one shows among the numbers.
    labels = {round(value, 6) for value in answers}
    predicted = {round(value, 6) for value in predictions}
    assert len(labels) > 40 and len(predicted) > 40

    # Everything the case library holds: every sqlite row (the records are JSON text) and every chroma document.
    with sqlite3.connect(store.home / "memory.db") as connection:
        dump = "\n".join(connection.iterdump())
    documents = store.collection.get(include=["documents", "metadatas"])
    stored = dump + "\n".join(documents["documents"]) + repr(documents["metadatas"])
    found = _numbers(stored)
    assert len(found) > 5  # the CV scores are there, for one
    assert not found & labels
    assert not found & predicted
    # Nor any column of test rows: no stored list as long as the test set.
    n_test = len(answers)
    for memory in store.list():
        record = memory.to_dict()
        lengths = [len(value) for value in _values(record) if isinstance(value, list)]
        assert n_test not in lengths
    assert np.isfinite(store.list(kind=SOLUTION)[0].score)


def _values(data):
    if isinstance(data, dict):
        for value in data.values():
            yield value
            yield from _values(value)
    elif isinstance(data, list):
        for value in data:
            yield from _values(value)
