"""The budget clock: every deadline of a solve, and the time kept back for what follows its search.

A `BudgetClock` is started once from the settings (`starting`), and a search is given what is left of it
(`from_now`). The search stops drawing nodes at `search_deadline`: the budget's end less the time kept back for the
final refit (a measured estimate: each fold's fit seconds, scaled to every row), the final blend and the outputs. Each
node's time cap (`node_deadline`) is what is left before it, and at most `node_share` of the budget: what a node is
sized for; its CV runs until `run_deadline`, which lets one whose folds project it a little past the node share
finish. The refit is not kept back for nodes whose CVs kept their fold models: their average is the
submission. On a large table a node promoted from the exploration sample may take twice the share
(`full_rows_deadline`). The final fit has what is left before the outputs (`refit_seconds_left`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from agent.search.blending import BlendCost, blend_candidates
from agent.search.journal import Journal
from agent.settings import SearchSettings
from agent.verify.findings import Evidence

TYPICAL_BLEND_SIZE = 4  # members greedy selection keeps, as a rule, from the best verified nodes
REFIT_SHARE = 0.35  # one fit on all rows, as a share of a 5-fold CV's seconds, when the folds' fits were not timed
# A refit's estimate: each model's mean fold fit scaled to every row, times this margin, plus once the seconds of
# starting the refit's process and sending it the data (a blend's members are refit in one process). The folds' fits
# include early stopping's patience rounds and validation scoring, which a refit at the stopped rounds does not
# repeat. Measured on the 288 refits in the benches' run folders (60-300 s budgets, 1-7 members): at 1.0 and 2.0 s
# none took more than its estimate, which kept back 6.2 s on average; at 0.9 and 1.0 s, 2 took more (by at most
# 1.6 s, where the fold models' average stands in) and 4.8 s is kept back.
REFIT_MARGIN, REFIT_OVERHEAD = 0.9, 1.0
REFIT_MAX_SHARE = 0.25  # the most of the budget kept back for the refit; beyond it, the fold models' average is kept
# How far past its cap a running CV may go when its folds project it there, never past the time its search leaves
# it: a node sized to its cap lands on either side of it, and a CV stopped over it throws away the folds it ran.
# Of the 369 CVs the benches' run folders show stopped on their projection while the node share was their cap, 75
# projected at most 1.2 times it: 665 s of folds thrown away, where 789 s more would have verified them.
OVERRUN = 1.2
# Seconds for what follows the search: submission.csv, solution.py, run.json and report.html (its matplotlib
# figures), measured at about 1-2 s.
OUTPUT_SECONDS = 3.0
# A node's CV on every row is estimated from its sample CV: fit seconds scaled by the rows, with this margin for
# trees' worse than linear cost in the rows.
PROMOTION_MARGIN = 1.25


@dataclass(frozen=True)
class BudgetClock:
    """A time budget of `budget` seconds (None: unbounded) ending at `deadline` (a time.monotonic() value), read
    with the search settings' node share and large-table rule."""

    settings: SearchSettings
    budget: float | None
    deadline: float

    @classmethod
    def starting(cls, settings: SearchSettings, started: float | None = None, kept: float = 0.0) -> BudgetClock:
        """settings.time_budget from `started` (a time.monotonic() value; now if None), less `kept` seconds at its
        end that the caller needs once the run is back (a process's exit)."""
        budget = settings.time_budget
        started = time.monotonic() if started is None else started
        return cls(settings, budget, started + budget - kept if budget is not None else math.inf)

    def from_now(self, kept: float = 0.0) -> BudgetClock:
        """What is left of this budget, less `kept` seconds at its end (for leaving a Ray cluster, say), as a budget
        of its own (at least a second), which the node shares are taken of."""
        if self.budget is None:
            return self
        now = time.monotonic()
        budget = max(self.deadline - kept - now, 1.0)
        return BudgetClock(self.settings, budget, now + budget)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def search_deadline(self, journal: Journal, rows: int, blend: BlendCost | None) -> float:
        """When the search must stop drawing nodes: the deadline less the time kept back (refit_reserve)."""
        return self.deadline - self.refit_reserve(journal, rows, blend)

    def refit_reserve(self, journal: Journal, rows: int, blend: BlendCost | None) -> float:
        """Seconds kept back for what follows the search: the final fit, the final blend (`blend`, its cost on this
        table; None when the metric cannot be blended) of the candidates it would pick from now, and writing the
        outputs. The final fit needs no refit for a node whose CV kept its fold models (agent.search.final.kept_fit):
        only the nodes the final solution may hold that kept none (forests, whose fold models grow with the rows)
        are refit on every row, each apart. When none of them kept any (on a Ray cluster), a blend of the best is
        refit whole (a blend refits each of its members, typically a few of the best nodes). Estimated from their
        folds' fit seconds, and at most REFIT_MAX_SHARE of the budget (beyond that the fold models' average is the
        submission). On a large table only a best scored on the sample only, which has no fold models'
        predictions, is budgeted: the others' fold models' average is the submission unless time is left for the
        refit."""
        best, blending = journal.best(), blend is not None  # best: an explored node, when it beats the valid ones
        if self.settings.large_table(rows):
            refits = [[best]] if best is not None and not best.valid else []
        else:
            ranked = sorted(journal.valid_nodes, key=lambda node: node.score, reverse=True)
            final = blend_candidates(journal) if blending else ranked[:1]
            if best is not None and best not in final:
                final.append(best)
            unkept = [node for node in final if not node.fold_models_kept]
            if len(unkept) < len(final):
                refits = [[node] for node in unkept]
            else:
                refits = [ranked[:TYPICAL_BLEND_SIZE] if blending else unkept]
        # A journal the search was handed may hold nodes evaluated elsewhere: their evidence is only their time.
        estimate = sum(refit_estimate([node.evidence or Evidence("ok", elapsed=node.elapsed) for node in nodes], rows)
                       for nodes in refits)
        kept = min(estimate, REFIT_MAX_SHARE * self.budget) if self.budget is not None else estimate
        blending_seconds = blend.seconds(len(blend_candidates(journal))) if blend is not None else 0.0
        return kept + OUTPUT_SECONDS + blending_seconds

    def used_up(self, journal: Journal, search_deadline: float) -> str:
        """Why no node may start before `search_deadline` ("" while one may): a node started with less time left
        than the fastest verified node took would only run over time."""
        fastest = fastest_node_seconds(journal)
        if time.monotonic() + fastest < search_deadline:
            return ""
        return (f"time budget used up: less is left than the fastest node took ({fastest:.1f} s), and the rest is "
                "kept for the final refit and the outputs")

    def node_deadline(self, search_deadline: float, shares: float = 1.0) -> float:
        """A node's cap, which it is sized to fit in: at most `shares` node shares of the budget from now, and early
        enough before `search_deadline` that its own refit, which the time kept back grows by once it is verified
        (REFIT_SHARE of its CV), fits too."""
        now = time.monotonic()
        if self.budget is None:
            return search_deadline
        return min(now + (search_deadline - now) / (1 + REFIT_SHARE), now + shares * self.settings.node_share * self.budget)

    def run_deadline(self, search_deadline: float, first: bool = False) -> float:
        """When a node's CV must stop: its cap (node_deadline) with OVERRUN node shares, so that a CV whose folds
        project it a little past the share finishes; never later than the cap's rule before `search_deadline`.
        The `first` (no node is verified yet) may take whatever its search has left, by that rule: stopped at the
        node share, it leaves the trivial baseline as the submission whenever less is left than another node needs
        (two 15 s solves at once under a loaded test run: the reference stopped at its cap as the search's only
        node, while its worker was still importing its libraries)."""
        return self.node_deadline(search_deadline, math.inf if first else OVERRUN)

    def full_rows_deadline(self, search_deadline: float, explored: Evidence, full_rows: int) -> float:
        """When a node promoted from the exploration sample must stop its CV on every row: it may take two node
        shares (those are the scores that choose the best), less the refit on every row it would need, estimated
        from the sample's fits (none on a large table, where its fold models' average stands in)."""
        cap = self.node_deadline(search_deadline, 2)
        if not self.settings.large_table(full_rows):
            cap = min(cap, search_deadline - refit_estimate([explored], full_rows))
        return cap

    def refit_seconds_left(self) -> float:
        """Seconds the final fit may take: what is left before the outputs."""
        return self.deadline - OUTPUT_SECONDS - time.monotonic()


def fastest_node_seconds(journal: Journal) -> float:
    """Seconds the fastest verified single-model node took to be verified (0 with none): on a large table, its CV
    on the exploration sample, which is all a new node must get through (its CV on every row has its own cap)."""
    return min((node.first_cv_seconds for node in journal if node.verified and not node.members), default=0.0)


def refit_seconds_per_row(evidence: Evidence) -> float | None:
    """A refit's seconds per training row, from the CV behind `evidence`: its mean fold fit over a fold's training
    rows, with REFIT_MARGIN; None without fold timings (free code)."""
    if not evidence.fit_seconds or not evidence.rows:
        return None
    folds = len(evidence.fit_seconds)
    return sum(evidence.fit_seconds) / folds / (evidence.rows * (folds - 1) / folds) * REFIT_MARGIN


def refit_estimate(models: Sequence[Evidence], rows: int) -> float:
    """Seconds refitting these models on `rows` rows in one process should take, from the CV behind each one's
    evidence: refit_seconds_per_row times the rows, plus REFIT_OVERHEAD once; a model without fold timings (free
    code, or a node evaluated elsewhere) counts REFIT_SHARE of its whole CV, start-up included."""
    seconds, timed = 0.0, False
    for evidence in models:
        per_row = refit_seconds_per_row(evidence)
        seconds += REFIT_SHARE * evidence.elapsed if per_row is None else per_row * rows
        timed = timed or per_row is not None
    return seconds + (REFIT_OVERHEAD if timed else 0.0)


def rows_within(evidence: Evidence, seconds: float) -> int:
    """The most rows a refit fits on in `seconds`, by refit_estimate's rule; the CV's rows without fold timings."""
    per_row = refit_seconds_per_row(evidence)
    return evidence.rows if not per_row else max(int((seconds - REFIT_OVERHEAD) / per_row), 0)


def promotion_estimate(explored: Evidence, sample_rows: int, full_rows: int) -> float:
    """Seconds a CV on every row should take, from the CV on the sample behind `explored`: its fits scaled by the
    rows (with PROMOTION_MARGIN), the rest (start-up, inspection) as it was."""
    fitting = sum(explored.fit_seconds)
    return fitting * full_rows / sample_rows * PROMOTION_MARGIN + (explored.elapsed - fitting)
