"""What evaluating a candidate measured (Evidence), what the probes found (Finding, Inspection), and the verifier's
Verdict.

A `Finding` is one fact about a candidate, as a record: its kind (below), the 1-based step and the op it concerns,
the column or file it concerns, and the sentence a person reads. Code that acts on findings (the repairs, reports)
reads the fields, never the sentence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Finding kinds. Leaks are reasons to reject a candidate:
LEAK_TEST = "leak_test"  # a step learns from the test set
LEAK_TARGET = "leak_target"  # a step reads the target outside the CV folds
# Warnings are worth a look, not a reason to reject:
TARGET_COPY = "target_copy"  # a raw column is a near-copy of the target (column)
NOT_DETERMINISTIC = "not_deterministic"  # the preprocessing is not deterministic, so leakage was not checked
FIT_OUTSIDE_FOLD = "fit_outside_fold"  # a step is fitted on training rows outside the CV fold (fit before the split)
# Data usage:
IGNORED_COLUMN = "ignored_column"  # a raw column that can change without changing what the model receives (column)
IGNORED_FILE = "ignored_file"  # a file of the task that the solution does not read (file)

LEAK_KINDS = (LEAK_TEST, LEAK_TARGET)
WARNING_KINDS = (TARGET_COPY, NOT_DETERMINISTIC, FIT_OUTSIDE_FOLD)
FINDING_KINDS = (*LEAK_KINDS, *WARNING_KINDS, IGNORED_COLUMN, IGNORED_FILE)

# Verdict failure kinds: how an attempt failed (None for a valid one). The run failures are how its run ended
# (Evidence.status); the others are what the verifier found in a run that ended well.
ERROR, TIMEOUT, MEMORY, CRASHED = "error", "timeout", "memory", "crashed"
# Stopped at the time cap the search gave it (agent.evaluator records the sandbox's "timeout" so): the budget's
# verdict, not a bug, so the search never debugs it. TIMEOUT remains for journals written before.
OVER_TIME = "over_time"
NON_FINITE, LEAKAGE, NOT_BETTER = "non_finite", "leakage", "not_better"
# Scored on its first folds only: it trailed the best node there by more than the fold spread allows
# (agent.engine.fit.FoldGate). The search's verdict of a sound run, not a bug: never debugged, never the best.
STOPPED_EARLY = "stopped_early"
RUN_FAILURES = (ERROR, OVER_TIME, TIMEOUT, MEMORY, CRASHED)
FAILURES = (*RUN_FAILURES, NON_FINITE, LEAKAGE, NOT_BETTER, STOPPED_EARLY)


@dataclass(frozen=True)
class Finding:
    kind: str  # one of FINDING_KINDS
    step: int | None = None  # the 1-based index of the step it concerns, if one
    op: str | None = None  # that step's op
    column: str | None = None  # the raw column it concerns, if one
    file: str | None = None  # the task's file it concerns, if one
    message: str = ""  # the finding in words

    @property
    def leak(self) -> bool:
        return self.kind in LEAK_KINDS

    @property
    def warning(self) -> bool:
        return self.kind in WARNING_KINDS

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step, "op": self.op, "column": self.column, "file": self.file,
                "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        step = data.get("step")
        return cls(data["kind"], None if step is None else int(step), data.get("op"), data.get("column"),
                   data.get("file"), data.get("message", ""))


def culprit(step: int | None, op: str | None) -> str:
    """Where a finding points, in words: "step 2 (target_encoding)", or the preprocessing as a whole."""
    return f"step {step} ({op})" if step is not None else "the preprocessing"


@dataclass(frozen=True)
class Inspection:
    """The probes' findings about a candidate's preprocessing, in the order they were made."""

    findings: tuple[Finding, ...] = ()

    @property
    def leaks(self) -> tuple[str, ...]:
        """Reasons to reject, in words."""
        return tuple(finding.message for finding in self.findings if finding.leak)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Worth a look, not a reason to reject, in words."""
        return tuple(finding.message for finding in self.findings if finding.warning)

    @property
    def ignored_columns(self) -> tuple[str, ...]:
        return tuple(str(finding.column) for finding in self.findings if finding.kind == IGNORED_COLUMN)

    def of_kind(self, *kinds: str) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.kind in kinds)


@dataclass(frozen=True)
class Evidence:
    """What evaluating one candidate measured."""

    status: str  # "ok", or one of RUN_FAILURES: how its run ended
    metric_value: float = math.nan  # mean CV metric in its own units
    fold_values: tuple[float, ...] = ()
    error: str = ""
    inspection: Inspection = Inspection()
    ignored_files: tuple[str, ...] = ()
    elapsed: float = 0.0
    # Every training row's out-of-fold prediction (what the metric scores), for blending candidates; not compared.
    predictions: Any = field(default=None, compare=False, repr=False)
    # The CV fold models' test-set predictions, averaged: the submission when a refit on every row would not fit in
    # the budget (None when the CV predicted no test set).
    test_prediction: Any = field(default=None, compare=False, repr=False)
    rows: int = 0  # the training rows the CV ran on (0: not known)
    fit_seconds: tuple[float, ...] = ()  # each fold's fit, for estimating a refit's seconds
    # The number of trees each early-stopping model kept, by its path in the model (runtime.CrossFit.stopped_rounds).
    stopped_rounds: Mapping[str, float] = field(default_factory=dict)
    folds: int = 0  # the CV's folds; fold_values holds fewer when a FoldGate stopped it early (0: not known)
    # Over time on its pace (agent.engine.fit.Pace): the seconds its whole CV would have taken, as its first folds
    # projected (0: not stopped so).
    projected_seconds: float = 0.0
    # Where the evaluator kept the CV's fold models (Evaluator.kept_fold_models reads them); "": not kept.
    fold_models: str = ""
    # The seconds of `elapsed` spent outside the job itself: the candidate's process started, the data sent to it and
    # its results sent back (0: not measured). A node's fixed cost, apart from its folds' fits.
    overhead_seconds: float = 0.0
    # The trees its first fold's early stopping was told to expect, by path (a change of a measured parent:
    # runtime.cross_fit's expected_trees); empty: that fold waited its full patience.
    expected_trees: Mapping[str, float] = field(default_factory=dict)

    @property
    def stopped_early(self) -> bool:
        return 0 < len(self.fold_values) < self.folds

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The inspection's findings, then a finding for each file of the task the solution ignores."""
        files = tuple(Finding(IGNORED_FILE, file=name, message=f"ignores file {name}") for name in self.ignored_files)
        return (*self.inspection.findings, *files)


@dataclass(frozen=True)
class Verdict:
    valid: bool
    reason: str
    score: float  # greater is better (errors negated, as scikit-learn scorers do); -inf for a failure
    notes: tuple[str, ...] = field(default=())
    failure: str | None = None  # one of FAILURES when invalid (None when valid, or from a verifier that does not say)
    # The findings behind the verdict: the leaks that rejected it, and the warnings and data usage behind its notes.
    findings: tuple[Finding, ...] = field(default=())

    @property
    def leaks(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.leak)
