"""What the search does next, decided from the journal alone (AutoMind section 3.2, after AIDE).

`SearchPolicy.next_action`:
  1. draft until `num_drafts` drafts exist;
  2. with probability `debug_prob`, debug a random buggy leaf whose debug depth is below
     `max_debug_depth` (a buggy node created at that depth is dead: never debugged again);
  3. otherwise improve: with probability `greedy_prob` the best verified node, else a random verified one (on a
     sampled table, a node verified on the exploration sample only counts: its changes are explored there too);
  4. with nothing verified to improve, debug a debuggable leaf, and with nothing to debug either, draft.
Every random choice draws from the `random.Random(seed)` the search passes in, so a seed fixes the run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from agent.engine.trainers import LARGE_ROWS
from agent.search.journal import DEBUG, DRAFT, IMPROVE, Journal, Node


@dataclass(frozen=True)
class SearchSettings:
    # AIDE (on which AutoMind's search builds) drafts 5 solutions; on a 2-core machine 4 model families
    # (linear, random forest, histogram GBM, XGBoost) cover the space and leave the budget for improving.
    num_drafts: int = 4
    debug_prob: float = 0.5  # AIDE's value
    max_debug_depth: int = 3  # AIDE's value: three repair attempts in a row, then the branch is dead
    greedy_prob: float = 0.8  # improve the best node; otherwise a random verified one (exploration)
    trick_prob: float = 0.5  # knowledge proposer: improve with one retrieved trick vs a built-in change
    steps: int = 100  # search steps after the initial drafts; the wall-clock budget usually ends a search first
    time_budget: float | None = 900.0  # seconds for the whole search; None: unbounded
    seed: int = 0
    # A node's time cap is what is left of the budget (less the time kept for the refit and the outputs), and at
    # most this share of the budget, so that no one node can use it all; on a sampled table, a promising node's CV
    # on every row may take twice that (those are the scores that choose the best). A node stopped at its cap is
    # over time.
    node_share: float = 0.25
    # Above this many training rows, a node is first cross-validated on a sample of this many rows (by class for
    # classification), and only one that beats its model family's best score on the sample is then cross-validated
    # on every row; only those scores are compared to choose the best. None: every node on every row.
    explore_rows: int | None = 20_000
    # Above this many training rows a table is large: its CV has at most `large_table_folds` folds, on the sample
    # and on every row alike, and no time is kept back for refitting a node whose fold models predicted the test set
    # (agent.search.tree). FLAML trades its CV for a holdout from 100,000 rows, where one validation fold already
    # holds enough rows for a steady score; three folds still predict every row out of fold (for blending and the
    # fold models' average) at about half the fitting of five (3 x 2/3 of the rows against 5 x 4/5). AutoGluon
    # predicts with its bagged fold models unless asked to refit. None: no table is large.
    large_table_rows: int | None = LARGE_ROWS
    large_table_folds: int = 3

    def large_table(self, rows: int) -> bool:
        return self.large_table_rows is not None and rows > self.large_table_rows

    def folds_for(self, rows: int, cv: int) -> int:
        """The CV's number of folds on a table of `rows` training rows when `cv` were asked for."""
        return min(cv, self.large_table_folds) if self.large_table(rows) else cv


@dataclass(frozen=True)
class SearchPolicy:
    settings: SearchSettings = SearchSettings()

    def debuggable(self, journal: Journal) -> list[Node]:
        return [node for node in journal.buggy_leaves
                if node.debug_depth < self.settings.max_debug_depth and node.id not in journal.exhausted]

    def next_action(self, journal: Journal, rng: random.Random) -> tuple[str, Node | None]:
        """(action, the node to act on); the node is None for a draft."""
        if len(journal.draft_nodes) < self.settings.num_drafts:
            return DRAFT, None
        debuggable = self.debuggable(journal)
        if debuggable and rng.random() < self.settings.debug_prob:
            return DEBUG, rng.choice(debuggable)
        improvable = [node for node in journal if node.verified and node.id not in journal.exhausted]
        if improvable:
            best = journal.best()
            if best is not None and best.id not in journal.exhausted and rng.random() < self.settings.greedy_prob:
                return IMPROVE, best
            return IMPROVE, rng.choice(improvable)
        if debuggable:
            return DEBUG, rng.choice(debuggable)
        return DRAFT, None
