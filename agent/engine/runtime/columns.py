"""Which columns a step works on: selectors, free-text detection, and applying a transformer to some columns."""

import re

import pandas as pd
from sklearn.compose import ColumnTransformer, make_column_selector

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
    # XGBoost rejects feature names holding [ ] or <, which category values often do ("<30"), and LightGBM those
    # holding JSON's special characters (a time of day, "11:38:36").
    return re.sub(r'[\[\]<>,:"{}]', "_", f"{column}={category}")


def add_columns(X, features):
    """X with the new columns appended in one go (repeated assign fragments the frame)."""
    if not features:
        return X
    added = pd.DataFrame(features, index=X.index)
    return pd.concat([X.drop(columns=[name for name in added.columns if name in X.columns]), added], axis=1)


def numeric_names(X):
    return [name for name in X.columns if pd.api.types.is_numeric_dtype(X[name]) and not pd.api.types.is_bool_dtype(X[name])]
