"""The estimators, transformers and splitters that rendered model source names (solution.py's build_model()).

Nothing in the runtime calls them, so they look unused to a linter: keep them (ruff: F401 is off for the
runtime in pyproject.toml). The boosting libraries are optional: a solution that does not use one runs without it.
"""

import numpy as np
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
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
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression, Ridge
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
from sklearn.svm import LinearSVR

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
