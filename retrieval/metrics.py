"""Evaluation metrics by canonical name: what they are, and how a task description names them.

The agent's scorers (agent.engine.runtime) are keyed by the same names; this module stays upstream of
the agent so that task profiling can name a metric without importing any modelling code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CLASSIFICATION = frozenset({"binary", "multiclass"})
REGRESSION = frozenset({"regression"})
# Metrics on a log or relative scale: fitting log(1 + y) optimises (nearly) the metric itself.
LOG_SCALE_METRICS = frozenset({"rmsle", "mape"})


@dataclass(frozen=True)
class MetricInfo:
    name: str
    title: str
    greater_is_better: bool
    needs_proba: bool
    task_types: frozenset[str]
    # Description phrases that name this metric, tried in METRICS order (most specific first).
    pattern: str

    @property
    def is_classification(self) -> bool:
        return self.task_types <= CLASSIFICATION

    @property
    def log_scale(self) -> bool:
        return self.name in LOG_SCALE_METRICS


def describe_change(improvement: float, relative: bool = False) -> str:
    """A score change in words, "improved by 0.0014", "worsened by 1.2%" or "no change", from its improvement (the
    change of the greater-is-better score): a bare signed number reads the wrong way for a metric where lower is
    better, such as an RMSE that went up."""
    if improvement == 0:
        return "no change"
    amount = f"{abs(improvement):.2%}" if relative else f"{abs(improvement):.4g}"
    return f"{'improved' if improvement > 0 else 'worsened'} by {amount}"


METRICS: tuple[MetricInfo, ...] = (
    MetricInfo("rmsle", "RMSE of log values", False, False, REGRESSION,
               r"\bRMSLE\b|root[- ]mean[- ]squared?[- ]log(arithmic)?[- ]error"
               # "RMSE between the logarithm of ...", within one sentence (a dot before a non-space is no sentence end).
               r"|(root[- ]mean[- ]squared?[- ]error|\bRMSE\b)(?:[^.]|\.(?=\S)){0,80}?\blog"),
    MetricInfo("mape", "mean absolute percentage error", False, False, REGRESSION,
               r"mean absolute percentage error|\bMAPE\b"),
    MetricInfo("rmse", "root mean squared error", False, False, REGRESSION,
               r"root[- ]mean[- ]squared?[- ]error|\bRMSE\b"),
    MetricInfo("mse", "mean squared error", False, False, REGRESSION,
               r"mean[- ]squared?[- ]error|\bMSE\b"),
    MetricInfo("mae", "mean absolute error", False, False, REGRESSION,
               r"mean[- ]absolute[- ]error|\bMAE\b"),
    MetricInfo("r2", "coefficient of determination (R²)", True, False, REGRESSION,
               r"\bR\^?2\b|R²|\bR-squared\b|coefficient of determination"),
    MetricInfo("roc_auc", "area under the ROC curve", True, True, CLASSIFICATION,
               r"\bROC\b|\bAUC\b|area under the (receiver operating characteristic |ROC )?curve"),
    MetricInfo("log_loss", "log loss", False, True, CLASSIFICATION,
               r"\blog[- ]?loss\b|logarithmic loss|cross[- ]entropy"),
    MetricInfo("mcc", "Matthews correlation coefficient", True, False, CLASSIFICATION,
               r"matthews|\bMCC\b"),
    MetricInfo("qwk", "quadratic weighted kappa", True, False, CLASSIFICATION,
               r"quadratic(ally)? weighted kappa|\bQWK\b|cohen'?s kappa"),
    MetricInfo("f1_macro", "macro-averaged F1", True, False, CLASSIFICATION,
               r"macro[- ]?(averaged )?F1|F1[- ]macro|mean F1"),
    MetricInfo("f1", "F1 score", True, False, CLASSIFICATION,
               r"\bF1\b|\bF-?score\b|\bF-measure\b"),
    MetricInfo("balanced_accuracy", "balanced accuracy", True, False, CLASSIFICATION,
               r"balanced accuracy"),
    MetricInfo("accuracy", "accuracy", True, False, CLASSIFICATION,
               r"\baccuracy\b|classification rate"),
)

METRICS_BY_NAME = {metric.name: metric for metric in METRICS}

DEFAULT_METRIC = {"binary": "roc_auc", "multiclass": "accuracy", "regression": "rmse"}

_ALIASES = {
    "auc": "roc_auc", "rocauc": "roc_auc", "roc": "roc_auc",
    "logloss": "log_loss", "crossentropy": "log_loss", "binarycrossentropy": "log_loss",
    "rmsel": "rmsle", "rmselog": "rmsle", "rmseoflogs": "rmsle",
    "rootmeansquarederror": "rmse", "meansquarederror": "mse", "meanabsoluteerror": "mae",
    "rsquared": "r2", "r²": "r2", "matthews": "mcc", "kappa": "qwk",
    "f1score": "f1", "macrof1": "f1_macro", "f1macro": "f1_macro",
    "balancedaccuracy": "balanced_accuracy", "acc": "accuracy",
}

_MARKDOWN_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
# Headings under which a description states how submissions are scored.
_EVALUATION_HEADING = re.compile(r"^#+\s*(evaluation|metric|scoring)", re.IGNORECASE | re.MULTILINE)


class UnknownMetricError(ValueError):
    """A metric name that is neither canonical nor a known alias."""


def metric_info(name: str) -> MetricInfo:
    """The metric for a canonical name or a common alias ("AUC", "logloss", "RMSE of logs")."""
    canonical = name.strip().lower()
    if canonical not in METRICS_BY_NAME:
        squeezed = re.sub(r"[\s_\-]", "", canonical)
        canonical = _ALIASES.get(squeezed, squeezed if squeezed in METRICS_BY_NAME else "")
    if canonical not in METRICS_BY_NAME:
        known = ", ".join(METRICS_BY_NAME)
        raise UnknownMetricError(f"unknown metric {name!r}: use one of {known}")
    return METRICS_BY_NAME[canonical]


def evaluation_text(description: str) -> str:
    """The description's evaluation section when it has one, else the whole text; markdown links keep their text."""
    description = _MARKDOWN_LINK.sub(r"\1", description)
    heading = _EVALUATION_HEADING.search(description)
    if heading is None:
        return description
    rest = description[heading.end():]
    next_heading = re.search(r"^#+\s", rest, re.MULTILINE)
    return rest[: next_heading.start()] if next_heading else rest


def parse_metric(description: str) -> tuple[MetricInfo, str] | None:
    """The metric a description names, with the phrase that named it; None when it names none."""
    text = evaluation_text(description)
    for metric in METRICS:
        match = re.search(metric.pattern, text, re.IGNORECASE)
        if match:
            return metric, " ".join(match.group(0).split())
    return None
