"""What evaluating a candidate measured (Evidence), what the probes found (Inspection), and the verifier's Verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Inspection:
    leaks: tuple[str, ...] = ()  # reasons to reject
    warnings: tuple[str, ...] = ()  # worth a look, not a reason to reject
    ignored_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Evidence:
    """What evaluating one candidate measured."""

    status: str  # as agent.engine.sandbox.Outcome.status
    metric_value: float = math.nan  # mean CV metric in its own units
    fold_values: tuple[float, ...] = ()
    error: str = ""
    inspection: Inspection = Inspection()
    ignored_files: tuple[str, ...] = ()
    elapsed: float = 0.0
    # Every training row's out-of-fold prediction (what the metric scores), for blending candidates; not compared.
    predictions: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Verdict:
    valid: bool
    reason: str
    score: float  # greater is better (errors negated, as scikit-learn scorers do); -inf for a failure
    notes: tuple[str, ...] = field(default=())
