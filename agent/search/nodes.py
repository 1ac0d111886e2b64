"""A proposal once evaluated (`Evaluated`), and the journal's node it becomes once verified (`Evaluated.node`).

A node is verified against the trivial baseline on the rows it was scored on. One verified on the exploration sample
only is EXPLORED, one stopped at its time cap OVER_TIME, one stopped after its first folds STOPPED_EARLY: none of them
is compared with the valid nodes nor debugged; a failed node is BUGGY until its debug depth reaches the policy's limit, then DEAD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.engine.spec import SolutionSpec
from agent.execution.sandbox import error_tail
from agent.search.journal import (
    BUGGY,
    DEAD,
    DEBUG,
    EXPLORED,
    FULL,
    OVER_TIME,
    SAMPLE,
    STOPPED_EARLY,
    VALID,
    Exploration,
    Node,
)
from agent.verify.findings import Evidence, Verdict


@dataclass(frozen=True, eq=False)
class Evaluated:
    """A proposal once evaluated: how it was made, what it is, and its evidence; verified, it becomes a node."""

    action: str  # draft / improve / debug
    parent: Node | None
    candidate: SolutionCandidate  # with its full pipeline, and the plan as its rationale
    trick: AppliedTrick | None
    spec: SolutionSpec
    evidence: Evidence
    code: str  # the pipeline's Python source, or a free-code node's script ("" when it cannot be rendered)
    scored_on: str = FULL  # the data `evidence` comes from: FULL (every training row) or SAMPLE
    exploration: Exploration | None = None  # its score on the exploration sample, when it was explored first
    members: tuple[int, ...] = ()  # for a blend: the nodes it combines
    proposed: SolutionCandidate | None = None  # what the proposer asked for, when `candidate` is it sized (Node.proposed)

    def node(self, node_id: int, verdict: Verdict, started: float, max_debug_depth: int, rows: int) -> Node:
        """The journal's node `node_id`, judged by `verdict`, its evaluation started `started` seconds into the
        search, on a table of `rows` training rows."""
        evidence, parent = self.evidence, self.parent
        debug_depth = parent.debug_depth + 1 if self.action == DEBUG and parent is not None else 0
        if verdict.valid:
            status = VALID if self.scored_on == FULL else EXPLORED
        elif verdict.failure in (OVER_TIME, STOPPED_EARLY):
            status = verdict.failure
        else:
            status = DEAD if debug_depth >= max_debug_depth else BUGGY
        scored = (f"scored on {evidence.rows} of {rows} training rows (the exploration sample)"
                  if self.scored_on == SAMPLE else "")
        output = "; ".join(part for part in (verdict.reason, *verdict.notes, scored,
                                             self.exploration.note if self.exploration is not None else "") if part)
        return Node(
            id=node_id, parent_id=parent.id if parent is not None else None, action=self.action,
            plan=self.candidate.rationale, candidate=self.candidate, spec=self.spec, code=self.code,
            status=status, metric=evidence.metric_value if math.isfinite(evidence.metric_value) else None,
            score=verdict.score, output=output, error=error_tail(evidence.error), trick=self.trick,
            debug_depth=debug_depth, elapsed=evidence.elapsed, started=started, members=self.members,
            failure=verdict.failure, findings=verdict.findings, scored_on=self.scored_on,
            scored_rows=evidence.rows or rows, exploration=self.exploration, folds_scored=len(evidence.fold_values),
            folds=evidence.folds or self.spec.validation.n_splits, projected_seconds=evidence.projected_seconds,
            fold_models_kept=bool(evidence.fold_models), proposed=self.proposed, evidence=evidence,
            verdict=verdict,
        )

