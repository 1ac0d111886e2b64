"""Feature transformers of the recipe steps: each learns only from the rows it is fitted on."""

import re

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.preprocessing import QuantileTransformer

from .columns import add_columns, categorical_columns, is_free_text, numeric_names


class DatetimeParts(TransformerMixin, BaseEstimator):
    """Replace each listed date column by its parts, and optionally the days since the earliest training date.

    A column of times of day without a date (11:38:36, 9:05) becomes one feature, its hour with the minutes and
    seconds as a fraction: read as dates, pandas would give them today's date, so their year, month and day would be
    the day the model runs, not anything in the data."""

    def __init__(self, columns=(), parts=("year", "month", "day", "dayofweek", "hour"), add_elapsed=False):
        self.columns = columns
        self.parts = parts
        self.add_elapsed = add_elapsed

    def fit(self, X, y=None):
        self.times_of_day_ = [name for name in self.columns if _is_time_of_day(X[name])]
        self.reference_ = {name: _as_datetime(X[name]).min() for name in self.columns if name not in self.times_of_day_}
        return self

    def transform(self, X):
        features = {}
        for name in self.columns:
            if name in self.times_of_day_:
                features[f"{name}_hour"] = _hours_of_day(X[name])
                continue
            when = _as_datetime(X[name])
            for part in self.parts:
                values = _date_part(when, part)
                features[f"{name}_{part}"] = values.astype(float).where(when.notna(), np.nan)
            if self.add_elapsed:
                features[f"{name}_days"] = (when - self.reference_[name]).dt.total_seconds() / 86400
        return X.drop(columns=list(self.columns)).assign(**features)


def _as_datetime(values):
    return pd.to_datetime(values, errors="coerce", format="mixed")


def _hours_of_day(values):
    """Hours since midnight of times written H:MM or H:MM:SS (missing where a value is neither)."""
    written = values.astype("string").str.strip().str.replace(r"^(\d{1,2}:\d{2})$", r"\1:00", regex=True)
    return pd.to_timedelta(written, errors="coerce").dt.total_seconds() / 3600


def _is_time_of_day(values):
    """Text whose present values nearly all read as times of day (the profile's rule for a date column: 95%)."""
    present = values.dropna()
    return (not pd.api.types.is_datetime64_any_dtype(values) and len(present) > 0
            and _hours_of_day(present).notna().mean() >= 0.95)


# Part names (the recipes' "dayofweek", ...) read through pandas' current accessors, not the deprecated aliases.
_DATE_ACCESSORS = {"dayofweek": "day_of_week", "weekday": "day_of_week", "dayofyear": "day_of_year",
                   "daysinmonth": "days_in_month"}


def _date_part(when, part):
    if part == "is_weekend":
        return when.dt.day_of_week >= 5
    if part in ("week", "weekofyear"):
        return when.dt.isocalendar().week.astype(float)
    return getattr(when.dt, _DATE_ACCESSORS.get(part, part))


class SampleQuantileTransformer(QuantileTransformer):
    """QuantileTransformer with `n_quantiles` at most the number of rows it is fitted on (scikit-learn would lower
    it too, but warn on every fit of a small fold)."""

    def fit(self, X, y=None):
        requested = self.n_quantiles
        self.n_quantiles = max(1, min(requested, X.shape[0]))
        try:
            return super().fit(X, y)
        finally:
            self.n_quantiles = requested


class DropConstant(TransformerMixin, BaseEstimator):
    """Drop columns whose most frequent value (missing counts as a value) covers `max_top_frequency` of the fit rows."""

    def __init__(self, max_top_frequency=0.999):
        self.max_top_frequency = max_top_frequency

    def fit(self, X, y=None):
        self.dropped_ = [name for name in X.columns
                         if len(X) and X[name].value_counts(dropna=False, normalize=True).iloc[0] >= self.max_top_frequency]
        return self

    def transform(self, X):
        return X.drop(columns=self.dropped_)


class Winsorize(TransformerMixin, BaseEstimator):
    """Clip numeric columns to their fit-row quantiles."""

    def __init__(self, lower_q=0.01, upper_q=0.99):
        self.lower_q = lower_q
        self.upper_q = upper_q

    def fit(self, X, y=None):
        names = numeric_names(X)
        self.bounds_ = {name: (X[name].quantile(self.lower_q), X[name].quantile(self.upper_q)) for name in names}
        return self

    def transform(self, X):
        return X.assign(**{name: X[name].clip(low, high) for name, (low, high) in self.bounds_.items()})


_PERIOD_NAMES = {"direction": 360, "wind_direction": 360, "winddir": 360, "bearing": 360}


class CyclicalEncoding(TransformerMixin, BaseEstimator):
    """Add sine and cosine of numeric columns named like a periodic quantity (`..._hour`, `month`, ...)."""

    def __init__(self, periods=None):
        self.periods = periods

    def fit(self, X, y=None):
        periods = {**_PERIOD_NAMES, **dict(self.periods or {})}
        self.columns_ = {}
        for name in numeric_names(X):
            lowered = str(name).lower()
            for key, period in periods.items():
                if lowered == key or lowered.endswith("_" + key):
                    self.columns_[name] = float(period)
                    break
        return self

    def transform(self, X):
        features = {}
        for name, period in self.columns_.items():
            angle = 2 * np.pi * X[name].astype(float) / period
            features[f"{name}_sin"], features[f"{name}_cos"] = np.sin(angle), np.cos(angle)
        return add_columns(X, features)


class SplitComposite(TransformerMixin, BaseEstimator):
    """Split string columns made of delimited parts ("B/12/P") into one column per part; parts that are
    numbers become numbers. Columns and separators are found on the fit rows: every non-missing value
    holds the separator and (almost) all split into the same number of parts. `add_group_size` adds the
    number of fit rows sharing the first part."""

    def __init__(self, column=None, sep="auto", regex=None, add_group_size=True, separators=("/", "_", "-", ":", "|")):
        self.column = column
        self.sep = sep
        self.regex = regex
        self.add_group_size = add_group_size
        self.separators = separators

    def fit(self, X, y=None):
        names = [self.column] if self.column is not None else [
            name for name in X.columns if not pd.api.types.is_numeric_dtype(X[name]) and not is_free_text(X[name])]
        separators = self.separators if self.sep == "auto" else (self.sep,)
        self.splits_ = {}
        for name in names:
            values = X[name].dropna().astype(str)
            if values.nunique() < 10:  # a composite key has many combinations of fewer distinct parts
                continue
            for sep in separators:
                parts = values.str.split(self.regex or sep, regex=self.regex is not None)
                counts = parts.str.len()
                n_parts = int(counts.mode().iloc[0])
                if n_parts < 2 or (counts == n_parts).mean() < 0.95:
                    continue
                frame = pd.DataFrame(parts[counts == n_parts].tolist(), columns=range(n_parts))
                numeric = [bool(pd.to_numeric(frame[i], errors="coerce").notna().mean() >= 0.95) for i in range(n_parts)]
                group_sizes = frame[0].value_counts().to_dict() if self.add_group_size else None
                self.splits_[name] = (sep, n_parts, numeric, group_sizes)
                break
        return self

    def transform(self, X):
        features = {}
        for name, (sep, n_parts, numeric, group_sizes) in self.splits_.items():
            values = X[name].astype(object).where(X[name].notna(), None)
            parts = values.map(lambda v: None if v is None else str(v).split(self.regex or sep) if self.regex is None
                               else re.split(self.regex, str(v)))
            for i in range(n_parts):
                part = parts.map(lambda p: p[i] if p is not None and len(p) > i else np.nan)
                features[f"{name}_part{i}"] = pd.to_numeric(part, errors="coerce") if numeric[i] else part.astype(object)
            if group_sizes is not None:
                first = parts.map(lambda p: p[0] if p is not None else np.nan)
                features[f"{name}_group_size"] = first.map(group_sizes).astype(float).fillna(0.0)
        return add_columns(X, features)


class GroupStats(TransformerMixin, BaseEstimator):
    """Statistics of numeric columns within groups of a categorical key, from the fit rows only: for each key,
    the row count of the group and each numeric column's mean/std/... (and value minus group mean)."""

    def __init__(self, group_cols=None, agg_cols=None, aggs=("mean", "std", "count"), add_diff=True,
                 max_groups=2, max_aggs=5):
        self.group_cols = group_cols
        self.agg_cols = agg_cols
        self.aggs = aggs
        self.add_diff = add_diff
        self.max_groups = max_groups
        self.max_aggs = max_aggs

    def fit(self, X, y=None):
        if self.group_cols is not None:
            keys = [name for name in self.group_cols if name in X.columns]
        else:  # keys with repeated rows: at least 3 levels, groups of 5 rows on average
            keys = [name for name in categorical_columns(X) if 3 <= X[name].nunique() <= len(X) / 5]
            keys = sorted(keys, key=lambda name: -X[name].nunique())[: self.max_groups]
        if self.agg_cols is not None:
            values = [name for name in self.agg_cols if name in X.columns]
        else:
            values = sorted(numeric_names(X), key=lambda name: -X[name].nunique())[: self.max_aggs]
        self.stats_ = {}
        for key in keys:
            grouped = X.groupby(X[key].astype(str), dropna=True)
            table = {"count": grouped.size().astype(float)} if "count" in self.aggs else {}
            for name in values:
                for agg in self.aggs:
                    if agg != "count":  # first/last: in the fit rows' order
                        table[f"{name}_{agg}"] = grouped[name].agg(agg).astype(float)
            self.stats_[key] = pd.DataFrame(table)
        self.values_ = values
        return self

    def transform(self, X):
        features = {}
        for key, table in self.stats_.items():
            keys = X[key].astype(str).where(X[key].notna(), None)
            for stat in table.columns:
                features[f"{key}__{stat}"] = keys.map(table[stat]).astype(float)
            if self.add_diff and "mean" in self.aggs:
                for name in self.values_:
                    features[f"{key}__{name}_diff"] = X[name].astype(float) - features[f"{key}__{name}_mean"]
        return add_columns(X, features)


class NumericPairs(TransformerMixin, BaseEstimator):
    """Ratios (`kind="ratio"`) or sums/differences/products (`kind="interaction"`) of pairs of numeric columns:
    the given `pairs`, or pairs of the columns most correlated with the target in the fit rows (by variance
    without a target), at most `max_pairs`."""

    def __init__(self, kind="ratio", pairs=None, max_pairs=20, ops=("sum", "difference", "product"), eps=1e-6):
        self.kind = kind
        self.pairs = pairs
        self.max_pairs = max_pairs
        self.ops = ops
        self.eps = eps

    def fit(self, X, y=None):
        if self.pairs is not None:
            self.pairs_ = [tuple(pair) for pair in self.pairs if pair[0] in X.columns and pair[1] in X.columns]
            return self
        names = [name for name in numeric_names(X) if X[name].nunique() > 2]
        if y is not None and len(names):
            target = pd.Series(np.asarray(y, dtype=float), index=X.index)
            strength = {name: abs(X[name].astype(float).corr(target)) for name in names}
        else:
            strength = {name: float(X[name].astype(float).std() / (abs(X[name].astype(float).mean()) + 1e-12))
                        for name in names}
        ranked = sorted(names, key=lambda name: -(0.0 if np.isnan(strength[name]) else strength[name]))
        k = 2
        while k < len(ranked) and k * (k - 1) // 2 < self.max_pairs:
            k += 1
        top = ranked[:k]
        self.pairs_ = [(a, b) for i, a in enumerate(top) for b in top[i + 1:]][: self.max_pairs]
        return self

    def transform(self, X):
        features = {}
        for a, b in self.pairs_:
            left, right = X[a].astype(float), X[b].astype(float)
            if self.kind == "ratio":
                features[f"{a}_per_{b}"] = (left / (right + self.eps)).replace([np.inf, -np.inf], np.nan)
                continue
            if "sum" in self.ops:
                features[f"{a}_plus_{b}"] = left + right
            if "difference" in self.ops:
                features[f"{a}_minus_{b}"] = left - right
            if "product" in self.ops:
                features[f"{a}_times_{b}"] = left * right
        return add_columns(X, features)


LAT_NAMES = ("lat", "latitude")
LON_NAMES = ("lon", "lng", "long", "longitude")


def coordinate_column(X, given, names):
    if given is not None:
        return given
    for name in numeric_names(X):
        tokens = {token.lower() for token in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", str(name)) if token}
        if tokens & set(names):
            return name
    return None


class CoordinateRotation(TransformerMixin, BaseEstimator):
    """Add the coordinates rotated by each angle (degrees) around the fit rows' centre, and optionally the
    distance and bearing from that centre: axis-aligned tree splits then cut the map along other directions."""

    def __init__(self, lat_col=None, lon_col=None, angles=(15, 30, 45, 60), add_polar=True):
        self.lat_col = lat_col
        self.lon_col = lon_col
        self.angles = angles
        self.add_polar = add_polar

    def fit(self, X, y=None):
        self.lat_ = coordinate_column(X, self.lat_col, LAT_NAMES)
        self.lon_ = coordinate_column(X, self.lon_col, LON_NAMES)
        if self.lat_ is not None and self.lon_ is not None:
            self.centre_ = (float(X[self.lat_].mean()), float(X[self.lon_].mean()))
        return self

    def transform(self, X):
        if self.lat_ is None or self.lon_ is None:
            return X
        lat = X[self.lat_].astype(float) - self.centre_[0]
        lon = X[self.lon_].astype(float) - self.centre_[1]
        features = {}
        for angle in self.angles:
            theta = np.deg2rad(angle)
            features[f"rot{angle}_x"] = lon * np.cos(theta) - lat * np.sin(theta)
            features[f"rot{angle}_y"] = lon * np.sin(theta) + lat * np.cos(theta)
        if self.add_polar:
            features["coord_radius"] = np.sqrt(lat**2 + lon**2)
            features["coord_bearing"] = np.arctan2(lat, lon)
        return add_columns(X, features)


class LogSkewed(TransformerMixin, BaseEstimator):
    """log1p of numeric columns that are non-negative and skewed (skewness above `skew_threshold`) in the fit rows."""

    def __init__(self, skew_threshold=0.75, method="log1p"):
        self.skew_threshold = skew_threshold
        self.method = method

    def fit(self, X, y=None):
        self.columns_ = [name for name in numeric_names(X)
                         if X[name].nunique() > 2 and X[name].min() >= 0 and X[name].skew() > self.skew_threshold]
        return self

    def transform(self, X):
        return X.assign(**{name: np.log1p(X[name].astype(float).clip(lower=0)) for name in self.columns_})


class RowMissing(TransformerMixin, BaseEstimator):
    """Add the number (and share) of missing values in each row, and optionally the number of zeros."""

    def __init__(self, add_fraction=True, count_zeros=False):
        self.add_fraction = add_fraction
        self.count_zeros = count_zeros

    def fit(self, X, y=None):
        self.columns_ = list(X.columns)
        self.numeric_ = numeric_names(X)
        return self

    def transform(self, X):
        missing = X[self.columns_].isna().sum(axis=1).astype(float)
        features = {"row_missing_count": missing}
        if self.add_fraction:
            features["row_missing_fraction"] = missing / max(len(self.columns_), 1)
        if self.count_zeros:
            features["row_zero_count"] = (X[self.numeric_] == 0).sum(axis=1).astype(float)
        return add_columns(X, features)


class Binning(TransformerMixin, BaseEstimator):
    """Add `<name>_bin`: the bin index of numeric columns, with quantile or uniform edges from the fit rows."""

    def __init__(self, columns=None, n_bins=10, strategy="quantile"):
        self.columns = columns
        self.n_bins = n_bins
        self.strategy = strategy

    def fit(self, X, y=None):
        names = self.columns if self.columns is not None else [
            name for name in numeric_names(X) if X[name].nunique() > self.n_bins]
        self.edges_ = {}
        for name in names:
            values = X[name].dropna().astype(float)
            if values.empty:
                continue
            if self.strategy == "quantile":
                edges = np.unique(np.quantile(values, np.linspace(0, 1, self.n_bins + 1)[1:-1]))
            else:
                edges = np.linspace(values.min(), values.max(), self.n_bins + 1)[1:-1]
            self.edges_[name] = edges
        return self

    def transform(self, X):
        features = {}
        for name, edges in self.edges_.items():
            values = X[name].astype(float)
            features[f"{name}_bin"] = pd.Series(np.searchsorted(edges, values, side="right"), index=X.index,
                                                dtype=float).where(values.notna(), np.nan)
        return add_columns(X, features)
