"""Shared fixtures: the real corpus in ../shared (skipped when absent) and one embedding model per run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus"
WRITEUPS = CORPUS / "kaggle_writeups"
PAPERS = CORPUS / "papers"
HOUSE_PRICES = SHARED / "datasets" / "house_prices"
KNOWLEDGE = REPO / "data" / "knowledge"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared corpus is not beside this checkout")
    return path


@pytest.fixture(scope="session")
def embedding_cache(tmp_path_factory) -> Path:
    """One embeddings cache for the whole run, so no text is embedded twice across tests."""
    return tmp_path_factory.mktemp("embeddings") / "embeddings.db"


@pytest.fixture(scope="session")
def embedder(embedding_cache):
    from kb.embedding import CachedEmbedder, MiniLMEmbedder

    return CachedEmbedder(MiniLMEmbedder(), embedding_cache)


@pytest.fixture
def make_kb(tmp_path, embedder):
    """A fresh knowledge base in a temporary home, sharing the session's embedder."""
    from kb.store import KnowledgeBase

    def make(name: str = "home"):
        return KnowledgeBase(tmp_path / name, embedder=embedder)

    return make


@pytest.fixture(scope="session")
def corpus_kb(tmp_path_factory, embedder):
    """The real write-ups, paper summaries, three full papers and the bundled cards, ingested once."""
    from ingest import ingest
    from kb.store import KnowledgeBase

    need(WRITEUPS)
    home = tmp_path_factory.mktemp("corpus_home")
    papers = tmp_path_factory.mktemp("papers")
    shutil.copy(PAPERS / "paper_summaries.json", papers)
    for full in sorted((PAPERS / "full").glob("*.json"))[:3]:
        shutil.copy(full, papers)
    base = KnowledgeBase(home, embedder=embedder)
    summary = ingest([str(WRITEUPS), str(papers), str(KNOWLEDGE)], base)
    return base, summary
