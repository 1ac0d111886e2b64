"""The run folder's fitted model: model.pkl (the model that made submission.csv, with what it needs to predict a
new table) and model.json (how it was made, and the library versions it was saved with).

The model is pickled with cloudpickle, not skops: a pipeline holds casebook's runtime classes and, in rendered
steps, functions made from source at run time, which skops refuses unless every type is listed as trusted and
cannot persist at all. Loading therefore needs casebook and runs the pickle's code: load only run folders you
trust. model.json is read first, so a library whose version differs from the one the model was saved with is a
`ModelVersionWarning` (naming each library, saved and running version) before the pickle is opened, and a pickle
that then fails to load is a `ModelFileError` that names them too.

Which model is saved: the one the submission came from. Its CV fold models (agent.search.final.FoldAverage) when
the submission averages them, as kept by their CVs; the refit on every row (or on a sample) when it came from one.
When the fold models behind a fold-average submission were not kept (the refit did not fit in the budget, or the
anytime submission of a run stopped early), they are fitted again on the same folds and seeds if asked
(--save-fold-models), so predicting test.csv again gives the submission's values.
"""

from __future__ import annotations

import json
import platform
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
import pandas as pd

from agent.candidate import EngineeringRun
from agent.engine import runtime
from agent.engine.dataset import Dataset
from agent.evaluator import Evaluator
from agent.execution.sandbox import error_tail
from agent.outputs.run_folder import write_atomically
from agent.search.final import FOLD_AVERAGE, FinalFit, FoldAverage
from agent.search.journal import Node
from agent.search.protocols import FREE_CODE
from retrieval.metrics import CLASSIFICATION, metric_info
from retrieval.profile import detect_encoding, read_csv_file

MODEL_FILE = "model.pkl"
MODEL_RECORD = "model.json"
# The libraries a model's pickle depends on, each by the distribution names it may be installed under.
LIBRARIES = {"numpy": ("numpy",), "pandas": ("pandas",), "scikit-learn": ("scikit-learn",),
             "lightgbm": ("lightgbm",), "xgboost": ("xgboost", "xgboost-cpu"), "catboost": ("catboost",),
             "cloudpickle": ("cloudpickle",)}


class ModelFileError(ValueError):
    """A run folder without a saved model, or one whose model cannot be loaded; the message says why."""


class ModelVersionWarning(UserWarning):
    """A saved model loaded under library versions other than those it was saved with."""


class ModelInputError(ValueError):
    """A table to predict that lacks columns the model learned from."""


def library_versions() -> dict[str, str | None]:
    """Python's version and each of LIBRARIES' installed versions (None when not installed)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for library, distributions in LIBRARIES.items():
        versions[library] = None
        for distribution in distributions:
            try:
                versions[library] = metadata.version(distribution)
                break
            except metadata.PackageNotFoundError:
                continue
    return versions


def version_mismatches(saved: Mapping[str, str | None]) -> list[str]:
    """'library saved with X, running Y' for each library whose version differs from the one recorded."""
    running = library_versions()
    return [f"{library} saved with {version}, running {running.get(library)}"
            for library, version in saved.items() if running.get(library) != version]


@dataclass(frozen=True, eq=False)
class SavedModel:
    """A fitted model and what predicting a new table with it needs: the columns it learned from, the target's
    labels (`classes`: the label of each class code) and the submission's shape."""

    model: Any  # a fitted pipeline, or a FoldAverage
    how: str  # how it was made (run.json's final_fit.how, or the anytime submission's)
    node: int | None  # the solution tree's node it is (None for a seed-loop run)
    features: tuple[str, ...]
    target: str
    task_type: str
    metric: str
    classes: np.ndarray | None = None
    positive_class: Any = None
    id_column: str | None = None
    submission_columns: tuple[str, ...] | None = None  # sample_submission.csv's columns, when the task had one
    versions: Mapping[str, str | None] = field(default_factory=library_versions)
    # Classes too rare to train on (Dataset.dropped_classes): label -> the probability a submission gives them
    rare_classes: Mapping[Any, float] = field(default_factory=dict)

    @classmethod
    def of(cls, model: Any, dataset: Dataset, how: str, node: int | None) -> SavedModel:
        sample = dataset.sample_submission
        return cls(model, how, node, tuple(str(name) for name in dataset.X.columns), dataset.target,
                   dataset.task_type, dataset.metric, dataset.classes, dataset.positive_class, dataset.id_column,
                   tuple(str(name) for name in sample.columns) if sample is not None else None,
                   rare_classes=dict(dataset.dropped_classes))

    @property
    def classification(self) -> bool:
        return self.task_type in CLASSIFICATION

    @property
    def needs_proba(self) -> bool:
        return metric_info(self.metric).needs_proba

    def predict(self, frame: pd.DataFrame) -> pd.Series:
        """The predicted label (classification, as the training table wrote it: the most probable one, so it
        agrees with predict_proba) or value of each row."""
        if self.classification and (isinstance(self.model, FoldAverage) or hasattr(self.model, "predict_proba")):
            # An ensemble's members are averaged in probability; their labels cannot be.
            codes = np.argmax(runtime.as_probabilities(self._predict(frame, needs_proba=True)), axis=1)
            return pd.Series(self.classes[codes], index=frame.index, name=self.target)
        prediction = runtime.as_predictions(self._predict(frame, needs_proba=False))
        values = self.classes[prediction.astype(int)] if self.classification else prediction.astype(float)
        return pd.Series(values, index=frame.index, name=self.target)

    def predict_proba(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Each row's class probabilities, one column per class label as the training table wrote it (a binary
        task's positive class last; classes too rare to train on last, at their share of the training rows)."""
        if not self.classification:
            raise ModelInputError(f"{self.target!r} is a regression target: it has no class probabilities")
        proba, labels = runtime.with_rare_classes(runtime.as_probabilities(self._predict(frame, needs_proba=True)),
                                                  self.classes, self.rare_classes)
        return pd.DataFrame(proba, index=frame.index, columns=list(labels))

    def submission(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The table's predictions as submission.csv holds them: the sample submission's columns, with this
        table's ids (when it has the id column) in its order."""
        ids = frame[self.id_column] if self.id_column is not None and self.id_column in frame.columns else None
        id_column = self.id_column if ids is not None else None
        template = None
        if self.submission_columns is not None:
            columns = [name for name in self.submission_columns if ids is not None or name != self.id_column]
            template = pd.DataFrame(0, index=range(len(frame)), columns=columns)
            if ids is not None:
                template[id_column] = np.asarray(ids)
        return runtime.submission_frame(self._predict(frame, needs_proba=self.needs_proba), test_ids=ids,
                                        id_column=id_column, target=self.target, classes=self.classes,
                                        needs_proba=self.needs_proba, sample=template, rare=self.rare_classes)

    def _predict(self, frame: pd.DataFrame, needs_proba: bool) -> Any:
        missing = [name for name in self.features if name not in frame.columns]
        if missing:
            raise ModelInputError(f"the table lacks {len(missing)} of the columns the model learned from: "
                                  f"{', '.join(missing[:10])}")
        X = runtime.normalise_frame(frame[list(self.features)])
        n_classes = len(self.classes) if self.classes is not None else None
        if isinstance(self.model, FoldAverage):
            return self.model.predict_for_metric(X, needs_proba, self.classification, n_classes)
        return runtime.predict_for_metric(self.model, X, needs_proba, n_classes)

    def record(self) -> dict[str, Any]:
        """model.json: the file, its format, how the model was made, and the library versions."""
        return {"file": MODEL_FILE, "format": "cloudpickle", "how": self.how, "node": self.node,
                "kind": "CV fold models" if isinstance(self.model, FoldAverage) else "one fitted pipeline",
                "target": self.target, "metric": self.metric, "features": list(self.features),
                "classes": None if self.classes is None else [str(label) for label in self.classes],
                "versions": dict(self.versions)}


def write_model(out_dir: Path, saved: SavedModel) -> Path:
    """model.pkl and model.json in the run folder, each written atomically; the pickle's path."""
    path = write_atomically(out_dir / MODEL_FILE, cloudpickle.dumps(saved))
    write_atomically(out_dir / MODEL_RECORD, json.dumps(saved.record(), indent=2))
    return path


def read_model_record(run_dir: Path) -> dict[str, Any]:
    """model.json; ModelFileError when the run folder holds no saved model."""
    path = Path(run_dir) / MODEL_RECORD
    if not path.is_file() or not (Path(run_dir) / MODEL_FILE).is_file():
        raise ModelFileError(f"{run_dir}: no saved model ({MODEL_FILE} and {MODEL_RECORD}); run.json's notes say why "
                             "(a submission from CV fold models keeps them only with --save-fold-models)")
    return json.loads(path.read_text(encoding="utf-8"))


def load_model(run_dir: Path | str) -> SavedModel:
    """The run folder's saved model. A library whose version differs from the one it was saved with is a
    ModelVersionWarning; a pickle that cannot be loaded is a ModelFileError naming those differences."""
    run_dir = Path(run_dir)
    mismatches = version_mismatches(read_model_record(run_dir)["versions"])
    if mismatches:
        warnings.warn(f"{run_dir / MODEL_FILE}: {'; '.join(mismatches)}: its predictions may differ or fail",
                      ModelVersionWarning, stacklevel=2)
    try:
        saved = cloudpickle.loads((run_dir / MODEL_FILE).read_bytes())
    except Exception as error:  # noqa: BLE001 - any unpickling failure is the file's, said with the versions
        why = f" ({'; '.join(mismatches)})" if mismatches else ""
        raise ModelFileError(f"{run_dir / MODEL_FILE} cannot be loaded{why}: {type(error).__name__}: {error}") \
            from error
    if not isinstance(saved, SavedModel):
        raise ModelFileError(f"{run_dir / MODEL_FILE} holds a {type(saved).__name__}, not a casebook SavedModel")
    return saved


def save_final_model(out_dir: Path, dataset: Dataset, run: EngineeringRun, final_fit: FinalFit | None,
                     node: Node | None, final_written: bool, evaluator: Evaluator,
                     fit_folds_again: bool) -> tuple[Path | None, str]:
    """Save the model that made submission.csv (`node`: the node it came from): the final submission's model (its
    kept fold models, or the refit); else the node's CV fold models, as its CV kept them or, with
    `fit_folds_again`, fitted again (past the budget). (model.pkl's path or None, a note saying why there is
    none)."""
    if final_written and run.model is not None:
        how = final_fit.how if final_fit is not None else "the best candidate refit on every row"
        return write_model(out_dir, SavedModel.of(run.model, dataset, how, node.id if node is not None else None)), ""
    if node is None:  # the trivial baseline: no model to save
        return None, ""
    if node.candidate.trainer == FREE_CODE:
        return None, f"no {MODEL_FILE}: the submission is node {node.id}'s free-code script's; solution.py is the script"
    spec = node.spec
    kept = evaluator.kept_fold_models(node.evidence.fold_models) if node.evidence is not None else None
    if kept is not None:
        return write_model(out_dir, SavedModel.of(FoldAverage(spec, (kept,)), dataset, FOLD_AVERAGE, node.id)), ""
    if not fit_folds_again:
        return None, (f"no {MODEL_FILE}: the submission averaged node {node.id}'s CV fold models, which are not kept "
                      "(save_fold_models, or agent solve --save-fold-models, fits them again after the search)")
    folds = evaluator.fit_fold_models(spec, dataset, evaluator.candidate_time_limit)
    if not folds.members:
        return None, f"no {MODEL_FILE}: fitting node {node.id}'s CV fold models again failed ({error_tail(folds.error, 1)})"
    how = f"{FOLD_AVERAGE} (fitted again after the search, in {folds.seconds:.1f} s)"
    return write_model(out_dir, SavedModel.of(FoldAverage(spec, folds.members), dataset, how, node.id)), ""


def predict_csv(run_dir: Path | str, csv_path: Path | str, out_path: Path | str) -> tuple[SavedModel, pd.DataFrame]:
    """`agent predict`: the rows of `csv_path` predicted by the run folder's saved model (no CV, no fit) and
    written to `out_path` as submission.csv is written; the model and the predictions."""
    csv_path = Path(csv_path)
    if not csv_path.is_file():
        raise ModelInputError(f"{csv_path}: no such file; pass a CSV with the columns train.csv had")
    saved = load_model(run_dir)
    # in whatever encoding and separator the task's own files may be in (set-up's detectors), not UTF-8 commas only
    predictions = saved.submission(runtime.normalise_frame(read_csv_file(csv_path, detect_encoding(csv_path))[0]))
    write_atomically(Path(out_path), predictions.to_csv(index=False))
    return saved, predictions
