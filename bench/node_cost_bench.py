"""Benchmark: the fixed cost of one node evaluation through the Evaluator, part by part, and nodes per minute.

On real tables (bench/tasks.py, built as task folders and loaded as `agent solve` loads them), for a cheap model and
a GBDT draft, each timed 5 times (the median kept):

    hand-off     a job that does nothing: the worker's fork, the socket round trip, the result back
    transfer     the same job given the Dataset as the Evaluator hands it over (executor.share), less the hand-off
    compile      the spec compiled to a pipeline, in the candidate's process
    preprocess   the preprocessing fitted and applied (or read from the fold cache), summed over the CV folds
    fit          the model fitted on the preprocessed rows, summed over the folds
    predict      the model's out-of-fold predictions, summed over the folds
    metric       the metric on each fold
    inspect      the leakage and data-usage probes (agent.verify.probes) run beside the CV
    evaluate     Evaluator.evaluate's whole wall time, as the search sees it

Each part is the median of 5 runs of one spec: from the second run on, as for a node whose parent had the same
preprocessing (the fold cache holds its folds, its inspection is known). Then a plain loop of N nodes through one Evaluator, each a change of the model's parameters only (the search's
improvements), counted per minute: once for cheap models, once for GBDT drafts.

    python -m bench.node_cost_bench --label before|after [--tasks credit,ames] [--repeats 5] [--nodes 8]

Results go to bench/agent_runs/node-cost-<label>.json, and the "## Fixed cost per node (issue 25)" section of
RESULTS.md shows every label stored.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click
import cloudpickle
import numpy as np
from sklearn.base import clone

from agent.engine.compile import compile_spec
from agent.engine.dataset import Dataset
from agent.engine.fit import FoldCache, FoldStore, preprocessing_key
from agent.engine.runtime import fit_fold, fold_scores, make_folds, predict_for_metric
from agent.engine.spec import ModelSpec, SolutionSpec
from agent.engine.trainers import steps_for, trainer_facts
from agent.evaluator import Evaluator
from agent.execution.executors import LocalExecutor
from agent.execution.sandbox import Limits, run_isolated
from agent.verify.probes import inspect_candidate
from bench.agent_bench import RUNS, run_stamp
from bench.results import write_section
from bench.tasks import RDATASETS_TASKS, write_task_folder
from retrieval.profile import profile_task

BENCH = Path(__file__).resolve().parent
SECTION = "## Fixed cost per node (issue 25)"
PARTS = ("hand-off", "transfer", "compile", "preprocess", "fit", "predict", "metric", "inspect", "evaluate")
# The models of a node: a cheap one (AutoGluon-style linear model), and the search's LightGBM draft (early stopping,
# its round cap by table size); each node of a loop changes the model's parameters only, as an improvement does.
CHEAP, GBDT = "linear", "lightgbm"
CHEAP_VARIATIONS = ({}, {"C": 10.0}, {"C": 0.1}, {"C": 3.0}, {"C": 0.3}, {"C": 30.0}, {"C": 0.03}, {"C": 100.0})
REGRESSION_VARIATIONS = tuple({"alpha": 1.0 / params["C"]} if params else {} for params in CHEAP_VARIATIONS)
GBDT_VARIATIONS = ({}, {"num_leaves": 15}, {"num_leaves": 63}, {"min_child_samples": 40}, {"extra_trees": True},
                   {"colsample_bytree": 0.6}, {"subsample": 0.6}, {"reg_lambda": 1.0})


def load(name: str, root: Path) -> Dataset:
    """The task's Dataset as `agent solve` loads it: the task folder profiled, then read."""
    task = RDATASETS_TASKS[name]
    built = write_task_folder(task.frame(), task.target, root / name, description=task.goal, metric=task.metric)
    return Dataset.from_profile(profile_task(built.task_dir), min_class_rows=5)


def node_spec(trainer: str, dataset: Dataset, change: dict, evaluator: Evaluator) -> SolutionSpec:
    params = {**trainer_facts(trainer).params_for(len(dataset.y)), **change}
    return SolutionSpec(steps_for(trainer, evaluator.trainers), ModelSpec(trainer, params), None, evaluator.validation)


def variations(trainer: str, dataset: Dataset) -> tuple[dict, ...]:
    if trainer == GBDT:
        return GBDT_VARIATIONS
    return CHEAP_VARIATIONS if dataset.classification else REGRESSION_VARIATIONS


def _nothing(*_args) -> None:
    return None


def _timed_parts(spec: SolutionSpec, dataset: Dataset, trainers, random_state: int, store: FoldStore,
                 inspect: bool) -> dict[str, float]:
    """In the candidate's process: what runtime.cross_fit and the probes do, part by part, as the Evaluator's job
    does them: each fold's preprocessing from `store` once a node fitted it, the probes only for a preprocessing
    not inspected before."""
    started = time.perf_counter()
    pipeline = compile_spec(spec, dataset.compile_context(random_state), trainers)
    parts = {"compile": time.perf_counter() - started, "preprocess": 0.0, "fit": 0.0, "predict": 0.0}
    n_classes = int(np.max(dataset.y)) + 1 if dataset.classification else None
    folds = make_folds(dataset.y, classification=dataset.classification, n_splits=spec.validation.n_splits,
                       seed=spec.validation.seed)
    predictions = None
    for fold, (train_rows, valid_rows) in enumerate(folds):
        X, y = dataset.X.iloc[train_rows], dataset.y[train_rows]
        X_valid, y_valid = dataset.X.iloc[valid_rows], dataset.y[valid_rows]
        started = time.perf_counter()
        prepared = store.load(fold)
        if prepared is None:
            head = clone(pipeline[:-1])
            prepared = (head, head.fit_transform(X, y), head.transform(X_valid), None)
            store.save(fold, prepared)
        _, X, X_valid, _ = prepared
        parts["preprocess"] += time.perf_counter() - started
        started = time.perf_counter()
        model, _ = fit_fold(pipeline[-1], X, y, X_valid, y_valid)
        parts["fit"] += time.perf_counter() - started
        started = time.perf_counter()
        prediction = predict_for_metric(model, X_valid, dataset.metric_info.needs_proba, n_classes)
        parts["predict"] += time.perf_counter() - started
        if predictions is None:
            predictions = np.zeros((len(dataset.y), *np.shape(prediction)[1:]))
        predictions[valid_rows] = prediction
    started = time.perf_counter()
    fold_scores(predictions, dataset.y, folds, dataset.metric)
    parts["metric"] = time.perf_counter() - started
    started = time.perf_counter()
    if inspect:
        inspect_candidate(spec, dataset, trainers, None, random_state)
    parts["inspect"] = time.perf_counter() - started
    return parts


def breakdown(dataset: Dataset, trainer: str, repeats: int) -> dict:
    """The median seconds of each part of one node evaluation (PARTS), over `repeats` runs of the same spec: after
    the first, as for a node whose parent had the same preprocessing (an improvement of the model)."""
    evaluator = Evaluator()
    spec = node_spec(trainer, dataset, {}, evaluator)
    limits = Limits(600.0)
    cache = FoldCache()
    store = cache.store(preprocessing_key(spec, "bench", evaluator.random_state))
    runs: dict[str, list[float]] = {part: [] for part in PARTS}
    run_isolated(_nothing, limits=limits)  # the worker server started: its imports are no node's cost
    for repeat in range(repeats):
        handoff = run_isolated(_nothing, limits=limits).elapsed
        runs["hand-off"].append(handoff)
        shared = evaluator.executor.share(dataset)  # as the Evaluator hands it over
        runs["transfer"].append(max(run_isolated(_nothing, shared, limits=limits).elapsed - handoff, 0.0))
        outcome = run_isolated(_timed_parts, spec, shared, evaluator.trainers, evaluator.random_state, store,
                               repeat == 0, limits=limits)
        if not outcome.ok:
            raise RuntimeError(outcome.error)
        for part, seconds in outcome.value.items():
            runs[part].append(seconds)
        evidence = evaluator.evaluate(spec, dataset)
        if evidence.status != "ok":
            raise RuntimeError(evidence.error)
        runs["evaluate"].append(evidence.elapsed)
    return {part: round(statistics.median(values), 4) for part, values in runs.items()} | {
        "pickled_mb": round(len(cloudpickle.dumps(dataset)) / 1e6, 2)}


@dataclass(frozen=True)
class UnsharedExecutor(LocalExecutor):
    """The local sandbox as it was before issue 25: the dataset pickled and sent with every job."""

    def share(self, value):
        return value


def node_loop(dataset: Dataset, trainer: str, nodes: int) -> dict:
    """N nodes through one Evaluator, each a parameter change of the same model: nodes per minute, and each node's
    CV score (the same before and after wherever the algorithm is unchanged). Two arms, node by node in turn so
    that both see the same load on the shared machine: "plain" as before issue 25 (the dataset sent with every job,
    every fold's preprocessing fitted, every node inspected), "reusing" as the Evaluator now runs."""
    arms = {"plain": Evaluator(executor=UnsharedExecutor(), reuse_preprocessing=False), "reusing": Evaluator()}
    changes = variations(trainer, dataset)
    seconds = dict.fromkeys(arms, 0.0)
    scores: dict[str, list[float]] = {arm: [] for arm in arms}
    for index in range(nodes):
        for arm, evaluator in arms.items():
            spec = node_spec(trainer, dataset, changes[index % len(changes)], evaluator)
            started = time.monotonic()
            evidence = evaluator.evaluate(spec, dataset)
            seconds[arm] += time.monotonic() - started
            scores[arm].append(round(evidence.metric_value, 6))
    return {arm: {"nodes": nodes, "seconds": round(seconds[arm], 2),
                  "per_minute": round(nodes / (seconds[arm] / 60), 1), "scores": scores[arm]} for arm in arms}


def measure(tasks: list[str], repeats: int, nodes: int) -> dict:
    results = {}
    with tempfile.TemporaryDirectory() as root:
        for name in tasks:
            dataset = load(name, Path(root))
            rows = {"rows": len(dataset.y), "columns": dataset.X.shape[1], "metric": dataset.metric}
            for trainer in (CHEAP, GBDT):
                rows[trainer] = {"breakdown": breakdown(dataset, trainer, repeats),
                                 "loop": node_loop(dataset, trainer, nodes)}
                print(name, trainer, json.dumps(rows[trainer]), file=sys.stderr, flush=True)
            results[name] = rows
    return results


def _loop_cell(loop: dict) -> str:
    if "plain" not in loop:  # a run before the two arms: one loop of the code it ran
        return f"{loop['per_minute']}"
    plain, reusing = loop["plain"], loop["reusing"]
    same = "same scores" if plain["scores"] == reusing["scores"] else "scores differ"
    return (f"{plain['per_minute']} → {reusing['per_minute']} "
            f"(×{reusing['per_minute'] / plain['per_minute']:.2f}, {same})")


def section(stored: dict[str, dict]) -> str:
    lines = [SECTION, "",
             "`python -m bench.node_cost_bench --label LABEL`: one node evaluated through the Evaluator (5-fold CV, "
             "the leakage probes beside it), part by part, median seconds of 5 runs of one spec (from the second "
             "on, as for a node whose parent had the same preprocessing); then a plain loop of 8 nodes that change "
             "only the model's parameters. Cheap node: `linear` on its default preprocessing; GBDT node: the "
             "LightGBM draft (early stopping, its round cap by table size). The loop's two arms run node by node "
             "in turn, so both see the same load: plain (the dataset sent with every job, every fold's "
             "preprocessing fitted, every node inspected: the Evaluator before issue 25) → reusing (the Evaluator "
             "now). 2 cores shared with other helpers' jobs: compare within a run.", ""]
    for label, run in stored.items():
        lines += [f"### {label} ({run['stamp']}, load {run['load']})", "",
                  "| table | model | " + " | ".join(PARTS) + " | pickled MB | loop nodes/min |",
                  "|---|---|" + "---:|" * (len(PARTS) + 2)]
        for task, rows in run["results"].items():
            for trainer in (CHEAP, GBDT):
                parts = rows[trainer]["breakdown"]
                cells = " | ".join(f"{parts[part]:.3f}" for part in PARTS)
                lines.append(f"| {task} ({rows['rows']}×{rows['columns']}) | {trainer} | {cells} | "
                             f"{parts['pickled_mb']} | {_loop_cell(rows[trainer]['loop'])} |")
        lines.append("")
    return "\n".join(lines)


@click.command()
@click.option("--label", required=True, help="before or after (the stored run it replaces)")
@click.option("--tasks", default="credit,ames", show_default=True)
@click.option("--repeats", default=5, show_default=True)
@click.option("--nodes", default=8, show_default=True, help="nodes in each plain loop")
def main(label: str, tasks: str, repeats: int, nodes: int) -> None:
    load_average = round(os.getloadavg()[0], 1)
    results = measure(tasks.split(","), repeats, nodes)
    RUNS.mkdir(parents=True, exist_ok=True)
    (RUNS / f"node-cost-{label}.json").write_text(json.dumps(
        {"label": label, "stamp": run_stamp(), "load": load_average, "results": results}, indent=1))
    stored = {path.stem.removeprefix("node-cost-"): json.loads(path.read_text())
              for path in sorted(RUNS.glob("node-cost-*.json"), reverse=True)}  # before, then after
    write_section(BENCH / "RESULTS.md", section(stored))


if __name__ == "__main__":
    main()
