"""The experience pack: exported from real pool runs without a label, a prediction or a row of data; its greedy
portfolio; the order of the portfolio for a new task; a file that is not a pack named with the fix."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from agent.engine.spec import SolutionSpec
from agent.memory.experience import PackError, PackHeader, build_pack, read_pack, write_pack
from agent.memory.portfolio import order_for, select_portfolio
from agent.memory.records import TaskSignature
from agent.solve import solve_task
from retrieval.profile import profile_task
from tests.agent.memory.conftest import SHORT

HEADER = PackHeader("agent experience build (test)", "test", "2026-11-25T00:00:00Z", "tests", 0.0)


@pytest.fixture(scope="module")
def pool(tasks, tmp_path_factory, embedder):
    """Two real pool runs (a binary and a regression table) with their case library."""
    from agent.memory.store import MemoryStore

    root = tmp_path_factory.mktemp("pool")
    store = MemoryStore(root / "home", embedder=embedder)
    runs = []
    for name in ("attrition", "wage"):
        profile = profile_task(tasks[name].task_dir)
        result = solve_task(profile, SHORT, root / name, memory=store)
        runs.append((json.loads((result.out_dir / "run.json").read_text()), TaskSignature.of(profile)))
    return runs, store.tasks(), store.list()


def lists_in(value):
    if isinstance(value, list):
        yield value
        for item in value:
            yield from lists_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from lists_in(item)


def test_a_pack_keeps_scores_of_configurations_and_no_label_prediction_or_row(pool, tasks, tmp_path):
    runs, library_tasks, memories = pool
    pack = read_pack(write_pack(build_pack(runs, library_tasks, memories, HEADER), tmp_path / "pack.json"))
    assert [task.name for task in pack.tasks] == ["attrition", "wage"]
    for task, (run, _) in zip(pack.tasks, runs, strict=True):
        assert task.configs and task.configs[0].error == 0.0  # each task's best single model...
        singles = [node for node in run["journal"]["nodes"] if node["status"] == "valid" and not node["members"]
                   and node["scored_on"] == "full"]
        # ...is the run's best on CV, whichever way its metric points (wage: RMSE, attrition: AUC), in its own units
        assert task.configs[0].score == pytest.approx(max(singles, key=lambda node: node["score"])["metric"])
        assert task.configs[-1].score == pytest.approx(min(singles, key=lambda node: node["score"])["metric"])
        assert all(0.0 <= c.error <= 1.0 and c.seconds > 0 and c.rows > 0 for c in task.configs)
        for result in task.configs:
            SolutionSpec.from_dict(result.spec)  # every configuration is a spec the engine can run again
    text = (tmp_path / "pack.json").read_text()
    assert '"solution":' not in text and "def main" not in text
    test_rows = min(len(pd.read_csv(tasks[name].answers_path)) for name in ("attrition", "wage"))
    # Labels or predictions would be lists as long as the test set; the longest list a pack holds is far shorter.
    longest = max(len(found) for found in lists_in(json.loads(text)))
    assert longest < test_rows / 4, longest
    for name in ("attrition", "wage"):
        answers = pd.read_csv(tasks[name].answers_path)
        labels = answers[tasks[name].target].astype(str).tolist()
        assert ", ".join(f'"{label}"' for label in labels[:8]) not in text
        assert ", ".join(labels[:8]) not in text


def test_the_portfolio_is_chosen_per_task_kind_and_ordered_for_a_new_task(pool, tasks):
    runs, library_tasks, memories = pool
    pack = build_pack(runs, library_tasks, memories, HEADER)
    assert pack.portfolios["classification"] and pack.portfolios["regression"]
    churn = TaskSignature.of(profile_task(tasks["churn"].task_dir))
    drafts = pack.portfolio_for(churn, "pack.json")
    classification = {c.config: c for c in pack.tasks[0].configs}
    assert sorted(draft.config for draft in drafts) == sorted(pack.portfolios["classification"])
    errors = [classification[draft.config].error for draft in drafts]
    assert errors == sorted(errors)  # the best on the nearest pool task (attrition) first
    for draft in drafts:  # each with the pool task that measured it and its result there
        assert draft.pack == "pack.json" and draft.measured == (("attrition", classification[draft.config]),)
        assert draft.spec == classification[draft.config].spec
    assert pack.neighbours(churn) == ["attrition"]  # the only pool task of its kind


def test_greedy_selection_prefers_complementary_configurations_and_stops_when_nothing_helps():
    errors = {
        "a": {"generalist": 0.3, "left": 0.0, "right": 1.0},
        "b": {"generalist": 0.3, "left": 1.0, "right": 0.0},
        "c": {"generalist": 0.3, "left": 0.0, "right": 1.0},
    }
    chosen = select_portfolio(errors, size=5)
    assert [c.config for c in chosen] == ["generalist", "left", "right"]
    assert [round(c.mean_error, 3) for c in chosen] == [0.3, 0.1, 0.0]
    assert select_portfolio({"a": {"x": 0.0}, "b": {"x": 0.0}}, size=3)[-1].config == "x"


def test_a_configuration_never_tried_on_a_task_counts_as_its_baseline():
    errors = {"a": {"often": 0.2}, "b": {"often": 0.2}, "c": {"often": 0.2, "once": 0.0}}
    assert select_portfolio(errors, size=1)[0].config == "often"
    assert math.isclose(select_portfolio(errors, size=2)[1].mean_error, (0.2 + 0.2 + 0.0) / 3)
    assert order_for(["often", "once"], errors, ["c"]) == ["once", "often"]
    assert order_for(["often", "once"], errors, ["a"]) == ["often", "once"]


def test_a_file_that_is_not_a_pack_is_one_line_naming_it_and_the_fix(tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text('{"tasks": []}')
    with pytest.raises(PackError, match=r"notes\.json.*agent experience build"):
        read_pack(bad)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(PackError, match=r"broken\.json"):
        read_pack(broken)
