"""The fold-to-fold spread behind the search's pruning bound (issue 25): replay finished runs' traces and ask, for
each improvement scored on every fold, what a rule stopping it after its first k folds would have done (the search
gates improvements only: a draft starts a model family's branch).

The rule compares a node with the best node so far on the same folds (every node of a run shares its folds): the
mean paired difference of their first k fold scores (greater is better), in units of a spread, against -z/sqrt(k).
Two spreads are replayed: the best node's own fold-to-fold standard deviation (the bound before 2026-11-26), and
the paired spread the search uses now (agent.engine.fit.paired_spread: the median fold-to-fold standard deviation of
an improvement's difference from its parent, over the improvements the run had scored on every fold before this
one; the best's own spread until it has MIN_PAIRS). A node that went on to beat the best on full CV and would have
been stopped is a wrong stop; the time saved is the share of the stopped nodes' CV seconds their remaining folds
took (fold times taken as equal).

The traces are those of runs made under the bound of their day: a node that bound stopped has no full-CV score and
is not replayed, so each row counts what a rule stops among the nodes that went on.

    python -m bench.fold_spread RUN_DIR [RUN_DIR ...] [--z 1,1.5,2,3] [--write]

A RUN_DIR is a run folder or a folder of run folders. With --write, the section "## Fold spread and the pruning
bound (issue 25)" of bench/RESULTS.md is rewritten.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import click

from agent.engine.fit import paired_spread
from bench.results import write_section
from retrieval.metrics import metric_info

SECTION = "## Fold spread and the pruning bound (issue 25)"
BAR, PAIRED = "bar", "paired"  # the two spreads replayed


@dataclass(frozen=True)
class Pair:
    run: str
    beat_best: bool  # the improvement's full-CV mean beat the best node's before it
    differences: tuple[float, ...]  # its fold scores minus the best's, greater is better
    spreads: dict[str, float]  # BAR and PAIRED, as the search knew them before this node
    gain: float  # its full-CV mean minus the best's, relative to the best's
    seconds: float  # the node's CV time

    @property
    def folds(self) -> int:
        return len(self.differences)


def run_folders(paths: tuple[Path, ...]) -> list[Path]:
    """The run folders among `paths` and the folders directly inside them."""
    return [path for given in paths
            for path in ([given] if (given / "run.json").is_file() else sorted(given.iterdir()))
            if (path / "run.json").is_file()]


def pairs_of(run_dir: Path) -> list[Pair]:
    """Every improvement scored on all folds, paired with the best node evaluated before it, in trace order."""
    try:
        run = json.loads((run_dir / "run.json").read_text())
        lines = (run_dir / "trace.jsonl").read_text().splitlines()
    except (OSError, json.JSONDecodeError):
        return []
    sign = 1.0 if metric_info(run["metric"]).greater_is_better else -1.0
    nodes = [json.loads(line) for line in lines if line.strip()]
    nodes = [n for n in nodes if n.get("valid") and n.get("fold_scores") and n.get("scored_on", "full") == "full"]
    folds = max((len(n["fold_scores"]) for n in nodes), default=0)
    scores_of = {n.get("node_id"): [sign * value for value in n["fold_scores"]]
                 for n in nodes if len(n["fold_scores"]) == folds}
    best: list[float] | None = None
    with_parents: list[tuple[list[float], list[float]]] = []  # improvements and their parents, as scored so far
    found = []
    for node in (n for n in nodes if len(n["fold_scores"]) == folds):
        scores = scores_of[node.get("node_id")]
        improvement = node.get("action") == "improve" and node.get("trainer") != "ensemble"
        if best is not None and improvement:
            bar_spread = statistics.pstdev(best) or 1e-12
            spreads = {BAR: bar_spread, PAIRED: paired_spread(with_parents) or bar_spread}
            found.append(Pair(run_dir.name, statistics.fmean(scores) > statistics.fmean(best),
                              tuple(a - b for a, b in zip(scores, best, strict=True)), spreads,
                              (statistics.fmean(scores) - statistics.fmean(best)) / abs(statistics.fmean(best) or 1),
                              float(node.get("seconds") or 0.0)))
        if improvement and (parent := scores_of.get(node.get("parent_id"))) is not None:
            with_parents.append((scores, parent))
        if best is None or statistics.fmean(scores) > statistics.fmean(best):
            best = scores
    return found


def first_stop(pair: Pair, z: float, spread: str) -> int | None:
    """The first fold count k < n after which the rule stops the node, None if it runs every fold."""
    return next((k for k in range(1, pair.folds)
                 if statistics.fmean(pair.differences[:k]) < -z * pair.spreads[spread] / math.sqrt(k)), None)


def replay(pairs: list[Pair], z: float, spread: str) -> dict[str, object]:
    stops = [(pair, k) for pair in pairs if (k := first_stop(pair, z, spread)) is not None]
    total = sum(pair.seconds for pair in pairs) or 1.0
    return {"z": z, "spread": spread, "nodes": len(pairs), "stopped": len(stops),
            "wrong_stops": sorted(p.gain for p, _ in stops if p.beat_best),
            "beat_best": sum(p.beat_best for p in pairs),
            "time_saved": sum(p.seconds * (p.folds - k) / p.folds for p, k in stops) / total}


@click.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--z", "zs", default="1,1.5,2,2.5,3", show_default=True)
@click.option("--write", is_flag=True, help="Rewrite this bench's section of bench/RESULTS.md.")
def main(run_dirs, zs, write):
    folders = run_folders(run_dirs)
    pairs = [pair for run_dir in folders for pair in pairs_of(run_dir)]
    rows = [replay(pairs, float(z), spread) for spread in (BAR, PAIRED) for z in zs.split(",")]
    lines = [SECTION, "",
             f"`python -m bench.fold_spread` over {len(folders)} run folders ({len({p.run for p in pairs})} with "
             f"improvements scored on every fold): {len(pairs)} improvements paired with the best node before them, "
             f"of which {rows[0]['beat_best'] if rows else 0} beat it on full CV. Spread: bar = the best node's own "
             "fold-to-fold standard deviation; paired = the run's improvements against their parents "
             "(agent.engine.fit.paired_spread).", "",
             "| spread | z | improvements stopped early | of them, improvements that beat the best on full CV (by) "
             "| CV time saved |",
             "|---|---:|---:|---|---:|"]
    lines += [f"| {r['spread']} | {r['z']:g} | {r['stopped']} of {r['nodes']} | {len(r['wrong_stops'])}"
              + (f" ({', '.join(f'{gain:.2%}' for gain in r['wrong_stops'])})" if r["wrong_stops"] else "")
              + f" | {r['time_saved']:.0%} |" for r in rows]
    text = "\n".join(lines) + "\n"
    click.echo(text)
    if write:
        write_section(Path(__file__).with_name("RESULTS.md"), text)


if __name__ == "__main__":
    main()
