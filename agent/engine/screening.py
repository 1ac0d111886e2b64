"""Screening a wide table's columns before the search, so that its first node fits in its time cap.

Above WIDE_COLUMNS feature columns every model family's CV, and the verifier's probes, grow with the columns: a real
1,500-column table of 6,000 rows ran all seven drafts over their caps at 120 s. One LightGBM fit on a row sample, each
tree on a fraction of the columns (as FLAML's and AutoGluon's first models sample columns), ranks the columns by their
total split gain, and the search learns from the KEPT_COLUMNS best. The ranking takes a second or two and sees
interactions and categorical columns a univariate test would miss. solution.py reads the same columns
(its TASK["features"]).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from agent.engine.dataset import Dataset

WIDE_COLUMNS = 400  # feature columns above which a table is screened
KEPT_COLUMNS = 200
SCREEN_ROWS = 3000  # rows the ranking model is fitted on (drawn at random, by the seed)
# The ranking model: many shallow trees, each on a fifth of the columns, so that every column is tried often.
_RANKING_PARAMS = {"n_estimators": 100, "max_bin": 63, "learning_rate": 0.1, "num_leaves": 15, "min_child_samples": 5,
                   "colsample_bytree": 0.2, "subsample": 0.8, "subsample_freq": 1, "n_jobs": 1, "verbose": -1}


@dataclass(frozen=True)
class Screening:
    """Which columns a wide table's search learns from, and how they were chosen."""

    columns: int  # feature columns before screening
    kept: tuple[str, ...]
    rows: int  # rows the ranking model was fitted on
    seconds: float

    @property
    def note(self) -> str:
        return (f"wide table: the search learns from the {len(self.kept)} of its {self.columns} columns with the most "
                f"split gain in one LightGBM fit on {self.rows:,} rows ({self.seconds:.1f} s); solution.py reads the "
                "same columns")

    def to_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "kept": list(self.kept), "rows": self.rows, "seconds": round(self.seconds, 2),
                "method": "LightGBM split gain on a row sample"}


def screen_wide_table(dataset: Dataset, seed: int, *, wide: int = WIDE_COLUMNS,
                      keep: int = KEPT_COLUMNS) -> tuple[Dataset, Screening | None]:
    """The dataset restricted to its `keep` most useful columns when it has more than `wide`, and how they were
    chosen; the dataset itself and None for a narrower table."""
    names = list(dataset.X.columns)
    if len(names) <= wide:
        return dataset, None
    started = time.perf_counter()
    gains = column_gains(dataset, seed)
    # Most gain first; ties (columns no tree split on) keep the table's order.
    ranked = sorted(range(len(names)), key=lambda index: (-gains[index], index))
    kept = tuple(names[index] for index in sorted(ranked[:keep]))
    screening = Screening(len(names), kept, min(SCREEN_ROWS, len(dataset.y)), time.perf_counter() - started)
    return dataset.with_features(kept), screening


def column_gains(dataset: Dataset, seed: int) -> np.ndarray:
    """Each feature column's total split gain in one LightGBM model fitted on up to SCREEN_ROWS rows; text and
    categorical columns as integer codes."""
    import lightgbm

    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(dataset.y), size=min(SCREEN_ROWS, len(dataset.y)), replace=False))
    X = dataset.X.iloc[rows]
    coded = pd.DataFrame({str(index): (X[name] if pd.api.types.is_numeric_dtype(X[name])
                                       else pd.Series(pd.factorize(X[name])[0], index=X.index).replace(-1, np.nan))
                          for index, name in enumerate(X.columns)}).astype(float)
    model_class = lightgbm.LGBMClassifier if dataset.classification else lightgbm.LGBMRegressor
    model = model_class(importance_type="gain", random_state=seed, **_RANKING_PARAMS)
    model.fit(coded.to_numpy(), dataset.y[rows])
    return np.asarray(model.feature_importances_, dtype=float)
