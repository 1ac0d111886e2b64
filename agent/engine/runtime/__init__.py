"""Run-time support for solutions: reading a task, feature helpers, metrics, cross-validation, submissions.

Every rendered solution.py carries this module's source verbatim (see agent.outputs.solution), so the agent and
the user's copy score a model with the same code. It must therefore import only numpy, pandas,
scikit-learn and, when installed, xgboost / lightgbm / catboost — nothing from casebook.
"""

import re
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.stats import rankdata

# Most estimator imports below are for the model source that solution.py's build_model() evaluates,
# so they look unused to a linter: keep them (ruff: F401 is off for this file in pyproject.toml).
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor, make_column_selector
from sklearn.decomposition import TruncatedSVD
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
    VotingClassifier,
    VotingRegressor,
)
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression, QuantileRegressor, Ridge
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    cohen_kappa_score,
    f1_score,
    log_loss,
    matthews_corrcoef,
    mean_absolute_error,
    mean_absolute_percentage_error,
    mean_squared_error,
    r2_score,
    roc_auc_score,
)
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    OneHotEncoder,
    PowerTransformer,
    QuantileTransformer,
    StandardScaler,
    TargetEncoder,
)

try:
    from xgboost import XGBClassifier, XGBRegressor
except ImportError:  # a solution that does not use XGBoost runs without it
    pass
try:
    from lightgbm import LGBMClassifier, LGBMRegressor
except ImportError:
    pass
try:
    from catboost import CatBoostClassifier, CatBoostRegressor
except ImportError:
    pass

# Column selectors evaluated when a step is fitted, so they also see columns earlier steps created.
NUMERIC = make_column_selector(dtype_include="number")


def is_free_text(values):
    """Free text, by the rule the task profile uses: several words per value and mostly distinct values."""
    present = values.dropna()
    if len(present) == 0 or pd.api.types.is_numeric_dtype(values) or isinstance(values.dtype, pd.CategoricalDtype):
        return False
    sample = present.head(500).astype(str)
    return sample.str.split().str.len().mean() >= 3.0 and present.nunique() / len(present) >= 0.5


def categorical_columns(X):
    """Non-numeric columns that are not free text (text is left to a text step, e.g. tfidf_text)."""
    return [name for name in X.columns if not pd.api.types.is_numeric_dtype(X[name]) and not is_free_text(X[name])]


class CategoricalColumns:
    """Column selector: the non-numeric columns, except `text` — free-text columns a text step (tfidf_text)
    consumes after the encoders, which must therefore leave them alone."""

    def __init__(self, text=()):
        self.text = tuple(text)

    def __call__(self, X):
        return [name for name in X.columns if not pd.api.types.is_numeric_dtype(X[name]) and name not in self.text]

    def __repr__(self):
        return f"CategoricalColumns({list(self.text)!r})"


CATEGORICAL = CategoricalColumns()


def on_columns(transformer, columns):
    """Apply `transformer` to `columns` and pass every other column through, keeping names."""
    return ColumnTransformer(
        [("step", transformer, columns)], remainder="passthrough", verbose_feature_names_out=False
    ).set_output(transform="pandas")


def one_hot_name(column, category):
    # XGBoost rejects feature names holding [ ] or <, which category values often do ("<30").
    return re.sub(r"[\[\]<>,]", "_", f"{column}={category}")


class AddMissingIndicators(TransformerMixin, BaseEstimator):
    """Add a 0/1 column `<name>_missing` for each column missing in at least `min_missing_frac` of fit rows."""

    def __init__(self, min_missing_frac=0.01):
        self.min_missing_frac = min_missing_frac

    def fit(self, X, y=None):
        shares = X.isna().mean()
        self.columns_ = [name for name in X.columns if shares[name] > 0 and shares[name] >= self.min_missing_frac]
        return self

    def transform(self, X):
        return X.assign(**{f"{name}_missing": X[name].isna().astype(float) for name in self.columns_})


class OrdinalCodes(TransformerMixin, BaseEstimator):
    """Each non-numeric column as numbers: categories by descending training frequency, in sorted order, or
    as `mappings` say. Unseen categories get `unknown_value`; missing values stay missing."""

    def __init__(self, order="frequency", unknown_value=-1, mappings=None, skip=()):
        self.order = order
        self.unknown_value = unknown_value
        self.mappings = mappings
        self.skip = skip

    def fit(self, X, y=None):
        self.codes_ = {}
        for name in CategoricalColumns(self.skip)(X):
            given = (self.mappings or {}).get(name)
            if given is not None:
                self.codes_[name] = dict(given)
                continue
            counts = X[name].dropna().astype(str).value_counts()
            levels = list(counts.index) if self.order == "frequency" else sorted(counts.index)
            self.codes_[name] = {level: code for code, level in enumerate(levels)}
        return self

    def transform(self, X):
        coded = {}
        for name, codes in self.codes_.items():
            values = X[name]
            mapped = values.astype(str).map(codes).astype(float).fillna(self.unknown_value)
            coded[name] = mapped.where(values.notna(), np.nan)
        return X.assign(**coded)


class DatetimeParts(TransformerMixin, BaseEstimator):
    """Replace each listed date column by its parts, and optionally the days since the earliest training date."""

    def __init__(self, columns=(), parts=("year", "month", "day", "dayofweek", "hour"), add_elapsed=False):
        self.columns = columns
        self.parts = parts
        self.add_elapsed = add_elapsed

    def fit(self, X, y=None):
        self.reference_ = {name: _as_datetime(X[name]).min() for name in self.columns}
        return self

    def transform(self, X):
        features = {}
        for name in self.columns:
            when = _as_datetime(X[name])
            for part in self.parts:
                values = when.dt.dayofweek >= 5 if part == "is_weekend" else getattr(when.dt, part)
                features[f"{name}_{part}"] = values.astype(float).where(when.notna(), np.nan)
            if self.add_elapsed:
                features[f"{name}_days"] = (when - self.reference_[name]).dt.total_seconds() / 86400
        return X.drop(columns=list(self.columns)).assign(**features)


def _as_datetime(values):
    return pd.to_datetime(values, errors="coerce", format="mixed")


# ---- feature transformers of the recipe steps: each learns only from the rows it is fitted on.

def _add_columns(X, features):
    """X with the new columns appended in one go (repeated assign fragments the frame)."""
    if not features:
        return X
    added = pd.DataFrame(features, index=X.index)
    return pd.concat([X.drop(columns=[name for name in added.columns if name in X.columns]), added], axis=1)


def _numeric_names(X):
    return [name for name in X.columns if pd.api.types.is_numeric_dtype(X[name]) and not pd.api.types.is_bool_dtype(X[name])]


class FrequencyEncoding(TransformerMixin, BaseEstimator):
    """Add `<name>_freq`: each level's share (or count) of the fit rows, 0 for unseen levels, for categorical
    columns with more than `min_levels` levels (and numeric ones too when `numeric`)."""

    def __init__(self, min_levels=10, normalize=True, numeric=False, keep_original=True):
        self.min_levels = min_levels
        self.normalize = normalize
        self.numeric = numeric
        self.keep_original = keep_original

    def fit(self, X, y=None):
        names = categorical_columns(X) + (_numeric_names(X) if self.numeric else [])
        self.counts_ = {name: X[name].value_counts(normalize=self.normalize, dropna=True).to_dict()
                        for name in names if X[name].nunique() > self.min_levels}
        return self

    def transform(self, X):
        features = {f"{name}_freq": X[name].map(counts).astype(float).fillna(0.0) for name, counts in self.counts_.items()}
        out = _add_columns(X, features)
        return out if self.keep_original else out.drop(columns=list(self.counts_))


class RareLevels(TransformerMixin, BaseEstimator):
    """Replace categorical levels seen fewer than `min_count` times in the fit rows (and unseen ones) by `other_label`."""

    def __init__(self, min_count=10, other_label="__rare__"):
        self.min_count = min_count
        self.other_label = other_label

    def fit(self, X, y=None):
        self.kept_ = {}
        for name in categorical_columns(X):
            counts = X[name].value_counts(dropna=True)
            self.kept_[name] = set(counts.index[counts >= self.min_count])
        return self

    def transform(self, X):
        grouped = {}
        for name, kept in self.kept_.items():
            values = X[name]
            grouped[name] = values.where(values.isna() | values.isin(kept), self.other_label)
        return X.assign(**grouped)


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
        names = _numeric_names(X)
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
        for name in _numeric_names(X):
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
        return _add_columns(X, features)


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
        return _add_columns(X, features)


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
            values = sorted(_numeric_names(X), key=lambda name: -X[name].nunique())[: self.max_aggs]
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
        return _add_columns(X, features)


def _vectorizers(analyzer, ngram_range, max_features, min_df, sublinear_tf):
    if analyzer == "word+char":
        return [TfidfVectorizer(analyzer="word", ngram_range=tuple(ngram_range), max_features=max_features,
                                min_df=min_df, sublinear_tf=sublinear_tf),
                TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), max_features=max_features,
                                min_df=min_df, sublinear_tf=sublinear_tf)]
    return [TfidfVectorizer(analyzer=analyzer, ngram_range=tuple(ngram_range), max_features=max_features,
                            min_df=min_df, sublinear_tf=sublinear_tf)]


def _text(values):
    return values.astype(object).where(values.notna(), "").astype(str)


class TfidfText(TransformerMixin, BaseEstimator):
    """TF-IDF of the free-text `columns` next to every other (already numeric) column: a sparse matrix
    (output="sparse", for linear models and XGBoost) or a DataFrame (output="dense", small vocabularies)."""

    def __init__(self, columns=(), analyzer="word", ngram_range=(1, 2), max_features=50000, min_df=2,
                 sublinear_tf=True, output="sparse"):
        self.columns = columns
        self.analyzer = analyzer
        self.ngram_range = ngram_range
        self.max_features = max_features
        self.min_df = min_df
        self.sublinear_tf = sublinear_tf
        self.output = output

    def fit(self, X, y=None):
        self.text_ = [name for name in self.columns if name in X.columns]
        self.vectorizers_ = {}
        for name in self.text_:
            fitted = []
            for vectorizer in _vectorizers(self.analyzer, self.ngram_range, self.max_features, self.min_df,
                                           self.sublinear_tf):
                try:
                    fitted.append(vectorizer.fit(_text(X[name])))
                except ValueError:  # no term reaches min_df in these rows
                    pass
            self.vectorizers_[name] = fitted
        self.rest_ = [name for name in X.columns if name not in self.text_]
        return self

    def transform(self, X):
        blocks = [sparse.csr_matrix(X[self.rest_].to_numpy(dtype=float))]
        names = [str(name) for name in self.rest_]
        for name, fitted in self.vectorizers_.items():
            for index, vectorizer in enumerate(fitted):
                blocks.append(vectorizer.transform(_text(X[name])))
                names += [f"{name}_tfidf{index}_{term}" for term in vectorizer.get_feature_names_out()]
        matrix = sparse.hstack(blocks, format="csr")
        if self.output == "sparse":
            return matrix
        return pd.DataFrame(matrix.toarray(), columns=names, index=X.index)


class TfidfSvd(TransformerMixin, BaseEstimator):
    """Add `n_components` dense TruncatedSVD components of each text column's TF-IDF (the text stays)."""

    def __init__(self, columns=(), n_components=64, analyzer="word", ngram_range=(1, 2), max_features=20000,
                 random_state=0):
        self.columns = columns
        self.n_components = n_components
        self.analyzer = analyzer
        self.ngram_range = ngram_range
        self.max_features = max_features
        self.random_state = random_state

    def fit(self, X, y=None):
        self.models_ = {}
        for name in self.columns:
            if name not in X.columns:
                continue
            vectorizer = TfidfVectorizer(analyzer=self.analyzer, ngram_range=tuple(self.ngram_range),
                                         max_features=self.max_features, sublinear_tf=True)
            matrix = vectorizer.fit_transform(_text(X[name]))
            svd = TruncatedSVD(min(self.n_components, max(matrix.shape[1] - 1, 1)), random_state=self.random_state)
            self.models_[name] = (vectorizer, svd.fit(matrix))
        return self

    def transform(self, X):
        features = {}
        for name, (vectorizer, svd) in self.models_.items():
            components = svd.transform(vectorizer.transform(_text(X[name])))
            for index in range(components.shape[1]):
                features[f"{name}_svd{index}"] = components[:, index]
        return _add_columns(X, features)


_PUNCTUATION = re.compile(r"[^\w\s]")


class TextStats(TransformerMixin, BaseEstimator):
    """Add simple statistics of each text column: characters, words, distinct words, uppercase share, digits, punctuation."""

    def __init__(self, columns=(), stats=("n_chars", "n_words", "n_unique_words", "upper_ratio", "n_digits", "n_punct")):
        self.columns = columns
        self.stats = stats

    def fit(self, X, y=None):
        self.text_ = [name for name in self.columns if name in X.columns]
        return self

    def transform(self, X):
        features = {}
        for name in self.text_:
            text = _text(X[name])
            chars = text.str.len().astype(float)
            words = text.str.split()
            computed = {
                "n_chars": chars,
                "n_words": words.str.len().astype(float),
                "n_unique_words": words.map(lambda ws: float(len(set(ws)))),
                "upper_ratio": text.str.count(r"[A-Z]") / chars.clip(lower=1),
                "n_digits": text.str.count(r"\d").astype(float),
                "n_punct": text.map(lambda t: float(len(_PUNCTUATION.findall(t)))),
            }
            for stat in self.stats:
                features[f"{name}_{stat}"] = computed[stat]
        return _add_columns(X, features)


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
        names = [name for name in _numeric_names(X) if X[name].nunique() > 2]
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
        return _add_columns(X, features)


_LAT_NAMES = ("lat", "latitude")
_LON_NAMES = ("lon", "lng", "long", "longitude")


def _coordinate_column(X, given, names):
    if given is not None:
        return given
    for name in _numeric_names(X):
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
        self.lat_ = _coordinate_column(X, self.lat_col, _LAT_NAMES)
        self.lon_ = _coordinate_column(X, self.lon_col, _LON_NAMES)
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
        return _add_columns(X, features)


class LogSkewed(TransformerMixin, BaseEstimator):
    """log1p of numeric columns that are non-negative and skewed (skewness above `skew_threshold`) in the fit rows."""

    def __init__(self, skew_threshold=0.75, method="log1p"):
        self.skew_threshold = skew_threshold
        self.method = method

    def fit(self, X, y=None):
        self.columns_ = [name for name in _numeric_names(X)
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
        self.numeric_ = _numeric_names(X)
        return self

    def transform(self, X):
        missing = X[self.columns_].isna().sum(axis=1).astype(float)
        features = {"row_missing_count": missing}
        if self.add_fraction:
            features["row_missing_fraction"] = missing / max(len(self.columns_), 1)
        if self.count_zeros:
            features["row_zero_count"] = (X[self.numeric_] == 0).sum(axis=1).astype(float)
        return _add_columns(X, features)


class Binning(TransformerMixin, BaseEstimator):
    """Add `<name>_bin`: the bin index of numeric columns, with quantile or uniform edges from the fit rows."""

    def __init__(self, columns=None, n_bins=10, strategy="quantile"):
        self.columns = columns
        self.n_bins = n_bins
        self.strategy = strategy

    def fit(self, X, y=None):
        names = self.columns if self.columns is not None else [
            name for name in _numeric_names(X) if X[name].nunique() > self.n_bins]
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
        return _add_columns(X, features)


class NativeCategories(TransformerMixin, BaseEstimator):
    """Categorical columns as pandas categories (the `max_levels` most frequent fit levels; others missing),
    for models that split on categories natively (HistGradientBoosting, XGBoost, LightGBM)."""

    def __init__(self, max_levels=250, skip=()):
        self.max_levels = max_levels
        self.skip = skip

    def fit(self, X, y=None):
        self.levels_ = {name: list(X[name].dropna().astype(str).value_counts().index[: self.max_levels])
                        for name in CategoricalColumns(self.skip)(X)}
        return self

    def transform(self, X):
        coded = {}
        for name, levels in self.levels_.items():
            known = set(levels)
            strings = X[name].map(lambda v: str(v) if not pd.isna(v) and str(v) in known else None)
            coded[name] = pd.Categorical(strings.astype(object), categories=levels)
        return X.assign(**coded)


class ClassWeighted(ClassifierMixin, BaseEstimator):
    """A classifier fitted with per-row weights that balance the classes (capped at `max_weight`)."""

    def __init__(self, estimator=None, mode="balanced", max_weight=50.0):
        self.estimator = estimator
        self.mode = mode
        self.max_weight = max_weight

    def fit(self, X, y, sample_weight=None):
        y = np.asarray(y)
        classes, counts = np.unique(y, return_counts=True)
        weights = np.minimum(len(y) / (len(classes) * counts), self.max_weight)
        row_weights = weights[np.searchsorted(classes, y)]
        if sample_weight is not None:
            row_weights = row_weights * np.asarray(sample_weight)
        self.estimator_ = clone(self.estimator).fit(X, y, sample_weight=row_weights)
        self.classes_ = self.estimator_.classes_
        return self

    def predict(self, X):
        return self.estimator_.predict(X)

    def predict_proba(self, X):
        return self.estimator_.predict_proba(X)


class _Wrapper(BaseEstimator):
    """A model around `estimator` that is a classifier or a regressor as its estimator is."""

    def _inner(self):
        return self.estimator

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            tags.estimator_type = self._inner().__sklearn_tags__().estimator_type
        except AttributeError:
            pass
        return tags


class EarlyStopped(_Wrapper):
    """An XGBoost or LightGBM model that stops adding trees when a held-out share of its own fit rows stops
    improving for `rounds` rounds (the held-out rows come from the training fold, never the validation fold)."""

    def __init__(self, estimator=None, rounds=100, validation_fraction=0.1, random_state=0):
        self.estimator = estimator
        self.rounds = rounds
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None):
        y = np.asarray(y)
        rng = np.random.default_rng(self.random_state)
        held_out = rng.random(len(y)) < self.validation_fraction
        if hasattr(self.estimator, "predict_proba"):  # keep every class in the fitting part
            for label in np.unique(y):
                rows = np.flatnonzero(y == label)
                held_out[rows[:1]] = False
        fit_rows, eval_rows = np.flatnonzero(~held_out), np.flatnonzero(held_out)
        part = (lambda data, rows: data.iloc[rows]) if hasattr(X, "iloc") else (lambda data, rows: data[rows])
        weights = {} if sample_weight is None else {"sample_weight": np.asarray(sample_weight)[fit_rows]}
        model = clone(self.estimator)
        eval_set = [(part(X, eval_rows), y[eval_rows])]
        if type(model).__name__.startswith("LGBM"):
            import lightgbm

            model.fit(part(X, fit_rows), y[fit_rows], eval_set=eval_set,
                      callbacks=[lightgbm.early_stopping(self.rounds, verbose=False)], **weights)
        else:
            model.set_params(early_stopping_rounds=self.rounds)
            model.fit(part(X, fit_rows), y[fit_rows], eval_set=eval_set, verbose=False, **weights)
        self.estimator_ = model
        if hasattr(model, "classes_"):
            self.classes_ = model.classes_
        return self

    def predict(self, X):
        return self.estimator_.predict(X)

    def predict_proba(self, X):
        return self.estimator_.predict_proba(X)


class SeedBagged(_Wrapper):
    """The same model fitted with `n_seeds` random seeds (random_state, random_state + 1, ...) and its
    predictions averaged, which averages away the variance one seed's row and column sampling adds.
    `seed_param` names the seed inside `estimator` (e.g. "estimator__random_state" through a wrapper)."""

    def __init__(self, estimator=None, n_seeds=3, seed_param="random_state", random_state=0):
        self.estimator = estimator
        self.n_seeds = n_seeds
        self.seed_param = seed_param
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None):
        weights = {} if sample_weight is None else {"sample_weight": sample_weight}
        self.estimators_ = [clone(self.estimator).set_params(**{self.seed_param: self.random_state + k}).fit(X, y, **weights)
                            for k in range(self.n_seeds)]
        if hasattr(self.estimators_[0], "classes_"):
            self.classes_ = self.estimators_[0].classes_
        return self

    def predict_proba(self, X):
        return np.mean([member.predict_proba(X) for member in self.estimators_], axis=0)

    def predict(self, X):
        if hasattr(self, "classes_"):
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        return np.mean([member.predict(X) for member in self.estimators_], axis=0)


# ---- combining fitted members with fixed coefficients (agent.search.blending learns them out of fold)

LINKS = ("identity", "log1p", "logit", "rank")


def apply_link(values, link, groups=None):
    """Values (members x rows, or rows) in the space they are combined in. "rank" scales each member's ranks
    to (0, 1] within each group of row positions (all rows when there are no groups)."""
    values = np.asarray(values, dtype=float)
    if link == "log1p":
        return np.log1p(np.clip(values, 0, None))
    if link == "logit":
        clipped = np.clip(values, 1e-6, 1 - 1e-6)
        return np.log(clipped / (1 - clipped))
    if link == "rank":
        ranks = np.empty_like(values)
        for rows in groups if groups is not None else [np.arange(values.shape[-1])]:
            ranks[..., rows] = rankdata(values[..., rows], axis=-1) / len(rows)
        return ranks
    if link != "identity":
        raise ValueError(f"unknown link {link!r}; use one of {LINKS}")
    return values


def combine(member_values, weights, intercept, link, *, classification, groups=None):
    """inverse_link(intercept + weights . link(member values)): regression values, or class probabilities of a
    binary task from each member's positive-class probability."""
    combined = intercept + np.tensordot(np.asarray(weights, dtype=float), apply_link(member_values, link, groups),
                                        axes=1)
    if link == "logit":
        combined = 1.0 / (1.0 + np.exp(-combined))
    elif link == "log1p":
        combined = np.expm1(combined)
    return np.column_stack([1.0 - combined, combined]) if classification else combined


class LinearStack(_Wrapper):
    """Members fitted on the same rows, combined with fixed coefficients (see combine): a linear stack, or a
    rank average. Binary classifiers combine their positive-class probabilities; "rank" ranks the batch
    being predicted."""

    def __init__(self, estimators=(), weights=(), intercept=0.0, link="identity"):
        self.estimators = estimators
        self.weights = weights
        self.intercept = intercept
        self.link = link

    def _inner(self):
        return self.estimators[0][1] if self.estimators else None

    def fit(self, X, y):
        self.estimators_ = [clone(estimator).fit(X, y) for _, estimator in self.estimators]
        if hasattr(self.estimators_[0], "classes_"):
            self.classes_ = self.estimators_[0].classes_
        return self

    def _combined(self, X):
        classification = hasattr(self, "classes_")
        values = [member.predict_proba(X)[:, 1] if classification else member.predict(X) for member in self.estimators_]
        return combine(np.stack(values), self.weights, self.intercept, self.link, classification=classification)

    def predict_proba(self, X):
        return self._combined(X)

    def predict(self, X):
        combined = self._combined(X)
        return self.classes_[np.argmax(combined, axis=1)] if hasattr(self, "classes_") else combined


def shifted_log(y, offset=1.0):
    return np.log(np.asarray(y, dtype=float) + offset)


def shifted_exp(z, offset=1.0):
    return np.exp(z) - offset


# ---- metrics: every function takes the true labels or values and the prediction the metric needs:
# class probabilities (n_rows x n_classes) when it needs probabilities, else labels or values.

def rmse(y_true, y_pred):
    return float(np.sqrt(mean_squared_error(y_true, y_pred)))


def rmsle(y_true, y_pred):
    return rmse(np.log1p(y_true), np.log1p(np.clip(y_pred, 0, None)))


def roc_auc(y_true, proba):
    if proba.shape[1] == 2:
        return float(roc_auc_score(y_true, proba[:, 1]))
    return float(roc_auc_score(y_true, proba, multi_class="ovr", labels=np.arange(proba.shape[1])))


def class_log_loss(y_true, proba):
    return float(log_loss(y_true, proba, labels=np.arange(proba.shape[1])))


def f1(y_true, y_pred):
    return float(f1_score(y_true, y_pred, average="binary" if len(np.unique(y_true)) <= 2 else "macro"))


METRIC_FUNCTIONS = {
    "rmsle": rmsle,
    "rmse": rmse,
    "mse": lambda y, p: float(mean_squared_error(y, p)),
    "mae": lambda y, p: float(mean_absolute_error(y, p)),
    "mape": lambda y, p: float(mean_absolute_percentage_error(y, p)),
    "r2": lambda y, p: float(r2_score(y, p)),
    "roc_auc": roc_auc,
    "log_loss": class_log_loss,
    "mcc": lambda y, p: float(matthews_corrcoef(y, p)),
    "qwk": lambda y, p: float(cohen_kappa_score(y, p, weights="quadratic")),
    "f1_macro": lambda y, p: float(f1_score(y, p, average="macro")),
    "f1": f1,
    "balanced_accuracy": lambda y, p: float(balanced_accuracy_score(y, p)),
    "accuracy": lambda y, p: float(accuracy_score(y, p)),
}


def predict_for_metric(model, X, needs_proba, n_classes=None):
    """What the metric scores: class probabilities (all classes, even ones a fold lacked) or predictions."""
    if not needs_proba:
        return np.asarray(model.predict(X))
    proba = np.asarray(model.predict_proba(X), dtype=float)
    proba = proba / proba.sum(axis=1, keepdims=True)  # float32 outputs (XGBoost) sum to 1 only roughly
    if n_classes is not None and proba.shape[1] != n_classes:
        full = np.zeros((len(proba), n_classes))
        full[:, np.asarray(model.classes_, dtype=int)] = proba
        proba = full
    return proba


def make_folds(y, *, classification, n_splits, seed):
    """Shuffled K folds, stratified for classification."""
    splitter = (StratifiedKFold if classification else KFold)(n_splits=n_splits, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(y)), y))


def out_of_fold(model, X, y, *, needs_proba, classification, n_splits, seed):
    """Every row predicted by a fresh clone of `model` fitted on the other folds; (predictions, folds)."""
    n_classes = int(np.max(y)) + 1 if classification else None
    folds = make_folds(y, classification=classification, n_splits=n_splits, seed=seed)
    predictions = None
    for train_rows, valid_rows in folds:
        fitted = clone(model).fit(X.iloc[train_rows], y[train_rows])
        prediction = predict_for_metric(fitted, X.iloc[valid_rows], needs_proba, n_classes)
        if predictions is None:
            predictions = np.zeros((len(y), *np.shape(prediction)[1:]), dtype=np.asarray(prediction).dtype)
        predictions[valid_rows] = prediction
    return predictions, folds


def fold_scores(predictions, y, folds, metric):
    """The metric on each validation fold of out-of-fold predictions."""
    return [METRIC_FUNCTIONS[metric](y[valid_rows], predictions[valid_rows]) for _, valid_rows in folds]


def cross_validate(model, X, y, *, metric, needs_proba, classification, n_splits, seed):
    """The metric on each held-out fold, fitting a fresh clone of `model` per fold."""
    predictions, folds = out_of_fold(model, X, y, needs_proba=needs_proba, classification=classification,
                                     n_splits=n_splits, seed=seed)
    return fold_scores(predictions, y, folds, metric)


def normalise_frame(frame):
    """Every non-numeric column as Python objects with NaN for missing, whatever the pandas version."""
    frame = frame.copy()
    for name in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[name]):
            values = frame[name].astype(object)
            frame[name] = values.where(values.notna(), np.nan)
    return frame


def read_table(path):
    return normalise_frame(pd.read_csv(path))


def encode_target(values, classification):
    """Classes as 0..k-1 (sorted labels, so the positive class of a binary task is the larger one)."""
    if not classification:
        return np.asarray(values, dtype=float), None
    classes, codes = np.unique(np.asarray(values), return_inverse=True)
    return codes, classes


def load_task(task_dir, target, id_column):
    """Training features, raw target, test features, test ids (None without an id column) and the sample submission."""
    task_dir = Path(task_dir)
    train = read_table(task_dir / "train.csv")
    test = read_table(task_dir / "test.csv")
    sample_path = task_dir / "sample_submission.csv"
    sample = read_table(sample_path) if sample_path.is_file() else None
    features = [name for name in train.columns if name != target and name in test.columns]
    test_ids = test[id_column] if id_column is not None else None
    return train[features], train[target], test[features], test_ids, sample


def submission_frame(prediction, *, test_ids, id_column, target, classes, needs_proba, sample):
    """The submission: the sample's ids, order and columns when there is a sample, else id + target."""
    single_output = sample is not None and len(sample.columns) == (2 if id_column is not None else 1)
    target = sample.columns[-1] if single_output else target
    if classes is not None and needs_proba:
        proba = np.asarray(prediction)
        by_class = {str(label): proba[:, index] for index, label in enumerate(classes)}
        class_columns = sample is not None and set(sample.columns[1:]) <= set(by_class) and len(sample.columns) > 2
        values = by_class if class_columns else {target: proba[:, -1] if proba.shape[1] == 2 else classes[proba.argmax(1)]}
    elif classes is not None:
        values = {target: classes[np.asarray(prediction, dtype=int)]}
    else:
        values = {target: np.asarray(prediction, dtype=float)}
    predicted = pd.DataFrame(values)
    if id_column is not None:
        predicted.insert(0, id_column, np.asarray(test_ids))
    if sample is None:
        return predicted
    if id_column is None:
        if len(sample) != len(predicted):
            raise ValueError(f"sample_submission.csv has {len(sample)} rows but test.csv has {len(predicted)}")
        return predicted[list(sample.columns)]
    ordered = sample[[id_column]].merge(predicted, on=id_column, how="left", validate="one_to_one")
    if ordered.drop(columns=[id_column]).isna().to_numpy().any():
        raise ValueError(f"sample_submission.csv lists ids that test.csv lacks (column {id_column!r})")
    return ordered[list(sample.columns)]
