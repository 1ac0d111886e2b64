"""Fixtures of the command-line tests: a knowledge base of two trick cards, one with an id longer than a table's
column."""

from __future__ import annotations

import json

import pytest

# Longer than a column of an 80-column table: an id cut there could not be given to `kb show`.
LONG_ID = "tab-a-card-id-long-enough-to-be-cut-in-an-eighty-column-table"
CARDS = [
    {"id": LONG_ID, "title": "Target encoding inside folds", "text": "Encode a high-cardinality categorical column "
     "by the mean target of its level, computed out of fold so the encoding never sees its own row's target.",
     "labels": ["General Machine Learning / Classification"], "stage": "feature engineering",
     "recipe": {"op": "target_encoding", "params": {}}},
    {"id": "tab-frequency-encoding-short", "title": "Frequency encoding", "text": "Replace a categorical level by how "
     "often it occurs, a cheap signal for a model that cannot use rare levels.",
     "labels": ["General Machine Learning / Classification"], "stage": "feature engineering",
     "recipe": {"op": "frequency_encoding", "params": {}}},
]


@pytest.fixture(scope="module")
def cards_home(tmp_path_factory, embedder):
    """A knowledge base of the two cards, ingested with the session's embedder."""
    from ingest import ingest
    from kb.store import KnowledgeBase

    root = tmp_path_factory.mktemp("cards")
    (root / "cards.jsonl").write_text("".join(json.dumps(card) + "\n" for card in CARDS), encoding="utf-8")
    summary = ingest([str(root / "cards.jsonl")], KnowledgeBase(root / "home", embedder=embedder))
    assert summary.ok and summary.tricks == 2
    return root
