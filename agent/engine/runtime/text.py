"""Features from free-text columns: TF-IDF (sparse or dense), its SVD components, and simple text statistics."""

import re

import pandas as pd
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer

from .columns import add_columns


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
        rest = X[self.rest_]
        # Native categories (runtime.NativeCategories) enter the matrix as their codes, missing as missing.
        codes = {name: rest[name].cat.codes.astype(float).where(rest[name].notna()) for name in rest.columns
                 if isinstance(rest[name].dtype, pd.CategoricalDtype)}
        blocks = [sparse.csr_matrix(rest.assign(**codes).to_numpy(dtype=float))]
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
        return add_columns(X, features)


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
        return add_columns(X, features)
