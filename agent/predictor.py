"""`Predictor`: `agent solve` for DataFrames, in the style of AutoGluon's TabularPredictor and scikit-learn.

    predictor = Predictor(label="Attrition", time_budget=60).fit(train_df)
    predictor.predict(new_df); predictor.predict_proba(new_df); predictor.leaderboard()
    predictor.save("models/attrition"); Predictor.load("models/attrition").predict(new_df)

`fit` writes the frames as a task folder inside the run folder (task/: train.csv, test.csv, description.md) and
runs `solve_task` on it: the same set-up, tree search and verifier as `agent solve`, and the same run folder, with
the final model saved in it (agent.outputs.saved_model; the CV fold models too when the submission averaged them).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from agent.memory.store import MemoryStore
from agent.outputs.report import REPORT_FILE, TRACE_FILE, NodeView, read_run
from agent.outputs.run_folder import RunFolderError
from agent.outputs.saved_model import SavedModel, load_model
from agent.search.journal import VALID
from agent.settings import SolveSettings
from agent.solve import SolveResult, solve_task
from retrieval.metrics import metric_info
from retrieval.profile import DESCRIPTION_FILE, TEST_FILE, TRAIN_FILE, profile_task

TASK_DIR = "task"  # the run folder's copy of the frames fit was given, as a task folder
LEADERBOARD_COLUMNS = ("node", "trainer", "action", "status", "cv_score", "seconds", "plan")


class NotFitted(RuntimeError):
    """A Predictor asked for predictions (or its run) before fit or load."""


class Predictor:
    """A tabular predictor for column `label`, searched within `time_budget` seconds. `metric` (e.g. "roc_auc",
    "rmse"; default: the task type's), `id_column` and `positive_class` override set-up's inference as `agent
    solve`'s options do; `settings` sets the rest of the search (drafts, steps, CV folds, seed, model families:
    agent.SolveSettings), its time budget replaced by `time_budget`. `path` is the run folder (default
    runs/<label>-<timestamp>/)."""

    def __init__(self, label: str, metric: str | None = None, time_budget: float = 300.0, *,
                 path: str | Path | None = None, id_column: str | None = None, positive_class: str | None = None,
                 settings: SolveSettings | None = None):
        self.label, self.metric, self.time_budget = label, metric, time_budget
        self.id_column, self.positive_class = id_column, positive_class
        self.settings = settings if settings is not None else SolveSettings()
        self._path = Path(path) if path is not None else None
        self._model: SavedModel | None = None
        self.result: SolveResult | None = None  # fit's outcome (None after load)

    @property
    def path(self) -> Path:
        """The run folder: run.json, trace.jsonl, report.html, submission.csv, solution.py, model.pkl, task/."""
        if self._path is None or not (self._path / TRACE_FILE).is_file():
            raise NotFitted("this Predictor has not been fitted or loaded: call fit(train_df) or Predictor.load(path)")
        return self._path

    def fit(self, train_df: pd.DataFrame, test_df: pd.DataFrame | None = None, description: str | None = None, *,
            use_kb: bool = False, memory: MemoryStore | None = None,
            kb_home: str | Path | None = None) -> Predictor:
        """Search for the best verified solution to predicting `label` from train_df's other columns; `test_df`
        (the rows to predict, without the label) makes the run folder's submission.csv (default: train_df's rows).
        `description` is the task's description.md (its evaluation section can name the metric). `use_kb` lets
        the knowledge base in `kb_home` (default: kb's home) guide the search; `memory`, a case library, move it
        and remember the run. Returns the Predictor, fitted."""
        started = time.monotonic()  # the budget counts writing and profiling the task
        out_dir = self._path or Path("runs") / f"{self.label}-{time.strftime('%Y%m%d-%H%M%S')}"
        if (out_dir / TRACE_FILE).exists():  # before the task files, which would overwrite that run's
            raise RunFolderError(f"{out_dir}: already holds a run; pass another path")
        task_dir = out_dir / TASK_DIR
        task_dir.mkdir(parents=True, exist_ok=True)
        train_df.to_csv(task_dir / TRAIN_FILE, index=False)
        test = test_df if test_df is not None else train_df.drop(columns=[self.label], errors="ignore")
        test.to_csv(task_dir / TEST_FILE, index=False)
        if description is not None:
            (task_dir / DESCRIPTION_FILE).write_text(description, encoding="utf-8")
        profile = profile_task(task_dir, target=self.label, id_column=self.id_column, metric=self.metric,
                               positive_class=self.positive_class)
        search = replace(self.settings.search, time_budget=self.time_budget)
        # The Predictor keeps its model whatever the submission came from, even past the budget.
        settings = replace(self.settings, search=search, use_kb=use_kb, save_fold_models=True)
        self._path = out_dir
        self.result = solve_task(profile, settings, out_dir, kb_home=kb_home, memory=memory, started=started)
        self._model = None
        return self

    @property
    def model(self) -> SavedModel:
        """The saved final model (model.pkl), loaded once; ModelFileError, saying why, when the run saved none."""
        if self._model is None:
            self._model = load_model(self.path)
        return self._model

    def predict(self, df: pd.DataFrame) -> pd.Series:
        """Each row's predicted label (as train_df wrote it) or value, indexed as `df`."""
        return self.model.predict(df)

    def predict_proba(self, df: pd.DataFrame) -> pd.DataFrame:
        """Each row's class probabilities: one column per class label as train_df wrote it (a binary task's
        positive class last), indexed as `df`."""
        return self.model.predict_proba(df)

    def leaderboard(self) -> pd.DataFrame:
        """Every node of the search, verified ones first, best first, then the others by id: node, trainer,
        action, status, CV score (in the metric's own units), seconds and plan."""
        run, attempts = read_run(self.path)
        greater = metric_info(run["metric"]).greater_is_better
        nodes = [NodeView.from_attempt(attempt) for attempt in attempts]
        rows = [(node.id, node.trainer, node.action, node.status, node.cv_score, node.seconds, node.plan)
                for node in sorted(nodes, key=lambda node: _rank(node, greater))]
        return pd.DataFrame(rows, columns=list(LEADERBOARD_COLUMNS))

    def report(self) -> Path:
        """report.html's path."""
        return self.path / REPORT_FILE

    def save(self, path: str | Path) -> Path:
        """The run folder copied to `path` (a new folder), so that Predictor.load(path) restores this Predictor;
        its own folder when `path` is it."""
        path = Path(path)
        if path.resolve() != self.path.resolve():
            shutil.copytree(self.path, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Predictor:
        """The Predictor a run folder holds (one fit wrote, or save copied); a library version other than the
        model's is a ModelVersionWarning (agent.outputs.saved_model)."""
        run = read_run(path)[0]
        task, settings = run["task"], run["settings"]
        predictor = cls(task["target"], run["metric"], settings["search"]["time_budget"], path=path,
                        id_column=task.get("id_column"), positive_class=task.get("positive_class"))
        predictor._model = load_model(path)
        return predictor

    def __repr__(self) -> str:
        where = f", path={str(self._path)!r}" if self._path is not None else ""
        return f"Predictor(label={self.label!r}, metric={self.metric!r}, time_budget={self.time_budget!r}{where})"


def _rank(node: NodeView, greater_is_better: bool) -> tuple[bool, float, int]:
    """Verified nodes first, by CV score (best first), then the rest by id."""
    verified = node.status == VALID and node.cv_score is not None
    score = node.cv_score if verified else 0.0
    return not verified, -score if greater_is_better else score, node.id
