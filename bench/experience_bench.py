"""Benchmark for issue 22: what experience and knowledge add, in four arms of `agent solve` that differ in one thing.

On the evaluation tables (bench/tasks.py EVALUATION_TASKS: none in the experience pool, nothing tuned on them), at
each budget and seed, every arm runs as its own process, one at a time, on the same task folder and seed (so on the
same CV folds), with a fresh home and `--no-memory` (no arm has the agent's own memories):

    none        `--no-experience`: no knowledge base and no experience pack
    experience  the experience packs in use (the bundled one), no knowledge base
    kb          `--use-kb --no-experience`: the knowledge base of --kb-home, no pack
    both        `--use-kb`: the knowledge base and the pack
    autogluon   AutoGluon `medium_quality` at the same budget (bench/peers.py, its own environment)
    both-half   `--use-kb` (experience-half: the pack alone) given, as its whole budget, half the search seconds
                the `none` run of the same table, budget and seed took to its final CV score (its blend, made after
                its search): whether knowledge and experience reach that score in half the time, their own final
                blend included, which a node-by-node reading of one full run cannot see (no blend is made mid-search);
                not run where that half is under HALF_MIN_BUDGET, too short for a run to search at all

Every agent arm has the same search, blending and tuning; only what it knows differs. Per run: the held-back score,
wall seconds and peak memory (timed from outside), and from the run folder the nodes and, for every node verified on
full CV, when it finished (search seconds) and its CV score, so the time and nodes an arm needed to reach the `none`
arm's final CV score can be read.

    python -m bench.experience_bench --kb-home HOME [--tasks lending,...] [--budgets 60] [--seeds 0,1,2]
        [--arms none,experience,kb,both,autogluon] [--label LABEL]

HOME is a knowledge base built with `kb ingest --bundled` plus the write-ups and papers of ../shared/corpus; it is
copied for each run. Runs are saved to bench/agent_runs/experience.json as each ends (an interrupted bench resumes;
a stored agent run is redone only when the code changed), and the section of bench/RESULTS.md is rewritten from it.
With --label, to bench/agent_runs/experience-LABEL.json and a section of its own (new tables, say, from
bench/tasks.py HEADROOM_CANDIDATES), leaving this one as it was.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import tempfile
from datetime import date
from pathlib import Path

import click

from agent.search.journal import FULL, VALID
from bench.agent_bench import PEER_PYTHON, REPO, RUNS, peer_command
from bench.anytime_bench import AGENT_MAIN, within_limit
from bench.results import write_section
from bench.tasks import EVALUATION_TASKS, HEADROOM_CANDIDATES
from bench.throughput_bench import (
    code_stamp,
    evaluation_task,
    fmt,
    load_runs,
    mean,
    run_key,
    score_ratio,
    scored_run,
    split,
)

RESULTS = REPO / "bench" / "RESULTS.md"
RUNS_FILE = RUNS / "experience.json"
SECTION = "## Experience and knowledge: four arms (issue 22)"
AGENT_OPTIONS = {"none": ["--no-experience"], "experience": [], "kb": ["--use-kb", "--no-experience"],
                 "both": ["--use-kb"]}
REFERENCE = "none"
# A half-time arm runs like its full arm, on half the search seconds the reference run took to its final CV score.
HALF_ARMS = {"both-half": "both", "experience-half": "experience"}
# The least whole budget a half-time run is given: below it `agent solve` stops before its search with one error line
# (its set-up and exit leave under agent.solve.MIN_SEARCH_SECONDS; it asked for 10 s on 13k rows). A reference that
# reached its final CV sooner than twice this cannot be halved, and the table is left out of the half-time count.
HALF_MIN_BUDGET = 10.0
ARMS = (*AGENT_OPTIONS, "autogluon", *HALF_ARMS)
# The tables it may run: the evaluation set, and the candidates for it that bench/headroom.py screens.
TASKS = {**EVALUATION_TASKS, **HEADROOM_CANDIDATES}


def default_tasks() -> list[str]:
    """The evaluation tables up to 100k rows (the throughput bench's eight and the smaller held-out ones)."""
    return [name for name, task in EVALUATION_TASKS.items() if len(task.frame()) <= 100_000]


def search_curve(run_dir: Path) -> dict:
    """From an agent run folder: nodes, the best CV score (oriented: higher is better) and, for every node verified
    on every row and fold, when it finished in search seconds, its place in the journal, its oriented score and
    whether it combines other nodes (1: a blend or stack, 0: one model)."""
    try:
        run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"run_json": False}
    nodes = (run.get("journal") or {}).get("nodes") or []
    full = [node for node in nodes if node["status"] == VALID and node.get("scored_on", FULL) == FULL
            and node.get("folds_scored") == node.get("folds") and node.get("score") is not None]
    experience = run.get("experience") or {}
    return {"run_json": True, "nodes": len(nodes), "verified_full_cv": len(full),
            "curve": [[round(node["started"] + node["elapsed"], 2), node["id"] + 1, node["score"],
                       int(bool(node.get("members")))] for node in full],
            "portfolio_drafts": experience.get("portfolio_drafts"), "stop_reason": run.get("stop_reason")}


def half_budget(reference: dict | None) -> float | None:
    """Half the search seconds a reference run took to its final CV score (None without a scored reference)."""
    seconds = seconds_to_final(reference) if reference is not None else None
    return None if seconds is None else round(seconds / 2, 1)


def halvable(run_budget: float) -> bool:
    """Whether a half-time run of `run_budget` seconds can search at all (HALF_MIN_BUDGET)."""
    return run_budget >= HALF_MIN_BUDGET


def run_once(name: str, budget: float, arm: str, seed: int, root: Path, kb_home: Path | None, stamp: str,
             run_budget: float | None = None) -> dict:
    """One run of `arm`; a half-time arm's on `run_budget` seconds (its record keeps the nominal `budget`)."""
    task_dir, answers, dataset = evaluation_task(name, root)
    out = root / "runs" / run_key(name, budget, arm, seed).replace("@", "-")
    if out.exists():  # an interrupted run's folder: redone whole
        shutil.rmtree(out)
    out.mkdir(parents=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    options = AGENT_OPTIONS.get(HALF_ARMS.get(arm, arm))
    run_budget = budget if run_budget is None else run_budget
    if options is not None:
        home, run_dir = out / "home", out / "run"
        if "--use-kb" in options:
            shutil.copytree(kb_home, home)
        command = [*AGENT_MAIN, "--home", str(home), "solve", str(task_dir), "--time-budget", str(run_budget),
                   "--seed", str(seed), "--out", str(run_dir), "--no-memory", "--quiet", *options]
        submission = run_dir / "submission.csv"
    else:
        submission = out / "submission.csv"
        command = peer_command(arm, task_dir, submission, dataset, budget, "--seed", str(seed))
    load_before, measured, score = scored_run(command, REPO, env, out, run_budget, dataset, submission, answers)
    record = {"task": name, "budget": budget, "arm": arm, "seed": seed, "date": date.today().isoformat(),
              "code": stamp if options is not None else "", "rows": len(dataset.X), "metric": dataset.metric,
              "greater_is_better": dataset.metric_info.greater_is_better, "load_before": load_before, **measured,
              "within_limit": within_limit(measured["wall"], run_budget), "score": score}
    if arm in HALF_ARMS:
        record["run_budget"] = run_budget
    if options is not None:
        record["search"] = search_curve(out / "run")
    return record


# -- the results -----------------------------------------------------------------------------------------------------

def reached(run: dict, target: float) -> tuple[float, int] | None:
    """When (search seconds) and at which node an agent run first had a node verified on full CV scoring at least
    `target` (oriented), or None if it never did."""
    for seconds, node, score, *_ in sorted((run.get("search") or {}).get("curve") or []):
        if score >= target - 1e-12:
            return seconds, node
    return None


def seconds_to_final(run: dict) -> float | None:
    """The search seconds at which a run first verified its final CV score (None when it verified nothing)."""
    target = final_cv(run)
    return None if target is None else reached(run, target)[0]


def final_cv(run: dict, single: bool = False) -> float | None:
    """The run's best CV score; with `single`, its best single model's (None from a record that did not keep which
    nodes combine others)."""
    curve = (run.get("search") or {}).get("curve") or []
    if single:
        if any(len(point) < 4 for point in curve):
            return None
        curve = [point for point in curve if not point[3]]
    return max((point[2] for point in curve), default=None)


Cells = dict[tuple[str, float, str], list[dict]]  # (task, budget, arm) -> its runs, one per seed


def time_to_reference(cells: Cells, task: str, budget: float, arm: str,
                      single: bool = False) -> list[tuple[float, float, int] | None]:
    """Per seed: (the reference arm's time to its own final CV score, this arm's time to it, this arm's nodes to it),
    None where this arm never reached it; seeds without both runs are left out. With `single`, the reference's
    best single model's score instead: its final one is mostly the blend made after its search."""
    reference = {run["seed"]: run for run in cells.get((task, budget, REFERENCE), [])}
    found = []
    for run in cells.get((task, budget, arm), []):
        base = reference.get(run["seed"])
        target = final_cv(base, single) if base is not None else None
        if target is None:
            continue
        base_time = reached(base, target)[0]
        mine = reached(run, target)
        found.append(None if mine is None else (base_time, mine[0], mine[1]))
    return found


def half_reach(cells: Cells, task: str, budget: float, arm: str) -> list[tuple[float, float, bool]]:
    """Per seed of a half-time arm: (the reference run's search seconds to its final CV, this run's whole budget,
    whether this run's final CV scored at least the reference's), seeds without both runs left out, and those whose
    half was too short to search (`halvable`; such a run, recorded before the bench skipped them, has no score)."""
    reference = {run["seed"]: run for run in cells.get((task, budget, REFERENCE), [])}
    found = []
    for run in cells.get((task, budget, arm), []):
        base = reference.get(run["seed"])
        target, mine = (final_cv(base) if base is not None else None), final_cv(run)
        if target is not None and halvable(run["run_budget"]):
            found.append((seconds_to_final(base), run["run_budget"], mine is not None and mine >= target - 1e-12))
    return found


def markdown(runs: dict[str, dict], title: str = SECTION) -> str:
    records = list(runs.values())
    cells: Cells = {}
    for run in sorted(records, key=lambda run: (list(TASKS).index(run["task"]), run["budget"],
                                                 ARMS.index(run["arm"]), run["seed"])):
        cells.setdefault((run["task"], run["budget"], run["arm"]), []).append(run)
    budgets = sorted({budget for _, budget, _ in cells})
    arms = [arm for arm in ARMS if any(cell_arm == arm for _, _, cell_arm in cells)]
    codes = ", ".join(sorted({run["code"] for run in records if run["code"]})) or "–"
    loads = [run["load_before"] for run in records]

    def seed_scores(task: str, budget: float, arm: str) -> dict[int, float]:
        return {run["seed"]: run["score"] for run in cells.get((task, budget, arm), []) if run["score"] is not None}

    def ratio(task: str, budget: float, arm: str, reference: str) -> float | None:
        """The ratio of the mean scores over the seeds both arms have."""
        mine, theirs = seed_scores(task, budget, arm), seed_scores(task, budget, reference)
        common = sorted(set(mine) & set(theirs))
        if not common:
            return None
        return score_ratio(mean([mine[s] for s in common]), mean([theirs[s] for s in common]),
                           cells[(task, budget, arm)][0]["greater_is_better"])

    lines = [title, "",
             f"`python -m bench.experience_bench` ({', '.join(sorted({run['date'] for run in records}))}; "
             f"{platform.machine()}, {os.cpu_count()} cores; 1-minute load {min(loads):.1f} to {max(loads):.1f} when "
             f"runs started; agent code {codes}). One run at a time, every arm its own process on the same task folder "
             "and seed (bench/tasks.py EVALUATION_TASKS or HEADROOM_CANDIDATES, split 75/25: no table of the "
             "experience pool, nothing tuned on them), a fresh home and `--no-memory`. none = `--no-experience`; "
             "experience = the bundled pack; "
             "kb = `--use-kb --no-experience` (the cards, both write-up folders and the papers); both = `--use-kb`; "
             "autogluon = AutoGluon `medium_quality` († its run taken from another bench's runs file on the same task "
             "folder, budget and seed, not run again here). Score: on the held-back answers, the mean over seeds (± their "
             "standard deviation). Ratios: > 1 is better. To none's CV: the search seconds and nodes at which the "
             "arm first verified a node on full CV scoring at least none's final CV score (same folds), against the "
             "seconds none took; `never` when it did not within the budget. A half-time arm (both-half, experience-half) is "
             "its full arm run again with, as its whole budget, half the search seconds none took to its final CV "
             "score: `reached in s (none's s)` when its own final CV (its blend included) scored at least none's.", "",
             "| task | rows | metric | budget (s) | arm | runs | score | ratio to none | ratio to autogluon | "
             "to none's CV: s (none's s), nodes | nodes | wall (s) | within limit | peak MB |",
             "|---|---:|---|---:|---|---:|---:|---:|---:|---|---:|---:|---|---:|"]
    for (task, budget, arm), cell in cells.items():
        scores = [run["score"] for run in cell if run["score"] is not None]
        spread = f" ± {statistics.stdev(scores):.4f}" if len(scores) > 1 else ""
        first = cell[0]
        reach = ""
        if arm in HALF_ARMS:
            reach = "; ".join(f"{'reached' if hit else 'not'} in {own:.0f} ({base:.0f})"
                              for base, own, hit in half_reach(cells, task, budget, arm)) or "–"
            short = [run["run_budget"] for run in cell if not halvable(run["run_budget"])]
            if short:
                reach = (f"{'' if reach == '–' else reach + '; '}{len(short)} not run: none's final CV came within "
                         f"{2 * max(short):.0f} s, under twice the {HALF_MIN_BUDGET:g} s a run needs")
        elif arm in AGENT_OPTIONS and arm != REFERENCE:
            reach = "; ".join("never" if item is None else f"{item[1]:.0f} ({item[0]:.0f}), {item[2]}"
                              for item in time_to_reference(cells, task, budget, arm)) or "–"
        nodes = mean([run["search"]["nodes"] for run in cell if (run.get("search") or {}).get("nodes") is not None])
        lines.append(f"| {task} | {first['rows']:,} | {first['metric']} {'↑' if first['greater_is_better'] else '↓'} | "
                     f"{budget:g} | {arm}{' †' if any(run.get('taken_from') for run in cell) else ''} | "
                     f"{len(cell)} | {fmt(mean(scores))}{spread} | "
                     f"{fmt(ratio(task, budget, arm, REFERENCE) if arm != REFERENCE else None)} | "
                     f"{fmt(ratio(task, budget, arm, 'autogluon') if arm != 'autogluon' else None)} | {reach or '–'} | "
                     f"{fmt(nodes, 1)} | {fmt(mean([run['wall'] for run in cell]), 1)} | "
                     f"{sum(run['within_limit'] for run in cell)} / {len(cell)} | "
                     f"{max(run['peak_tree_mb'] for run in cell):,.0f} |")
    lines += ["", "Means over the tables (each table's ratio of its mean scores over seeds):", "",
              "| budget (s) | arm | tables | score ratio to none | beats none on | score ratio to autogluon | "
              "reached none's final CV in ≤ half its time | none's best single model, in ≤ half its time | "
              "within limit |", "|---:|---|---:|---:|---|---:|---|---|---|"]
    for budget in budgets:
        tasks = [task for task, cell_budget, cell_arm in cells if cell_budget == budget and cell_arm == REFERENCE]
        for arm in arms:
            mine = [task for task in tasks if (task, budget, arm) in cells]
            if not mine:  # an arm not run at this budget
                continue
            to_none = [value for value in (ratio(task, budget, arm, REFERENCE) for task in mine) if value is not None]
            to_ag = [value for value in (ratio(task, budget, arm, "autogluon") for task in mine) if value is not None]
            if arm in HALF_ARMS:  # a run of half the time, its own final blend included
                fast = [all(hit for *_, hit in found) for found in (half_reach(cells, task, budget, arm)
                                                                     for task in mine) if found]
                fast_single = []
            else:
                fast, fast_single = ([all(item is not None and item[1] <= item[0] / 2 for item in found)
                                      for found in (time_to_reference(cells, task, budget, arm, single)
                                                    for task in mine) if found] for single in (False, True))
            within = [run["within_limit"] for task in mine for run in cells[(task, budget, arm)]]
            lines.append(f"| {budget:g} | {arm} | {len(mine)} | "
                         f"{fmt(mean(to_none)) if arm != REFERENCE else '–'} | "
                         f"{f'{sum(v > 1 for v in to_none)} of {len(to_none)}' if arm != REFERENCE else '–'} | "
                         f"{fmt(mean(to_ag)) if arm != 'autogluon' else '–'} | "
                         f"{f'{sum(fast)} of {len(fast)}' if arm not in (REFERENCE, 'autogluon') else '–'} | "
                         f"{f'{sum(fast_single)} of {len(fast_single)}' if arm not in (REFERENCE, 'autogluon') and fast_single else '–'} | "
                         f"{sum(within)} / {len(within)} |")
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--kb-home", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="The knowledge base the kb and both arms copy (required with them).")
@click.option("--tasks", default=None,
              help="Comma-separated EVALUATION_TASKS or HEADROOM_CANDIDATES names [default: the evaluation tables up "
                   "to 100k rows].")
@click.option("--budgets", default="60", show_default=True, help="Comma-separated wall-clock budgets (s).")
@click.option("--arms", default=",".join(ARMS), show_default=True)
@click.option("--seeds", default="0", show_default=True, help="Comma-separated seeds; each seed is one more run.")
@click.option("--peers-from", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Take the autogluon runs from this bench's runs file (bench/agent_runs/throughput.json: the same "
                   "task folders, budget and seed) instead of running them again; the table marks them.")
@click.option("--root", type=click.Path(path_type=Path), default=Path(tempfile.gettempdir()) / "experience-bench",
              show_default=True, help="Task folders and run folders.")
@click.option("--label", default=None,
              help="Keep these runs apart: bench/agent_runs/experience-LABEL.json and a RESULTS.md section of its own.")
def main(kb_home: Path | None, tasks: str | None, budgets: str, arms: str, seeds: str, peers_from: Path | None,
         root: Path, label: str | None) -> None:
    runs_file = RUNS_FILE if label is None else RUNS / f"experience-{label}.json"
    title = SECTION if label is None else f"{SECTION}, {label}"
    names = split(tasks) if tasks else default_tasks()
    chosen = split(arms)
    unknown = [name for name in names if name not in TASKS] + [arm for arm in chosen if arm not in ARMS]
    if unknown:
        raise click.BadParameter(f"unknown {unknown}: tasks from {', '.join(TASKS)}; arms from "
                                 f"{', '.join(ARMS)}")
    with_kb = [arm for arm in chosen if "--use-kb" in AGENT_OPTIONS.get(HALF_ARMS.get(arm, arm), ())]
    if kb_home is None and with_kb:
        raise click.BadParameter(f"the {', '.join(with_kb)} arms need --kb-home HOME")
    if "autogluon" in chosen and not PEER_PYTHON["autogluon"].exists():
        raise click.ClickException("no environment for autogluon: see bench/peers.py for the set-up")
    stamp = code_stamp(None)
    if peers_from is not None:
        taken = json.loads(peers_from.read_text(encoding="utf-8"))
        runs = load_runs(runs_file)
        for name in names:
            for budget in (float(value) for value in split(budgets)):
                for seed in (int(value) for value in split(seeds)):
                    key = run_key(name, budget, "autogluon", seed)
                    if key not in runs and key in taken:
                        runs[key] = {**taken[key], "code": "", "taken_from": peers_from.name}
        runs_file.parent.mkdir(parents=True, exist_ok=True)
        runs_file.write_text(json.dumps(runs, indent=1), encoding="utf-8")
    for name in names:
        for budget in (float(value) for value in split(budgets)):
            for seed in (int(value) for value in split(seeds)):
                for arm in chosen:
                    key = run_key(name, budget, arm, seed)
                    stored = load_runs(runs_file).get(key)
                    if stored is not None and (arm == "autogluon" or stored["code"] == stamp):
                        continue
                    run_budget = None
                    if arm in HALF_ARMS:
                        run_budget = half_budget(load_runs(runs_file).get(run_key(name, budget, REFERENCE, seed)))
                        if run_budget is None:
                            click.echo(f"{key}: no scored {REFERENCE} run of this table, budget and seed to halve; "
                                       f"run the {REFERENCE} arm first (--arms {REFERENCE},{arm})", err=True)
                            continue
                        if not halvable(run_budget):
                            click.echo(f"{key}: {REFERENCE} reached its final CV in {2 * run_budget:.1f} s, under "
                                       f"twice the {HALF_MIN_BUDGET:g} s a run needs: not halved", err=True)
                            continue
                    record = run_once(name, budget, arm, seed, root, kb_home, stamp, run_budget)
                    runs = load_runs(runs_file)
                    runs[key] = record
                    runs_file.parent.mkdir(parents=True, exist_ok=True)
                    runs_file.write_text(json.dumps(runs, indent=1), encoding="utf-8")
                    write_section(RESULTS, markdown(runs, title))
                    print(json.dumps({k: record.get(k) for k in ("task", "budget", "arm", "seed", "wall",
                                                                 "within_limit", "score")}
                                     | {k: (record.get("search") or {}).get(k) for k in ("nodes", "verified_full_cv")}),
                          flush=True)


if __name__ == "__main__":
    main()
