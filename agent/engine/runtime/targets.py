"""Target transforms a model is fitted through (TransformedTargetRegressor's transformer)."""

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin


class ShiftedLog(TransformerMixin, BaseEstimator):
    """log(y + shift) and back. The shift is `offset` (log(1 + y) at the default) for a training target of no
    negative value; with negative values it is raised so that the least maps to log(offset): a log target on a
    target with negative values (an income change, a profit) is fitted on a log scale instead of NaN. A target below
    the training range (validation rows) is held at half the least shifted value, so it maps just below that range."""

    def __init__(self, offset=1.0):
        self.offset = offset

    def fit(self, y, _=None):
        least = float(np.min(np.asarray(y, dtype=float)))
        self.shift_ = max(float(self.offset), float(self.offset) - least)
        self.floor_ = (least + self.shift_) / 2
        return self

    def transform(self, y):
        return np.log(np.maximum(np.asarray(y, dtype=float) + self.shift_, self.floor_))

    def inverse_transform(self, z):
        return np.exp(np.asarray(z, dtype=float)) - self.shift_
