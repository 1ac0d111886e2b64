"""The solution tree search (AutoMind section 3.2, after AIDE's journal): nodes, journal, policy, search loop.

A `Node` is one evaluated solution: the plan that motivated it, its candidate and spec, the code
that builds its pipeline, the CV metric, and how it relates to its parent (the action that made it
and, for knowledge-driven steps, the trick applied). The `Journal` holds the nodes, append-only.

`SearchPolicy.next_action` decides what to do next, from the journal alone:
  1. draft until `num_drafts` drafts exist;
  2. with probability `debug_prob`, debug a random buggy leaf whose debug depth is below
     `max_debug_depth` (a buggy node created at that depth is dead: never debugged again);
  3. otherwise improve: with probability `greedy_prob` the best verified node, else a random verified one;
  4. with nothing verified to improve, debug a debuggable leaf, and with nothing to debug either, draft.
Every random choice draws from the `random.Random(seed)` the search passes in, so a seed fixes the run.

`TreeSearch.run` evaluates each proposal through the seed loop's own path (agent.loop.AgenticAutoML:
a sandboxed cross-validation plus leakage inspection, then the verifier) and refits the best
verified node. Only verified nodes can be the best, ranked by their CV score.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from agent import runtime
from agent.engine import ENSEMBLE, Dataset, ensemble_spec
from agent.ensemble import AVERAGE, RANK_AVERAGE, STACK, Blend, blendable, blends
from agent.loop import (
    DEFAULT_CANDIDATE_TIME_LIMIT,
    AgenticAutoML,
    AttemptRecord,
    EngineeringRun,
    SequenceProposer,
    SolutionCandidate,
    json_number,
)
from agent.models import Trainer, default_steps
from agent.render import NotRenderableError, render_model
from agent.sandbox import DEFAULT_MEMORY_LIMIT
from agent.spec import SolutionSpec, SpecError, Step, ValidationSpec
from agent.steps import BUILTIN_STEPS, TARGET_OPS, StepOp
from agent.verifier import Evidence, Verifier
from retrieval.profile import TaskProfile

DRAFT, IMPROVE, DEBUG = "draft", "improve", "debug"
TYPICAL_BLEND_SIZE = 4  # members greedy selection keeps, as a rule, from the best verified nodes
REFIT_SHARE = 0.35  # one fit on all rows, as a share of a 5-fold CV's seconds (about 1.25/5, with a margin)
ACTIONS = (DRAFT, IMPROVE, DEBUG)
VALID, BUGGY, DEAD = "valid", "buggy", "dead"


# ---------------------------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class AppliedTrick:
    """The knowledge behind a change: which trick, from where, and the executable op it became."""

    id: str
    title: str = ""
    source: str = ""
    competition: str | None = None
    op: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    related: tuple[str, ...] = ()  # further tricks composed with this one in the same step (a draft)

    @property
    def ids(self) -> tuple[str, ...]:
        return (self.id, *self.related)

    def describe(self) -> str:
        origin = f"competition {self.competition}" if self.competition else (self.source or "the knowledge base")
        return f"trick {self.id} '{self.title or self.op}' ({origin})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "params": dict(self.params), "related": list(self.related)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AppliedTrick:
        return cls(**{**data, "params": dict(data.get("params") or {}), "related": tuple(data.get("related") or ())})


@dataclass(frozen=True)
class Node:
    id: int
    parent_id: int | None
    action: str  # draft / improve / debug
    plan: str  # why this node was made, in words
    candidate: SolutionCandidate  # with explicit steps
    spec: Mapping[str, Any]  # SolutionSpec.to_dict()
    code: str  # the pipeline's Python source ("" when it cannot be rendered)
    status: str  # valid / buggy / dead
    metric: float | None  # mean CV metric in its own units; None when it did not run
    score: float  # greater is better; -inf for a failure
    output: str = ""  # the verifier's reason and notes
    error: str = ""
    trick: AppliedTrick | None = None
    debug_depth: int = 0  # consecutive debug steps that led to this node
    elapsed: float = 0.0
    started: float = 0.0  # seconds since the search started
    members: tuple[int, ...] = ()  # for a blend: the nodes it combines (the heaviest one is its parent)

    @property
    def valid(self) -> bool:
        return self.status == VALID

    @property
    def buggy(self) -> bool:
        return self.status == BUGGY

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "parent_id": self.parent_id, "action": self.action, "plan": self.plan,
            "candidate": candidate_to_dict(self.candidate), "spec": dict(self.spec), "code": self.code,
            "status": self.status, "metric": json_number(self.metric) if self.metric is not None else None,
            "score": json_number(self.score), "output": self.output, "error": self.error,
            "trick": self.trick.to_dict() if self.trick else None, "debug_depth": self.debug_depth,
            "elapsed": round(self.elapsed, 3), "started": round(self.started, 3), "members": list(self.members),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Node:
        return cls(
            id=int(data["id"]), parent_id=data["parent_id"], action=data["action"], plan=data["plan"],
            candidate=candidate_from_dict(data["candidate"]), spec=dict(data["spec"]), code=data.get("code", ""),
            status=data["status"], metric=data.get("metric"),
            score=-math.inf if data.get("score") is None else float(data["score"]),
            output=data.get("output", ""), error=data.get("error", ""),
            trick=AppliedTrick.from_dict(data["trick"]) if data.get("trick") else None,
            debug_depth=int(data.get("debug_depth", 0)), elapsed=float(data.get("elapsed", 0.0)),
            started=float(data.get("started", 0.0)), members=tuple(data.get("members") or ()),
        )


def candidate_to_dict(candidate: SolutionCandidate) -> dict[str, Any]:
    return {
        "trainer": candidate.trainer, "params": dict(candidate.params), "rationale": candidate.rationale,
        "steps": None if candidate.steps is None else [step.to_dict() for step in candidate.steps],
        "target_transform": candidate.target_transform.to_dict() if candidate.target_transform else None,
    }


def candidate_from_dict(data: Mapping[str, Any]) -> SolutionCandidate:
    def step(item: Mapping[str, Any]) -> Step:
        return Step(item["op"], dict(item.get("params") or {}))

    return SolutionCandidate(
        data["trainer"], dict(data.get("params") or {}), data.get("rationale", ""),
        None if data.get("steps") is None else tuple(step(item) for item in data["steps"]),
        step(data["target_transform"]) if data.get("target_transform") else None,
    )


def candidate_key(candidate: SolutionCandidate, trainers: Mapping[str, Trainer] | None = None) -> str:
    """What makes two candidates the same solution (the rationale aside)."""
    steps = candidate.steps
    if steps is None and trainers is not None and candidate.trainer in trainers:
        steps = default_steps(trainers[candidate.trainer])
    return json.dumps({
        "trainer": candidate.trainer, "params": dict(candidate.params),
        "steps": None if steps is None else [_with_step_defaults(step) for step in steps],
        "target_transform": _with_step_defaults(candidate.target_transform) if candidate.target_transform else None,
    }, sort_keys=True, default=str)


def _with_step_defaults(step: Step) -> dict[str, Any]:
    """A step with its op's default parameters filled in, so {} and the explicit defaults compare equal."""
    op = BUILTIN_STEPS.get(step.op) or TARGET_OPS.get(step.op)
    defaults = dict(getattr(op, "defaults", {}) or {})
    params = {**defaults, **dict(step.params)}
    return {"op": step.op, "params": {name: list(value) if isinstance(value, tuple) else value
                                      for name, value in params.items()}}


class Journal:
    """Every node of a search, in the order they were made. Append-only."""

    def __init__(self, nodes: Sequence[Node] = ()):
        self._nodes: list[Node] = []
        self.exhausted: set[int] = set()  # nodes the proposer had nothing more to improve
        for node in nodes:
            self.append(node)

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self):
        return iter(self._nodes)

    def __getitem__(self, node_id: int) -> Node:
        return self._nodes[node_id]

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(self._nodes)

    def next_id(self) -> int:
        return len(self._nodes)

    def append(self, node: Node) -> Node:
        if node.id != len(self._nodes):
            raise ValueError(f"node id {node.id} out of order: the journal expects id {len(self._nodes)}")
        if node.parent_id is not None and not 0 <= node.parent_id < node.id:
            raise ValueError(f"node {node.id}: parent {node.parent_id} is not an earlier node")
        if node.action not in ACTIONS:
            raise ValueError(f"node {node.id}: unknown action {node.action!r}; expected one of {ACTIONS}")
        self._nodes.append(node)
        return node

    def mark_exhausted(self, node: Node) -> None:
        self.exhausted.add(node.id)

    def parent(self, node: Node) -> Node | None:
        return None if node.parent_id is None else self._nodes[node.parent_id]

    def children(self, node: Node) -> list[Node]:
        return [child for child in self._nodes if child.parent_id == node.id]

    def path(self, node: Node) -> list[Node]:
        """The node's ancestors, root first, then the node."""
        chain = [node]
        while chain[-1].parent_id is not None:
            chain.append(self._nodes[chain[-1].parent_id])
        return chain[::-1]

    @property
    def leaves(self) -> list[Node]:
        parents = {node.parent_id for node in self._nodes}
        return [node for node in self._nodes if node.id not in parents]

    @property
    def buggy_leaves(self) -> list[Node]:
        """Leaves that failed and may still be debugged (dead nodes are not buggy)."""
        return [node for node in self.leaves if node.buggy]

    @property
    def draft_nodes(self) -> list[Node]:
        return [node for node in self._nodes if node.action == DRAFT]

    @property
    def valid_nodes(self) -> list[Node]:
        return [node for node in self._nodes if node.valid]

    def best(self, verified_only: bool = True) -> Node | None:
        """The node with the best CV score (the earliest on a tie); by default among verified nodes only."""
        pool = self.valid_nodes if verified_only else [node for node in self._nodes if math.isfinite(node.score)]
        return max(pool, key=lambda node: (node.score, -node.id), default=None)

    def beats_parent(self, node: Node) -> bool:
        parent = self.parent(node)
        return node.valid and (parent is None or not parent.valid or node.score > parent.score)

    def tricks_on_branch(self, node: Node) -> tuple[set[str], set[str]]:
        """(used, ineffective) trick ids for improving `node`: tricks applied on its path or already tried from
        it, and tricks whose child did not beat its parent anywhere on the path (not retried on this branch)."""
        used, ineffective = set(), set()
        for ancestor in self.path(node):
            if ancestor.trick is not None:
                used.update(ancestor.trick.ids)
            for child in self.children(ancestor):
                if child.trick is None or child.action != IMPROVE:
                    continue
                if ancestor.id == node.id:
                    used.add(child.trick.id)
                if not self.beats_parent(child):
                    ineffective.add(child.trick.id)
        return used, ineffective

    def has(self, key: str, trainers: Mapping[str, Trainer] | None = None) -> bool:
        return any(candidate_key(node.candidate, trainers) == key for node in self._nodes)

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": [node.to_dict() for node in self._nodes], "exhausted": sorted(self.exhausted)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Journal:
        journal = cls(Node.from_dict(item) for item in data["nodes"])
        journal.exhausted = set(data.get("exhausted", ()))
        return journal

    @classmethod
    def from_json(cls, text: str) -> Journal:
        return cls.from_dict(json.loads(text))


# ---------------------------------------------------------------------------------------------- policy


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
        improvable = [node for node in journal.valid_nodes if node.id not in journal.exhausted]
        if improvable:
            best = journal.best()
            if best is not None and best.id not in journal.exhausted and rng.random() < self.settings.greedy_prob:
                return IMPROVE, best
            return IMPROVE, rng.choice(improvable)
        if debuggable:
            return DEBUG, rng.choice(debuggable)
        return DRAFT, None


# ---------------------------------------------------------------------------------------------- proposers


@dataclass(frozen=True)
class Proposal:
    candidate: SolutionCandidate
    plan: str
    trick: AppliedTrick | None = None


@dataclass(frozen=True)
class BlendProposal:
    """Blend verified nodes: the search combines `members` (node ids) from their OOF predictions, each way that
    fits the metric (agent.ensemble.blends); every combination is a node that wins only on CV."""

    members: tuple[int, ...]
    plan: str
    trick: AppliedTrick | None = None


@runtime_checkable
class TreeProposer(Protocol):
    """Proposes the next solution for each kind of step; None when it has nothing (more) to offer."""

    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None: ...

    def improve(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None: ...

    def debug(self, node: Node, profile: TaskProfile, rng: random.Random) -> Proposal | None: ...


@runtime_checkable
class BlendingProposer(Protocol):
    """A proposer that may end the search by blending nodes (the knowledge proposer, when a trick says so)."""

    def blend(self, profile: TaskProfile, journal: Journal) -> BlendProposal | None: ...


@runtime_checkable
class ObservingProposer(Protocol):
    """A proposer that learns from each verified node (the knowledge proposer's Optuna studies)."""

    def observe(self, node: Node) -> None: ...


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
        steps: Mapping[str, StepOp] | None = None,
        candidate_time_limit: float = DEFAULT_CANDIDATE_TIME_LIMIT,
        memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
        on_node: Callable[[Node, AttemptRecord], None] | None = None,
    ):
        self.proposer = proposer
        self.settings = settings or SearchSettings()
        self.policy = policy or SearchPolicy(self.settings)
        # The seed loop's machinery: sandboxed CV + inspection (_evaluate), the verifier, trainers and steps.
        self.engine = AgenticAutoML(SequenceProposer(()), verifier=verifier, max_iterations=0, cv=cv,
                                    random_state=self.settings.seed, trainers=trainers, steps=steps,
                                    time_budget=self.settings.time_budget, candidate_time_limit=candidate_time_limit,
                                    memory_limit=memory_limit)
        self.on_node = on_node

    @property
    def trainers(self) -> Mapping[str, Trainer]:
        return self.engine.trainers

    def run(self, profile: TaskProfile, dataset: Dataset, journal: Journal | None = None) -> SearchResult:
        engine, settings = self.engine, self.settings
        started = time.monotonic()
        deadline = started + settings.time_budget if settings.time_budget is not None else math.inf
        rng = random.Random(settings.seed)
        validation = ValidationSpec(n_splits=engine.cv, seed=engine.random_state)
        baseline_score = engine.baseline(dataset, validation)
        blending = isinstance(self.proposer, BlendingProposer) and blendable(dataset.metric, dataset.task_type)

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
            proposal = self.proposer.blend(profile, journal)
            if proposal is not None:
                for combination in self._blends(proposal, dataset, journal, predictions, validation):
                    record(*self._add_blend(combination, proposal, dataset, journal, validation, baseline_score,
                                            started, self._best_attempt(attempts)))

        run = EngineeringRun(attempts=tuple(attempts), best_candidate=None, best_score=-math.inf, model=None,
                             metric=dataset.metric, baseline_score=baseline_score, n_iterations=search_steps,
                             stop_reason=stop_reason)
        best = journal.best()
        if best is not None:
            cv_seconds = sum(journal[i].elapsed for i in best.members) if best.members else best.elapsed
            run = engine.refit(run, best.candidate, best.score, SolutionSpec.from_dict(best.spec), dataset,
                               deadline, cv_seconds)
        return SearchResult(journal, run, tuple(attempts), engine.trainers)

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
        engine = self.engine
        candidate = proposal.candidate
        if candidate.steps is None and candidate.trainer in engine.trainers:  # nodes record their full pipeline
            candidate = replace(candidate, steps=tuple(default_steps(engine.trainers[candidate.trainer])))
        spec, evidence = engine.evaluate(candidate, dataset, validation, deadline)
        return self._add_node(replace(candidate, rationale=proposal.plan), proposal.trick, spec, evidence, action,
                              parent, dataset, journal, baseline_score, started, best_attempt)

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
        return self._add_node(candidate, proposal.trick, spec, evidence, IMPROVE, heaviest, dataset, journal,
                              baseline_score, started, best_attempt, tuple(node.id for node in members))

    def _add_node(self, candidate: SolutionCandidate, trick: AppliedTrick | None, spec: SolutionSpec,
                  evidence: Evidence, action: str, parent: Node | None, dataset: Dataset, journal: Journal,
                  baseline_score: float, started: float, best_attempt: AttemptRecord | None,
                  members: tuple[int, ...] = ()) -> tuple[Node, AttemptRecord]:
        """Verify the evidence and append the node (and its attempt record) to the journal."""
        engine = self.engine
        verdict = engine.verifier.verify(evidence, baseline_score, dataset.metric_info)
        improved = verdict.valid and (best_attempt is None or verdict.score > best_attempt.score)
        elapsed_since_start = time.monotonic() - started
        attempt = AttemptRecord(len(journal), action, candidate, spec, evidence, verdict,
                                elapsed_since_start - evidence.elapsed, improved)
        debug_depth = parent.debug_depth + 1 if action == DEBUG and parent is not None else 0
        at_limit = debug_depth >= self.policy.settings.max_debug_depth
        status = VALID if verdict.valid else (DEAD if at_limit else BUGGY)
        try:
            code = render_model(spec, dataset, engine.trainers, engine.random_state, engine.steps)
        except (NotRenderableError, SpecError, KeyError, TypeError, ValueError):
            code = ""
        metric = evidence.metric_value if math.isfinite(evidence.metric_value) else None
        output = "; ".join([verdict.reason, *verdict.notes])
        node = journal.append(Node(
            id=len(journal), parent_id=parent.id if parent is not None else None, action=action,
            plan=candidate.rationale, candidate=candidate, spec=spec.to_dict(), code=code, status=status,
            metric=metric, score=verdict.score, output=output, error=_error_tail(evidence.error), trick=trick,
            debug_depth=debug_depth, elapsed=evidence.elapsed, started=elapsed_since_start - evidence.elapsed,
            members=members,
        ))
        return node, attempt


def _error_tail(error: str, lines: int = 12) -> str:
    """The end of a traceback: where it failed and why, without the whole stack."""
    kept = [line for line in error.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def trace_line(node: Node, attempt: AttemptRecord) -> dict[str, Any]:
    """One trace.jsonl line: the attempt as the seed loop records it, plus the node's place in the tree."""
    return {
        **attempt.to_dict(), "node_id": node.id, "parent_id": node.parent_id, "action": node.action,
        "plan": node.plan, "trick": node.trick.to_dict() if node.trick else None, "node_status": node.status,
        "debug_depth": node.debug_depth,
    }
