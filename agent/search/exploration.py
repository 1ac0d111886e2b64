"""A large table searched on a sample first: sample, then promote.

On a table of at least 1 / MAX_SAMPLE_SHARE times `explore_rows` training rows (SearchSettings) a node is first
cross-validated on a sample of `explore_rows` rows (`exploring`), and only one that beats its model family's best on
the sample, and whose CV on every row is estimated to fit in its cap, is cross-validated on every row (`promotion`);
its `scored_on` says which. Only scores on every row are compared to choose the best. A table whose first drafts
would not fit in their cap on every row (agent.search.fit_time) is explored the same way, on a sample they fit in.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.spec import SolutionSpec
from agent.execution.sandbox import error_tail
from agent.search.blending import keep_bar
from agent.search.clock import BudgetClock, promotion_estimate
from agent.search.journal import OVER_TIME, Exploration, Journal
from agent.search.protocols import TreeEvaluator
from agent.verify.findings import Evidence
from agent.verify.verifier import Verifier

# The largest share of a table's rows its exploration sample may hold. A promoted node is cross-validated on the sample
# and then on every row, so exploring costs about (sample share + share promoted) of scoring every node on every row:
# on the experience build's 15 tables of 20k-150k rows, 38% of the explored nodes were promoted (20% to 60% per
# table), so a sample above about 60% of the rows costs more than it saves, and on a table of 20k-28k rows (a sample of
# 70%-97%) every promoted node was scored twice for nothing.
MAX_SAMPLE_SHARE = 0.5


@dataclass(frozen=True, eq=False)
class Exploring:
    """One search's exploration of a large table: the sample (TreeEvaluator.sample) and its trivial baseline's score,
    the table itself, and the evaluator, verifier and clock its nodes are evaluated, judged and capped by."""

    dataset: Dataset  # the sample
    baseline: float
    table: Dataset  # every row
    evaluator: TreeEvaluator
    verifier: Verifier
    clock: BudgetClock

    @property
    def rows(self) -> int:
        return len(self.dataset.y)

    @property
    def full_rows(self) -> int:
        return len(self.table.y)

    def evaluate(self, candidate: SolutionCandidate, journal: Journal, search_deadline: float,
                 expected_trees: Mapping[str, float] | None = None) -> tuple[SolutionSpec, Evidence, Exploration]:
        """The candidate cross-validated on the sample (its first fold told `expected_trees`, from a parent's CV on
        the sample: fit_time.expected_trees), then on every row when it is promising (`promotion`): its spec, its
        evidence (the sample's unless its exploration says it was promoted: a node not promoted, or over time on
        every row, keeps its score on the sample) and its exploration."""
        evaluator, clock, table = self.evaluator, self.clock, self.table
        first = not journal.any_verified  # it may take what the search has left (BudgetClock.run_deadline)
        spec, explored = evaluator.evaluate_candidate(candidate, self.dataset, clock.run_deadline(search_deadline, first),
                                                      expected_trees=expected_trees)
        verdict = self.verifier.verify(explored, self.baseline, table.metric_info)
        metric = explored.metric_value if math.isfinite(explored.metric_value) else None
        exploration = Exploration(self.rows, metric, verdict.score, explored.elapsed, False,
                                  "" if verdict.valid else "failed on the sample")
        if not verdict.valid:
            return spec, explored, exploration
        # It is promoted only when its estimate fits in one share: the other half absorbs the estimate's errors, so
        # that a CV on every row seldom runs over time for nothing.
        cap = clock.full_rows_deadline(search_deadline, explored, self.full_rows)
        note = self.promotion(candidate, verdict.score, explored, journal, min(cap, clock.node_deadline(search_deadline)))
        if note.startswith("not promoted"):
            return spec, explored, replace(exploration, note=note)
        evidence = evaluator.evaluate(spec, table, cap, predict_test=True,
                                      keep_above=keep_bar(journal, candidate.trainer))
        if evidence.status == OVER_TIME:  # it keeps its score on the sample
            note = f"{note}; its CV on every row was over time ({error_tail(evidence.error, 1)})"
            return spec, replace(explored, elapsed=explored.elapsed + evidence.elapsed), replace(exploration, note=note)
        return (spec, replace(evidence, elapsed=explored.elapsed + evidence.elapsed),
                replace(exploration, promoted=True, note=note))

    def promotion(self, candidate: SolutionCandidate, score: float, explored: Evidence, journal: Journal,
                  cap: float) -> str:
        """Whether a node verified on the sample is cross-validated on every row, in words (starting "not promoted"
        when it is not): it must beat the best sample score of its model family so far, and its CV on every row,
        estimated from the sample's, must fit in its cap."""
        trainer = candidate.trainer
        rivals = [node.exploration.score for node in journal
                  if node.exploration is not None and node.verified and node.candidate.trainer == trainer]
        if rivals and score <= max(rivals):
            return f"not promoted: its score on the sample does not beat the best {trainer} node's there"
        estimate = promotion_estimate(explored, self.rows, self.full_rows)
        allowed = cap - time.monotonic()
        if estimate > allowed:
            return (f"not promoted: its CV on every row would take about {estimate:.0f} s, more than the "
                    f"{max(allowed, 0):.0f} s it may use")
        return f"promoted: the best {trainer} node on the sample so far"


def exploring(dataset: Dataset, evaluator: TreeEvaluator, verifier: Verifier, clock: BudgetClock,
              rows: int | None = None) -> Exploring | None:
    """The exploration of a table on a sample of `rows` training rows, when it has more; by default of the settings'
    `explore_rows`, when that is at most MAX_SAMPLE_SHARE of the table. None for a smaller table."""
    if rows is None:
        rows = clock.settings.explore_rows
        if rows is None or rows > MAX_SAMPLE_SHARE * len(dataset.y):
            return None
    if len(dataset.y) <= rows:
        return None
    explored = evaluator.sample(dataset, rows)
    return Exploring(explored, evaluator.baseline(explored), dataset, evaluator, verifier, clock)
