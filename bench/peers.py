"""Run an AutoML peer on a task folder and write a submission, for bench/agent_bench.py.

Runs inside the peer's own virtual environment and imports nothing from casebook:

    bench/.venv-flaml/bin/python bench/peers.py flaml TASK_DIR OUT.csv --target T --id ID --metric M \
        --classes '["No", "Yes"]' --time-budget 120
    bench/.venv-ag/bin/python bench/peers.py autogluon TASK_DIR OUT.csv ...

Set-up (benchmark-only, never product dependencies):
    python3 -m venv bench/.venv-flaml && bench/.venv-flaml/bin/pip install "flaml[automl]" lightgbm xgboost-cpu pandas scikit-learn
    python3 -m venv bench/.venv-ag && bench/.venv-ag/bin/pip install torch==2.13.0 "autogluon.tabular[lightgbm,catboost,xgboost]"

The submission follows the task's sample submission: the predicted label, the positive class's
probability (binary probability metrics) or one probability column per class (multiclass).
Log-scale metrics (rmsle) are fitted on log1p of the target, as a competitor would.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

PROBA_METRICS = {"roc_auc", "log_loss"}
FLAML_METRIC = {"roc_auc": "roc_auc", "log_loss": "log_loss", "accuracy": "accuracy", "f1": "f1",
                "rmse": "rmse", "rmsle": "rmse", "mae": "mae", "r2": "r2"}
AUTOGLUON_METRIC = {"roc_auc": "roc_auc", "log_loss": "log_loss", "accuracy": "accuracy", "f1": "f1",
                    "rmse": "root_mean_squared_error", "rmsle": "root_mean_squared_error",
                    "mae": "mean_absolute_error", "r2": "r2"}


def fit_predict(peer: str, X: pd.DataFrame, y: pd.Series, X_test: pd.DataFrame, metric: str, task: str,
                budget: float, seed: int, estimators: list[str] | None = None) -> np.ndarray:
    """Probabilities (n, n_classes) for probability metrics, else labels or values. `estimators`: FLAML's
    estimator_list (default: its own choice)."""
    if peer == "flaml":
        from flaml import AutoML

        model = AutoML()
        model.fit(X, y, task=task, metric=FLAML_METRIC[metric], time_budget=budget, seed=seed, verbose=0,
                  estimator_list=estimators or "auto")
        return model.predict_proba(X_test) if metric in PROBA_METRICS else model.predict(X_test)
    from autogluon.tabular import TabularPredictor

    with tempfile.TemporaryDirectory() as scratch:
        predictor = TabularPredictor(label="__target__", eval_metric=AUTOGLUON_METRIC[metric], path=scratch,
                                     problem_type={"classification": None, "regression": "regression"}[task],
                                     verbosity=0)
        predictor.fit(X.assign(__target__=y.to_numpy()), time_limit=budget, presets="medium_quality")
        if metric in PROBA_METRICS:
            proba = predictor.predict_proba(X_test)
            return proba[sorted(proba.columns)].to_numpy()
        return predictor.predict(X_test).to_numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", choices=("flaml", "autogluon"))
    parser.add_argument("task_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--target", required=True)
    parser.add_argument("--id", dest="id_column", required=True)
    parser.add_argument("--metric", required=True)
    parser.add_argument("--classes", default="null", help="JSON list of class labels in the agent's order")
    parser.add_argument("--time-budget", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--flaml-estimators", default=None, help="FLAML's estimator_list, comma-separated (e.g. lgbm)")
    args = parser.parse_args()

    train = pd.read_csv(args.task_dir / "train.csv")
    test = pd.read_csv(args.task_dir / "test.csv")
    classes = json.loads(args.classes)
    X = train.drop(columns=[args.target, args.id_column])
    X_test = test.drop(columns=[args.id_column])[X.columns]
    y = train[args.target]
    task = "classification" if classes else "regression"
    if task == "classification":
        y = y.map({label: code for code, label in enumerate(classes)})  # codes in the agent's class order
    elif args.metric == "rmsle":
        y = np.log1p(y)
    estimators = args.flaml_estimators.split(",") if args.flaml_estimators else None
    predicted = np.asarray(fit_predict(args.peer, X, y, X_test, args.metric, task, args.time_budget, args.seed,
                                       estimators))
    out = pd.DataFrame({args.id_column: test[args.id_column]})
    if task == "regression":
        out[args.target] = np.expm1(predicted) if args.metric == "rmsle" else predicted
    elif args.metric in PROBA_METRICS and len(classes) == 2:
        out[args.target] = predicted[:, 1]
    elif args.metric in PROBA_METRICS:
        for code, label in enumerate(classes):
            out[str(label)] = predicted[:, code]
    else:
        out[args.target] = [classes[int(code)] for code in predicted]
    out.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
