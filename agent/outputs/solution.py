"""Render a solution node as a standalone solution.py: the user keeps code, not only a pickle.

The file is agent.engine.runtime's source, the task's settings, and `build_model()` made of the same
source strings the engine evaluates, so running it reproduces the agent's CV score exactly.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path

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
    X, y_raw, X_test, test_ids, sample = load_task(task_dir, TASK["target"], TASK["id_column"])
    y, classes = encode_target(y_raw, TASK["classification"])
    scores = cross_validate(build_model(), X, y, metric=TASK["metric"], needs_proba=TASK["needs_proba"],
                            classification=TASK["classification"], n_splits=TASK["n_splits"], seed=TASK["seed"])
    print(f"cv_{{TASK['metric']}}={{np.mean(scores):.10f}} folds={{[round(score, 6) for score in scores]}}")
    model = build_model().fit(X, y)
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
) -> str:
    """A standalone solution.py: `python solution.py [TASK_DIR] [SUBMISSION_CSV]` prints the CV score and writes the submission."""
    if dataset.task_dir is None:
        raise NotRenderableError("solution.py reads a task folder; this dataset was not loaded from one")
    task = {
        "task_dir": str(Path(dataset.task_dir).resolve()),
        "target": dataset.target,
        "id_column": dataset.id_column,
        "metric": dataset.metric,
        "needs_proba": dataset.metric_info.needs_proba,
        "classification": dataset.classification,
        "n_splits": spec.validation.n_splits,
        "seed": spec.validation.seed,
    }
    docstring = (
        f'"""Solution for task {dataset.name!r}, rendered by casebook\'s agent.\n\n{headline}\n\n'
        "Usage: python solution.py [TASK_DIR] [SUBMISSION_CSV]\n"
        "Prints the cross-validated score, refits on all training rows and writes the submission.\n"
        'Needs numpy, pandas and scikit-learn (and the boosting library the model uses, if any)."""\n'
    )
    runtime_source = inspect.getsource(runtime)
    runtime_body = runtime_source.split('"""', 2)[2].lstrip("\n")  # drop the module's own docstring
    model = render_model(spec, dataset, trainers, random_state, extra_steps)
    return docstring + "\n" + runtime_body + _MAIN.format(task=task, model=model)
