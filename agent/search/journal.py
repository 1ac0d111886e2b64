"""The journal of a tree search, after AIDE's journal.py: nodes, append-only.

A `Node` is one evaluated solution: the plan that motivated it, its candidate and spec, the code
that builds its pipeline, the CV metric, and how it relates to its parent (the action that made it
and, for knowledge-driven steps, the trick applied).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.candidate import SOURCE_KINDS, AppliedTrick, AttemptRecord, SolutionCandidate, json_number
from agent.engine.spec import SolutionSpec, Step
from agent.engine.steps import BUILTIN_STEPS, TARGET_OPS
from agent.engine.trainers import Trainer, default_steps
from agent.verify.findings import OVER_TIME as OVER_TIME  # a node status too
from agent.verify.findings import STOPPED_EARLY as STOPPED_EARLY  # a node status too
from agent.verify.findings import Evidence, Finding, Verdict

DRAFT, IMPROVE, DEBUG = "draft", "improve", "debug"
VALID, BUGGY, DEAD = "valid", "buggy", "dead"
# Neither compared with valid nodes nor debugged: a node verified on the exploration sample only (EXPLORED), and
# a node stopped at its time cap (OVER_TIME, its verdict's failure too: the budget's verdict rather than a bug), and
# a node stopped after its first folds because it trailed the best there (STOPPED_EARLY: multi-fidelity CV).
EXPLORED = "explored"
PENDING = "pending"  # the status of a proposal drawn but not yet evaluated (agent.search.tree), never in a run's journal
# The data a node's CV score comes from: every training row, or the exploration sample (agent.search.exploration).
FULL, SAMPLE = "full", "sample"

ACTIONS = (DRAFT, IMPROVE, DEBUG)


@dataclass(frozen=True)
class Exploration:
    """How a node scored on the exploration sample (large tables: a stratified sample of the training rows), and
    whether that made it promising enough to be cross-validated on every row."""

    rows: int  # the sample's rows
    metric: float | None  # the mean CV metric on the sample, in its own units; None when it did not run
    score: float  # the sample's verdict, greater is better (-inf for a failure): what explored nodes compare on
    elapsed: float
    promoted: bool  # cross-validated on every row afterwards
    note: str = ""  # why it was or was not promoted, in words

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "metric": json_number(self.metric) if self.metric is not None else None,
                "score": json_number(self.score), "elapsed": round(self.elapsed, 3), "promoted": self.promoted,
                "note": self.note}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Exploration:
        return cls(int(data["rows"]), data.get("metric"), -math.inf if data.get("score") is None else float(data["score"]),
                   float(data.get("elapsed", 0.0)), bool(data.get("promoted")), data.get("note", ""))


@dataclass(frozen=True)
class Node:
    id: int
    parent_id: int | None
    action: str  # draft / improve / debug
    plan: str  # why this node was made, in words
    candidate: SolutionCandidate  # with explicit steps
    spec: SolutionSpec | None  # None only for a proposal not yet evaluated (agent.search.tree.with_pending)
    code: str  # the pipeline's Python source ("" when it cannot be rendered)
    status: str  # valid / buggy / dead / explored / over_time / stopped_early
    metric: float | None  # mean CV metric in its own units; None when it did not run
    score: float  # greater is better; -inf for a failure
    output: str = ""  # the verifier's reason and notes
    error: str = ""
    trick: AppliedTrick | None = None
    debug_depth: int = 0  # consecutive debug steps that led to this node
    elapsed: float = 0.0
    started: float = 0.0  # seconds since the search started
    members: tuple[int, ...] = ()  # for a blend: the nodes it combines (the heaviest one is its parent)
    # The verdict as records, for repairs to read instead of `output`: how it failed (one of
    # agent.verify.findings.FAILURES, None when valid) and the findings behind the verdict (leaks, warnings, usage).
    failure: str | None = None
    findings: tuple[Finding, ...] = ()
    scored_on: str = FULL  # where `metric` comes from: FULL (CV on every training row) or SAMPLE
    scored_rows: int = 0  # the training rows of that CV (0 in journals written before nodes kept it)
    exploration: Exploration | None = None  # its score on the exploration sample, when it was explored first
    # The CV folds its score is the mean of, of how many the run's CV has (0: not known, or a journal written
    # before): fewer when multi-fidelity CV stopped it early.
    folds_scored: int = 0
    folds: int = 0
    # Over time on its pace, stopped after its first folds: the seconds its whole CV would have taken, as they
    # projected (Evidence.projected_seconds; 0: not stopped so).
    projected_seconds: float = 0.0
    # Its CV's fold models were kept (Evidence.fold_models): a submission from it needs no refit.
    fold_models_kept: bool = False
    # What the proposer asked for, when the search ran it sized to its time cap instead (a higher learning rate,
    # agent.search.fit_time.size_change): a proposer that asks for it again finds it in the journal (Journal.has).
    proposed: SolutionCandidate | None = None
    # What the node was judged on, and the verdict whole, as the search made them; the trace lines and the refit's
    # estimates read them. Kept in memory only (None in a journal read back): the fields above are their record.
    evidence: Evidence | None = field(default=None, compare=False, repr=False)
    verdict: Verdict | None = field(default=None, compare=False, repr=False)

    @property
    def valid(self) -> bool:
        """Verified on every training row: the nodes whose scores are compared to choose the best."""
        return self.status == VALID

    @property
    def verified(self) -> bool:
        """Verified, on every row or on the exploration sample only."""
        return self.status in (VALID, EXPLORED)

    @property
    def buggy(self) -> bool:
        return self.status == BUGGY

    @property
    def first_cv_rows(self) -> int:
        """The rows of the node's first CV: the exploration sample's, or every row's."""
        return self.exploration.rows if self.exploration is not None else self.scored_rows

    @property
    def first_cv_seconds(self) -> float:
        """The seconds of the node's first CV (on the exploration sample, when it was explored first): what a new
        node on the same rows must get through; for a CV stopped on its pace, what its whole CV would have taken."""
        return self.exploration.elapsed if self.exploration is not None else max(self.elapsed, self.projected_seconds)

    @property
    def skipped(self) -> bool:
        """Over time before it ran: the search did not evaluate it, its fit-time estimate being over its cap
        (agent.search.fit_time); any node that ran took some time."""
        return self.status == OVER_TIME and self.elapsed == 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "parent_id": self.parent_id, "action": self.action, "plan": self.plan,
            "candidate": self.candidate.to_dict(), "spec": self.spec.to_dict() if self.spec is not None else {},
            "code": self.code,
            "status": self.status, "metric": json_number(self.metric) if self.metric is not None else None,
            "score": json_number(self.score), "output": self.output, "error": self.error,
            "trick": self.trick.to_dict() if self.trick else None, "debug_depth": self.debug_depth,
            "elapsed": round(self.elapsed, 3), "started": round(self.started, 3), "members": list(self.members),
            "failure": self.failure, "findings": [finding.to_dict() for finding in self.findings],
            "scored_on": self.scored_on, "scored_rows": self.scored_rows,
            "exploration": self.exploration.to_dict() if self.exploration is not None else None,
            "folds_scored": self.folds_scored, "folds": self.folds,
            "stopped_early": self.status == STOPPED_EARLY, "projected_seconds": round(self.projected_seconds, 3),
            "fold_models_kept": self.fold_models_kept,
            "proposed": self.proposed.to_dict() if self.proposed is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Node:
        return cls(
            id=int(data["id"]), parent_id=data["parent_id"], action=data["action"], plan=data["plan"],
            candidate=SolutionCandidate.from_dict(data["candidate"]),
            spec=SolutionSpec.from_dict(data["spec"]) if data.get("spec") else None, code=data.get("code", ""),
            status=data["status"], metric=data.get("metric"),
            score=-math.inf if data.get("score") is None else float(data["score"]),
            output=data.get("output", ""), error=data.get("error", ""),
            trick=AppliedTrick.from_dict(data["trick"]) if data.get("trick") else None,
            debug_depth=int(data.get("debug_depth", 0)), elapsed=float(data.get("elapsed", 0.0)),
            started=float(data.get("started", 0.0)), members=tuple(data.get("members") or ()),
            failure=data.get("failure"),  # journals written before nodes kept the verdict as records have neither
            findings=tuple(Finding.from_dict(item) for item in data.get("findings") or ()),
            scored_on=data.get("scored_on", FULL), scored_rows=int(data.get("scored_rows") or 0),
            exploration=Exploration.from_dict(data["exploration"]) if data.get("exploration") else None,
            folds_scored=int(data.get("folds_scored") or 0), folds=int(data.get("folds") or 0),
            projected_seconds=float(data.get("projected_seconds") or 0.0),
            fold_models_kept=bool(data.get("fold_models_kept")),
            proposed=SolutionCandidate.from_dict(data["proposed"]) if data.get("proposed") else None,
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
        """Nodes verified on every training row."""
        return [node for node in self._nodes if node.valid]

    @property
    def any_verified(self) -> bool:
        """Whether a node is verified (on every row or on the exploration sample): until then the search has only
        the trivial baseline to submit."""
        return any(node.verified for node in self._nodes)

    @property
    def explored_nodes(self) -> list[Node]:
        """Nodes verified on the exploration sample only."""
        return [node for node in self._nodes if node.status == EXPLORED]

    def best(self, verified_only: bool = True) -> Node | None:
        """The node with the best CV score (the earliest on a tie); by default among nodes verified on every row
        only, so a score on the exploration sample is never compared with one on every row.

        Explored nodes compare among themselves, on the sample: an explored node whose CV on every row did not fit
        in the budget replaces that best when it beats it there, where both were scored (the best must have been
        explored too, so not a blend); a search that could cross-validate no node on every row takes the best
        explored node."""
        if not verified_only:
            return max((node for node in self._nodes if math.isfinite(node.score)),
                       key=lambda node: (node.score, -node.id), default=None)
        best = max(self.valid_nodes, key=lambda node: (node.score, -node.id), default=None)
        explored = max(self.explored_nodes, key=lambda node: (node.score, -node.id), default=None)
        if explored is None or (best is not None and (best.exploration is None
                                                      or explored.score <= best.exploration.score)):
            return best
        return explored

    def improved(self, node: Node) -> bool:
        """Whether the node became the best when it was appended: valid, and better than every valid node before it."""
        return node.valid and all(node.score > other.score for other in self._nodes[:node.id] if other.valid)

    def attempt(self, node: Node) -> AttemptRecord:
        """The node in the seed loop's terms (agent.candidate.AttemptRecord): the trace's lines and the card's run
        are read this way. Only a node this process evaluated has one (a journal read back keeps no evidence)."""
        if node.evidence is None or node.verdict is None:
            raise ValueError(f"node {node.id} keeps no evidence: it was read back, not evaluated here")
        return AttemptRecord(node.id, node.action, node.candidate, node.spec, node.evidence,
                             node.verdict, node.started, self.improved(node))

    def attempts(self) -> tuple[AttemptRecord, ...]:
        """Every node this process evaluated, as `attempt` reads it."""
        return tuple(self.attempt(node) for node in self._nodes if node.evidence is not None and node.verdict is not None)

    def beats_parent(self, node: Node) -> bool:
        """Verified and better than its parent (a parent that failed is beaten), compared on the exploration sample
        when both were explored on it, else on every row."""
        parent = self.parent(node)
        if not node.verified:
            return False
        if parent is None or not parent.verified:
            return True
        if node.exploration is not None and parent.exploration is not None:
            return node.exploration.score > parent.exploration.score
        return node.valid and (not parent.valid or node.score > parent.score)

    def fold_gain(self, node: Node, greater_is_better: bool) -> float | None:
        """How much a node improved on its parent on the CV folds both were scored on (a search's nodes share its
        folds): the mean of the folds' relative improvements, > 0 better. A node stopped early or over time after
        some folds is measured on those. None without both nodes' fold values on every row (a journal read back
        keeps none, and an exploration sample's folds are other folds)."""
        parent = self.parent(node)
        if parent is None or node.evidence is None or parent.evidence is None \
                or node.exploration is not None or parent.exploration is not None:
            return None
        sign = 1.0 if greater_is_better else -1.0
        gains = [sign * (mine - theirs) / abs(theirs)
                 for mine, theirs in zip(node.evidence.fold_values, parent.evidence.fold_values)  # the shorter's folds
                 if math.isfinite(mine) and math.isfinite(theirs) and theirs != 0]
        return sum(gains) / len(gains) if gains else None

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

    def lineage(self, node: Node) -> list[Node]:
        """The nodes a solution is made of: the node's path, and for a combination each member's path too."""
        seen: dict[int, Node] = {}
        for start in (node, *(self._nodes[i] for i in node.members)):
            for ancestor in self.path(start):
                seen.setdefault(ancestor.id, ancestor)
        return [seen[i] for i in sorted(seen)]

    def throughput(self) -> dict[str, Any]:
        """How much the search evaluated: nodes (the final combinations and the drafts skipped unrun aside), the ones
        verified on every fold of every row, the ones multi-fidelity CV stopped early, the drafts skipped, and nodes
        per minute of search."""
        nodes = [node for node in self._nodes if not node.members and not node.skipped]
        seconds = max((node.started + node.elapsed for node in nodes), default=0.0)
        full_cv = sum(node.valid and (node.folds == 0 or node.folds_scored == node.folds) for node in nodes)
        return {"nodes": len(nodes), "verified_full_cv": full_cv,
                "stopped_early": sum(node.status == STOPPED_EARLY for node in nodes),
                "skipped": sum(node.skipped for node in self._nodes),
                "search_seconds": round(seconds, 1),
                "nodes_per_minute": round(len(nodes) / seconds * 60, 2) if seconds > 0 else None}

    def tricks_by_source(self) -> dict[str, dict[str, int]]:
        """How many distinct tricks the search applied, and how many won, by source kind (card, write-up,
        paper; "unknown" for a trick that does not say). A trick wins when it lies on the best node's lineage:
        its path, or the path of one of its members when the best node is a combination."""

        def count(nodes: Sequence[Node]) -> dict[str, int]:
            kinds: dict[str, str] = {}
            for node in nodes:
                if node.trick is not None:
                    for trick_id, kind in node.trick.sources:
                        kinds.setdefault(trick_id, kind or "unknown")
            counts = dict.fromkeys(SOURCE_KINDS, 0)
            for kind in kinds.values():
                counts[kind] = counts.get(kind, 0) + 1
            return counts

        best = self.best()
        return {"applied": count(self._nodes), "winning": count(self.lineage(best) if best is not None else [])}

    def has(self, key: str, trainers: Mapping[str, Trainer] | None = None) -> bool:
        return bool(self.tries(key, trainers))

    def tries(self, key: str, trainers: Mapping[str, Trainer] | None = None) -> list[Node]:
        """The nodes that ran the candidate of `key`, or were proposed it (and ran it sized)."""
        return [node for node in self._nodes if candidate_key(node.candidate, trainers) == key
                or (node.proposed is not None and candidate_key(node.proposed, trainers) == key)]

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
