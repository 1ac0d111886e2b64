"""Render a solution node as a standalone solution.py: the user keeps code, not only a pickle.

The file is agent.engine.runtime's modules (their source, concatenated), the task's settings, and `build_model()` made of the same
source strings the engine evaluates, so running it reproduces the agent's CV score exactly.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from agent.engine import runtime
from agent.engine.compile import NotRenderableError, render_model
from agent.engine.dataset import Dataset
from agent.engine.spec import SolutionSpec
from agent.engine.steps import StepOp
from agent.engine.trainers import Trainer

_MAIN = '''

TASK = {task!r}


def build_model():
    return {model}


def main(argv):
    task_dir = Path(argv[1]) if len(argv) > 1 else Path(TASK["task_dir"])
    out_path = Path(argv[2]) if len(argv) > 2 else Path("submission.csv")
    X, y_raw, X_test, test_ids, sample = load_task(task_dir, TASK["target"], TASK["id_column"], TASK["features"],
                                                   TASK["encodings"])
    y, classes = encode_target(y_raw, TASK["classification"], TASK["positive_class"])
    folds = cross_fit(build_model(), X, y, needs_proba=TASK["needs_proba"], classification=TASK["classification"],
                      n_splits=TASK["n_splits"], seed=TASK["seed"],
                      X_test=X_test if TASK["final"] == "fold_average" else None)
    scores = fold_scores(folds.predictions, y, folds.folds, TASK["metric"])
    print(f"cv_{{TASK['metric']}}={{np.mean(scores):.10f}} folds={{[round(score, 6) for score in scores]}}")
    if TASK["final"] == "fold_average":  # the CV's fold models, their test predictions averaged
        prediction = folds.test_prediction
    else:  # one fit on every row; early-stopping models keep the number of trees their folds kept on average
        model = refit(build_model(), X, y, folds.stopped_rounds)
        n_classes = None if classes is None else len(classes)
        prediction = predict_for_metric(model, X_test, TASK["needs_proba"], n_classes)
    submission = submission_frame(prediction, test_ids=test_ids, id_column=TASK["id_column"], target=TASK["target"],
                                  classes=classes, needs_proba=TASK["needs_proba"], sample=sample)
    submission.to_csv(out_path, index=False)
    print(f"wrote {{out_path}}")


if __name__ == "__main__":
    import sys

    main(sys.argv)
'''


def render_solution(
    spec: SolutionSpec,
    dataset: Dataset,
    trainers: Mapping[str, Trainer],
    random_state: int,
    *,
    headline: str = "",
    extra_steps: Mapping[str, StepOp] | None = None,
    fold_average: bool = False,
) -> str:
    """A standalone solution.py: `python solution.py [TASK_DIR] [SUBMISSION_CSV]` prints the CV score and writes the
    submission: from one refit on every row, or with `fold_average`, from the CV fold models' averaged test
    predictions (as the agent's submission was made when the refit did not fit in its budget)."""
    if dataset.task_dir is None:
        raise NotRenderableError("solution.py reads a task folder; this dataset was not loaded from one")
    task = {
        "task_dir": str(Path(dataset.task_dir).resolve()),
        "target": dataset.target,
        "id_column": dataset.id_column,
        "features": [str(name) for name in dataset.X.columns],  # the columns learned from (a wide table's screened)
        "encodings": dict(dataset.encodings),  # task files not in UTF-8
        "metric": dataset.metric,
        "needs_proba": dataset.metric_info.needs_proba,
        "classification": dataset.classification,
        "positive_class": dataset.positive_class,  # binary tasks: the label coded 1, whose probability is submitted
        "n_splits": spec.validation.n_splits,
        "seed": spec.validation.seed,
        "final": "fold_average" if fold_average else "refit",  # how the submission's predictions are made
    }
    final = "averages the fold models' test predictions" if fold_average else "refits on all training rows"
    docstring = (
        f'"""Solution for task {dataset.name!r}, rendered by casebook\'s agent.\n\n{headline}\n\n'
        "Usage: python solution.py [TASK_DIR] [SUBMISSION_CSV]\n"
        f"Prints the cross-validated score, {final} and writes the submission.\n"
        'Needs numpy, pandas and scikit-learn (and the boosting library the model uses, if any)."""\n'
    )
    model = render_model(spec, dataset, trainers, random_state, extra_steps)
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
