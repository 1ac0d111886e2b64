"""How a recall is scored, on records alone (no store): tasks ranked by similarity, effects weighted by it (with a
least weight for unrelated tasks), per model family and per recipe, and repaired errors most similar first."""

from __future__ import annotations

import pytest

from agent.candidate import AppliedTrick
from agent.memory.change import Change
from agent.memory.recall import MIN_WEIGHT, Similarity, most_similar, scored_recall
from agent.memory.records import (
    ERROR,
    WORSE,
    NegativeMemory,
    PositiveMemory,
    Repair,
    SolutionMemory,
    TaskMemory,
    TaskSignature,
)

SIGNATURE = TaskSignature((), "binary", "roc_auc", "tabular", (("numeric", 4),), "tiny", 500, 5)
TRICK = AppliedTrick("tab-seed-bagging", "Average the same model over several seeds", "cards.jsonl", None,
                     "seed_bagging", {"n_seeds": 3}, source_kind="card")
# Another card carrying the same recipe: its effect is the recipe's.
SAME_RECIPE = AppliedTrick("other-seeds", "Bag seeds", "writeup.md", None, "seed_bagging", {"n_seeds": 3})


def _task(key: str) -> TaskMemory:
    return TaskMemory(key, f"task {key}", "", "", SIGNATURE, solved=True, runs=1)


def _solution(key: str, oriented: float) -> SolutionMemory:
    return SolutionMemory(f"s-{key}-{oriented}", key, f"task {key}", "r", SIGNATURE, "roc_auc", oriented, oriented,
                          {}, {}, oriented, "", 3, 1)


def _measured(key: str, trainer: str, gain: float, trick: AppliedTrick | None = TRICK, op: str = "seed_bagging"):
    if gain > 0:
        return PositiveMemory(f"p-{key}-{trainer}", key, f"task {key}", "r", SIGNATURE, 2, "improve", trainer, op,
                              Change(), trick, "roc_auc", 0.8, 0.8 + gain * 0.8, gain * 0.8, gain, "plan")
    return NegativeMemory(f"w-{key}-{trainer}", WORSE, key, f"task {key}", "r", SIGNATURE, "worse", 2, "improve",
                          trainer, op=op, change=Change(), trick=trick, metric="roc_auc", delta=gain * 0.8, gain=gain)


def _error(key: str, repaired: bool, created_at: str) -> NegativeMemory:
    repair = Repair(3, Change(params={"n_estimators": 100}), "fix", 0.8) if repaired else None
    return NegativeMemory(f"e-{key}", ERROR, key, f"task {key}", "r", SIGNATURE, "ValueError: bad", 2, "draft",
                          "xgboost", repair=repair, created_at=created_at)


SIMILARITY = {"a": Similarity(0.9, 0.95, 0.85), "b": Similarity(0.02, 0.0, 0.04), "c": Similarity(0.5, 0.6, 0.4),
              "d": Similarity(0.5, 0.5, 0.5)}


def test_the_most_similar_tasks_come_first_with_their_best_solution():
    tasks = [_task(key) for key in "dcba"]
    solutions = [_solution("a", 0.7), _solution("a", 0.8), _solution("d", 0.6)]
    similar = most_similar(tasks, SIMILARITY, solutions, k=3)
    assert [task.task.task_key for task in similar] == ["a", "c", "d"]  # c and d tie: by key
    assert (similar[0].similarity, similar[0].description_similarity, similar[0].structure_similarity) == \
        (0.9, 0.95, 0.85)
    assert similar[0].solution.oriented_score == 0.8 and similar[1].solution is None


def test_effects_are_weighted_by_similarity_per_trick_recipe_model_family_and_op():
    similar = most_similar([_task(key) for key in "abcd"], SIMILARITY, [], k=4)
    measured = [_measured("a", "xgboost", 0.1), _measured("c", "linear", -0.05),
                _measured("b", "xgboost", 0.2, trick=None, op="drop:Age"),
                _measured("a", "linear", -0.01, trick=None, op="drop:Age")]
    errors = [_error("b", True, "2024-01-01"), _error("c", False, "2024-01-02"), _error("a", True, "2024-01-03")]
    recall = scored_recall("own", similar, measured, errors, SIMILARITY, reuse_own=False)
    effect = recall.trick_effects[TRICK.id]
    assert effect.applications == 2 and effect.helped == 1 and effect.title == TRICK.title
    assert effect.mean_gain == pytest.approx((0.9 * 0.1 + 0.5 * -0.05) / 1.4) and effect.helps
    assert effect.tasks == ("task a", "task c") and effect.best == ("task a", pytest.approx(0.08), "roc_auc")
    assert recall.effect(TRICK, "linear").mean_gain == pytest.approx(-0.05)  # measured on that model family
    assert recall.effect(SAME_RECIPE, "xgboost").mean_gain == pytest.approx(0.1)  # the same recipe's
    # An unrelated task still counts, at the least weight.
    dropped = recall.op_effects["drop:Age"]
    assert dropped.mean_gain == pytest.approx((MIN_WEIGHT * 0.2 + 0.9 * -0.01) / (MIN_WEIGHT + 0.9))
    assert [error.memory.task_key for error in recall.errors] == ["a", "b"]  # repaired only, most similar first
    assert recall.task_key == "own" and not recall.reused_own
