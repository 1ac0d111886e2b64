"""The fold-to-fold spread behind the search's pruning bound (issue 25): replay finished runs' traces and ask, for
each improvement scored on every fold, what a rule stopping it after its first k folds would have done (the search
gates improvements only: a draft starts a model family's branch).

The rule compares a node with the best node so far on the same folds (every node of a run shares its folds): the
mean paired difference of their first k fold scores (greater is better), in units of the best node's own
fold-to-fold standard deviation, against -z/sqrt(k). A node that went on to beat the best on full CV and would have
been stopped is a wrong stop; the time saved is the share of the stopped nodes' CV seconds their remaining folds
took (fold times taken as equal).

    python -m bench.fold_spread RUN_DIR [RUN_DIR ...] [--z 0.5,0.75,1,1.5] [--write]

With --write, the section "## Fold spread and the pruning bound (issue 25)" of bench/RESULTS.md is rewritten.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import click

from bench.results import write_section
from retrieval.metrics import metric_info

SECTION = "## Fold spread and the pruning bound (issue 25)"


@dataclass(frozen=True)
class Pair:
    run: str
    beat_best: bool  # the improvement's full-CV mean beat the best node's before it
    standardised: tuple[float, ...]  # mean paired difference after k = 1..n folds, over the best's fold spread
    seconds: float  # the node's CV time
    folds: int


def pairs_of(run_dir: Path) -> list[Pair]:
    """Every node scored on all folds, paired with the best node evaluated before it, in trace order."""
    try:
        run = json.loads((run_dir / "run.json").read_text())
        lines = (run_dir / "trace.jsonl").read_text().splitlines()
    except (OSError, json.JSONDecodeError):
        return []
    sign = 1.0 if metric_info(run["metric"]).greater_is_better else -1.0
    nodes = [json.loads(line) for line in lines if line.strip()]
    nodes = [n for n in nodes if n.get("valid") and n.get("fold_scores") and n.get("scored_on", "full") == "full"]
    folds = max((len(n["fold_scores"]) for n in nodes), default=0)
    best: list[float] | None = None
    found = []
    for node in (n for n in nodes if len(n["fold_scores"]) == folds):
        scores = [sign * value for value in node["fold_scores"]]
        if best is not None and node.get("action") == "improve" and node.get("trainer") != "ensemble":
            spread = statistics.pstdev(best) or 1e-12
            differences = [a - b for a, b in zip(scores, best, strict=True)]
            found.append(Pair(run_dir.name, statistics.fmean(scores) > statistics.fmean(best),
                              tuple(statistics.fmean(differences[:k]) / spread for k in range(1, folds + 1)),
                              float(node.get("seconds") or 0.0), folds))
        if best is None or statistics.fmean(scores) > statistics.fmean(best):
            best = scores
    return found


def first_stop(pair: Pair, z: float) -> int | None:
    """The first fold count k < n after which the rule stops the node, None if it runs every fold."""
    return next((k for k in range(1, pair.folds) if pair.standardised[k - 1] < -z / math.sqrt(k)), None)


def replay(pairs: list[Pair], z: float) -> dict[str, float]:
    stops = [(pair, k) for pair in pairs if (k := first_stop(pair, z)) is not None]
    total = sum(pair.seconds for pair in pairs) or 1.0
    return {"z": z, "nodes": len(pairs), "stopped": len(stops), "wrong_stops": sum(p.beat_best for p, _ in stops),
            "beat_best": sum(p.beat_best for p in pairs),
            "time_saved": sum(p.seconds * (p.folds - k) / p.folds for p, k in stops) / total}


@click.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--z", "zs", default="0.5,0.75,1,1.25,1.5", show_default=True)
@click.option("--write", is_flag=True, help="Rewrite this bench's section of bench/RESULTS.md.")
def main(run_dirs, zs, write):
    pairs = [pair for run_dir in run_dirs for pair in pairs_of(run_dir)]
    rows = [replay(pairs, float(z)) for z in zs.split(",")]
    lines = [SECTION, "",
             f"`python -m bench.fold_spread` over {len(run_dirs)} run folders ({len({p.run for p in pairs})} with "
             f"nodes scored on every fold): {len(pairs)} nodes paired with the best node before them, of which "
             f"{rows[0]['beat_best'] if rows else 0} beat it on full CV.", "",
             "| z | nodes stopped early | of them, nodes that beat the best on full CV | CV time saved |",
             "|---:|---:|---:|---:|"]
    lines += [f"| {r['z']:g} | {r['stopped']} of {r['nodes']} | {r['wrong_stops']} | {r['time_saved']:.0%} |"
              for r in rows]
    text = "\n".join(lines) + "\n"
    click.echo(text)
    if write:
        write_section(Path(__file__).with_name("RESULTS.md"), text)


if __name__ == "__main__":
    main()
