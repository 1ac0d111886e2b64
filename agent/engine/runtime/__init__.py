"""Run-time support for solutions: reading a task, feature helpers, metrics, cross-validation, submissions.

Every rendered solution.py carries this package's modules verbatim, concatenated in MODULE_ORDER (see
agent.outputs.solution), so the agent and the user's copy score a model with the same code. The modules must
therefore import only numpy, pandas, scipy, scikit-learn and, when installed, xgboost / lightgbm / catboost —
nothing from casebook — and one another only by relative imports of earlier modules in MODULE_ORDER (render
drops those lines: in solution.py every module's names are already defined above it).

This package's namespace is also what rendered model and step source is evaluated in (agent.engine.steps), so it
imports every module's public names.
"""

from . import columns, cv, encoders, estimators, features, metrics, shapes, stacking, targets, taskio, text, wrappers
from .columns import (
    CATEGORICAL,
    NUMERIC,
    CategoricalColumns,
    add_columns,
    categorical_columns,
    is_free_text,
    numeric_names,
    on_columns,
    one_hot_name,
)
from .cv import (
    CrossFit,
    FoldMean,
    average_fold_models,
    cross_fit,
    cross_validate,
    fit_fold,
    fold_scores,
    make_folds,
    members_averaged_or_refit,
    out_of_fold,
    refit,
    stops_early,
)
from .encoders import AddMissingIndicators, FrequencyEncoding, NativeCategories, OrdinalCodes, RareLevels
from .estimators import *  # noqa: F403 - every estimator rendered source may name (boosting ones when installed)
from .features import (
    LAT_NAMES,
    LON_NAMES,
    Binning,
    CoordinateRotation,
    CyclicalEncoding,
    DatetimeParts,
    DropConstant,
    GroupStats,
    LogSkewed,
    NumericPairs,
    RowMissing,
    SampleQuantileTransformer,
    SplitComposite,
    Winsorize,
    coordinate_column,
)
from .metrics import METRIC_FUNCTIONS, class_log_loss, f1, predict_for_metric, rmse, rmsle, roc_auc
from .shapes import as_predictions, as_probabilities
from .stacking import LINKS, LinearStack, apply_link, combine
from .targets import ShiftedLog
from .taskio import (
    ClassColumnsError,
    drop_rare_classes,
    encode_target,
    load_task,
    normalise_frame,
    read_table,
    submission_frame,
    submission_problems,
    with_rare_classes,
    written_labels,
)
from .text import TextStats, TfidfSvd, TfidfText
from .wrappers import (
    BOOSTING_LIBRARIES,
    ClassWeighted,
    EarlyStopped,
    SeedBagged,
    Wrapper,
    boosting_library,
    catboost_frame,
)

# The order solution.py concatenates the modules in: each may use only the names of the modules before it.
MODULE_ORDER = (shapes, estimators, columns, encoders, features, text, wrappers, stacking, targets, metrics, cv, taskio)
