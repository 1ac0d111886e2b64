"""What the search does next, decided from the journal and the seconds since the search started (AutoMind section
3.2, after AIDE).

`SearchPolicy.next_action`:
  1. draft until `num_drafts` drafts drafted something (`drafted`: one over its time cap did not), and once more
     each time the search stalls while the proposer has drafts left: `stall_improvements` improvements in a row
     (since the last draft that ran) found no new best, or at least one did and `stall_seconds` passed without one
     (where improvements are slow, ten of them are most of a budget);
  2. with probability `debug_prob`, debug a random buggy leaf whose debug depth is below
     `max_debug_depth` (a buggy node created at that depth is dead: never debugged again);
  3. otherwise improve: with probability `greedy_prob` the best verified node (or the node the search names in its
     place, `greedy`: one as good within the folds' noise that costs less), else a random verified one (on a sampled
     table, a node verified on the exploration sample only counts: its changes are explored there too);
  4. with nothing verified to improve, debug a debuggable leaf, and with nothing to debug either, draft.
Every random choice draws from the `random.Random(seed)` the search passes in, so a seed fixes the run.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from agent.search.journal import DEBUG, DRAFT, EXPLORED, IMPROVE, OVER_TIME, PENDING, VALID, Journal, Node
from agent.settings import SearchSettings


@dataclass(frozen=True)
class SearchPolicy:
    settings: SearchSettings = SearchSettings()

    def debuggable(self, journal: Journal) -> list[Node]:
        return [node for node in journal.buggy_leaves
                if node.debug_depth < self.settings.max_debug_depth and node.id not in journal.exhausted]

    def stalled(self, journal: Journal, now: float | None = None) -> bool:
        """Whether the improvements since the last draft that ran have gone `stall_improvements` in a row without a new
        best, or, at `now` (seconds since the search started; None: by the count alone), at least one has and
        `stall_seconds` passed since the last progress. None `stall_improvements`: never."""
        stall, seconds = self.settings.stall_improvements, self.settings.stall_seconds
        if stall is None:
            return False
        progress = since_progress(journal, now if now is not None else 0.0)
        return progress.improvements >= stall or (
            now is not None and seconds is not None and progress.improvements > 0 and now - progress.since >= seconds)

    def next_action(self, journal: Journal, rng: random.Random, now: float | None = None,
                    greedy: Node | None = None) -> tuple[str, Node | None]:
        """(action, the node to act on); the node is None for a draft. `now`: seconds since the search started;
        `greedy`: the node a greedy step improves (None: the best)."""
        if drafted(journal) < self.settings.num_drafts or self.stalled(journal, now):
            return DRAFT, None
        debuggable = self.debuggable(journal)
        if debuggable and rng.random() < self.settings.debug_prob:
            return DEBUG, rng.choice(debuggable)
        improvable = [node for node in journal if node.verified and node.id not in journal.exhausted]
        if improvable:
            best = greedy or journal.best()
            if best is not None and best.id not in journal.exhausted and rng.random() < self.settings.greedy_prob:
                return IMPROVE, best
            return IMPROVE, rng.choice(improvable)
        if debuggable:
            return DEBUG, rng.choice(debuggable)
        return DRAFT, None


def drafted(journal: Journal) -> int:
    """The drafts that count toward `num_drafts`: every one but those over their time cap (skipped before they ran,
    or stopped at it), which scored nothing. Their family is drafted again at a size that fits
    (agent.search.fit_time.DraftTimes.size) while the search is young, not after the best node's improvements
    stall (on a table where two GBDT drafts ran over, that came with 1 s of a 60 s search left)."""
    return sum(1 for node in journal.draft_nodes if node.status != OVER_TIME)


@dataclass(frozen=True)
class Progress:
    """Where a search stands since its last progress: the improvements appended (or pending) since, and when it was
    made, in seconds since the search started."""

    improvements: int
    since: float


def since_progress(journal: Journal, now: float) -> Progress:
    """The search's last progress: the last draft that ran (from its start; a pending one's is `now`), or the last
    improvement that beat every node verified before it on the same rows (every row, or the exploration sample; from
    its end). A draft skipped before it ran (its fit-time estimate over its cap) tried nothing, so the next step
    drafts again."""
    best = {VALID: -math.inf, EXPLORED: -math.inf}
    count, since = 0, 0.0
    for node in journal:
        if node.action == DRAFT and not node.skipped:
            count, since = 0, now if node.status == PENDING else node.started
        elif node.action == IMPROVE:
            if node.verified and node.score > best[node.status]:
                count, since = 0, node.started + node.elapsed
            else:
                count += 1
        if node.verified:
            best[node.status] = max(best[node.status], node.score)
    return Progress(count, since)
