"""Blending verified solutions from their out-of-fold predictions.

Every evaluated node keeps its out-of-fold (OOF) predictions, made on the same folds, so a blend can
be scored without fitting anything: the blend of the members' OOF predictions is the OOF prediction
of the blended model. Weights come from greedy ensemble selection with replacement (Caruana et al.,
2004; AutoGluon's weighted ensemble works the same way): start from the best member, repeatedly add
the member whose addition most improves the metric, keep the best blend seen. Weights are counts, so
they are non-negative and sum to one, and a member that never helps gets weight 0.

The blend is itself a solution (agent.engine.compile.ensemble_spec): refit, rendered and submitted like any
other. Only metrics scored on probabilities or on regression values can be blended; label metrics
(accuracy, F1 on labels) cannot be averaged.

Two more ways to combine the same members, each its own candidate that wins only on CV:
- rank averaging (AUC on a binary task): greedy selection on each member's ranks within a fold, so
  members whose probabilities are on different scales mix by order only;
- a linear stack: a linear model fitted on the members' out-of-fold predictions, in the metric's space
  (log-odds for a binary classifier, log1p values under RMSLE), with an intercept. Least squares with
  non-negative weights for regression, logistic regression for classification.
Both are rendered as runtime.LinearStack, which combines refit members with those fixed coefficients,
so their CV in solution.py is exactly the out-of-fold score reported here, as for the average.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LinearRegression, LogisticRegression

from agent.engine import runtime
from agent.search.journal import Journal, Node
from agent.verify.verifier import oriented
from retrieval.metrics import MetricInfo, metric_info

DEFAULT_ROUNDS = 25  # AutoGluon uses 25 rounds of selection too
AVERAGE, RANK_AVERAGE, STACK = "average", "rank_average", "stack"
RANK_METRICS = ("roc_auc",)  # scored on the order of predictions only
STACK_METRICS = ("rmse", "mse", "r2", "rmsle", "roc_auc", "log_loss")  # fitted by least squares or log loss
# Greedy selection scores the metric hundreds of times: on a larger table it chooses the weights on this many rows
# (150,000 rows and 8 members took 33 s on two busy cores), then scores each combination once on every row.
BLEND_ROWS = 20_000
# A blend's seconds, estimated before the search stops (BlendCost): its metric calls times one call's seconds measured
# on this table, with this margin. On 40 blends of 1k-150k rows, 2 and 8 members, RMSE, AUC, and binary and 5- and
# 12-class log loss (bench/blend_cost.py), each took at most 0.86 of the estimate (median 0.68).
BLEND_MARGIN = 1.5


@dataclass(frozen=True)
class Blend:
    weights: tuple[float, ...]  # one per candidate member, in the order given; 0 for members left out
    fold_values: tuple[float, ...]  # the metric on each validation fold of the blended OOF predictions
    predictions: np.ndarray  # the blended OOF predictions
    kind: str = AVERAGE  # AVERAGE, RANK_AVERAGE or STACK
    intercept: float = 0.0  # a stack's intercept, in its link's space
    link: str = "identity"  # the space members are combined in (runtime.LINKS)

    @property
    def members(self) -> tuple[int, ...]:
        """Positions of the members with a weight (a stack's may be negative)."""
        return tuple(index for index, weight in enumerate(self.weights) if weight != 0)

    @property
    def metric_value(self) -> float:
        return float(np.mean(self.fold_values))


@dataclass(frozen=True)
class BlendCost:
    """What the final blend of a table costs: one score of its metric on the rows the weights are chosen on
    (`call_seconds`, measured), the metric calls `blends` makes per candidate member (a member's own score, then one
    per round; twice with a rank average), and the seconds of scoring each combination on every row."""

    call_seconds: float
    calls_per_member: int
    rescoring_seconds: float = 0.0

    def seconds(self, members: int) -> float:
        """A blend of `members` candidates' expected seconds, with BLEND_MARGIN (0 with fewer than two)."""
        if members < 2:
            return 0.0
        return BLEND_MARGIN * (self.call_seconds * self.calls_per_member * members + self.rescoring_seconds)


def blend_cost(y: np.ndarray, metric: str, task_type: str, classification: bool, repeats: int = 3) -> BlendCost:
    """The blend's cost on this table (`y`: class codes 0..k-1 when `classification`), from the metric timed
    `repeats` times (the median) on random predictions of its shape (class probabilities, or values beside `y`) on as
    many rows as the weights are chosen on; rescoring counts the three combinations `blends` may return, scored once
    each on every row."""
    info = metric_info(metric)
    rows = min(len(y), BLEND_ROWS)
    rng = np.random.default_rng(0)
    sample = np.asarray(y)[rng.choice(len(y), rows, replace=False)]
    classes = int(np.max(y)) + 1 if classification else 0
    prediction = (rng.dirichlet(np.ones(classes), size=rows) if classes else
                  sample.astype(float) + rng.normal(size=rows))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        with contextlib.suppress(ValueError):  # a sample of one class: its time is still the call's
            _score(info, sample, prediction)
        times.append(time.perf_counter() - started)
    call = statistics.median(times)
    rank = task_type == "binary" and metric in RANK_METRICS
    return BlendCost(call, (DEFAULT_ROUNDS + 1) * (2 if rank else 1), 3 * call * len(y) / rows if len(y) > rows else 0.0)


def blendable(metric: str, task_type: str) -> bool:
    """Predictions that can be averaged: class probabilities, or regression values."""
    return metric_info(metric).needs_proba or task_type == "regression"


def _score(info: MetricInfo, y: np.ndarray, prediction: np.ndarray) -> float:
    return oriented(float(runtime.METRIC_FUNCTIONS[info.name](y, prediction)), info)


def hill_climb(predictions: Sequence[np.ndarray], y: np.ndarray, metric: str,
               rounds: int = DEFAULT_ROUNDS) -> np.ndarray:
    """Greedy ensemble selection with replacement; the weights of the best blend seen (summing to 1)."""
    info = metric_info(metric)
    stacked = np.asarray(predictions, dtype=float)  # members x rows (x classes)
    singles = [_score(info, y, p) for p in stacked]
    counts = np.zeros(len(stacked))
    first = int(np.argmax(singles))
    counts[first], total, current = 1, stacked[first].copy(), singles[first]
    best_counts, best_score = counts.copy(), current
    for _ in range(rounds):
        n = counts.sum()
        scores = [_score(info, y, (total + member) / (n + 1)) for member in stacked]
        pick = int(np.argmax(scores))
        counts[pick] += 1
        total += stacked[pick]
        if scores[pick] > best_score:
            best_counts, best_score = counts.copy(), scores[pick]
    return best_counts / best_counts.sum()


def blend(predictions: Sequence[np.ndarray], y: np.ndarray, metric: str, folds, rounds: int = DEFAULT_ROUNDS) -> Blend:
    """Hill-climbed weights over `predictions` (OOF on `folds`), with the blend's per-fold metric."""
    stacked = np.asarray(predictions, dtype=float)
    weights = hill_climb(stacked, y, metric, rounds)
    blended = np.tensordot(weights, stacked, axes=1)
    return Blend(tuple(float(w) for w in weights), tuple(runtime.fold_scores(blended, y, folds, metric)), blended)


def _binary_scores(predictions: np.ndarray) -> np.ndarray:
    """Members x rows: each member's probability of the positive class."""
    return np.asarray(predictions, dtype=float)[:, :, 1]


def rank_blend(predictions: Sequence[np.ndarray], y: np.ndarray, metric: str, folds,
               rounds: int = DEFAULT_ROUNDS) -> Blend:
    """Greedy selection on the members' ranks within each validation fold (as runtime.LinearStack ranks the
    batch it predicts); for rank metrics on binary tasks."""
    scores, groups = _binary_scores(predictions), [valid_rows for _, valid_rows in folds]
    ranks = runtime.apply_link(scores, "rank", groups)
    weights = hill_climb(np.stack([1.0 - ranks, ranks], axis=-1), y, metric, rounds)
    blended = runtime.combine(scores, weights, 0.0, "rank", classification=True, groups=groups)
    return Blend(tuple(float(w) for w in weights), tuple(runtime.fold_scores(blended, y, folds, metric)), blended,
                 RANK_AVERAGE, 0.0, "rank")


def stack(predictions: Sequence[np.ndarray], y: np.ndarray, metric: str, folds, classification: bool) -> Blend:
    """A linear model on the members' out-of-fold predictions (in the link's space), with an intercept."""
    if classification:
        link, member_values = "logit", _binary_scores(predictions)
        meta = LogisticRegression().fit(runtime.apply_link(member_values, link).T, y)
        coefficients, intercept = meta.coef_[0], float(meta.intercept_[0])
    else:
        link = "log1p" if metric == "rmsle" else "identity"
        member_values = np.asarray(predictions, dtype=float)
        meta = LinearRegression(positive=True).fit(runtime.apply_link(member_values, link).T,
                                                   runtime.apply_link(y, link))
        coefficients, intercept = meta.coef_, float(meta.intercept_)
    combined = runtime.combine(member_values, coefficients, intercept, link, classification=classification)
    return Blend(tuple(float(c) for c in coefficients), tuple(runtime.fold_scores(combined, y, folds, metric)),
                 combined, STACK, intercept, link)


def blends(predictions: Sequence[np.ndarray], y: np.ndarray, metric: str, task_type: str, folds) -> list[Blend]:
    """Every combination of the members that fits the metric: the weighted average, then a rank average (rank
    metrics on binary tasks) and a linear stack of the members the average kept."""
    average = blend(predictions, y, metric, folds)
    found = [average]
    if task_type == "binary" and metric in RANK_METRICS:
        found.append(rank_blend(predictions, y, metric, folds))
    if task_type in ("binary", "regression") and metric in STACK_METRICS and len(average.members) >= 2:
        kept = list(average.members)
        stacked = stack([predictions[k] for k in kept], y, metric, folds, classification=task_type == "binary")
        weights = np.zeros(len(predictions))
        weights[kept] = stacked.weights
        found.append(Blend(tuple(float(w) for w in weights), stacked.fold_values, stacked.predictions, STACK,
                           stacked.intercept, stacked.link))
    return found


BLEND_CANDIDATES = 8  # the verified nodes a blend picks its members from: each family's best, then the best


def blend_candidates(journal: Journal) -> list[Node]:
    """The nodes a blend picks from: the best node of each model family, then the best of the rest. Members that
    differ in kind are what a blend gains from; the best nodes of a search are often one family's variants."""
    ranked = sorted((node for node in journal.valid_nodes if not node.members),
                    key=lambda node: node.score, reverse=True)
    leaders = list({node.candidate.trainer: node for node in reversed(ranked)}.values())[:BLEND_CANDIDATES]
    chosen = {node.id for node in leaders}
    rest = [node for node in ranked if node.id not in chosen]
    return sorted(leaders + rest[:BLEND_CANDIDATES - len(leaders)],
                  key=lambda node: node.score, reverse=True)


def keep_bar(journal: Journal, trainer: str) -> float:
    """The score (greater is better) a new node of `trainer` must reach, its CV complete, to keep its fold models:
    what a blend candidate then reaches (blend_candidates: each family's best, then the best of the rest), the
    lower of its family's best and the BLEND_CANDIDATES-th best single model; -inf while either is missing. A node
    a final blend may pick was a candidate when it was scored, so its fold models were kept."""
    scores = sorted((node.score for node in journal.valid_nodes if not node.members), reverse=True)
    family = [node.score for node in journal.valid_nodes if not node.members and node.candidate.trainer == trainer]
    if len(scores) < BLEND_CANDIDATES or not family:
        return -math.inf
    return min(scores[BLEND_CANDIDATES - 1], max(family))
