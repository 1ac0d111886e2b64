"""Render a solution node as a standalone solution.py: the user keeps code, not only a pickle.

The file is agent.engine.runtime's modules (their source, concatenated), the task's settings, and `build_model()` made of the same
source strings the engine evaluates, so running it reproduces the agent's CV score exactly.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

from agent.engine import runtime
from agent.engine.compile import NotRenderableError, render_model
from agent.engine.dataset import Dataset
from agent.engine.spec import SolutionSpec
from agent.engine.steps import StepOp
from agent.engine.trainers import Trainer

_MAIN = '''

import sys

TASK = {task!r}


def build_model():
    return {model}


def fit_and_predict(task_dir, X_new=None):
    """Cross-validate the model on the task in `task_dir` (printing its CV score), then predict its test rows (or
    X_new) as the agent's submission was made: (predictions, class labels, the classes too rare to train on with
    their share of the training rows, test ids, sample submission)."""
    X, y_raw, X_test, test_ids, sample = load_task(task_dir, TASK["target"], TASK["id_column"], TASK["features"],
                                                   TASK["encodings"], TASK["csv_formats"])
    X, y_raw, rare = drop_rare_classes(X, y_raw, TASK["min_class_rows"])
    X_test = X_test if X_new is None else X_new
    y, classes = encode_target(y_raw, TASK["classification"], TASK["positive_class"])
    folds = cross_fit(build_model(), X, y, needs_proba=TASK["needs_proba"], classification=TASK["classification"],
                      n_splits=TASK["n_splits"], seed=TASK["seed"],
                      X_test=X_test if TASK["final"] == "fold_average" else None,
                      keep_models=bool(TASK["refit_members"]))
    scores = fold_scores(folds.predictions, y, folds.folds, TASK["metric"])
    print(f"cv_{{TASK['metric']}}={{np.mean(scores):.10f}} folds={{[round(score, 6) for score in scores]}}")
    n_classes = None if classes is None else len(classes)
    if TASK["refit_members"]:  # members whose fold models the agent did not keep were refit on every row
        prediction = members_averaged_or_refit(folds, X, y, X_test, TASK["refit_members"],
                                               needs_proba=TASK["needs_proba"], n_classes=n_classes)
        return prediction, classes, rare, test_ids, sample
    if TASK["final"] == "fold_average":  # the CV's fold models, their test predictions averaged
        return folds.test_prediction, classes, rare, test_ids, sample
    # one fit on every row; early-stopping models keep the number of trees their folds kept on average
    model = refit(build_model(), X, y, folds.stopped_rounds)
    return predict_for_metric(model, X_test, TASK["needs_proba"], n_classes), classes, rare, test_ids, sample


def default_task_dir(here):
    """This file's folder when it holds the task (train.csv and test.csv), else the folder it was rendered from."""
    return here if (here / "train.csv").is_file() and (here / "test.csv").is_file() else Path(TASK["task_dir"])


def predict_new(here, new_path):
    """The submission for the rows of `new_path`: from the model saved beside this file (model.pkl, which needs
    casebook to load) when there is one, with no CV and no fit; else fitted here as the submission was made."""
    new = read_table(new_path)
    if (here / "model.pkl").is_file():
        try:
            from agent.outputs.saved_model import load_model
        except ImportError:
            sys.exit(f"{{here / 'model.pkl'}} holds casebook's classes: install casebook to use it, or move it away "
                     "to fit the model here instead")
        return load_model(here).submission(new)
    id_column = TASK["id_column"] if TASK["id_column"] in new.columns else None
    prediction, classes, rare, _, _ = fit_and_predict(default_task_dir(here), new[TASK["features"]])
    return submission_frame(prediction, test_ids=new[id_column] if id_column else None, id_column=id_column,
                            target=TASK["target"], classes=classes, needs_proba=TASK["needs_proba"], sample=None,
                            rare=rare)


def main(argv):
    here = Path(__file__).resolve().parent
    if len(argv) > 2 and argv[1] == "--predict":
        out_path = Path(argv[3]) if len(argv) > 3 else Path("predictions.csv")
        submission = predict_new(here, Path(argv[2]))
    else:
        task_dir = Path(argv[1]) if len(argv) > 1 else default_task_dir(here)
        out_path = Path(argv[2]) if len(argv) > 2 else Path("submission.csv")
        prediction, classes, rare, test_ids, sample = fit_and_predict(task_dir)
        submission = submission_frame(prediction, test_ids=test_ids, id_column=TASK["id_column"],
                                      target=TASK["target"], classes=classes, needs_proba=TASK["needs_proba"],
                                      sample=sample, rare=rare)
    submission.to_csv(out_path, index=False)
    print(f"wrote {{out_path}}")


if __name__ == "__main__":
    main(sys.argv)
'''


def render_solution(
    spec: SolutionSpec,
    dataset: Dataset,
    trainers: Mapping[str, Trainer],
    *,
    headline: str = "",
    extra_steps: Mapping[str, StepOp] | None = None,
    fold_average: bool = False,
    refit_members: Sequence[int] = (),
) -> str:
    """A standalone solution.py: `python solution.py [TASK_DIR] [SUBMISSION_CSV]` prints the CV score and writes the
    submission: from one refit on every row, or with `fold_average`, from the CV fold models' averaged test
    predictions (as the agent's submission was made from the fold models its CVs kept), an ensemble's members at
    `refit_members` refit on every row instead (those that kept none). TASK_DIR defaults
    to the file's own folder when it holds the task, else the one it was rendered from; `--predict NEW_CSV` uses
    the model.pkl beside it when there is one. Its models are seeded, and its folds made, with the spec's
    validation seed: the CV the spec records."""
    if dataset.task_dir is None:
        raise NotRenderableError("solution.py reads a task folder; this dataset was not loaded from one")
    task = {
        "task_dir": str(Path(dataset.task_dir).resolve()),
        "target": dataset.target,
        "id_column": dataset.id_column,
        "features": [str(name) for name in dataset.X.columns],  # the columns learned from (a wide table's screened)
        "encodings": dict(dataset.encodings),  # task files not in UTF-8
        "csv_formats": {name: dict(found) for name, found in dataset.csv_formats.items()},  # beyond pandas' defaults
        "min_class_rows": dataset.min_class_rows,  # classes with fewer training rows are left out
        "metric": dataset.metric,
        "needs_proba": dataset.metric_info.needs_proba,
        "classification": dataset.classification,
        "positive_class": dataset.positive_class,  # binary tasks: the label coded 1, whose probability is submitted
        "n_splits": spec.validation.n_splits,
        "seed": spec.validation.seed,
        "final": "fold_average" if fold_average else "refit",  # how the submission's predictions are made
        "refit_members": list(refit_members),  # an ensemble's members refit on every row, the others' folds averaged
    }
    final = "averages the fold models' test predictions" if fold_average else "refits on all training rows"
    docstring = (
        f'"""Solution for task {dataset.name!r}, rendered by casebook\'s agent.\n\n{headline}\n\n'
        "Usage: python solution.py [TASK_DIR] [SUBMISSION_CSV]\n"
        f"Prints the cross-validated score, {final} and writes the submission. TASK_DIR defaults to this\n"
        "file's folder when it holds train.csv and test.csv, else to the task folder it was rendered from.\n"
        "       python solution.py --predict NEW_CSV [PREDICTIONS_CSV]\n"
        "Predicts NEW_CSV's rows with the model saved beside this file (model.pkl, loaded with casebook), or\n"
        "without one fits as above and predicts them.\n"
        'Needs numpy, pandas and scikit-learn (and the boosting library the model uses, if any)."""\n'
    )
    model = render_model(spec, dataset, trainers, spec.validation.seed, extra_steps)
    return docstring + "\n" + runtime_source() + _MAIN.format(task=task, model=model)


def runtime_source() -> str:
    """agent.engine.runtime's modules in MODULE_ORDER, one section each: a module's source without its docstring
    and without its relative imports (solution.py defines what they import in the sections above)."""
    return "\n\n".join(_module_body(module) for module in runtime.MODULE_ORDER)


def _module_body(module: ModuleType) -> str:
    source = inspect.getsource(module)
    tree = ast.parse(source)
    dropped: set[int] = set()  # 1-based line numbers
    for node in tree.body:
        is_docstring = node is tree.body[0] and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if is_docstring or (isinstance(node, ast.ImportFrom) and node.level > 0):
            dropped.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines = [line for number, line in enumerate(source.splitlines(), start=1) if number not in dropped]
    body = "\n".join(lines).strip("\n")
    while "\n\n\n\n" in body:  # where a dropped import left a gap
        body = body.replace("\n\n\n\n", "\n\n\n")
    summary = (ast.get_docstring(tree) or "").split("\n\n")[0].replace("\n", " ")
    title = textwrap.fill(f"---- {module.__name__.rsplit('.', 1)[-1]}: {summary}", 118,
                          initial_indent="# ", subsequent_indent="# ")
    return f"{title}\n\n{body}\n"
