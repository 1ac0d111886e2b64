"""A score change reads the same way everywhere: "improved by" or "worsened by" in the metric's direction (an RMSE
that went up worsened), and "no change" when the score did not move."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from agent.memory.records import WORSE, Effect, NegativeMemory
from agent.memory.store import MemoryStore
from agent.outputs.report import NodeView, trick_effects
from cli.agent import main
from retrieval.metrics import describe_change


def _worse(memory_id: str, delta: float) -> NegativeMemory:
    return NegativeMemory(memory_id, WORSE, "wages-key", "wages", "run", None, "did not beat its parent", 4, "improve",
                          "xgboost", op="early_stopping", metric="rmse", delta=delta, gain=delta / 0.68)


def test_describe_change_follows_the_improvement():
    assert describe_change(0.0014) == "improved by 0.0014"
    assert describe_change(-0.00143) == "worsened by 0.00143"
    assert describe_change(-0.012, relative=True) == "worsened by 1.20%"
    assert describe_change(0.0) == "no change"


def test_memory_list_says_worsened_for_an_rmse_that_went_up_and_no_change_for_none(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with MemoryStore(tmp_path / "home") as store:
        store.write_node([_worse("went-up", -0.00143), _worse("same", 0.0)])
    result = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "memory", "list"], terminal_width=200)
    assert result.exit_code == 0, result.output
    rows = {line.split()[1]: line for line in result.output.splitlines() if "early_stopping" in line}
    assert "rmse worsened by 0.00143 (0.21%)" in rows["went-up"] and "-0.00143" not in rows["went-up"]
    assert "rmse no change" in rows["same"] and "worse" not in rows["same"] and "+0" not in rows["same"]


def test_a_remembered_effect_says_how_the_score_moved():
    effect = Effect("early_stopping", "early_stopping", "early_stopping", 2, 0, -0.004, ("wages", -0.00143, "rmse"),
                    ("wages", "ames"))
    assert effect.describe().endswith("the score worsened by 0.40% on average; on wages: rmse worsened by 0.00143)")


def _attempt(node_id: int, parent_id: int | None, cv_score: float, trick: dict | None = None) -> dict:
    return {"node_id": node_id, "parent_id": parent_id, "action": "improve" if parent_id else "draft",
            "trainer": "xgboost", "spec": {"model": {"name": "xgboost", "params": {}}, "steps": []},
            "cv_score": cv_score, "valid": True, "node_status": "valid", "verdict": "accepted", "seconds": 1.0,
            "started": float(node_id), "plan": "a plan", "trick": trick, "notes": [], "error": ""}


@pytest.mark.parametrize("greater_is_better", [False, True])
def test_report_says_how_a_trick_moved_the_score_in_the_metrics_direction(greater_is_better):
    trick = {"id": "tab-early", "title": "Early stopping", "op": "early_stopping", "source": "cards.jsonl"}
    better, worse = (0.7014, 0.6986) if greater_is_better else (0.6986, 0.7014)
    attempts = [_attempt(1, None, 0.7), _attempt(2, 1, better, trick), _attempt(3, 1, worse, trick),
                _attempt(4, 1, 0.7, trick)]
    effects = {effect["node"].id: effect for effect in trick_effects([NodeView.from_attempt(a) for a in attempts],
                                                                     greater_is_better)}
    assert [(effects[n]["outcome"], effects[n]["change_words"]) for n in (2, 3, 4)] == [
        ("helped", "improved by 0.0014"), ("hurt", "worsened by 0.0014"), ("unchanged", "no change")]
