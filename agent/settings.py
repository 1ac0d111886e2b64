"""The settings of a solve, frozen and passed whole: `SolveSettings` (what `agent solve` is asked to do) holding
`SearchSettings` (the tree search's policy, steps, time budget and seed).

They own the rules read from them in several places: how many CV folds a table gets (`SolveSettings.folds_for`) and
when a table is large (`SearchSettings.large_table`). The time budget's deadlines are agent.search.clock's
`BudgetClock`, started from these settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.engine.fit import PRUNE_Z
from agent.engine.trainers import LARGE_ROWS
from agent.execution.executors import LOCAL
from agent.execution.sandbox import DEFAULT_MEMORY_LIMIT

DEFAULT_CANDIDATE_TIME_LIMIT = 600.0


@dataclass(frozen=True)
class SearchSettings:
    # AIDE (on which AutoMind's search builds) drafts 5 solutions; on a 2-core machine 4 model families
    # (linear, random forest, histogram GBM, XGBoost) cover the space and leave the budget for improving.
    num_drafts: int = 4
    # After this many improvements in a row without a new best (since the last draft that ran), the next step drafts
    # another model family or portfolio configuration while any is left: a draft is scored on every fold (the fold gate
    # stops improvements, not drafts) and gives the final blend another member. Chosen before measuring, not tuned:
    # in 16 runs on pool and development tables, 39 of 61 new bests came within 10 improvements of the last one,
    # and runs ended on 6-132 improvements without one. None: draft only the first `num_drafts`.
    stall_improvements: int | None = 10
    # Or, once an improvement since has found no new best, after this share of the time budget without one: where
    # improvements are slow (a CatBoost CV of 15 s), ten of them are most of a budget. Chosen before measuring, to
    # fire later than the count on the same 16 runs: 48 of their 61 new bests came within 24 s (a fifth of their
    # 120 s) of the last progress, 39 within 10 improvements. None: by the count alone.
    stall_share: float | None = 0.2
    debug_prob: float = 0.5  # AIDE's value
    max_debug_depth: int = 3  # AIDE's value: three repair attempts in a row, then the branch is dead
    greedy_prob: float = 0.8  # improve the best node; otherwise a random verified one (exploration)
    trick_prob: float = 0.5  # knowledge proposer: improve with one retrieved trick vs a built-in change
    # Search steps after the initial drafts: a ceiling the wall-clock budget should reach first. At 100, a search
    # whose improvements mostly stop after a fold (multi-fidelity CV) ended with a fifth of 120 s unused.
    steps: int = 1000
    time_budget: float | None = 900.0  # seconds for the whole search; None: unbounded
    seed: int = 0
    # A node's time cap is what is left of the budget (less the time kept for the refit and the outputs), and at
    # most this share of the budget, so that no one node can use it all; on a sampled table, a promising node's CV
    # on every row may take twice that (those are the scores that choose the best). A node stopped at its cap is
    # over time.
    node_share: float = 0.25
    # On a table of at least twice this many training rows (agent.search.exploration.MAX_SAMPLE_SHARE), a node is
    # first cross-validated on a sample of this many rows (by class for classification), and only one that beats its
    # model family's best score on the sample is then cross-validated on every row; only those scores are compared to
    # choose the best. None: every node on every row.
    explore_rows: int | None = 20_000
    # Above this many training rows a table is large: its CV has at most `large_table_folds` folds, on the sample
    # and on every row alike, and no time is kept back for refitting a node whose fold models predicted the test set
    # (agent.search.clock). FLAML trades its CV for a holdout from 100,000 rows, where one validation fold already
    # holds enough rows for a steady score; three folds still predict every row out of fold (for blending and the
    # fold models' average) at about half the fitting of five (3 x 2/3 of the rows against 5 x 4/5). AutoGluon
    # predicts with its bagged fold models unless asked to refit. None: no table is large.
    large_table_rows: int | None = LARGE_ROWS
    large_table_folds: int = 3
    # Multi-fidelity CV: once a node is verified, every later improvement is scored fold by fold and stopped as soon
    # as it trails the best node on the same folds by more than `prune_z` standard deviations of a paired fold
    # difference (measured on the run's improvements against their parents; the best's own fold-to-fold spread
    # until it has three) over the root of the folds scored (agent.engine.fit.FoldGate; bench/fold_spread.py chose
    # it). None: every node on every fold.
    prune_z: float | None = PRUNE_Z
    # With several workers: evaluate one batch of proposals at a time and append it in the order drawn, a journal
    # that repeats for a seed, the steps and the workers, at the price of workers idle while a batch's slowest node
    # runs. False: each worker takes the next proposal as soon as its node is back (agent.search.tree).
    in_order: bool = False

    @property
    def stall_seconds(self) -> float | None:
        """The seconds without progress after which a search stalls (None: by the count of improvements alone)."""
        return self.time_budget * self.stall_share if self.time_budget is not None and self.stall_share else None

    @property
    def node_seconds(self) -> float | None:
        """The most seconds one node may take (None: unbounded)."""
        return self.time_budget * self.node_share if self.time_budget is not None else None

    def large_table(self, rows: int) -> bool:
        return self.large_table_rows is not None and rows > self.large_table_rows

    def folds_for(self, rows: int, cv: int) -> int:
        """The CV's number of folds on a table of `rows` training rows when `cv` were asked for."""
        return min(cv, self.large_table_folds) if self.large_table(rows) else cv


@dataclass(frozen=True)
class SolveSettings:
    # The tree search's policy, steps, time budget and seed.
    search: SearchSettings = field(default_factory=SearchSettings)
    use_kb: bool = False
    # The experience packs in use (the bundled one and those a user added, agent.memory.experience): the portfolio
    # drafts first, retrieved tricks in the order of their measured effect. Off, or with no pack, a run is as without.
    experience: bool = True
    cv: int = 5
    candidate_time_limit: float = DEFAULT_CANDIDATE_TIME_LIMIT
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT
    llm: str | None = None  # an Anthropic model id: the LLM proposer plans each step, the offline one is its fallback
    llm_budget_usd: float | None = None  # no LLM calls once this much is spent (estimated from kb.llm.PRICES)
    # Run the LLM's scripts where the OS offers no isolation (agent.execution.isolation), under the audit hook only.
    allow_unisolated_code: bool = False
    # Where the tree search evaluates its nodes (agent.execution.executors): "local" or "ray" (the cluster at
    # `ray_address`), `workers` at once (default: one per core locally, executors.local_workers; the cluster's CPUs
    # on Ray).
    executor: str = LOCAL
    ray_address: str | None = None
    workers: int | None = None
    # The model families the search drafts, in order (default: agent.search.builtin.DRAFT_FAMILIES), as FLAML's
    # estimator_list narrows its search.
    models: tuple[str, ...] | None = None
    # When the submission averaged CV fold models (no refit fitted in the budget), fit them again after the search
    # and save them in model.pkl (agent.outputs.saved_model); off, the budget is kept and there is no model.pkl.
    save_fold_models: bool = False

    def folds_for(self, rows: int) -> int:
        """The tree search's CV folds on a table of `rows` training rows: `cv`, fewer on a large table."""
        return self.search.folds_for(rows, self.cv)
