"""An experience pack: what casebook's own agent learned on a pool of real tables, in one versioned JSON file that
ships with casebook (as AutoGluon ships its portfolios) or that a user builds with `agent experience build`.

Per pool task it keeps the task as the case library knows it (description, structure, signature), a profile
vector, and every verified single-model configuration with its CV score, normalised error, fit seconds and rows;
beside them the run's memories (tricks with their measured effect, failures with the repair that worked) and a
portfolio per task kind. Never a label, a prediction or a row of data: only what the search measured."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from agent.candidate import SolutionCandidate
from agent.engine.trainers import model_group, trainer_facts
from agent.memory.change import Change
from agent.memory.portfolio import config_key, nearest, normalised_error, order_for, select_portfolio
from agent.memory.records import Memory, TaskMemory, TaskSignature, memory_from_dict
from retrieval.metrics import metric_info

T = TypeVar("T")

PACK_FORMAT = "casebook-experience"
PACK_VERSION = 1
PORTFOLIO_SIZE = 12
NEIGHBOURS = 5
# A built-in change (a parameter set, an encoder swapped) was measured on few pool tasks each (CatBoost's
# max_ctr_complexity=4, the most often tried, on 94 of the 230 pool runs), so its effect is read over more neighbours
# than a trick's: about eight measurements of a common change instead of two.
CHANGE_NEIGHBOURS = 20
CLASSIFICATION_TYPES = ("binary", "multiclass")
COLUMN_KINDS = ("numeric", "categorical", "text", "datetime", "id")


class PackError(ValueError):
    """A file that is not an experience pack this casebook reads; the message names the file and the fix."""


def task_kind(task_type: str) -> str:
    """Portfolios are chosen apart for classification and regression: their specs' steps differ."""
    return "classification" if task_type in CLASSIFICATION_TYPES else "regression"


def profile_vector(signature: TaskSignature) -> tuple[float, ...]:
    """Where a task sits among the pool's: log rows, log columns, each column kind's share, and its task type."""
    counts = dict(signature.column_kinds)
    columns = max(sum(counts.values()), 1)
    shares = [counts.get(kind, 0) / columns for kind in COLUMN_KINDS]
    types = [float(signature.task_type == kind) for kind in ("binary", "multiclass", "regression")]
    return (math.log10(max(signature.n_rows, 1)), math.log10(max(signature.n_cols, 1)), *shares, *types)


@dataclass(frozen=True)
class ConfigResult:
    """One verified single-model node of a pool run, scored on every row by the full CV."""

    config: str  # portfolio.config_key of the spec
    spec: Mapping[str, Any]  # SolutionSpec.to_dict()
    score: float  # CV score in the metric's own units
    error: float  # normalised: 0 the task's best single model, 1 its trivial baseline
    seconds: float  # the node's CV time
    rows: int  # rows it was scored on

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "spec": dict(self.spec), "score": self.score, "error": self.error,
                "seconds": self.seconds, "rows": self.rows}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfigResult:
        return cls(data["config"], dict(data["spec"]), float(data["score"]), float(data["error"]),
                   float(data["seconds"]), int(data["rows"]))


@dataclass(frozen=True)
class PoolTaskResult:
    name: str
    signature: TaskSignature
    vector: tuple[float, ...]
    metric: str
    baseline: float
    configs: tuple[ConfigResult, ...]

    @property
    def kind(self) -> str:
        return task_kind(self.signature.task_type)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "signature": self.signature.to_dict(), "vector": list(self.vector),
                "metric": self.metric, "baseline": self.baseline, "configs": [c.to_dict() for c in self.configs]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PoolTaskResult:
        return cls(data["name"], TaskSignature.from_dict(data["signature"]), tuple(data["vector"]), data["metric"],
                   float(data["baseline"]), tuple(ConfigResult.from_dict(c) for c in data["configs"]))


@dataclass(frozen=True)
class PackHeader:
    built_with: str  # the command that built it
    commit: str  # casebook's commit at build time
    date: str  # ISO 8601
    pool: str  # the task list the pool came from
    seconds_per_task: float

    def to_dict(self) -> dict[str, Any]:
        return {"built_with": self.built_with, "commit": self.commit, "date": self.date, "pool": self.pool,
                "seconds_per_task": self.seconds_per_task}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PackHeader:
        return cls(data["built_with"], data["commit"], data["date"], data["pool"], float(data["seconds_per_task"]))


@dataclass(frozen=True)
class PortfolioDraft:
    """One portfolio configuration offered as a new task's draft (agent.memory.portfolio_proposer)."""

    pack: str  # the pack's file name
    config: str
    spec: Mapping[str, Any]  # as the nearest pool task that measured it ran it
    measured: tuple[tuple[str, ConfigResult], ...]  # (pool task, its result there), nearest to the new task first
    nearest: TaskSignature  # the signature of measured[0]'s pool task


@dataclass(frozen=True)
class ExperiencePack:
    header: PackHeader
    tasks: tuple[PoolTaskResult, ...]
    library_tasks: tuple[TaskMemory, ...]  # the pool's case library: its tasks ...
    memories: tuple[Memory, ...]  # ... and its memories
    portfolios: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # task kind -> configurations

    def errors(self, kind: str) -> dict[str, dict[str, float]]:
        """task -> configuration -> normalised error, over the pool tasks of one kind."""
        return {task.name: {c.config: c.error for c in task.configs} for task in self.tasks if task.kind == kind}

    def neighbours(self, signature: TaskSignature, k: int = NEIGHBOURS) -> list[str]:
        """The k pool tasks of the same kind nearest to a task with this signature, those scored by its metric
        first: the metric decides what a configuration should fit (the pool's tasks scored by MAE were won by an L1
        loss on 5 of 7, the ones nearest an MAE table in shape were scored by RMSE and put the pack's one L1
        configuration 11th of 12)."""
        kind = task_kind(signature.task_type)
        vector = profile_vector(signature)
        tasks = [task for task in self.tasks if task.kind == kind]
        same = {task.name: task.vector for task in tasks if task.signature.metric == signature.metric}
        other = {task.name: task.vector for task in tasks if task.name not in same}
        return (nearest(vector, same, k) + nearest(vector, other, k))[:k]

    def portfolio_for(self, signature: TaskSignature, source: str) -> list[PortfolioDraft]:
        """The portfolio as drafts for a new task, the configurations best on its nearest pool tasks first; each
        with the pool tasks that measured it, nearest first. `source` names the pack in the drafts' plans."""
        kind = task_kind(signature.task_type)
        by_distance = self.neighbours(signature, k=len(self.tasks))
        results = {task.name: {result.config: result for result in task.configs} for task in self.tasks}
        signatures = {task.name: task.signature for task in self.tasks}
        ordered = order_for(self.portfolios.get(kind, ()), self.errors(kind), by_distance[:NEIGHBOURS])
        drafts = []
        for config in ordered:
            measured = tuple((name, results[name][config]) for name in by_distance if config in results[name])
            drafts.append(PortfolioDraft(source, config, measured[0][1].spec, measured, signatures[measured[0][0]]))
        return drafts

    def to_dict(self) -> dict[str, Any]:
        return {"format": PACK_FORMAT, "version": PACK_VERSION, "header": self.header.to_dict(),
                "portfolios": {kind: list(configs) for kind, configs in self.portfolios.items()},
                "tasks": [task.to_dict() for task in self.tasks],
                "library": {"tasks": [task.to_dict() for task in self.library_tasks],
                            "memories": [shareable(memory.to_dict()) for memory in self.memories]}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExperiencePack:
        library = data.get("library") or {}
        return cls(PackHeader.from_dict(data["header"]), tuple(PoolTaskResult.from_dict(t) for t in data["tasks"]),
                   tuple(TaskMemory.from_dict(t) for t in library.get("tasks", ())),
                   tuple(memory_from_dict(m) for m in library.get("memories", ())),
                   {kind: tuple(configs) for kind, configs in (data.get("portfolios") or {}).items()})


def task_result(run: Mapping[str, Any], signature: TaskSignature) -> PoolTaskResult | None:
    """A pool task's verified single-model configurations from its run.json; None when none was verified."""
    metric = run["metric"]
    sign = 1.0 if metric_info(metric).greater_is_better else -1.0
    nodes = [node for node in (run.get("journal") or {}).get("nodes", ())
             if node.get("status") == "valid" and not node.get("members") and node.get("scored_on", "full") == "full"
             and node.get("score") is not None and math.isfinite(node["score"])]
    if not nodes:
        return None
    # A node's score is oriented already (higher is better); the baseline is in the metric's own units.
    baseline = sign * float(run["baseline"])
    best = max(node["score"] for node in nodes)
    results: dict[str, ConfigResult] = {}
    for node in nodes:
        key = config_key(node["spec"])
        error = normalised_error(node["score"], best, baseline)
        if key not in results or error < results[key].error:
            results[key] = ConfigResult(key, node["spec"], sign * float(node["score"]), error, float(node.get("elapsed") or 0),
                                        int(node.get("scored_rows") or signature.n_rows))
    return PoolTaskResult(run["task"]["name"], signature, profile_vector(signature), metric, float(run["baseline"]),
                          tuple(sorted(results.values(), key=lambda r: (r.error, r.config))))


# An absolute path inside a memory's text (a plan naming a trick's source file): the pack keeps its file name only.
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(?:[^\s/,;()'\"#]+/)+([^\s/,;()'\"#]+(?:#[^\s,;()'\"]*)?)")


def shareable(record: Mapping[str, Any]) -> dict[str, Any]:
    """A memory as a pack keeps it: no solution program, every file by its name (not the building machine's
    path)."""
    def without_paths(value: Any) -> Any:
        if isinstance(value, str):
            return ABSOLUTE_PATH.sub(r"\1", value)
        if isinstance(value, Mapping):
            return {key: without_paths(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [without_paths(item) for item in value]
        return value

    return without_paths({key: value for key, value in record.items() if key != "solution"})


def build_pack(runs: Iterable[tuple[Mapping[str, Any], TaskSignature]], library_tasks: Iterable[TaskMemory],
               memories: Iterable[Memory], header: PackHeader, portfolio_size: int = PORTFOLIO_SIZE) -> ExperiencePack:
    """The pack of a pool: each (run.json, its task's signature), the case library the same runs wrote, and per
    task kind the greedy portfolio of `portfolio_size` configurations."""
    tasks = tuple(result for run, signature in runs if (result := task_result(run, signature)) is not None)
    pack = ExperiencePack(header, tasks, tuple(library_tasks), tuple(memories))
    portfolios = {kind: tuple(choice.config for choice in select_portfolio(pack.errors(kind), portfolio_size))
                  for kind in ("classification", "regression")}
    return replace(pack, portfolios=portfolios)


def write_pack(pack: ExperiencePack, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(pack.to_dict(), indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return path


def read_pack(path: str | Path) -> ExperiencePack:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise PackError(f"{path}: not a readable experience pack ({error}); rebuild it with "
                        "`agent experience build POOL --out FILE`") from None
    if not isinstance(data, dict) or data.get("format") != PACK_FORMAT:
        raise PackError(f"{path}: not an experience pack (no \"format\": {PACK_FORMAT!r}); build one with "
                        "`agent experience build POOL --out FILE`")
    if data.get("version") != PACK_VERSION:
        raise PackError(f"{path}: experience pack version {data.get('version')}, this casebook reads version "
                        f"{PACK_VERSION}; rebuild it with `agent experience build POOL --out FILE`")
    return ExperiencePack.from_dict(data)


def measured_gains(pack: ExperiencePack, neighbours: Sequence[str]) -> dict[tuple[str, str], list[float]]:
    """The relative gains of each (model group, trick op or built-in change) on the given pool tasks, from the
    improvements and the changes that made things worse."""
    names = set(neighbours)
    gains: dict[tuple[str, str], list[float]] = {}
    for memory in pack.memories:
        op, gain = getattr(memory, "op", None), getattr(memory, "gain", None)
        if memory.task_name in names and op and gain is not None:
            gains.setdefault((model_group(memory.trainer or ""), op), []).append(float(gain))
    return gains


USER_PACKS = "experience"  # the folder of a casebook home that holds the packs a user added


def bundled_pack_path() -> Path | None:
    """The pack shipped with casebook (data/experience/pack.json), None when this install has none."""
    from kb.config import data_path

    path = data_path("experience", "pack.json")
    return path if path.is_file() else None


def user_pack_paths(home: str | Path) -> list[Path]:
    """The packs a user added to this home with `agent experience use`, in name order."""
    return sorted((Path(home) / USER_PACKS).glob("*.json"))


def add_pack(home: str | Path, path: str | Path) -> Path:
    """Check that `path` is a pack this casebook reads, then keep a copy in the home (so moving or rebuilding the
    original does not change what later runs use). Returns the copy's path."""
    pack = read_pack(path)
    copy = Path(home) / USER_PACKS / Path(path).name
    return write_pack(pack, copy)


def packs_in_use(home: str | Path, *, bundled: bool = True) -> list[tuple[Path, ExperiencePack]]:
    """The bundled pack (unless `bundled` is off) and the home's own, each with its file."""
    paths = [*([found] if bundled and (found := bundled_pack_path()) else []), *user_pack_paths(home)]
    return [(path, read_pack(path)) for path in paths]


def portfolio_drafts(packs: Sequence[tuple[Path, ExperiencePack]], signature: TaskSignature) -> list[PortfolioDraft]:
    """The portfolios of the packs in use for a task, taken in turn (each pack's best for it first), each
    configuration once."""
    queues = [pack.portfolio_for(signature, path.name) for path, pack in packs]
    drafts, seen = [], set()
    for position in range(max((len(queue) for queue in queues), default=0)):
        for queue in queues:
            if position < len(queue) and queue[position].config not in seen:
                seen.add(queue[position].config)
                drafts.append(queue[position])
    return drafts


@dataclass(frozen=True)
class TrickEffects:
    """Each trick op's mean measured gain on a task's nearest pool tasks, per model group (linear models, trees:
    agent.engine.trainers.model_group). A linear model extrapolates, so a target or feature transform changes the
    function it fits: a log target sent linear models' errors up twenty-fold on a pool task, their predictions
    exponentiated. Trees predict leaf averages whatever the transform; averaged with the linear runs, that
    measurement put the trick last for a GBDT node too. Forests and GBDTs are one group: split further, one CatBoost
    measurement of a power transform (-0.04%) outweighed two forest ones (+13%) for a LightGBM node."""

    by_group: Mapping[str, Mapping[str, float]]  # group -> op -> mean gain (over packs, each pack's mean)
    runs: Mapping[str, Mapping[str, int]]  # group -> op -> the measurements behind it

    def for_trainer(self, trainer: str) -> Mapping[str, float]:
        """The ops measured on this trainer's model group; an op never tried on it is absent (untried)."""
        return self.by_group.get(model_group(trainer), {})

    def ops(self) -> set[str]:
        return {op for effects in self.by_group.values() for op in effects}

    def of_op(self, op: str) -> dict[str, tuple[float, int]]:
        """Each group that measured the op: its mean gain and its runs, by group name."""
        return {group: (effects[op], self.runs[group][op]) for group, effects in sorted(self.by_group.items())
                if op in effects}

    def overall(self) -> dict[str, float]:
        """Each op's mean gain over the groups that measured it, weighted by their measurements: the order for a
        listing that names no model."""
        return {op: sum(gain * runs for gain, runs in measured.values()) / sum(runs for _, runs in measured.values())
                for op in self.ops() if (measured := self.of_op(op))}


def effects_near(packs: Sequence[ExperiencePack], signature: TaskSignature) -> TrickEffects:
    """Each trick op's measured gain per model group on the nearest pool tasks of every pack (a pack's own
    neighbours): the mean over packs of each pack's mean."""
    means: dict[tuple[str, str], list[float]] = {}
    runs: dict[tuple[str, str], int] = {}
    for pack in packs:
        for key, gains in measured_gains(pack, pack.neighbours(signature)).items():
            means.setdefault(key, []).append(sum(gains) / len(gains))
            runs[key] = runs.get(key, 0) + len(gains)
    by_group: dict[str, dict[str, float]] = {}
    counts: dict[str, dict[str, int]] = {}
    for (group, op), values in means.items():
        by_group.setdefault(group, {})[op] = sum(values) / len(values)
        counts.setdefault(group, {})[op] = runs[(group, op)]
    return TrickEffects(by_group, counts)


def change_key(trainer: str, change: Change) -> str:
    """A built-in change of a model family as experience compares it: the family, the change's op and the model
    parameters it sets (deeper CatBoost trees are one change, shallower ones another)."""
    return json.dumps([trainer, change.op, dict(change.params)], sort_keys=True, default=repr)


@dataclass(frozen=True)
class MeasuredChange:
    """One built-in change of a model family and its gains over its parent in the pool runs that made it."""

    trainer: str
    op: str  # Change.op
    params: Mapping[str, Any]  # the model parameters it sets
    gains: tuple[float, ...]

    @property
    def wins(self) -> int:
        return sum(gain > 0 for gain in self.gains)

    @property
    def expected_gain(self) -> float:
        """The mean of max(gain, 0): what trying the change is expected to add to the best (a change that scores
        worse leaves its parent standing, so it costs only its time)."""
        return sum(max(gain, 0.0) for gain in self.gains) / len(self.gains)

    def evidence(self) -> str:
        return (f"beat its parent in {self.wins} of {len(self.gains)} runs on similar pool tasks, expected gain "
                f"{self.expected_gain:+.2%}")

    def to_dict(self) -> dict[str, Any]:
        return {"trainer": self.trainer, "op": self.op, "params": dict(self.params), "runs": len(self.gains),
                "wins": self.wins, "expected_gain": self.expected_gain}


@dataclass(frozen=True)
class ChangeGains:
    """What the packs measured of the built-in changes (an improvement with no retrieved trick) on a task's nearest
    pool tasks: each change's gains over its parent, relative to the parent's score, greater is better."""

    measured: Mapping[str, MeasuredChange]  # change_key -> the change and its gains

    def changes(self) -> list[MeasuredChange]:
        """Every measured change, by model family, the largest expected gain first (the order the search tries
        them in)."""
        return sorted(self.measured.values(), key=lambda change: (change.trainer, -change.expected_gain, change.op))

    def order(self, parent: SolutionCandidate,
              changes: Sequence[tuple[str, SolutionCandidate]]) -> list[tuple[str, SolutionCandidate]]:
        """A node's built-in changes (why, candidate) in the order experience measured: the largest expected gain
        first, the ones never measured in their own order, the ones that never beat their parent last; each
        measured one's `why` says what was measured."""
        keyed = [(change_key(parent.trainer, Change.between(parent, candidate)), why, candidate)
                 for why, candidate in changes]
        ordered = order_by_effect(keyed, lambda item: item[0],
                                  {key: change.expected_gain for key, change in self.measured.items()})
        return [(why + (f" (experience: {self.measured[key].evidence()})" if key in self.measured else ""), candidate)
                for key, why, candidate in ordered]


def _built_in(trainer: str, change: Change) -> bool:
    """Whether a change is one the built-in proposer makes (a step or the target changed, or parameters out of one of
    the family's variations), not an Optuna trial's parameters."""
    variations = [params for classification in (True, False)
                  for _, params in trainer_facts(trainer).variations_for(classification)]
    return not change.params or any(all(name in params and params[name] == value
                                        for name, value in change.params.items()) for params in variations)


def change_gains_near(packs: Sequence[ExperiencePack], signature: TaskSignature,
                      k: int = CHANGE_NEIGHBOURS) -> ChangeGains:
    """The built-in changes' gains on the k nearest pool tasks of every pack (a pack's own neighbours)."""
    gains: dict[str, list[float]] = {}
    changes: dict[str, tuple[str, Change]] = {}
    for pack in packs:
        names = set(pack.neighbours(signature, k))
        for memory in pack.memories:
            change, gain = getattr(memory, "change", None), getattr(memory, "gain", None)
            if (memory.task_name in names and getattr(memory, "action", None) == "improve"
                    and getattr(memory, "trick", None) is None and change is not None and gain is not None
                    and _built_in(memory.trainer, change)):
                key = change_key(memory.trainer, change)
                gains.setdefault(key, []).append(float(gain))
                changes[key] = (memory.trainer, change)
    return ChangeGains({key: MeasuredChange(trainer, change.op, dict(change.params), tuple(gains[key]))
                        for key, (trainer, change) in changes.items()})


def order_by_effect(items: Sequence[T], op_of: Callable[[T], str | None], effects: Mapping[str, float]) -> list[T]:
    """Items (retrieved tricks, built-in changes) reordered by what experience measured: the ones that helped on
    similar pool tasks first, most first; the ones never tried in today's order; the ones that hurt (or did nothing)
    last."""
    def effect(item: T) -> float | None:
        op = op_of(item)
        return effects.get(op) if op else None

    helped = sorted((item for item in items if (e := effect(item)) is not None and e > 0), key=lambda i: -effect(i))
    untried = [item for item in items if effect(item) is None]
    hurt = sorted((item for item in items if (e := effect(item)) is not None and e <= 0), key=lambda i: -effect(i))
    return [*helped, *untried, *hurt]
