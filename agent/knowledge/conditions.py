"""Preconditions of the recipes: when a recipe applies to a task.

Each condition reads the TaskProfile and, for the few checks that need values, a sample of train.csv
(`train_sample`), and returns one line on why the recipe does not fit the task, or None when it does.
CONDITIONS maps every executable recipe op to its condition. PARAMS_FITS maps the few ops whose parameters can
serve another metric than the task's to what keeps the ones that fit.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import pandas as pd

from agent.engine import runtime
from retrieval.metrics import CLASSIFICATION
from retrieval.profile import TaskProfile

Condition = Callable[[TaskProfile], str | None]  # None: the recipe applies; else why it does not
# A trick's parameters fitted to the task: the parameters to use, and a note on what was left out and why ("" if none).
ParamsFit = Callable[[dict, TaskProfile], tuple[dict, str]]
SKEWED = 0.75  # the |skewness| past which a column or target is treated as skewed


@lru_cache(maxsize=16)
def _train_sample(path: str, mtime: float) -> pd.DataFrame:
    return runtime.normalise_frame(pd.read_csv(path, nrows=20000))


def train_sample(profile: TaskProfile) -> pd.DataFrame | None:
    """train.csv of the task (its first 20,000 rows), for preconditions that need values; None without one."""
    path = Path(profile.task_dir) / "train.csv"
    if not path.is_file():
        return None
    return _train_sample(str(path), path.stat().st_mtime)


def _features(profile: TaskProfile) -> pd.DataFrame | None:
    frame = train_sample(profile)
    if frame is None:
        return None
    return frame[[column.name for column in profile.columns if column.name in frame.columns]]


def _numeric(profile: TaskProfile, min_distinct: int = 3) -> list[str]:
    return [c.name for c in profile.columns if c.kind == "numeric" and c.cardinality >= min_distinct]


def _has(kind: str, what: str) -> Condition:
    return lambda profile: None if profile.columns_of_kind(kind) else f"no {what} column"


def _categorical_over(levels: int) -> Condition:
    def check(profile: TaskProfile) -> str | None:
        if any(c.cardinality > levels for c in profile.column_infos("categorical")):
            return None
        return f"no categorical column with more than {levels} levels"
    return check


def _target_values(profile: TaskProfile) -> pd.Series | None:
    frame = train_sample(profile)
    if frame is None or profile.target not in frame.columns:
        return None
    return pd.to_numeric(frame[profile.target], errors="coerce").dropna()


def _log_target(profile: TaskProfile) -> str | None:
    if profile.task_type != "regression":
        return "not a regression task"
    if profile.metric in ("rmsle",):
        return None
    target = _target_values(profile)
    if target is None or target.empty:
        return "target values unavailable"
    if target.min() < 0:
        return "the target has negative values (log needs non-negative values; try power_target)"
    return _not_right_skewed(target)


def _not_right_skewed(target: pd.Series) -> str | None:
    """Why the target is not right-skewed (skewness above SKEWED), None when it is."""
    if target.skew() <= SKEWED:
        return f"the target is not right-skewed (skewness {target.skew():.2f} <= {SKEWED})"
    return None


def _power_target(profile: TaskProfile) -> str | None:
    if profile.task_type != "regression":
        return "not a regression task"
    target = _target_values(profile)
    if target is None or target.empty:
        return "target values unavailable"
    if abs(target.skew()) <= SKEWED:
        return f"the target is not skewed (|skewness| {abs(target.skew()):.2f} <= {SKEWED})"
    return None


def _skewed_numeric(non_negative: bool) -> Condition:
    def check(profile: TaskProfile) -> str | None:
        frame = _features(profile)
        names = _numeric(profile)
        if frame is None or not names:
            return "no numeric column with more than two values"
        for name in names:
            values = frame[name].dropna()
            if (not non_negative or values.min() >= 0) and abs(values.skew()) > SKEWED:
                return None
        return f"no {'non-negative ' if non_negative else ''}numeric column with skewness above {SKEWED}"
    return check


def _missing_columns(minimum: int, kinds: tuple[str, ...] = ("numeric", "categorical", "datetime", "text", "id"),
                     share: float = 0.0) -> Condition:
    def check(profile: TaskProfile) -> str | None:
        missing = [c for c in profile.columns if c.kind in kinds and c.missing_share > share]
        if len(missing) >= minimum:
            return None
        return f"fewer than {minimum} {'/'.join(kinds) if len(kinds) < 5 else ''} column(s) with missing values".replace("  ", " ")
    return check


def _numeric_columns(minimum: int) -> Condition:
    return lambda profile: None if len(_numeric(profile)) >= minimum else f"fewer than {minimum} numeric columns"


def _constant_columns(profile: TaskProfile) -> str | None:
    if any(c.cardinality <= 1 for c in profile.columns):
        return None
    frame = _features(profile)
    if frame is not None and len(frame):
        for name in frame.columns:
            if frame[name].value_counts(dropna=False, normalize=True).iloc[0] >= 0.999:
                return None
    return "no (near-)constant column"


def _rare_levels(profile: TaskProfile) -> str | None:
    frame = _features(profile)
    for column in profile.column_infos("categorical"):
        if column.cardinality > 10 and frame is not None and (frame[column.name].value_counts() < 10).any():
            return None
    return "no categorical column with a long tail of levels seen fewer than 10 times"


_PERIODIC = ("hour", "dayofweek", "weekday", "month", "dayofyear", "direction", "winddir", "bearing")


def _cyclical(profile: TaskProfile) -> str | None:
    if profile.columns_of_kind("datetime"):
        return None
    if any(c.kind == "numeric" and any(str(c.name).lower().endswith(word) for word in _PERIODIC) for c in profile.columns):
        return None
    return "no date column and no hour/day-of-week/month/direction column"


def _composite(profile: TaskProfile) -> str | None:
    frame = _features(profile)
    candidates = [c.name for c in profile.columns if c.kind in ("categorical", "id")]
    if frame is None or not candidates:
        return "no categorical or id-like string column"
    strings = frame[[name for name in candidates if not pd.api.types.is_numeric_dtype(frame[name])]]
    if strings.shape[1] and runtime.SplitComposite().fit(strings).splits_:
        return None
    return "no string column whose values split into a fixed number of delimited parts"


def _group_keys(profile: TaskProfile) -> str | None:
    keys = [c for c in profile.column_infos("categorical") if 3 <= c.cardinality <= profile.n_rows / 5]
    if not keys:
        return "no categorical key with at least 3 levels and repeated rows"
    return None if _numeric(profile) else "no numeric column to summarise by group"


def _coordinates(profile: TaskProfile) -> str | None:
    frame = _features(profile)
    if frame is None:
        return "no training data"
    numeric = frame[_numeric(profile)] if _numeric(profile) else frame.iloc[:, :0]
    lat = runtime.coordinate_column(numeric, None, runtime.LAT_NAMES)
    lon = runtime.coordinate_column(numeric, None, runtime.LON_NAMES)
    return None if lat is not None and lon is not None else "no latitude/longitude column pair"


def _heavy_tails(profile: TaskProfile) -> str | None:
    frame = _features(profile)
    for name in _numeric(profile, min_distinct=10):
        if frame is not None and frame[name].dropna().kurt() > 5:
            return None
    return "no heavy-tailed numeric column (kurtosis above 5)"


def _class_weights_condition(profile: TaskProfile) -> str | None:
    if profile.task_type not in CLASSIFICATION:
        return "not a classification task"
    if profile.class_balance is None or profile.class_balance >= 0.2:
        return f"classes are balanced enough (rarest class share {profile.class_balance:.2f} >= 0.2)"
    if profile.metric == "log_loss":
        return "scored by log loss, which weighting classes would miscalibrate"
    return None


def _native_categorical_condition(profile: TaskProfile) -> str | None:
    if any(2 < c.cardinality <= 250 for c in profile.column_infos("categorical")):
        return None
    return "no categorical column with 3 to 250 levels"


# GBDT losses that predict a median or a quantile, not the mean: right for a task scored by absolute error only.
ABSOLUTE_LOSSES = ("mae", "l1", "quantile")


# GBDT losses for a target of counts or amounts (Poisson, Tweedie: zero or more; gamma: above zero), right-skewed.
COUNT_LOSSES = {"poisson": 0.0, "tweedie": 0.0, "gamma": None}  # objective -> the least value it takes (None: > 0)


def _count_target(profile: TaskProfile, objective: str) -> str | None:
    """Why the task's target is not one `objective` models (None when it is): a regression target within the loss's
    range and right-skewed as log_target asks."""
    if profile.task_type != "regression":
        return "not a regression task"
    target = _target_values(profile)
    if target is None or target.empty:
        return "target values unavailable"
    least = COUNT_LOSSES[objective]
    if (target.min() < least) if least is not None else (target.min() <= 0):
        return f"the target has values {'below 0' if least is not None else 'at or below 0'}"
    return _not_right_skewed(target)


def _gbdt_objective_for_task(params: dict, profile: TaskProfile) -> tuple[dict, str]:
    """A write-up's objective serves its own competition's metric and target: an absolute-error loss read from an
    MAE competition, applied to a task scored by RMSE, predicts the wrong statistic (hotel: CV RMSE 15.2 -> 16.7);
    a Tweedie loss read from M5's unit sales fits counts, not birth weights (nc_birth_weight: CV RMSE 459 -> 505)
    or log wages, which LightGBM refuses (spain_wages)."""
    objective = params.get("objective")
    if objective in ABSOLUTE_LOSSES and profile.metric != "mae":
        kept = {name: value for name, value in params.items() if name not in ("objective", "alpha")}
        return kept, f"objective={objective!r} left out: it fits a task scored by mae, this one is scored by {profile.metric}"
    if objective in COUNT_LOSSES and (why := _count_target(profile, objective)) is not None:
        kept = {name: value for name, value in params.items() if name not in ("objective", "tweedie_variance_power")}
        return kept, f"objective={objective!r} left out: it fits counts or amounts, and {why}"
    return params, ""


PARAMS_FITS: dict[str, ParamsFit] = {"gbdt_params": _gbdt_objective_for_task}

CONDITIONS: dict[str, Condition] = {
    "missing_indicators": _missing_columns(1, share=0.01),
    "impute_numeric": _missing_columns(1, ("numeric",)),
    "impute_categorical": _missing_columns(1, ("categorical",)),
    "drop_id_columns": lambda p: None if p.id_column or p.columns_of_kind("id") else "no id column",
    "drop_constant_columns": _constant_columns,
    "winsorize_features": _heavy_tails,
    "log_target": _log_target,
    "power_target": _power_target,
    "one_hot": lambda p: None if any(c.cardinality <= 15 for c in p.column_infos("categorical")) else "no categorical column with at most 15 levels",
    "ordinal_encoding": _has("categorical", "categorical"),
    "target_encoding": _categorical_over(50),
    "frequency_encoding": _categorical_over(10),
    "rare_level_grouping": _rare_levels,
    "datetime_parts": _has("datetime", "date/time"),
    "cyclical_encoding": _cyclical,
    "split_composite_string": _composite,
    "group_stats": _group_keys,
    "tfidf_text": _has("text", "free-text"),
    "tfidf_svd": _has("text", "free-text"),
    "text_stats": _has("text", "free-text"),
    "numeric_ratios": _numeric_columns(2),
    "numeric_interactions": _numeric_columns(2),
    "coordinate_rotation": _coordinates,
    "quantile_transform": _skewed_numeric(non_negative=False),
    "standard_scale": _numeric_columns(1),
    "log_features": _skewed_numeric(non_negative=True),
    "row_missing_count": _missing_columns(2),
    "binning": lambda p: None if _numeric(p, min_distinct=11) else "no numeric column with more than 10 values",
    "set_model": lambda p: None,
    "gbdt_params": lambda p: None,
    "loss_for_metric": lambda p: None if p.task_type == "regression" and p.metric == "mae"
    else "not a regression scored by mean absolute error (squared-error and log losses already match the others)",
    "class_weights": _class_weights_condition,
    "early_stopping": lambda p: None if p.n_rows >= 500 else "under 500 rows: a held-out share is too small to stop on",
    "low_lr_more_trees": lambda p: None,
    "native_categorical": _native_categorical_condition,
    "seed_bagging": lambda p: None,
}
