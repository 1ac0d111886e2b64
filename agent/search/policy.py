"""What the search does next, decided from the journal alone (AutoMind section 3.2, after AIDE).

`SearchPolicy.next_action`:
  1. draft until `num_drafts` drafts exist, and once more each time `stall_improvements` improvements in a row (since
     the last draft that ran) found no new best, while the proposer has drafts left;
  2. with probability `debug_prob`, debug a random buggy leaf whose debug depth is below
     `max_debug_depth` (a buggy node created at that depth is dead: never debugged again);
  3. otherwise improve: with probability `greedy_prob` the best verified node, else a random verified one (on a
     sampled table, a node verified on the exploration sample only counts: its changes are explored there too);
  4. with nothing verified to improve, debug a debuggable leaf, and with nothing to debug either, draft.
Every random choice draws from the `random.Random(seed)` the search passes in, so a seed fixes the run.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from agent.search.journal import DEBUG, DRAFT, EXPLORED, IMPROVE, VALID, Journal, Node
from agent.settings import SearchSettings


@dataclass(frozen=True)
class SearchPolicy:
    settings: SearchSettings = SearchSettings()

    def debuggable(self, journal: Journal) -> list[Node]:
        return [node for node in journal.buggy_leaves
                if node.debug_depth < self.settings.max_debug_depth and node.id not in journal.exhausted]

    def stalled(self, journal: Journal) -> bool:
        """Whether the improvements since the last draft that ran have gone `stall_improvements` in a row without a new
        best."""
        stall = self.settings.stall_improvements
        return stall is not None and improvements_without_progress(journal) >= stall

    def next_action(self, journal: Journal, rng: random.Random) -> tuple[str, Node | None]:
        """(action, the node to act on); the node is None for a draft."""
        if len(journal.draft_nodes) < self.settings.num_drafts or self.stalled(journal):
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


def improvements_without_progress(journal: Journal) -> int:
    """The improvements appended (or pending) since the last draft that ran and since the last improvement that beat
    every node verified before it on the same rows (every row, or the exploration sample). A draft skipped before it
    ran (its fit-time estimate over its cap) tried nothing, so the next step drafts again."""
    best = {VALID: -math.inf, EXPLORED: -math.inf}
    count = 0
    for node in journal:
        if node.action == DRAFT and not node.skipped:
            count = 0
        elif node.action == IMPROVE:
            count = 0 if node.verified and node.score > best[node.status] else count + 1
        if node.verified:
            best[node.status] = max(best[node.status], node.score)
    return count
