"""Task analysis: a task's hierarchical labels in priority order, from its description and its data.

The labeller is the one ingest uses. What the data shows outranks wording: a table is labelled
General ML classification or regression (by its target), a table with a free-text column also NLP,
and a rare positive class adds Imbalanced Classification.
"""

from __future__ import annotations

import re

from kb.competitions import from_name, from_text
from kb.labeller import HierarchicalLabeller
from kb.taxonomy import SEPARATOR, top_of
from retrieval.metrics import CLASSIFICATION, parse_metric
from retrieval.profile import TaskProfile

MAX_LABELS = 4
_REGRESSION_WORDS = re.compile(r"\b(regression|price|amount|continuous|rmse|rmsle|mae|r2|how much|how many)\b", re.I)
IMBALANCE_SHARE = 0.1
GENERAL = "General Machine Learning"
_BY_TASK_TYPE = {"binary": f"{GENERAL} / Classification", "multiclass": f"{GENERAL} / Classification",
                 "regression": f"{GENERAL} / Regression"}
_DEFAULT_SUB = {
    "Natural Language Processing": "Natural Language Processing / Text Classification",
    "Computer Vision": "Computer Vision / Image Classification",
    "Sequential Modeling": "Sequential Modeling / Time Series Forecasting",
}


def data_summary(profile: TaskProfile) -> str:
    """One sentence about the data, in the words the labeller's descriptions use."""
    kinds = {}
    for column in profile.columns:
        kinds[column.kind] = kinds.get(column.kind, 0) + 1
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda item: -item[1]))
    task = {"binary": "binary classification", "multiclass": "multiclass classification"}.get(profile.task_type, profile.task_type)
    return (f"{profile.modality} data, {task} of {profile.target} scored by {profile.metric}: "
            f"{profile.n_rows} rows with {parts} columns.")


def task_text(description: str, profile: TaskProfile | None = None) -> str:
    return f"{data_summary(profile)} {description}".strip() if profile else description.strip()


def task_labels(labeller: HierarchicalLabeller, description: str, profile: TaskProfile | None = None) -> list[str]:
    """Labels for a task, primary first."""
    text = task_text(description, profile)
    found = [item.label for item in labeller.label(text)] if text else []
    task_types: set[str] = set()
    if profile is not None:
        task_types = {profile.task_type}
    else:
        parsed = parse_metric(description)
        if parsed is not None:
            task_types = set(parsed[0].task_types)
    general = None
    if task_types and task_types <= CLASSIFICATION:
        general = _BY_TASK_TYPE["binary"]
    elif task_types == {"regression"}:
        general = _BY_TASK_TYPE["regression"]
    # the metric says classification or regression: correct the General-ML subcategory to match
    found = [general if general and top_of(label) == GENERAL and label in _BY_TASK_TYPE.values() else label
             for label in found]
    # A task's General-ML label is its task type; Imbalanced, Multi-label etc. qualify it and go after.
    first_general = next((i for i, label in enumerate(found) if top_of(label) == GENERAL), None)
    if first_general is not None and found[first_general] not in _BY_TASK_TYPE.values():
        implied = general or (_BY_TASK_TYPE["regression"] if _REGRESSION_WORDS.search(text)
                              else _BY_TASK_TYPE["binary"])
        found.insert(first_general, implied)
    ordered: list[str] = []
    if profile is not None:
        if profile.modality.startswith("tabular") and general:
            ordered.append(general)
        if profile.modality in ("tabular+text", "text"):
            ordered.insert(0 if profile.modality == "text" else len(ordered),
                           next((l for l in found if top_of(l) == "Natural Language Processing"),
                                _DEFAULT_SUB["Natural Language Processing"]))
        if profile.modality == "image":
            ordered.insert(0, next((l for l in found if top_of(l) == "Computer Vision"), _DEFAULT_SUB["Computer Vision"]))
        if profile.modality == "time series":
            ordered.insert(0, next((l for l in found if top_of(l) == "Sequential Modeling"), _DEFAULT_SUB["Sequential Modeling"]))
    ordered += found
    if general and not any(top_of(l) == GENERAL for l in ordered) and (profile is None or profile.modality.startswith("tabular")):
        ordered.append(general)
    if profile is not None and profile.class_balance is not None and profile.class_balance < IMBALANCE_SHARE:
        ordered.append(f"{GENERAL} / Imbalanced Classification")
    unique = list(dict.fromkeys(l for l in ordered if SEPARATOR in l or l in labeller.taxonomy_names))
    return unique[:MAX_LABELS]


def task_competition(description: str, profile: TaskProfile | None = None) -> str | None:
    """The competition a task is from, so its own write-ups can be left out."""
    if profile is not None and profile.competition:
        return profile.competition
    return from_text(description) or (from_name(profile.name) if profile is not None else None)
