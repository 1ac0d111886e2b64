"""The tree search loop: ask the policy for an action, the proposer for a proposal, the evaluator for evidence and
the verifier for a verdict, and append the node to the journal (agent.search.journal, agent.search.policy).

`TreeSearch.run` evaluates each proposal with agent.evaluator (a sandboxed cross-validation plus leakage
inspection), ends with the final combination step, and refits the best verified node. Only verified nodes can
be the best, ranked by their CV score. With an executor of several workers (agent.execution.executors, e.g. a Ray
cluster) it draws that many proposals at a time, the later ones seeing the earlier ones as pending nodes
(`with_pending`), evaluates them together and appends them in the order drawn, so the journal depends on the seed,
the steps and the number of workers, never on which node finishes first.

The time budget is kept, the refit and the outputs included. Each node's time cap is what is left before the
time kept back for the refit (a measured estimate: each fold's fit seconds, scaled to every row) and for writing
the outputs, and at most `node_share` of the budget; a node stopped at its cap is OVER_TIME, never debugged. On a
table above `explore_rows` rows a node is first cross-validated on a sample of that many rows, and only one that
beats its model family's best on the sample is cross-validated on every row (its `scored_on` says which), so only
scores on every row are compared. The submission is the refit on every row when the estimate fits in what is
left, else the CV fold models' test predictions averaged (computed with every CV on every row, so it costs no
fitting: the cheapest sound fall-back, and what the CV scored); a best scored on the sample only has none, and is
refit on as many rows as fit. A table above `large_table_rows` rows is cross-validated on fewer folds, and keeps
no time back for a refit the fold models' average can stand in for (SearchSettings.large_table).

The final combination is the engine's, with or without knowledge: when the metric can be blended
(agent.search.blending.blendable) and at least two verified nodes exist, the search combines the nodes
`blend_candidates` picks (each family's best, then the best of the rest) every way the metric allows: a greedy
weighted average, a linear stack, a rank average. A proposer that names a retrieved ensembling trick
(`TreeProposer.blend_trick`) only has the trick named in the plan.
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from agent.candidate import AppliedTrick, AttemptRecord, EngineeringRun, SolutionCandidate
from agent.engine import runtime
from agent.engine.compile import ENSEMBLE, NotRenderableError, ensemble_spec, render_model
from agent.engine.dataset import Dataset
from agent.engine.spec import ModelSpec, SolutionSpec, SpecError, ValidationSpec
from agent.engine.steps import StepOp
from agent.engine.trainers import Trainer, default_steps
from agent.evaluator import DEFAULT_CANDIDATE_TIME_LIMIT, Evaluator, Refit
from agent.evaluator import sample as sample_rows
from agent.execution.executors import Executor
from agent.execution.sandbox import DEFAULT_MEMORY_LIMIT, error_tail
from agent.search.blending import AVERAGE, RANK_AVERAGE, STACK, Blend, blend_candidates, blendable, blends
from agent.search.journal import (
    BUGGY,
    DEAD,
    DEBUG,
    DRAFT,
    EXPLORED,
    FULL,
    IMPROVE,
    OVER_TIME,
    SAMPLE,
    VALID,
    Exploration,
    Journal,
    Node,
)
from agent.search.policy import SearchPolicy, SearchSettings
from agent.search.protocols import FREE_CODE, BlendProposal, Proposal, TreeProposer
from agent.verify.findings import Evidence
from agent.verify.verifier import DeterministicVerifier, Verifier
from retrieval.profile import TaskProfile

PENDING = "pending"  # the status of a proposal drawn but not yet evaluated (`with_pending`), never in a run's journal
TYPICAL_BLEND_SIZE = 4  # members greedy selection keeps, as a rule, from the best verified nodes
REFIT_SHARE = 0.35  # one fit on all rows, as a share of a 5-fold CV's seconds, when the folds' fits were not timed
# A refit's estimate: each model's mean fold fit scaled to every row, times this margin, plus once the seconds of
# starting the refit's process and sending it the data (a blend's members are refit in one process). Measured on 24
# runs of the ablation bench (120 s, 10 tables), refits took 0.2-0.4 of the estimate at a margin of 1.5 with the
# start-up counted per member, and the search stopped with 12-28 s of the budget unused: the folds' fits include
# early stopping's patience rounds and validation scoring, which a refit at the stopped rounds does not repeat.
REFIT_MARGIN, REFIT_OVERHEAD = 1.0, 2.0
REFIT_MAX_SHARE = 0.25  # the most of the budget kept back for the refit; beyond it, the fold models' average is kept
# Seconds for what follows the search: submission.csv, solution.py, run.json and report.html (its matplotlib
# figures), measured at about 1-2 s.
OUTPUT_SECONDS = 3.0
# A node's CV on every row is estimated from its sample CV: fit seconds scaled by the rows, with this margin for
# trees' worse than linear cost in the rows.
PROMOTION_MARGIN = 1.25
# Greedy blend selection scores the metric hundreds of times: on a larger table it chooses the weights on this many
# rows (150,000 rows and 8 members took 33 s on two busy cores), and the time kept back holds BLEND_SECONDS for it
# (less on fewer rows).
BLEND_ROWS, BLEND_SECONDS = 20_000, 5.0
REFIT, FOLD_AVERAGE, SAMPLE_REFIT = "refit on every row", "CV fold models averaged", "refit on a sample of the rows"


# ---------------------------------------------------------------------------------------------- the search


@dataclass(frozen=True)
class FinalFit:
    """How the submission's predictions were made: `how` is REFIT, FOLD_AVERAGE or SAMPLE_REFIT, with the refit's
    estimate and its seconds (0 when nothing was fitted), the trees each early-stopping model kept and why."""

    how: str
    estimate: float
    seconds: float
    rounds: Mapping[str, float]
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"how": self.how, "estimate_seconds": round(self.estimate, 1), "seconds": round(self.seconds, 1),
                "rounds": dict(self.rounds), "why": self.why}


@dataclass(frozen=True, eq=False)
class SearchResult:
    journal: Journal
    run: EngineeringRun  # the same outcome in the seed loop's terms: attempts, best, refit model
    attempts: tuple[AttemptRecord, ...]
    trainers: Mapping[str, Trainer]
    final_fit: FinalFit | None = None  # None when nothing was verified (or a script predicted the test set itself)


@dataclass(frozen=True, eq=False)
class Exploring:
    """A large table's exploration sample (evaluator.sample), and its trivial baseline's score."""

    dataset: Dataset
    baseline: float
    full_rows: int

    @property
    def rows(self) -> int:
        return len(self.dataset.y)


@dataclass(frozen=True, eq=False)
class Evaluated:
    """A proposal once evaluated, before it is verified and appended as a node."""

    candidate: SolutionCandidate  # with its full pipeline, and the plan as its rationale
    trick: AppliedTrick | None
    spec: SolutionSpec
    evidence: Evidence
    code: str | None = None  # a free-code node's script (None: the code is rendered from the spec)
    scored_on: str = FULL  # the data `evidence` comes from: FULL (every training row) or SAMPLE
    exploration: Exploration | None = None  # its score on the exploration sample, when it was explored first


def with_pending(journal: Journal, proposal: Proposal, action: str, parent: Node | None) -> Journal:
    """The journal as the policy and the proposer see it while a batch is drawn: a copy (sharing the exhausted set)
    with the proposal as a pending node, neither valid nor buggy, so that the batch's later proposals neither repeat
    it nor count its draft twice, and no node is repaired twice at once."""
    pending = Node(id=len(journal), parent_id=parent.id if parent is not None else None, action=action,
                   plan=proposal.plan, candidate=proposal.candidate, spec={}, code=proposal.script or "",
                   status=PENDING, metric=None, score=-math.inf, trick=proposal.trick)
    view = Journal([*journal.nodes, pending])
    view.exhausted = journal.exhausted
    return view


class TreeSearch:
    """Run the policy with a proposer, evaluating each node like the seed loop does."""

    def __init__(
        self,
        proposer: TreeProposer,
        settings: SearchSettings | None = None,
        *,
        policy: SearchPolicy | None = None,
        verifier: Verifier | None = None,
        cv: int = 5,
        trainers: Mapping[str, Trainer] | None = None,
        step_ops: Mapping[str, StepOp] | None = None,
        candidate_time_limit: float = DEFAULT_CANDIDATE_TIME_LIMIT,
        memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
        on_node: Callable[[Node, AttemptRecord], None] | None = None,
        on_best: Callable[[Node, Any], None] | None = None,
        script_dir: Path | None = None,
        executor: Executor | None = None,
    ):
        self.proposer = proposer
        self.settings = settings or SearchSettings()
        self.policy = policy or SearchPolicy(self.settings)
        self.cv = cv  # asked for; a large table's CV may have fewer folds (SearchSettings.folds_for)
        self.evaluator = Evaluator(cv, self.settings.seed, trainers, step_ops,
                                   candidate_time_limit=candidate_time_limit, memory_limit=memory_limit,
                                   executor=executor)
        self.verifier = verifier if verifier is not None else DeterministicVerifier()
        self.on_node = on_node
        # Called with each node that becomes the best scored on every row, and its CV fold models' averaged test
        # predictions (a submission that needs no refit), so that the caller can keep a submission on disk.
        self.on_best = on_best
        self.script_dir = script_dir  # free-code nodes run in script_dir/node-<id> (a temporary folder if None)
        self.script_runs: dict[int, Any] = {}  # free-code node id -> its agent.execution.free_code.ScriptRun

    @property
    def trainers(self) -> Mapping[str, Trainer]:
        return self.evaluator.trainers

    def run(self, profile: TaskProfile, dataset: Dataset, journal: Journal | None = None) -> SearchResult:
        evaluator, settings = self.evaluator, self.settings
        started = time.monotonic()
        deadline = started + settings.time_budget if settings.time_budget is not None else math.inf
        rng = random.Random(settings.seed)
        evaluator.cv = settings.folds_for(len(dataset.y), self.cv)  # every node's spec records its folds
        validation = evaluator.validation
        baseline_score = evaluator.baseline(dataset)
        blending = blendable(dataset.metric, dataset.task_type)
        explore = self._exploring(dataset)

        journal = journal if journal is not None else Journal()
        attempts: list[AttemptRecord] = []
        predictions: dict[int, Any] = {}  # node id -> out-of-fold predictions, for blending
        evidence_of: dict[int, Evidence] = {}  # verified node id -> its evidence: refit estimates, test predictions
        stop_reason, search_steps = "", 0
        policy = self.policy
        standing = [-math.inf]  # the score of the last node handed to on_best

        def record(node: Node, attempt: AttemptRecord) -> None:
            attempts.append(attempt)
            self.proposer.observe(node)
            # Free code is not blended: a blend is refit from its members' specs, and a script has none.
            if node.valid and attempt.evidence.predictions is not None and node.id not in self.script_runs:
                predictions[node.id] = attempt.evidence.predictions
            if node.verified:
                evidence_of[node.id] = attempt.evidence
            if self.on_node is not None:
                self.on_node(node, attempt)
            if self.on_best is not None and node.status == VALID and node.score > standing[0]:
                prediction = fold_average(SolutionSpec.from_dict(node.spec),
                                          [getattr(evidence_of.get(i), "test_prediction", None)
                                           for i in node.members or (node.id,)],
                                          dataset.classification)
                if prediction is not None:
                    standing[0] = node.score
                    self.on_best(node, prediction)

        workers = self.evaluator.executor.workers
        while not stop_reason:
            # No node may run into the time kept back for the final refit and the outputs.
            search_deadline = deadline - self.refit_reserve(journal, blending, evidence_of, len(dataset.y))
            self.proposer.set_deadline(search_deadline)  # no LLM call may run past it either
            # One proposal per worker, all drawn before any is evaluated, each seeing the earlier ones as pending
            # nodes (`view`); they are evaluated together and appended in this order, whichever finishes first.
            batch: list[tuple[Proposal, str, Node | None]] = []
            view = journal
            # A node started with less time left than the fastest verified node took would only run over time.
            fastest = fastest_node_seconds(journal)
            while len(batch) < workers:
                if time.monotonic() + fastest >= search_deadline:
                    stop_reason = (f"time budget used up: less is left than the fastest node took ({fastest:.1f} s), "
                                   "and the rest is kept for the final refit and the outputs")
                    break
                drafting = len(view.draft_nodes) < policy.settings.num_drafts
                if not drafting and search_steps >= settings.steps:
                    stop_reason = f"reached steps={settings.steps} after {len(view.draft_nodes)} drafts"
                    break
                action, target = policy.next_action(view, rng)
                proposal = self._propose(action, target, profile, view, rng)
                if proposal is None and target is not None:  # nothing more to improve or repair there
                    journal.mark_exhausted(target)
                    continue
                if proposal is None:  # no draft left to make
                    if drafting:  # fewer drafts than asked for: go on to the search steps
                        policy = replace(policy, settings=replace(policy.settings, num_drafts=len(view.draft_nodes)))
                        continue
                    stop_reason = "the proposer has nothing more to try"
                    break
                if not drafting:
                    search_steps += 1
                batch.append((proposal, action, target))
                if len(batch) < workers:
                    view = with_pending(view, proposal, action, target)
            for (_, action, target), evaluated in zip(
                    batch, self._evaluate_batch(batch, len(journal), dataset, validation, search_deadline, explore,
                                                journal)):
                sampled = evaluated.scored_on == SAMPLE
                record(*self._add_node(evaluated.candidate, evaluated.trick, evaluated.spec, evaluated.evidence,
                                       action, target, dataset, journal,
                                       explore.baseline if sampled and explore else baseline_score, started,
                                       self._best_attempt(attempts), code=evaluated.code,
                                       scored_on=evaluated.scored_on, exploration=evaluated.exploration))

        if blending:
            proposal = self._blend_proposal(profile, journal)
            if proposal is not None:
                for combination in self._blends(proposal, dataset, journal, predictions, validation):
                    record(*self._add_blend(combination, proposal, dataset, journal, validation, baseline_score,
                                            started, self._best_attempt(attempts)))

        run = EngineeringRun(attempts=tuple(attempts), best_candidate=None, best_score=-math.inf, model=None,
                             metric=dataset.metric, baseline_score=baseline_score, rounds=search_steps,
                             stop_reason=stop_reason)
        best = journal.best()
        if best is not None and best.id in self.script_runs:  # a script predicted the test set itself: no refit
            script_run = self.script_runs[best.id]
            run = replace(run, best_candidate=best.candidate, best_score=best.score,
                          best_spec=SolutionSpec.from_dict(best.spec), test_prediction=script_run.test_prediction,
                          refit_error="" if script_run.test_prediction is not None else "the script wrote no test "
                                                                                        "predictions")
        final_fit = None
        if best is not None and best.id not in self.script_runs:
            spec = SolutionSpec.from_dict(best.spec)
            refit, final_fit = self._final_fit(best, spec, dataset, journal, evidence_of, deadline, explore)
            run = replace(run, best_candidate=best.candidate, best_score=best.score, best_spec=spec, model=refit.model,
                          test_prediction=refit.test_prediction, refit_error=refit.error)
        return SearchResult(journal, run, tuple(attempts), evaluator.trainers, final_fit)

    def refit_reserve(self, journal: Journal, blending: bool, evidence_of: Mapping[int, Evidence], rows: int) -> float:
        """Seconds kept back for what follows the search: refitting the final solution on every row (a blend refits
        each of its members, typically a few of the best nodes), estimated from their folds' fit seconds and at
        most REFIT_MAX_SHARE of the budget (beyond that the fold models' average is the submission), and writing
        the outputs. On a large table (SearchSettings.large_table) only a best scored on the sample only, which
        has no fold models' predictions, is budgeted: the others' fold models' average is the submission unless
        time is left for the refit."""
        best = journal.best()  # an explored node, when it beats the valid ones on the sample
        if self.settings.large_table(rows):
            refit = [best] if best is not None and not best.valid else []
        else:
            ranked = sorted(journal.valid_nodes, key=lambda node: node.score, reverse=True)
            refit = ranked[:TYPICAL_BLEND_SIZE] if blending else ranked[:1]
            if best is not None and best not in refit:
                refit.append(best)
        estimate = refit_estimate([evidence_of.get(node.id) or Evidence("ok", elapsed=node.elapsed) for node in refit],
                                  rows) if refit else 0.0
        budget = self.settings.time_budget
        kept = min(estimate, REFIT_MAX_SHARE * budget) if budget is not None else estimate
        blend = BLEND_SECONDS * min(1.0, rows / BLEND_ROWS) if blending and len(journal.valid_nodes) >= 2 else 0.0
        return kept + OUTPUT_SECONDS + blend

    def _exploring(self, dataset: Dataset) -> Exploring | None:
        """The exploration sample of a table above `explore_rows` training rows; None for a smaller one."""
        rows = self.settings.explore_rows
        if rows is None or len(dataset.y) <= rows:
            return None
        validation = self.evaluator.validation
        explored = sample_rows(dataset, rows, validation.n_splits, validation.seed)
        return Exploring(explored, self.evaluator.baseline(explored), len(dataset.y))

    def _node_deadline(self, deadline: float, share: float) -> float:
        """When a node must stop: after at most `share` of the budget, and early enough before `deadline` (the
        search's) that its own refit, which the time kept back grows by once it is verified (REFIT_SHARE of its
        CV), fits too."""
        budget, now = self.settings.time_budget, time.monotonic()
        if budget is None:
            return deadline
        return min(now + (deadline - now) / (1 + REFIT_SHARE), now + share * budget)

    def _final_fit(self, best: Node, spec: SolutionSpec, dataset: Dataset, journal: Journal,
                   evidence_of: Mapping[int, Evidence], deadline: float,
                   explore: Exploring | None) -> tuple[Refit, FinalFit]:
        """The submission's model and predictions: the refit on every row when its estimate fits in what is left
        before the outputs; else (or when it fails) the CV fold models' test predictions averaged; for a best node
        scored on the sample only, which has none, a refit on as many rows as the time left allows (FLAML's
        retraining within the budget, with the rows as the resource), at least the exploration sample's."""
        members = best.members or (best.id,)
        # A journal the search was handed may hold nodes evaluated elsewhere: their evidence is only their time.
        evidence = [evidence_of.get(i) or Evidence("ok", elapsed=journal[i].elapsed) for i in members]
        estimate = refit_estimate(evidence, len(dataset.y))
        rounds = {f"model/m{k}/{path}" if best.members else path: value
                  for k, item in enumerate(evidence) for path, value in item.stopped_rounds.items()}
        averaged = fold_average(spec, [item.test_prediction for item in evidence], dataset.classification)
        left = deadline - OUTPUT_SECONDS - time.monotonic()
        why = f"the refit's estimate, {estimate:.0f} s, fits in the {max(left, 0):.0f} s left"
        if estimate > left and averaged is not None:
            why = f"the refit's estimate, {estimate:.0f} s, is more than the {max(left, 0):.0f} s left"
            return Refit(None, averaged), FinalFit(FOLD_AVERAGE, estimate, 0.0, rounds, why)
        if estimate > left and explore is not None and len(evidence) == 1:  # scored on the sample only
            rows = min(max(rows_within(evidence[0], left), explore.rows), len(dataset.y))
            validation = self.evaluator.validation
            rows_drawn = replace(sample_rows(dataset, rows, validation.n_splits, validation.seed),
                                 X_test=dataset.X_test, test_ids=dataset.test_ids)
            small = self.evaluator.fit_all_rows(spec, rows_drawn, max(left, refit_estimate(evidence[:1], rows)), rounds)
            return small, FinalFit(SAMPLE_REFIT, estimate, small.seconds, rounds,
                                   f"the refit's estimate on every row, {estimate:.0f} s, is more than the "
                                   f"{max(left, 0):.0f} s left: refit on {len(rows_drawn.y):,} of them")
        refit = self.evaluator.fit_all_rows(spec, dataset, max(left, estimate if averaged is None else 0.0), rounds)
        if refit.test_prediction is not None or dataset.X_test is None:
            return refit, FinalFit(REFIT, estimate, refit.seconds, rounds, why)
        if averaged is not None:
            return Refit(None, averaged, refit.error, refit.seconds), FinalFit(
                FOLD_AVERAGE, estimate, refit.seconds, rounds, f"the refit failed ({error_tail(refit.error, 1)})")
        if explore is not None:  # scored on the sample only: no fold models predicted the test set
            small = self.evaluator.fit_all_rows(spec, replace(explore.dataset, X_test=dataset.X_test),
                                                max(deadline - time.monotonic(), refit_estimate(evidence[:1], explore.rows)),
                                                rounds)
            return small, FinalFit(SAMPLE_REFIT, estimate, refit.seconds + small.seconds, rounds,
                                   f"the refit on every row failed ({error_tail(refit.error, 1)})")
        return refit, FinalFit(REFIT, estimate, refit.seconds, rounds, f"it failed ({error_tail(refit.error, 1)})")

    @staticmethod
    def _best_attempt(attempts: Sequence[AttemptRecord]) -> AttemptRecord | None:
        return next((attempt for attempt in reversed(attempts) if attempt.improved), None)

    def _propose(self, action: str, target: Node | None, profile: TaskProfile, journal: Journal,
                 rng: random.Random) -> Proposal | None:
        if action == DRAFT:
            return self.proposer.draft(profile, journal, rng)
        if action == IMPROVE:
            return self.proposer.improve(target, profile, journal, rng)
        return self.proposer.debug(target, profile, journal, rng)

    def _evaluate_batch(self, batch: Sequence[tuple[Proposal, str, Node | None]], first_id: int, dataset: Dataset,
                        validation: ValidationSpec, deadline: float, explore: Exploring | None,
                        journal: Journal) -> list[Evaluated]:
        """Each proposal's evaluation, in the batch's order; several at once on the executor's workers."""

        def evaluate(index: int) -> Evaluated:
            return self._evaluate(batch[index][0], first_id + index, dataset, validation, deadline, explore, journal)

        if len(batch) < 2:
            return [evaluate(index) for index in range(len(batch))]
        with ThreadPoolExecutor(len(batch)) as pool:  # each thread waits on its own job's process or Ray task
            return list(pool.map(evaluate, range(len(batch))))

    def _evaluate(self, proposal: Proposal, node_id: int, dataset: Dataset, validation: ValidationSpec,
                  deadline: float, explore: Exploring | None, journal: Journal) -> Evaluated:
        """The proposal cross-validated within its time cap (`deadline` is the search's): on every row, or on a
        large table first on the exploration sample, then on every row only when it is promising (_promotion)."""
        evaluator, share = self.evaluator, self.settings.node_share
        candidate = proposal.candidate
        if proposal.script is not None:
            return self._evaluate_script(proposal, node_id, dataset, validation, self._node_deadline(deadline, share))
        if candidate.steps is None and candidate.trainer in evaluator.trainers:  # nodes record their full pipeline
            candidate = replace(candidate, steps=tuple(default_steps(evaluator.trainers[candidate.trainer])))
        candidate = replace(candidate, rationale=proposal.plan)
        if explore is None:
            spec, evidence = evaluator.evaluate_candidate(candidate, dataset, self._node_deadline(deadline, share),
                                                          predict_test=True)
            return Evaluated(candidate, proposal.trick, spec, evidence)
        spec, explored = evaluator.evaluate_candidate(candidate, explore.dataset, self._node_deadline(deadline, share))
        verdict = self.verifier.verify(explored, explore.baseline, dataset.metric_info)
        metric = explored.metric_value if math.isfinite(explored.metric_value) else None
        exploration = Exploration(explore.rows, metric, verdict.score, explored.elapsed, False,
                                  "" if verdict.valid else "failed on the sample")
        if not verdict.valid:
            return Evaluated(candidate, proposal.trick, spec, explored, scored_on=SAMPLE, exploration=exploration)
        # A promising node's CV on every row may take twice a node's share (those are the scores that choose the
        # best), less the refit on every row it would need, estimated from the sample's fits (none on a large table,
        # where its fold models' average stands in). It is promoted only when its estimate fits in one share: the
        # other half absorbs the estimate's errors, so that a CV on every row seldom runs over time for nothing.
        cap = self._node_deadline(deadline, 2 * share)
        if not self.settings.large_table(explore.full_rows):
            cap = min(cap, deadline - refit_estimate([explored], explore.full_rows))
        note = self._promotion(candidate, verdict.score, explored, explore, journal,
                               min(cap, self._node_deadline(deadline, share)))
        if note.startswith("not promoted"):
            return Evaluated(candidate, proposal.trick, spec, explored, scored_on=SAMPLE,
                             exploration=replace(exploration, note=note))
        evidence = evaluator.evaluate(spec, dataset, cap, predict_test=True)
        if evidence.status == OVER_TIME:  # it keeps its score on the sample
            note = f"{note}; its CV on every row was over time ({error_tail(evidence.error, 1)})"
            return Evaluated(candidate, proposal.trick, spec, replace(explored, elapsed=explored.elapsed + evidence.elapsed),
                             scored_on=SAMPLE, exploration=replace(exploration, note=note))
        return Evaluated(candidate, proposal.trick, spec, replace(evidence, elapsed=explored.elapsed + evidence.elapsed),
                         exploration=replace(exploration, promoted=True, note=note))

    def _promotion(self, candidate: SolutionCandidate, score: float, explored: Evidence, explore: Exploring,
                   journal: Journal, cap: float) -> str:
        """Whether a node verified on the exploration sample is cross-validated on every row, in words (starting
        "not promoted" when it is not): it must beat the best sample score of its model family so far, and its CV on
        every row, estimated from the sample's, must fit in its cap."""
        trainer = candidate.trainer
        rivals = [node.exploration.score for node in journal
                  if node.exploration is not None and node.verified and node.candidate.trainer == trainer]
        if rivals and score <= max(rivals):
            return f"not promoted: its score on the sample does not beat the best {trainer} node's there"
        fitting = sum(explored.fit_seconds)
        estimate = fitting * explore.full_rows / explore.rows * PROMOTION_MARGIN + (explored.elapsed - fitting)
        allowed = cap - time.monotonic()
        if estimate > allowed:
            return (f"not promoted: its CV on every row would take about {estimate:.0f} s, more than the "
                    f"{max(allowed, 0):.0f} s it may use")
        return f"promoted: the best {trainer} node on the sample so far"

    def _evaluate_script(self, proposal: Proposal, node_id: int, dataset: Dataset, validation: ValidationSpec,
                         deadline: float) -> Evaluated:
        """A free-code node: the script run confined in its own folder and scored by the engine on the same folds."""
        if self.script_dir is None:
            self.script_dir = Path(tempfile.mkdtemp(prefix="casebook-free-code-"))
        evidence, script_run = self.evaluator.evaluate_script(proposal.script, dataset,
                                                              self.script_dir / f"node-{node_id}", deadline)
        self.script_runs[node_id] = script_run
        candidate = SolutionCandidate(FREE_CODE, {}, proposal.plan, ())
        spec = SolutionSpec((), ModelSpec(FREE_CODE), None, validation)
        return Evaluated(candidate, proposal.trick, spec, evidence, code=proposal.script)

    def _blend_proposal(self, profile: TaskProfile, journal: Journal) -> BlendProposal | None:
        """The final combination's members (agent.search.blending.blend_candidates), None with fewer than two; its
        plan names the retrieved ensembling trick when the proposer has one."""
        ranked = blend_candidates(journal)
        if len(ranked) < 2:
            return None
        trick = self.proposer.blend_trick(profile, journal)
        plan = "blend the best nodes (the search's final combination"
        plan += f", as {trick.describe()} also suggests)" if trick is not None else ")"
        return BlendProposal(tuple(node.id for node in ranked), plan, trick)

    @staticmethod
    def _blends(proposal: BlendProposal, dataset: Dataset, journal: Journal, predictions: Mapping[int, Any],
                validation: ValidationSpec) -> list[tuple[list[Node], Blend, float]]:
        """Each way of combining the proposal's members from their OOF predictions (nothing is fitted) that keeps
        at least two of them: (members, the combination, seconds it took). On more than BLEND_ROWS rows the
        weights are chosen on BLEND_ROWS of them (greedy selection scores the metric hundreds of times), and each
        combination is then scored on every row."""
        ids = [i for i in proposal.members if i in predictions and journal[i].valid]
        if len(ids) < 2:
            return []
        clock = time.monotonic()
        y = dataset.y
        folds = runtime.make_folds(y, classification=dataset.classification, n_splits=validation.n_splits,
                                   seed=validation.seed)
        members = [np.asarray(predictions[i]) for i in ids]
        if len(y) <= BLEND_ROWS:
            found = blends(members, y, dataset.metric, dataset.task_type, folds)
        else:
            rows = np.sort(np.random.default_rng(validation.seed).choice(len(y), BLEND_ROWS, replace=False))
            position = np.full(len(y), -1)
            position[rows] = np.arange(len(rows))
            sampled = [(position[train][position[train] >= 0], position[valid][position[valid] >= 0])
                       for train, valid in folds]
            found = [on_every_row(combination, members, y, dataset.metric, dataset.classification, folds)
                     for combination in blends([member[rows] for member in members], y[rows], dataset.metric,
                                               dataset.task_type, sampled)]
        seconds = (time.monotonic() - clock) / len(found)
        return [([journal[ids[k]] for k in combination.members], combination, seconds)
                for combination in found if len(combination.members) >= 2]

    def _add_blend(self, made: tuple[list[Node], Blend, float], proposal: BlendProposal, dataset: Dataset,
                   journal: Journal, validation: ValidationSpec, baseline_score: float, started: float,
                   best_attempt: AttemptRecord | None) -> tuple[Node, AttemptRecord]:
        members, combination, seconds = made
        weights = [combination.weights[k] for k in combination.members]
        stacked = combination.kind != AVERAGE
        spec = ensemble_spec([SolutionSpec.from_dict(node.spec) for node in members], weights, validation,
                             intercept=combination.intercept, link=combination.link if stacked else None)
        evidence = Evidence("ok", combination.metric_value, combination.fold_values,
                            ignored_files=dataset.ignored_files, elapsed=seconds, predictions=combination.predictions)
        parts = ", ".join(f"node {node.id} ({node.candidate.trainer}) x {weight:.2f}"
                          for node, weight in zip(members, weights))
        how = {AVERAGE: "weights by greedy selection on out-of-fold predictions",
               RANK_AVERAGE: "a rank average, weights by greedy selection on ranks within each fold",
               STACK: f"a linear stack on out-of-fold predictions ({combination.link} space, "
                      f"intercept {combination.intercept:.3f})"}[combination.kind]
        candidate = SolutionCandidate(ENSEMBLE, dict(spec.model.params), f"{proposal.plan}: {parts} ({how})", ())
        heaviest = members[int(max(range(len(weights)), key=lambda k: abs(weights[k])))]
        # The combination is the engine's step: the trick the plan may name is provenance, not the node's trick.
        return self._add_node(candidate, None, spec, evidence, IMPROVE, heaviest, dataset, journal,
                              baseline_score, started, best_attempt, tuple(node.id for node in members))

    def _add_node(self, candidate: SolutionCandidate, trick: AppliedTrick | None, spec: SolutionSpec,
                  evidence: Evidence, action: str, parent: Node | None, dataset: Dataset, journal: Journal,
                  baseline_score: float, started: float, best_attempt: AttemptRecord | None,
                  members: tuple[int, ...] = (), code: str | None = None, scored_on: str = FULL,
                  exploration: Exploration | None = None) -> tuple[Node, AttemptRecord]:
        """Verify the evidence (against the trivial baseline on the same rows) and append the node (and its attempt
        record) to the journal. A node verified on the exploration sample only is EXPLORED, one stopped at its
        time cap OVER_TIME: neither is compared with the valid nodes nor debugged."""
        evaluator = self.evaluator
        verdict = self.verifier.verify(evidence, baseline_score, dataset.metric_info)
        comparable = verdict.valid and scored_on == FULL
        improved = comparable and (best_attempt is None or verdict.score > best_attempt.score)
        elapsed_since_start = time.monotonic() - started
        attempt = AttemptRecord(len(journal), action, candidate, spec, evidence, verdict,
                                elapsed_since_start - evidence.elapsed, improved)
        debug_depth = parent.debug_depth + 1 if action == DEBUG and parent is not None else 0
        at_limit = debug_depth >= self.policy.settings.max_debug_depth
        if verdict.valid:
            status = VALID if comparable else EXPLORED
        elif verdict.failure == OVER_TIME:
            status = OVER_TIME
        else:
            status = DEAD if at_limit else BUGGY
        try:  # a free-code node's code is its script
            code = code if code is not None else render_model(spec, dataset, evaluator.trainers,
                                                              evaluator.random_state, evaluator.step_ops)
        except (NotRenderableError, SpecError, KeyError, TypeError, ValueError):
            code = ""
        metric = evidence.metric_value if math.isfinite(evidence.metric_value) else None
        scored = (f"scored on {evidence.rows} of {len(dataset.y)} training rows (the exploration sample)"
                  if scored_on == SAMPLE else "")
        output = "; ".join(part for part in (verdict.reason, *verdict.notes, scored,
                                             exploration.note if exploration is not None else "") if part)
        node = journal.append(Node(
            id=len(journal), parent_id=parent.id if parent is not None else None, action=action,
            plan=candidate.rationale, candidate=candidate, spec=spec.to_dict(), code=code, status=status,
            metric=metric, score=verdict.score, output=output, error=error_tail(evidence.error), trick=trick,
            debug_depth=debug_depth, elapsed=evidence.elapsed, started=elapsed_since_start - evidence.elapsed,
            members=members, failure=verdict.failure, findings=verdict.findings, scored_on=scored_on,
            scored_rows=evidence.rows or len(dataset.y), exploration=exploration,
        ))
        return node, attempt


def on_every_row(combination: Blend, members: Sequence[Any], y: Any, metric: str, classification: bool,
                 folds: Sequence[Any]) -> Blend:
    """A combination whose weights were chosen on some rows, applied to every row's OOF predictions and scored on
    each fold, as runtime.LinearStack and the voting ensembles combine the members."""
    if combination.kind == AVERAGE:
        combined = np.tensordot(np.asarray(combination.weights), np.asarray(members, dtype=float), axes=1)
    else:
        values = [member[:, 1] if classification else member for member in members]
        groups = [valid for _, valid in folds] if combination.link == "rank" else None
        combined = runtime.combine(np.asarray(values, dtype=float), combination.weights, combination.intercept,
                                   combination.link, classification=classification, groups=groups)
    return replace(combination, predictions=combined,
                   fold_values=tuple(runtime.fold_scores(combined, y, folds, metric)))


def fastest_node_seconds(journal: Journal) -> float:
    """Seconds the fastest verified single-model node took to be verified (0 with none): on a large table, its CV
    on the exploration sample, which is all a new node must get through (its CV on every row has its own cap)."""
    return min((node.exploration.elapsed if node.exploration is not None else node.elapsed
                for node in journal if node.verified and not node.members), default=0.0)


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


def fold_average(spec: SolutionSpec, member_predictions: Sequence[Any], classification: bool) -> Any:
    """The CV fold models' averaged test predictions of a solution, combined as its spec combines its members (one
    member: its own); None when a member has none."""
    if not member_predictions or any(prediction is None for prediction in member_predictions):
        return None
    if spec.model.name != ENSEMBLE:
        return member_predictions[0]
    params = spec.model.params
    if "link" not in params:  # a weighted average, as VotingClassifier (soft) and VotingRegressor weigh
        weights = [float(weight) for weight in params["weights"]]
        return sum(weight * prediction for weight, prediction in zip(weights, member_predictions)) / sum(weights)
    values = [prediction[:, 1] if classification else prediction for prediction in member_predictions]
    return runtime.combine(values, params["weights"], params["intercept"], params["link"],
                           classification=classification)
