"""The final blend's estimated seconds against its measured ones (issue 25: time kept back that a search cannot use).

Before the search stops drawing nodes, the budget clock keeps back the seconds the final blend will take
(agent.search.blending.BlendCost: one metric call timed on the table, times the calls greedy selection makes per
candidate member, with BLEND_MARGIN). Here, for each metric shape a blend meets (RMSE; AUC, which adds a rank average;
binary log loss; 5- and 12-class log loss), on 1,000 to 150,000 rows and with 2 and 8 candidate members, the estimate
is made as the search makes it and the final combination's blends are timed on the same rows
(agent.search.final.chosen_blends: weights chosen on BLEND_ROWS rows, each combination scored on every row).
Predictions are random, of the shape a node's out-of-fold predictions have: greedy selection's cost depends on the
shapes, not on the values. The fixed constant it replaces kept back 5 s from 20,000 rows on, and a quarter of that
per 5,000 rows below.

    python -m bench.blend_cost [--write]
"""

from __future__ import annotations

import os
import time
from datetime import date

import click
import numpy as np
from sklearn.model_selection import KFold

from agent.search.blending import BLEND_MARGIN, BLEND_ROWS, blend_cost
from agent.search.final import chosen_blends
from bench.results import write_section
from bench.throughput_bench import REPO, code_stamp

SECTION = "## The final blend's seconds, estimated and measured (issue 25)"
SHAPES = (("rmse", "regression", 0), ("roc_auc", "binary", 2), ("log_loss", "binary", 2),
          ("log_loss", "multiclass", 5), ("log_loss", "multiclass", 12))
ROWS = (1_000, 5_000, 20_000, 150_000)
MEMBERS = (2, 8)
OLD_SECONDS = 5.0  # the constant replaced: BLEND_SECONDS x min(1, rows / BLEND_ROWS)


def measured_blend(y: np.ndarray, members: list[np.ndarray], metric: str, task_type: str) -> float:
    """Seconds the final combination's blends take on these members (agent.search.final.chosen_blends)."""
    folds = list(KFold(5, shuffle=True, random_state=0).split(y))
    started = time.perf_counter()
    chosen_blends(members, y, metric, task_type, folds, seed=0)
    return time.perf_counter() - started


def measure() -> list[dict]:
    rng = np.random.default_rng(0)
    results = []
    for rows in ROWS:
        for metric, task_type, classes in SHAPES:
            y = rng.integers(0, classes, rows) if classes else rng.normal(size=rows)
            predictions = [rng.dirichlet(np.ones(classes), size=rows) if classes else y + rng.normal(size=rows)
                           for _ in range(max(MEMBERS))]
            cost = blend_cost(y, metric, task_type, bool(classes))
            for members in MEMBERS:
                seconds = measured_blend(y, predictions[:members], metric, task_type)
                results.append({"rows": rows, "metric": metric, "classes": classes, "members": members,
                                "estimate": cost.seconds(members), "seconds": seconds,
                                "old": OLD_SECONDS * min(1.0, rows / BLEND_ROWS)})
                click.echo(f"{rows} {metric} {classes} {members}: estimate {cost.seconds(members):.3f} s, "
                           f"measured {seconds:.3f} s", err=True)
    return results


def markdown(results: list[dict]) -> str:
    ratios = [item["seconds"] / item["estimate"] for item in results]
    rows = [f"| {item['rows']:,} | {item['metric']} | {item['classes'] or ''} | {item['members']} | "
            f"{item['seconds']:.3f} | {item['estimate']:.3f} | {item['seconds'] / item['estimate']:.2f} | "
            f"{item['old']:.2f} |" for item in results]
    return "\n".join([
        SECTION, "",
        f"`python -m bench.blend_cost` ({date.today()}; {os.cpu_count()} cores, nothing else running; casebook "
        f"{code_stamp(None)}). Greedy selection (and a rank average with AUC, a linear stack with two members or more) on "
        f"random predictions of each shape; the estimate is BlendCost's, with its margin of {BLEND_MARGIN:g}; the old "
        "reserve is the constant it replaced. Measured over estimated: at most "
        f"{max(ratios):.2f}, median {float(np.median(ratios)):.2f} ({len(results)} blends).", "",
        "| rows | metric | classes | candidates | measured (s) | estimated (s) | measured / estimated | old reserve (s) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|", *rows])


@click.command()
@click.option("--write", is_flag=True, help="Rewrite its section of bench/RESULTS.md.")
def main(write: bool) -> None:
    text = markdown(measure())
    click.echo(text)
    if write:
        write_section(REPO / "bench" / "RESULTS.md", text)


if __name__ == "__main__":
    main()
