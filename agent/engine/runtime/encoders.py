"""Categorical encoders and missing-value indicators: each learns its levels only from the rows it is fitted on."""

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin

from .columns import CategoricalColumns, add_columns, categorical_columns, numeric_names


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


class FrequencyEncoding(TransformerMixin, BaseEstimator):
    """Add `<name>_freq`: each level's share (or count) of the fit rows, 0 for unseen levels, for categorical
    columns with more than `min_levels` levels (and numeric ones too when `numeric`)."""

    def __init__(self, min_levels=10, normalize=True, numeric=False, keep_original=True):
        self.min_levels = min_levels
        self.normalize = normalize
        self.numeric = numeric
        self.keep_original = keep_original

    def fit(self, X, y=None):
        names = categorical_columns(X) + (numeric_names(X) if self.numeric else [])
        self.counts_ = {name: X[name].value_counts(normalize=self.normalize, dropna=True).to_dict()
                        for name in names if X[name].nunique() > self.min_levels}
        return self

    def transform(self, X):
        features = {f"{name}_freq": X[name].map(counts).astype(float).fillna(0.0) for name, counts in self.counts_.items()}
        out = add_columns(X, features)
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


class NativeCategories(TransformerMixin, BaseEstimator):
    """Categorical columns as pandas categories (the `max_levels` most frequent fit levels; others missing),
    for models that split on categories natively (HistGradientBoosting, XGBoost, LightGBM). A column with more
    fit levels than `codes_above` becomes integer codes by frequency instead (unseen levels -1): LightGBM's
    category splits overfit many-level columns, where ordered codes split in a few thresholds."""

    def __init__(self, max_levels=250, skip=(), codes_above=None):
        self.max_levels = max_levels
        self.skip = skip
        self.codes_above = codes_above

    def fit(self, X, y=None):
        self.levels_, self.codes_ = {}, {}
        for name in CategoricalColumns(self.skip)(X):
            counts = X[name].dropna().astype(str).value_counts()
            if self.codes_above is not None and len(counts) > self.codes_above:
                self.codes_[name] = {level: code for code, level in enumerate(counts.index)}
            else:
                self.levels_[name] = list(counts.index[: self.max_levels])
        return self

    def transform(self, X):
        coded = {}
        for name, levels in self.levels_.items():
            known = set(levels)
            strings = X[name].map(lambda v: str(v) if not pd.isna(v) and str(v) in known else None)
            coded[name] = pd.Categorical(strings.astype(object), categories=levels)
        for name, codes in self.codes_.items():
            coded[name] = X[name].map(lambda v: -1 if pd.isna(v) else codes.get(str(v), -1)).astype(float)
        return X.assign(**coded)
