"""pool.html: one self-contained page for a pool solved by `agent solve-all`, rendered from templates/pool.html.j2
— the rounds with the curriculum's terms and each task's outcome, and plots of score against budget (each task's
best verified CV score over its run) and against order (how fast each task, in the order solved, reached its
final score)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup
from matplotlib.ticker import MaxNLocator

from agent.outputs.report import (
    REPORT_FILE,
    NodeView,
    RunDirError,
    flatten_settings,
    inline_svg,
    new_figure,
    read_run,
)
from curriculum.state import PoolState, RoundRecord
from retrieval.metrics import metric_info

POOL_REPORT_FILE = "pool.html"
TEMPLATE = "pool.html.j2"
TEMPLATES_DIR = Path(__file__).parent / "templates"
# A task has "reached its score" once its best verified node is within 1% of the way from the trivial baseline to
# the best score: a share of the gain, so it means the same for AUC, log loss and RMSE alike.
TARGET_SHARE = 0.99
# Task names in the plots' legends and ticks are cut to this length: a long Kaggle slug would otherwise squeeze the
# axes until constrained layout clips the y-axis label.
PLOT_NAME_CHARS = 24
# Beyond this many tasks a plot names none: a legend entry or a tick label per task would crowd the plot out of its
# figure (an experience build's pool of 200 tasks left the axes no room at all).
NAMED_TASKS = 24


@dataclass(frozen=True)
class Progress:
    """How one run got to its best verified score."""

    task: str
    metric: str
    baseline: float
    best: float | None
    greater_is_better: bool
    nodes: tuple[NodeView, ...]  # in the order they finished

    @classmethod
    def read(cls, run_dir: Path) -> Progress:
        run, attempts = read_run(run_dir)
        nodes = sorted((NodeView.from_attempt(attempt) for attempt in attempts), key=lambda node: node.finished)
        return cls(run["task"]["name"], run["metric"], run["baseline"], run["best_cv_score"],
                   metric_info(run["metric"]).greater_is_better, tuple(nodes))

    def better(self, score: float, than: float) -> bool:
        return score > than if self.greater_is_better else score < than

    def best_so_far(self) -> list[tuple[int, float, float]]:
        """(node evaluations, seconds, best verified score) at each verified node that improved the best."""
        steps: list[tuple[int, float, float]] = []
        for count, node in enumerate(self.nodes, start=1):
            if node.valid and node.cv_score is not None and (not steps or self.better(node.cv_score, steps[-1][2])):
                steps.append((count, node.finished, node.cv_score))
        return steps

    def target(self, best: float | None = None, share: float = TARGET_SHARE) -> float | None:
        """The score `share` of the way from the trivial baseline to `best` (default: this run's best)."""
        best = self.best if best is None else best
        return None if best is None else self.baseline + share * (best - self.baseline)

    def reached(self, target: float | None) -> tuple[int, float] | None:
        """(node evaluations, seconds) until the best verified score reached `target`; None if it never did."""
        if target is None:
            return None
        return next(((count, seconds) for count, seconds, score in self.best_so_far()
                     if score == target or self.better(score, target)), None)

    def gain_share(self, score: float) -> float | None:
        """How far `score` is from the trivial baseline towards this run's best (0: baseline, 1: best)."""
        if self.best is None or self.best == self.baseline:
            return None
        return (score - self.baseline) / (self.best - self.baseline)


def write_pool_report(out_dir: str | Path) -> Path:
    """(Re-)render pool.html from pool.json and the tasks' run folders."""
    out_dir = Path(out_dir)
    state = PoolState.load(out_dir)
    if state is None:
        raise RunDirError(f"{out_dir}: no pool.json; pass a folder written by `agent solve-all`")
    path = out_dir / POOL_REPORT_FILE
    path.write_text(render_pool_report(out_dir, state), encoding="utf-8")
    return path


def render_pool_report(out_dir: Path, state: PoolState) -> str:
    progress: dict[str, Progress] = {}
    for task in dict.fromkeys(record.task for record in state.rounds):
        try:
            progress[task] = Progress.read(out_dir / task)
        except RunDirError:  # interrupted, or an error before the run folder was complete
            continue
    latest = {record.task: record.round for record in state.rounds}
    rows = [_round_row(record, progress.get(record.task), latest[record.task] == record.round)
            for record in state.rounds]
    statuses = [row["status"] for row in rows]
    return _environment().get_template(TEMPLATE).render(
        state=state, rows=rows,
        counts={status: statuses.count(status) for status in dict.fromkeys(statuses)},
        budget_plot=Markup(budget_plot(list(progress.values()))) if progress else None,
        order_plot=Markup(order_plot(rows)) if any(row["reached"] for row in rows) else None,
        settings=list(flatten_settings(state.settings)), target_share=TARGET_SHARE,
    )


def _round_row(record: RoundRecord, progress: Progress | None, latest: bool) -> dict[str, Any]:
    """A round as the table shows it; only a task's latest round has its run folder, so earlier tries show no
    progress."""
    progress = progress if latest else None
    first = progress.nodes[0] if progress is not None and progress.nodes else None
    return {"record": record, "status": record.status,
            "chosen": next((row for row in record.ranking if row["task"] == record.task), None),
            "report": f"{record.task}/{REPORT_FILE}" if progress is not None else None,
            "reached": progress.reached(progress.target()) if progress is not None else None,
            "first_share": progress.gain_share(first.cv_score)
            if first is not None and first.valid and first.cv_score is not None else None}


@cache
def _environment() -> Environment:
    environment = Environment(loader=FileSystemLoader(TEMPLATES_DIR), autoescape=True, undefined=StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)
    environment.filters["score"] = lambda value: "–" if value is None else f"{value:.4f}"
    return environment


# ---------------------------------------------------------------------------------------------- the plots


def budget_plot(runs: Sequence[Progress]) -> str:
    """Score against budget: each task's best verified CV score as a share of its final gain over the trivial
    baseline (0: the baseline, 1: its best), against the seconds since its run started. One line per task, so
    tasks with different metrics share one scale; named in the legend up to NAMED_TASKS tasks."""
    figure = new_figure(9, 4)
    axes = figure.add_subplot()
    for run in runs:
        steps = run.best_so_far()
        shares = [run.gain_share(score) for _, _, score in steps]
        if not steps or any(share is None for share in shares):
            continue
        end = run.nodes[-1].finished  # from the start, at the baseline, to the last node
        named = len(runs) <= NAMED_TASKS
        axes.step([0.0, *(seconds for _, seconds, _ in steps), end], [0.0, *shares, shares[-1]], where="post",
                  linewidth=1.6 if named else 0.8, alpha=1.0 if named else 0.4,
                  label=plot_name(run.task) if named else None)
    axes.axhline(TARGET_SHARE, color="#777", linestyle="--", linewidth=1, label=f"{TARGET_SHARE:.0%} of the gain")
    axes.set_xlim(left=0)
    axes.set_xlabel("seconds since the task's run started")
    axes.set_ylabel("best verified CV score\n(share of the gain over the baseline)")
    axes.set_ylim(min(-0.05, axes.get_ylim()[0]), 1.05)
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return inline_svg(figure, "pool-budget")


def order_plot(rows: Sequence[Mapping[str, Any]]) -> str:
    """Score against order: for each solved task, in the order the pool solved them, the node evaluations until it
    reached 99% of its final gain, and the share of that gain its first node already had (what the memories gave
    the first draft)."""
    solved = [row for row in rows if row["reached"] is not None]
    figure = new_figure(9, 3.6)
    evaluations, first = figure.subplots(1, 2)
    positions = [row["record"].round for row in solved]
    evaluations.bar(positions, [row["reached"][0] for row in solved], color="#1f5fbf")
    evaluations.set_ylabel(f"node evaluations to {TARGET_SHARE:.0%}\nof the task's final gain")
    evaluations.yaxis.set_major_locator(MaxNLocator(integer=True))  # a count of nodes
    shares = [(row["record"].round, row["first_share"]) for row in solved if row["first_share"] is not None]
    first.plot([p for p, _ in shares], [s for _, s in shares], marker="o", color="#2e8b57")
    first.set_ylabel("first node's share of the final gain")
    first.set_ylim(min(-0.05, first.get_ylim()[0]), 1.05)
    for axes in (evaluations, first):
        axes.set_xlabel("round (order solved)")
        if len(solved) <= NAMED_TASKS:
            axes.set_xticks(positions, [f"{p} {plot_name(row['record'].task)}" for p, row in zip(positions, solved)],
                            fontsize=7, rotation=35, ha="right", rotation_mode="anchor")
        else:  # rounds only: the table below names each
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(alpha=0.3, axis="y")
    return inline_svg(figure, "pool-order")


def plot_name(task: str) -> str:
    return task if len(task) <= PLOT_NAME_CHARS else task[:PLOT_NAME_CHARS - 1] + "…"
