"""Equation 7 on hand-built similarity matrices: each term moves the score the way the rule says, the r nearest
memories are averaged, a task's own memory is not compared with it, recency penalises, and an empty case library
starts from the structurally simplest task."""

from __future__ import annotations

import math

import numpy as np
import pytest

from curriculum.rule import CurriculumSettings, Similarities, rank, score, top_r

NAMES = ["t0", "t1", "t2"]
SIZES = [300, 200, 100]


def _similarities(sim_pos=None, sim_neg=None, diff_pos=None, diff_neg=None, n_pos=2, n_neg=2) -> Similarities:
    """Three pool tasks against n_pos positive and n_neg negative memories; unspecified matrices are a flat 0.5."""
    def matrix(values, columns):
        return np.full((3, columns), 0.5) if values is None else np.asarray(values, dtype=float)

    return Similarities(matrix(sim_pos, n_pos), matrix(sim_neg, n_neg), matrix(diff_pos, n_pos),
                        matrix(diff_neg, n_neg))


def _order(similarities, rounds_since=(None, None, None), settings=None):
    terms = score(similarities, list(rounds_since), settings or CurriculumSettings())
    return [NAMES[i] for i in rank(terms, SIZES, NAMES)], terms


def test_top_r_averages_the_r_largest_and_ignores_nan():
    matrix = np.array([[0.1, 0.9, 0.5, 0.7], [np.nan, 0.2, np.nan, np.nan], [np.nan] * 4])
    assert top_r(matrix, 2) == pytest.approx([0.8, 0.2, 0.0])  # (0.9+0.7)/2; the one known value; nothing known
    assert top_r(matrix, 1) == pytest.approx([0.9, 0.2, 0.0])
    assert top_r(np.zeros((3, 0)), 3) == pytest.approx([0, 0, 0])  # an empty memory contributes nothing


def test_empty_memories_start_from_the_structurally_simplest_task():
    order, terms = _order(Similarities.empty(3))
    assert all(t.score == 0 for t in terms)
    assert order == ["t2", "t1", "t0"]  # sizes 100 < 200 < 300


def test_similarity_to_solved_tasks_raises_a_task():
    order, terms = _order(_similarities(sim_pos=[[0.2, 0.3], [0.9, 0.8], [0.2, 0.3]]))
    assert order[0] == "t1"
    assert terms[1].sim_positive == pytest.approx(0.85) and terms[0].sim_positive == pytest.approx(0.25)


def test_structure_similarity_to_solved_tasks_raises_a_task_weighted_by_a():
    diff_pos = [[0.1, 0.1], [0.1, 0.1], [0.9, 0.9]]
    order, terms = _order(_similarities(diff_pos=diff_pos), settings=CurriculumSettings(a=0.5))
    assert order[0] == "t2" and terms[2].diff_positive == pytest.approx(0.45)
    _, unweighted = _order(_similarities(diff_pos=diff_pos), settings=CurriculumSettings(a=0.0))
    assert {round(t.score, 9) for t in unweighted} == {0.0}  # a = 0: structure has no say


def test_similarity_to_failed_tasks_lowers_a_task():
    order, terms = _order(_similarities(sim_neg=[[0.9, 0.9], [0.1, 0.1], [0.5, 0.5]]))
    assert order == ["t1", "t2", "t0"]
    assert terms[0].score < terms[2].score < terms[1].score


def test_structure_similarity_to_failed_tasks_lowers_a_task():
    order, _ = _order(_similarities(diff_neg=[[0.1, 0.1], [0.9, 0.9], [0.5, 0.5]]))
    assert order == ["t0", "t2", "t1"]


def test_only_the_r_nearest_memories_count():
    # t0 has one very close solved task among distant ones; t1 is moderately close to all of them.
    sim_pos = [[0.95, 0.1, 0.1, 0.1], [0.5, 0.5, 0.5, 0.5], [0.0, 0.0, 0.0, 0.0]]
    similarities = _similarities(sim_pos=sim_pos, diff_pos=np.zeros((3, 4)), n_pos=4)
    assert _order(similarities, settings=CurriculumSettings(r=1))[0][0] == "t0"
    assert _order(similarities, settings=CurriculumSettings(r=3))[0][0] == "t1"


def test_a_tasks_own_memory_is_not_compared_with_it():
    # t0's only close positive memory is its own (NaN): it is scored on the others alone.
    sim_pos = [[np.nan, 0.2], [0.6, 0.6], [0.1, 0.1]]
    _, terms = _order(_similarities(sim_pos=sim_pos, diff_pos=np.zeros((3, 2))), settings=CurriculumSettings(r=2))
    assert terms[0].sim_positive == pytest.approx(0.2)


def test_recency_penalises_a_task_chosen_lately_and_fades():
    flat = _similarities()
    order, terms = _order(flat, rounds_since=(None, 1, 3))
    assert terms[0].recency == 0 and terms[0].rounds_since is None  # never tried: no penalty
    assert terms[1].recency == pytest.approx(math.exp(-1)) and terms[2].recency == pytest.approx(math.exp(-3))
    assert order == ["t0", "t2", "t1"]  # the simplest (t2) yields to the untried, and the latest tried is last
    _, unpenalised = _order(flat, rounds_since=(None, 1, 3), settings=CurriculumSettings(b=0.0))
    assert {t.recency for t in unpenalised} == {0.0}


def test_a_failed_task_stays_in_the_pool_and_comes_back_after_others():
    # t1 is the most attractive; just tried (and failed), it yields for a round, then leads again.
    sim_pos = [[0.5, 0.5], [0.7, 0.7], [0.5, 0.5]]
    similarities = _similarities(sim_pos=sim_pos)
    assert _order(similarities, rounds_since=(None, 1, None))[0][0] != "t1"
    assert _order(similarities, rounds_since=(1, 2, None))[0][0] == "t1"  # 0.2 > exp(-2) = 0.135


def test_the_score_is_the_sum_of_its_terms():
    similarities = _similarities(sim_pos=[[0.3, 0.2]] * 3, sim_neg=[[0.1, 0.4]] * 3, diff_pos=[[0.8, 0.6]] * 3,
                                 diff_neg=[[0.5, 0.7]] * 3)
    terms = score(similarities, [2, None, None], CurriculumSettings(a=2, b=3, r=1))[0]
    assert terms.score == pytest.approx(0.3 + 2 * 0.8 - 0.4 - 2 * 0.7 - 3 * math.exp(-2))


def test_mismatched_inputs_are_refused():
    with pytest.raises(ValueError, match="one row per pool task"):
        Similarities(np.zeros((3, 1)), np.zeros((2, 1)), np.zeros((3, 1)), np.zeros((2, 1)))
    with pytest.raises(ValueError, match="rounds-since"):
        score(Similarities.empty(3), [None], CurriculumSettings())
    with pytest.raises(ValueError, match="r must be"):
        CurriculumSettings(r=0)
