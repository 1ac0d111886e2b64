"""The tree search loop, after AIDE's `Agent.step`: the policy picks an action, the proposer proposes, the evaluator
evaluates, the verifier judges, and the journal appends the node (agent.search.journal, agent.search.policy). The
evaluator is handed to the search (as AIDE's agent is handed its interpreter's callback) and known by its protocol,
TreeEvaluator.

`TreeSearch` is one search of one task. `run` evaluates proposals until the steps or the budget (agent.search.clock)
are used up, then finishes (agent.search.final): the final combination of the best nodes, and the final fit of the
best verified node, ranked by its CV score. On a large table each node is explored on a sample first
(agent.search.exploration). With an executor of several workers (agent.execution.executors: one per core locally, or
a Ray cluster) each worker takes the next proposal as soon as its node is back, drawn seeing the running ones as
pending nodes (`with_pending`), so that a slow node never holds a worker idle; the journal then depends on which node
finishes first, as it already does on the time budget. With `in_order` (SearchSettings) the search draws one proposal
per worker, evaluates them together and appends them in the order drawn, so that the journal depends on the seed, the
steps and the number of workers only.
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from agent.candidate import EngineeringRun, SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.fit import FoldGate, paired_spread
from agent.engine.spec import ModelSpec, SolutionSpec, SpecError
from agent.engine.trainers import Trainer, default_steps, trainer_facts
from agent.search.blending import BlendCost, blend_cost, blendable, keep_bar
from agent.search.builtin import describe_score
from agent.search.clock import REFIT_SHARE, BudgetClock
from agent.search.exploration import Exploring, exploring
from agent.search.final import FinalFit, blend_proposal, combinations, engineering_run, final_model, fold_average
from agent.search.fit_time import (
    FIT_SHARE,
    MIN_SAMPLE_ROWS,
    DraftTimes,
    FitTimeModel,
    Sized,
    TableShape,
    change_factor,
    change_seconds,
    expected_trees,
    seed_bag,
    size_change,
    size_draft,
)
from agent.search.journal import DEBUG, DRAFT, FULL, IMPROVE, PENDING, SAMPLE, VALID, Journal, Node, candidate_key
from agent.search.nodes import Evaluated
from agent.search.policy import SearchPolicy, drafted, since_progress
from agent.search.protocols import FREE_CODE, Proposal, TreeEvaluator, TreeProposer
from agent.settings import SolveSettings
from agent.verify.findings import OVER_TIME, Evidence
from agent.verify.verifier import DeterministicVerifier, Verifier
from retrieval.profile import TaskProfile


@dataclass(frozen=True, eq=False)
class SearchResult:
    journal: Journal
    run: EngineeringRun  # the same outcome in the card's terms, read from the journal (agent.search.final)
    trainers: Mapping[str, Trainer]
    final_fit: FinalFit | None = None  # None when nothing was verified (or a script predicted the test set itself)


@dataclass(frozen=True, eq=False)
class Drawn:
    """A proposal drawn for the next node: the action that asked for it and the node it acts on (None: a draft)."""

    proposal: Proposal
    action: str
    parent: Node | None


@dataclass(frozen=True, eq=False)
class Running:
    """A drawn proposal being evaluated: its draw (the search's count of proposals drawn) and when it started,
    in seconds since the search started."""

    drawn: Drawn
    draw: int
    started: float


def with_pending(journal: Journal, drawn: Drawn) -> Journal:
    """The journal as the policy and the proposer see it while a batch is drawn: a copy (sharing the exhausted set)
    with the proposal as a pending node, neither valid nor buggy, so that the batch's later proposals neither repeat
    it nor count its draft twice, and no node is repaired twice at once."""
    proposal, parent = drawn.proposal, drawn.parent
    pending = Node(id=len(journal), parent_id=parent.id if parent is not None else None, action=drawn.action,
                   plan=proposal.plan, candidate=proposal.candidate, spec=None, code=proposal.script or "",
                   status=PENDING, metric=None, score=-math.inf, trick=proposal.trick)
    view = Journal([*journal.nodes, pending])
    view.exhausted = journal.exhausted
    return view


# The best model's seed bag, drawn in the search's last stretch: a GBDT that samples rows or columns (the built-in
# LightGBM and XGBoost do, CatBoost's splits are randomised) fitted with this many seeds, predictions averaged. On
# lending (4,483 rows) the portfolio's CatBoost gained 0.008 AUC of CV from a bag of 3 on either fold seed, at 1.4-2.6
# times its seconds. Every arm may bag its best this way, so an arm whose drafts carry a bag (the experience pack's
# portfolio, a retrieved seed-bagging trick) does not win by that permission alone; bagging the best once, late,
# rather than drafting bags keeps the search's other nodes at one fit each.
FINAL_BAG_SEEDS = 3
# A node tied with the best takes the greedy steps in its place when it cost at most this share of the best's CV
# seconds (a share chosen, not measured: at half the seconds, its changes finish at least twice as often).
TIE_COST_SHARE = 0.5


def _every_fold(node: Node) -> bool:
    """Scored on every row and every fold of the run's CV, its fold scores at hand: a node a gate can pair with."""
    return (node.scored_on == FULL and node.evidence is not None and node.folds > 0
            and len(node.evidence.fold_values) == node.folds)


class TreeSearch:
    """One tree search of one task: run the policy with a proposer, evaluating and verifying each node."""

    def __init__(
        self,
        proposer: TreeProposer,
        evaluator: TreeEvaluator,
        profile: TaskProfile,
        dataset: Dataset,
        settings: SolveSettings | None = None,
        *,
        clock: BudgetClock | None = None,
        journal: Journal | None = None,
        policy: SearchPolicy | None = None,
        verifier: Verifier | None = None,
        on_node: Callable[[Node, Journal], None] | None = None,
        on_best: Callable[[Node, Any], None] | None = None,
        script_dir: Path | None = None,
        fit_times: FitTimeModel | None = None,
    ):
        self.proposer, self.profile, self.dataset = proposer, profile, dataset
        self.settings = settings if settings is not None else SolveSettings()
        search = self.settings.search
        self.clock = clock if clock is not None else BudgetClock.starting(search)  # the budget starts now
        self.journal = journal if journal is not None else Journal()
        self.policy = policy or SearchPolicy(search)  # with fewer drafts once the proposer has no more
        # Its folds are every node's, fewer on a large table (SolveSettings.folds_for; Evaluator.for_solve).
        self.evaluator = evaluator
        self.verifier = verifier if verifier is not None else DeterministicVerifier()
        # How long a draft should take here (None: every draft runs on the rows the search is on, as drafted).
        fit_times = fit_times if fit_times is not None else FitTimeModel.bundled()
        shape = TableShape.of(profile)
        outputs = len(dataset.classes) if dataset.task_type == "multiclass" else 1  # the values predicted per row
        self.draft_times = DraftTimes(fit_times, shape.columns, shape.text, evaluator.validation.n_splits, outputs) \
            if fit_times is not None else None
        self.on_node = on_node
        # Called with each node that becomes the best scored on every row, and its CV fold models' averaged test
        # predictions (a submission that needs no refit), so that the caller can keep a submission on disk.
        self.on_best = on_best
        # Free-code nodes run in script_dir/draw-<n>, renamed node-<id> once appended (a temporary folder if None).
        self.script_dir = script_dir
        self.draws = 0  # proposals drawn so far
        self.rng = random.Random(search.seed)
        self.blending = blendable(dataset.metric, dataset.task_type)
        self.blend_cost: BlendCost | None = None  # measured when run() starts
        self.steps, self.stop_reason = 0, ""  # search steps taken after the drafts, and why the search stopped
        self.passed_over = 0  # verified nodes no longer improved: less time was left than their own CV took
        self.bagged: set[int] = set()  # nodes whose seed bag (`_final_bag`) has been drawn
        self.standing = -math.inf  # the score of the last node handed to on_best
        self.started = time.monotonic()
        self.baseline = math.nan  # the trivial baseline's score, and the large table's exploration: run() starts
        self.explore: Exploring | None = None

    def run(self) -> SearchResult:
        """Evaluate proposals until the search stops and every running node is back, then finish: the final
        combination and the final fit. Each worker takes the next proposal as soon as its node is back (the
        journal then depends on which finishes first, as a time budget already makes it), or, with `in_order`, a
        batch of one proposal per worker is evaluated together and appended in the order drawn."""
        self.started = time.monotonic()
        self.baseline = self.evaluator.baseline(self.dataset)
        if self.blending:
            dataset = self.dataset
            self.blend_cost = blend_cost(dataset.y, dataset.metric, dataset.task_type, dataset.classification)
        self.explore = exploring(self.dataset, self.evaluator, self.verifier, self.clock)
        back = ALL_COMPLETED if self.settings.search.in_order else FIRST_COMPLETED
        running: dict[Future[Evaluated], Running] = {}
        # Each thread waits on its own job's process or Ray task.
        with ThreadPoolExecutor(self.evaluator.executor.workers) as pool:
            while True:
                if not self.stop_reason:
                    self._start(pool, running)
                if not running:
                    break
                # A read that ends while a node runs frees a core for the next draw (_draw's one at a time).
                reading = self.proposer.reading() if back == FIRST_COMPLETED else None
                done, _ = wait([*running, *([reading] if reading is not None else [])], return_when=back)
                for future in sorted((future for future in done if future in running),
                                     key=lambda future: running[future].draw):
                    self._append(future.result(), running.pop(future))
        return self.finish()

    def _start(self, pool: ThreadPoolExecutor, running: dict[Future[Evaluated], Running]) -> None:
        """Draw a proposal for each free worker (the policy picks, the proposer proposes), seeing the running ones
        as pending nodes, and start evaluating it."""
        # No node may run into the time kept back for the final refit and the outputs.
        search_deadline = self.clock.search_deadline(self.journal, len(self.dataset.y), self.blend_cost)
        self.proposer.set_deadline(search_deadline)  # no LLM call may run past it either
        batch = self._draw(search_deadline, [job.drawn for job in running.values()])  # in the order drawn
        self._size_exploration(batch, search_deadline)
        for drawn in batch:
            self.draws += 1
            job = Running(drawn, self.draws, time.monotonic() - self.started)
            running[pool.submit(self._job(drawn, job.draw, search_deadline))] = job

    def finish(self) -> SearchResult:
        """The final combination of the best nodes (each a node of its own), then the best node's final fit."""
        if self.blending:
            proposal = blend_proposal(self.proposer, self.profile, self.journal)
            if proposal is not None:
                for made in combinations(proposal, self.dataset, self.journal, self.evaluator):
                    self._append(made)
        refit, final_fit = final_model(self.evaluator, self.clock, self.dataset, self.journal, self.explore)
        run = engineering_run(self.journal, self.dataset.metric, self.baseline, self.steps, self.stop_reason, refit)
        return SearchResult(self.journal, run, self.evaluator.trainers, final_fit)

    def _draw(self, search_deadline: float, running: list[Drawn]) -> list[Drawn]:
        """One proposal per free worker, all drawn before any is evaluated, each seeing the running ones and the
        earlier ones as pending nodes; fewer (and `stop_reason` said) when the steps, the budget or the proposer's
        ideas run out. Until a node is verified, one at a time: the first verified node is the anytime submission,
        and a node sharing the cores with another takes longer, so on a short budget two at once could both run
        over time. One at a time too while the proposer reads on a thread of its own (the knowledge base's
        embedding model): with a CV on every core beside the read, the first GBDT draft's folds took 1.7-3 times
        their seconds and ran over their caps, and the table factor read from such overruns skips the drafts after
        them (bench/dev_ab.py). The proposer having nothing more while proposals are pending ends the draw, not the
        search: those may yet give nodes to improve or repair."""
        batch: list[Drawn] = []
        view = self.journal
        for drawn in running:
            view = with_pending(view, drawn)
        workers = self.evaluator.executor.workers if self.journal.any_verified and self.proposer.reading() is None \
            else 1
        while len(running) + len(batch) < workers:
            self.stop_reason = self.clock.used_up(self.journal, search_deadline)
            if self.stop_reason:
                break
            drafting = drafted(view) < self.policy.settings.num_drafts
            if not drafting and self.steps >= self.settings.search.steps:
                self.stop_reason = f"reached steps={self.settings.search.steps} after {len(view.draft_nodes)} drafts"
                break
            bag = self._final_bag(search_deadline)
            if bag is not None:
                self.steps += 1
                batch.append(bag)
                view = with_pending(view, bag)
                continue
            now = time.monotonic() - self.started
            action, target = self.policy.next_action(view, self.rng, now, self._cheaper_tie())
            stall_draft = action == DRAFT and not drafting and self.policy.stalled(view, now)
            if action == IMPROVE and target is not None and not self._may_finish(target, search_deadline):
                self.journal.mark_exhausted(target)  # less time is left than it took: none of its changes would finish
                self.passed_over += 1
                continue
            proposal = self._propose(action, target, view)
            if proposal is None and target is not None:  # nothing more to improve or repair there
                self.journal.mark_exhausted(target)
                continue
            if proposal is None:  # no draft left to make
                if drafting:  # fewer drafts than asked for: go on to the search steps
                    self.policy = replace(self.policy,
                                          settings=replace(self.policy.settings, num_drafts=drafted(view)))
                    continue
                if stall_draft:  # none left to interleave either: improve on
                    self.policy = replace(self.policy,
                                          settings=replace(self.policy.settings, stall_improvements=None))
                    continue
                if running or batch:
                    break
                self.stop_reason = ("the proposer has nothing more to try" if not self.passed_over else
                                    f"time budget used up: less is left than each of {self.passed_over} verified "
                                    "nodes took, so no change of theirs would finish, and no draft is left")
                break
            if not drafting:
                self.steps += 1
            if stall_draft:
                progress = since_progress(view, now)
                proposal = replace(proposal, plan=f"{proposal.plan} (after {progress.improvements} improvements in a "
                                                  f"row, {now - progress.since:.0f} s, without a new best)")
            batch.append(Drawn(proposal, action, target))
            view = with_pending(view, batch[-1])
        return batch

    def _final_bag(self, search_deadline: float) -> Drawn | None:
        """The best single model with a seed bag of FINAL_BAG_SEEDS, drawn once per best node in the search's last
        stretch: when what is left before `search_deadline` is at most twice the time the bag and its refit need
        (its seconds estimated from the best's own CV, as `_sized` sizes a change), and still enough for the bag
        within a node's cap. None when the best is not a GBDT whose fit depends on its seed, already holds a bag,
        was scored on the exploration sample only, or the time is not (or no longer) right."""
        best = self.journal.best()
        if self.clock.budget is None or best is None or not best.valid or best.members or best.id in self.bagged:
            return None
        facts = trainer_facts(best.candidate.trainer)
        if facts.family != "gbdt" or not facts.seed_dependent or seed_bag(best.candidate) > 1:
            return None
        candidate = replace(best.candidate, params={**best.candidate.params, "seed_bag": FINAL_BAG_SEEDS})
        needed = change_seconds(best, candidate, best.first_cv_rows)
        if needed is None:
            return None
        needed *= change_factor(self.journal, best, candidate)  # as `_sized` will size it
        now = time.monotonic()
        allowed = self.clock.node_deadline(search_deadline) - now
        if needed > allowed or search_deadline - now > 2 * (1 + REFIT_SHARE) * needed:
            return None
        self.bagged.add(best.id)
        plan = (f"improve node {best.id} ({best.candidate.trainer}, {describe_score(best, self.profile)}): a seed bag "
                f"of {FINAL_BAG_SEEDS}, the best model fitted with {FINAL_BAG_SEEDS} seeds and its predictions "
                f"averaged, in the search's last stretch (about {needed:.1f} s expected from node {best.id}'s CV)")
        return Drawn(Proposal(candidate, plan), IMPROVE, best)

    def _size_exploration(self, batch: list[Drawn], search_deadline: float) -> None:
        """Before any node is verified, drafts that would not fit in FIT_SHARE of their cap on the rows the search
        is on are explored on a sample they fit in (agent.search.exploration), of at least MIN_SAMPLE_ROWS rows:
        a search that verifies nothing leaves only the trivial baseline."""
        times, journal = self.draft_times, self.journal
        if times is None or self.clock.budget is None or journal.any_verified:
            return
        seconds = FIT_SHARE * (self.clock.node_deadline(search_deadline) - time.monotonic())
        fits = [times.rows_within(drawn.proposal.candidate, seconds, journal) for drawn in batch
                if drawn.action == DRAFT and drawn.proposal.script is None]
        fits = [rows for rows in fits if rows is not None]
        rows = self.explore.rows if self.explore is not None else len(self.dataset.y)
        if fits and max(min(fits), MIN_SAMPLE_ROWS) < rows:
            self.explore = exploring(self.dataset, self.evaluator, self.verifier, self.clock,
                                     rows=max(min(fits), MIN_SAMPLE_ROWS))

    def _may_finish(self, node: Node, search_deadline: float) -> bool:
        """Whether a change of the node may finish within a new node's cap: its own CV took no longer than that (a
        change of its parameters or steps costs about as much, more trees more), or the budget is unbounded."""
        if self.clock.budget is None:
            return True
        return node.first_cv_seconds <= self.clock.node_deadline(search_deadline) - time.monotonic()

    def _propose(self, action: str, target: Node | None, journal: Journal) -> Proposal | None:
        if action == DRAFT:
            return self.proposer.draft(self.profile, journal, self.rng)
        if action == IMPROVE:
            return self.proposer.improve(target, self.profile, journal, self.rng)
        return self.proposer.debug(target, self.profile, journal, self.rng)

    def _job(self, drawn: Drawn, draw: int, search_deadline: float) -> Callable[[], Evaluated]:
        """The evaluation of a proposal, settled here from the journal as it stands (its size, its fold gate, the
        rows it is explored on, the trees an improvement should keep) and run on a worker's thread: cross-validated
        within its time cap on every row, or on a large table first on the exploration sample, then on every row
        only when it is promising; a script is run and scored apart."""
        evaluator, proposal, dataset = self.evaluator, drawn.proposal, self.dataset
        if proposal.script is not None:
            if self.script_dir is None:
                self.script_dir = Path(tempfile.mkdtemp(prefix="casebook-free-code-"))
            return partial(self._evaluate_script, drawn, self.script_dir / f"draw-{draw}",
                           self.clock.node_deadline(search_deadline))
        candidate = proposal.candidate
        if candidate.steps is None and candidate.trainer in evaluator.trainers:  # nodes record their full pipeline
            candidate = replace(candidate, steps=tuple(default_steps(evaluator.trainers[candidate.trainer])))
        candidate = replace(candidate, rationale=proposal.plan)
        sized = self._sized(drawn, candidate, search_deadline)
        if isinstance(sized, Evaluated):
            return lambda: sized
        proposed = candidate if sized is not candidate else None
        explore, gate = self.explore, self._gate(drawn.action)
        keep_above = keep_bar(self.journal, sized.trainer)
        rows = explore.rows if explore is not None else len(dataset.y)
        trees = expected_trees(drawn.parent, sized, rows) if drawn.action == IMPROVE and drawn.parent else None

        def evaluate() -> Evaluated:
            if explore is None:
                deadline = self.clock.run_deadline(search_deadline, first=not self.journal.any_verified)
                spec, evidence = evaluator.evaluate_candidate(sized, dataset, deadline, predict_test=True, gate=gate,
                                                              keep_above=keep_above, expected_trees=trees)
                exploration, scored_on = None, FULL
            else:  # promotion compares it with the journal as it stands when its sample CV is done
                spec, evidence, exploration = explore.evaluate(sized, self.journal, search_deadline, trees)
                scored_on = FULL if exploration.promoted else SAMPLE
            return Evaluated(drawn.action, drawn.parent, sized, proposal.trick, spec, evidence,
                             evaluator.pipeline_code(spec, dataset), scored_on, exploration, proposed=proposed)

        return evaluate

    def _sized(self, drawn: Drawn, candidate: SolutionCandidate, search_deadline: float
               ) -> SolutionCandidate | Evaluated:
        """The candidate to run within its cap, or a node over time that never ran (Node.skipped). A draft expected
        to take more than FIT_SHARE of its cap on the rows it would be scored on (agent.search.fit_time's model) runs
        with a smaller seed bag, at a faster learning rate or with fewer trees, or is skipped
        (fit_time.DraftTimes.size), once a node is verified:
        before, every draft runs (on the sample `_size_exploration` chose), so that a model wrong about this table
        cannot leave the search with nothing but the trivial baseline. An improvement is sized from its parent's own
        CV (fit_time.size_change): run as proposed, at a higher learning rate, or skipped. Anything the estimates
        cannot tell runs as proposed."""
        if self.clock.budget is None or drawn.action == DEBUG:
            return candidate
        rows = self.explore.rows if self.explore is not None else len(self.dataset.y)
        allowed = self.clock.node_deadline(search_deadline) - time.monotonic()
        if drawn.action == IMPROVE and drawn.parent is not None:
            sized = size_change(drawn.parent, candidate, rows, allowed,
                                change_factor(self.journal, drawn.parent, candidate), drawn.proposal.rate_may_rise)
        else:
            sized = self._draft_size(candidate, rows, allowed)
        if sized is None or sized.candidate is candidate:
            return candidate
        if sized.candidate is not None:
            return replace(sized.candidate, rationale=f"{candidate.rationale} ({sized.note})")
        return self._over_time(drawn, candidate, rows, sized.note)

    def _draft_size(self, candidate: SolutionCandidate, rows: int, allowed: float) -> Sized | None:
        """A draft sized by the fit-time model once a node is verified; one drafted again after it ran over its cap
        (builtin.may_draft) always: by the model, or, for a family it does not know (XGBoost, extra trees), from
        the overrun's own seconds (a lower bound, or its folds' projection), scaled by the rows. One that ran over
        as the search had sized it is sized again from what it ran: the model's estimate was already short of it
        there, and the first resize is part of the speed-up (flight_delay's L1 LightGBM ran over at 1.8 times its
        proposed rate, and fits at 5.5 times)."""
        trainers = self.evaluator.trainers
        overrun = next((node for node in self.journal.tries(candidate_key(candidate, trainers), trainers)
                        if node.status == OVER_TIME), None)
        if overrun is not None and overrun.proposed is not None:
            expected = overrun.first_cv_seconds * rows / max(overrun.first_cv_rows, 1)
            sized = size_draft(overrun.candidate, expected, allowed, f"from node {overrun.id}'s overrun",
                               as_run=f"as node {overrun.id} ran")
            if sized.candidate is overrun.candidate:  # nothing left to cut: it would run over again
                return Sized(None, f"over time before it ran: it ran over its cap at this size as node {overrun.id}, "
                                   f"and nothing is left to cut")
            return sized
        sized = None
        if self.draft_times is not None and (self.journal.any_verified or overrun is not None):
            sized = self._promotable(candidate, rows, allowed) or self.draft_times.size(candidate, rows, allowed,
                                                                                        self.journal)
        if sized is None and overrun is not None:
            expected = overrun.first_cv_seconds * rows / max(overrun.first_cv_rows, 1)
            return size_draft(candidate, expected, allowed, f"from node {overrun.id}'s overrun")
        return sized

    def _promotable(self, candidate: SolutionCandidate, rows: int, allowed: float) -> Sized | None:
        """On a table explored on a sample of `rows`, a draft sized for its CV on every row (as its promotion is
        capped), which alone can be chosen over a node scored on every row; None when that sizing would skip it (it
        is then sized for the sample). On cps_earnings (46k rows) the pack's L1 LightGBM, a seed bag of 3 at a rate
        of 0.025, was the best node on the 20k-row sample as a draft and in two changes, and was never promoted: its
        CV on every row was estimated at twice its cap."""
        if self.explore is None or self.draft_times is None or rows >= self.explore.full_rows:
            return None
        sized = self.draft_times.size(candidate, self.explore.full_rows, allowed, self.journal)
        if sized is None or sized.candidate is None:
            return None
        return replace(sized, note=f"{sized.note} (for its CV on every row)") if sized.note else sized

    def _over_time(self, drawn: Drawn, candidate: SolutionCandidate, rows: int, why: str) -> SolutionCandidate | Evaluated:
        """A node over time that never ran, `why` its error; the candidate itself when it cannot be built (the
        evaluator then reports why as the node's error)."""
        try:
            spec = self.evaluator.spec_of(candidate)
        except SpecError:
            return candidate
        evidence = Evidence(OVER_TIME, error=why, ignored_files=self.dataset.ignored_files, rows=rows, elapsed=0.0)
        return Evaluated(drawn.action, drawn.parent, candidate, drawn.proposal.trick, spec, evidence,
                         self.evaluator.pipeline_code(spec, self.dataset), SAMPLE if self.explore is not None else FULL)

    def _cheaper_tie(self) -> Node | None:
        """The node a greedy step improves in the best's place: the cheapest one verified on every fold that took
        at most TIE_COST_SHARE of the best's CV seconds and is tied with it, its mean paired fold difference within
        one standard error of the fold gate's spread (the gate's rule at z = 1). Which of two tied nodes is better
        is the folds' noise, and the cheaper one's changes finish several times over in the time of one of the
        best's (police_force, 120 s: a 22 s CatBoost best by 0.0002 accuracy over a 4.5 s LightGBM took every
        greedy step). None (the best) when no node is so, and where no improvement would be gated (before the best
        has fold scores, or with prune_z None)."""
        best, gate = self.journal.best(), self._gate(IMPROVE)
        if best is None or gate is None:
            return None
        sign = 1.0 if self.dataset.metric_info.greater_is_better else -1.0
        tied = [node for node in self.journal.valid_nodes
                if node is not best and not node.members and node.id not in self.journal.exhausted and _every_fold(node)
                and node.first_cv_rows == best.first_cv_rows
                and 0 < node.first_cv_seconds <= TIE_COST_SHARE * best.first_cv_seconds
                and gate.allows([sign * value for value in node.evidence.fold_values], z=1.0)]
        return min(tied, key=lambda node: (node.first_cv_seconds, node.id), default=None)

    def _gate(self, action: str) -> FoldGate | None:
        """Multi-fidelity CV: the bar an improvement must keep up with fold by fold, the best node's own folds, and
        the spread of paired fold differences this run's improvements measured against their parents. None for
        drafts and repairs (a model family's first score starts a branch the search may improve), before a node is
        verified, and with prune_z None."""
        best, z = self.journal.best(), self.settings.search.prune_z
        if action != IMPROVE or best is None or z is None or not _every_fold(best):
            return None
        pairs = [(node.evidence.fold_values, parent.evidence.fold_values) for node in self.journal
                 if node.action == IMPROVE and node.valid and not node.members and _every_fold(node)
                 and (parent := self.journal.parent(node)) is not None and _every_fold(parent)]
        sign = 1.0 if self.dataset.metric_info.greater_is_better else -1.0
        return FoldGate(tuple(sign * value for value in best.evidence.fold_values),
                        self.dataset.metric_info.greater_is_better, z, paired_spread(pairs))

    def _evaluate_script(self, drawn: Drawn, folder: Path, deadline: float) -> Evaluated:
        """A free-code node: the script run confined in `folder` and scored by the engine on the same folds."""
        proposal = drawn.proposal
        evidence, _ = self.evaluator.evaluate_script(proposal.script, self.dataset, folder, deadline)
        candidate = SolutionCandidate(FREE_CODE, {}, proposal.plan, ())
        spec = SolutionSpec((), ModelSpec(FREE_CODE), None, self.evaluator.validation)
        return Evaluated(drawn.action, drawn.parent, candidate, proposal.trick, spec, evidence, proposal.script)

    def _append(self, made: Evaluated, running: Running | None = None) -> Node:
        """Verify an evaluated proposal (against the trivial baseline on the rows it was scored on) and append its
        node; the proposer observes it, on_node hears of it, and on_best of a new best scored on every row.
        `running`: the proposal's draw, when it was drawn in the search (not a final combination)."""
        explore = self.explore
        baseline = explore.baseline if made.scored_on == SAMPLE and explore is not None else self.baseline
        verdict = self.verifier.verify(made.evidence, baseline, self.dataset.metric_info)
        started = running.started if running is not None else time.monotonic() - self.started - made.evidence.elapsed
        node = self.journal.append(made.node(len(self.journal), verdict, started,
                                             self.policy.settings.max_debug_depth, len(self.dataset.y)))
        folder = self.script_dir / f"draw-{running.draw}" if running is not None and self.script_dir else None
        if folder is not None and folder.is_dir():
            folder.rename(folder.with_name(f"node-{node.id}"))
        self.proposer.observe(node)
        if self.on_node is not None:
            self.on_node(node, self.journal)
        if self.on_best is not None and node.status == VALID and node.score > self.standing:
            prediction = fold_average(node.spec,
                                      [getattr(self.journal[i].evidence, "test_prediction", None)
                                       for i in node.members or (node.id,)],
                                      self.dataset.classification)
            if prediction is not None:
                self.standing = node.score
                self.on_best(node, prediction)
        return node

