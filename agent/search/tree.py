"""The tree search loop: ask the policy for an action, the proposer for a proposal, the evaluator for evidence and
the verifier for a verdict, and append the node to the journal (agent.search.journal, agent.search.policy).

`TreeSearch.run` evaluates each proposal with agent.evaluator (a sandboxed cross-validation plus leakage
inspection), ends with the final combination step, and refits the best verified node. Only verified nodes can
be the best, ranked by their CV score.

The final combination is the engine's, with or without knowledge: when the metric can be blended
(agent.search.blending.blendable) and at least two verified nodes exist, the search combines the nodes
`blend_candidates` picks (each family's best, then the best of the rest) every way the metric allows: a greedy
weighted average, a linear stack, a rank average. A proposer that names a retrieved ensembling trick
(`BlendingProposer`) only has the trick named in the plan.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agent.candidate import AppliedTrick, AttemptRecord, EngineeringRun, SolutionCandidate
from agent.engine import runtime
from agent.engine.compile import ENSEMBLE, NotRenderableError, ensemble_spec, render_model
from agent.engine.dataset import Dataset
from agent.engine.sandbox import DEFAULT_MEMORY_LIMIT, error_tail
from agent.engine.spec import SolutionSpec, SpecError, ValidationSpec
from agent.engine.steps import StepOp
from agent.engine.trainers import Trainer, default_steps
from agent.evaluator import DEFAULT_CANDIDATE_TIME_LIMIT, Evaluator
from agent.search.blending import AVERAGE, RANK_AVERAGE, STACK, Blend, blend_candidates, blendable, blends
from agent.search.journal import BUGGY, DEAD, DEBUG, DRAFT, IMPROVE, VALID, Journal, Node
from agent.search.policy import SearchPolicy, SearchSettings
from agent.search.protocols import BlendingProposer, BlendProposal, ObservingProposer, Proposal, TreeProposer
from agent.verify.findings import Evidence
from agent.verify.verifier import DeterministicVerifier, Verifier
from retrieval.profile import TaskProfile

TYPICAL_BLEND_SIZE = 4  # members greedy selection keeps, as a rule, from the best verified nodes
REFIT_SHARE = 0.35  # one fit on all rows, as a share of a 5-fold CV's seconds (about 1.25/5, with a margin)


# ---------------------------------------------------------------------------------------------- the search


@dataclass(frozen=True, eq=False)
class SearchResult:
    journal: Journal
    run: EngineeringRun  # the same outcome in the seed loop's terms: attempts, best, refit model
    attempts: tuple[AttemptRecord, ...]
    trainers: Mapping[str, Trainer]


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
    ):
        self.proposer = proposer
        self.settings = settings or SearchSettings()
        self.policy = policy or SearchPolicy(self.settings)
        self.evaluator = Evaluator(cv, self.settings.seed, trainers, step_ops,
                                   candidate_time_limit=candidate_time_limit, memory_limit=memory_limit)
        self.verifier = verifier if verifier is not None else DeterministicVerifier()
        self.on_node = on_node

    @property
    def trainers(self) -> Mapping[str, Trainer]:
        return self.evaluator.trainers

    def run(self, profile: TaskProfile, dataset: Dataset, journal: Journal | None = None) -> SearchResult:
        evaluator, settings = self.evaluator, self.settings
        started = time.monotonic()
        deadline = started + settings.time_budget if settings.time_budget is not None else math.inf
        rng = random.Random(settings.seed)
        validation = evaluator.validation
        baseline_score = evaluator.baseline(dataset)
        blending = blendable(dataset.metric, dataset.task_type)

        journal = journal if journal is not None else Journal()
        attempts: list[AttemptRecord] = []
        predictions: dict[int, Any] = {}  # node id -> out-of-fold predictions, for blending
        stop_reason, search_steps = "", 0
        policy = self.policy

        def record(node: Node, attempt: AttemptRecord) -> None:
            attempts.append(attempt)
            if isinstance(self.proposer, ObservingProposer):
                self.proposer.observe(node)
            if node.valid and attempt.evidence.predictions is not None:
                predictions[node.id] = attempt.evidence.predictions
            if self.on_node is not None:
                self.on_node(node, attempt)

        while True:
            # No node may run into the time kept back for the final refit.
            search_deadline = deadline - self.refit_reserve(journal, blending)
            if time.monotonic() >= search_deadline:
                stop_reason = "time budget used up (what is left is kept for the final refit)"
                break
            drafting = len(journal.draft_nodes) < policy.settings.num_drafts
            if not drafting and search_steps >= settings.steps:
                stop_reason = f"reached steps={settings.steps} after {len(journal.draft_nodes)} drafts"
                break
            action, target = policy.next_action(journal, rng)
            proposal = self._propose(action, target, profile, journal, rng)
            if proposal is None and target is not None:  # nothing more to improve or repair there
                journal.mark_exhausted(target)
                continue
            if proposal is None:  # no draft left to make
                if drafting:  # fewer drafts than asked for: go on to the search steps
                    policy = replace(policy, settings=replace(policy.settings, num_drafts=len(journal.draft_nodes)))
                    continue
                stop_reason = "the proposer has nothing more to try"
                break
            if not drafting:
                search_steps += 1
            record(*self._evaluate(proposal, action, target, dataset, journal, validation, baseline_score,
                                   search_deadline, started, self._best_attempt(attempts)))

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
        if best is not None:
            cv_seconds = sum(journal[i].elapsed for i in best.members) if best.members else best.elapsed
            spec = SolutionSpec.from_dict(best.spec)
            refit = evaluator.refit(spec, dataset, deadline, cv_seconds)
            run = replace(run, best_candidate=best.candidate, best_score=best.score, best_spec=spec, model=refit.model,
                          test_prediction=refit.test_prediction, refit_error=refit.error)
        return SearchResult(journal, run, tuple(attempts), evaluator.trainers)

    @staticmethod
    def refit_reserve(journal: Journal, blending: bool) -> float:
        """Seconds kept back for refitting the final solution on all rows: one fit costs about a quarter of a
        5-fold CV, and a blend refits each of its members (typically a few of the best nodes)."""
        ranked = sorted(journal.valid_nodes, key=lambda node: node.score, reverse=True)
        refit = ranked[:TYPICAL_BLEND_SIZE] if blending else ranked[:1]
        return REFIT_SHARE * sum(node.elapsed for node in refit)

    @staticmethod
    def _best_attempt(attempts: Sequence[AttemptRecord]) -> AttemptRecord | None:
        return next((attempt for attempt in reversed(attempts) if attempt.improved), None)

    def _propose(self, action: str, target: Node | None, profile: TaskProfile, journal: Journal,
                 rng: random.Random) -> Proposal | None:
        if action == DRAFT:
            return self.proposer.draft(profile, journal, rng)
        if action == IMPROVE:
            return self.proposer.improve(target, profile, journal, rng)
        return self.proposer.debug(target, profile, rng)

    def _evaluate(self, proposal: Proposal, action: str, parent: Node | None, dataset: Dataset, journal: Journal,
                  validation: ValidationSpec, baseline_score: float, deadline: float, started: float,
                  best_attempt: AttemptRecord | None) -> tuple[Node, AttemptRecord]:
        evaluator = self.evaluator
        candidate = proposal.candidate
        if candidate.steps is None and candidate.trainer in evaluator.trainers:  # nodes record their full pipeline
            candidate = replace(candidate, steps=tuple(default_steps(evaluator.trainers[candidate.trainer])))
        spec, evidence = evaluator.evaluate_candidate(candidate, dataset, deadline)
        return self._add_node(replace(candidate, rationale=proposal.plan), proposal.trick, spec, evidence, action,
                              parent, dataset, journal, baseline_score, started, best_attempt)

    def _blend_proposal(self, profile: TaskProfile, journal: Journal) -> BlendProposal | None:
        """The final combination's members (agent.search.blending.blend_candidates), None with fewer than two; its
        plan names the retrieved ensembling trick when the proposer has one."""
        ranked = blend_candidates(journal)
        if len(ranked) < 2:
            return None
        trick = self.proposer.blend_trick(profile, journal) if isinstance(self.proposer, BlendingProposer) else None
        plan = "blend the best nodes (the search's final combination"
        plan += f", as {trick.describe()} also suggests)" if trick is not None else ")"
        return BlendProposal(tuple(node.id for node in ranked), plan, trick)

    @staticmethod
    def _blends(proposal: BlendProposal, dataset: Dataset, journal: Journal, predictions: Mapping[int, Any],
                validation: ValidationSpec) -> list[tuple[list[Node], Blend, float]]:
        """Each way of combining the proposal's members from their OOF predictions (nothing is fitted) that keeps
        at least two of them: (members, the combination, seconds it took)."""
        ids = [i for i in proposal.members if i in predictions and journal[i].valid]
        if len(ids) < 2:
            return []
        clock = time.monotonic()
        folds = runtime.make_folds(dataset.y, classification=dataset.classification, n_splits=validation.n_splits,
                                   seed=validation.seed)
        found = blends([predictions[i] for i in ids], dataset.y, dataset.metric, dataset.task_type, folds)
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
                  members: tuple[int, ...] = ()) -> tuple[Node, AttemptRecord]:
        """Verify the evidence and append the node (and its attempt record) to the journal."""
        evaluator = self.evaluator
        verdict = self.verifier.verify(evidence, baseline_score, dataset.metric_info)
        improved = verdict.valid and (best_attempt is None or verdict.score > best_attempt.score)
        elapsed_since_start = time.monotonic() - started
        attempt = AttemptRecord(len(journal), action, candidate, spec, evidence, verdict,
                                elapsed_since_start - evidence.elapsed, improved)
        debug_depth = parent.debug_depth + 1 if action == DEBUG and parent is not None else 0
        at_limit = debug_depth >= self.policy.settings.max_debug_depth
        status = VALID if verdict.valid else (DEAD if at_limit else BUGGY)
        try:
            code = render_model(spec, dataset, evaluator.trainers, evaluator.random_state, evaluator.step_ops)
        except (NotRenderableError, SpecError, KeyError, TypeError, ValueError):
            code = ""
        metric = evidence.metric_value if math.isfinite(evidence.metric_value) else None
        output = "; ".join([verdict.reason, *verdict.notes])
        node = journal.append(Node(
            id=len(journal), parent_id=parent.id if parent is not None else None, action=action,
            plan=candidate.rationale, candidate=candidate, spec=spec.to_dict(), code=code, status=status,
            metric=metric, score=verdict.score, output=output, error=error_tail(evidence.error), trick=trick,
            debug_depth=debug_depth, elapsed=evidence.elapsed, started=elapsed_since_start - evidence.elapsed,
            members=members, failure=verdict.failure, findings=verdict.findings,
        ))
        return node, attempt
