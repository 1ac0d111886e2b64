"""Target transforms a model is fitted through (TransformedTargetRegressor's func / inverse_func)."""

import numpy as np


def shifted_log(y, offset=1.0):
    return np.log(np.asarray(y, dtype=float) + offset)


def shifted_exp(z, offset=1.0):
    return np.exp(z) - offset
