"""pool.json: the state of a pool solved by `agent solve-all`, every round with the task chosen, why, and how it
ended. Written whole to a temporary file and renamed, so a kill at any moment leaves the old state or the new."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from curriculum.pool import PoolError

STATE_FILE = "pool.json"
# How a round ended. "running" is only ever seen in the state of a call that was interrupted.
RUNNING, SOLVED, FAILED, ERROR, INTERRUPTED = "running", "solved", "failed", "error", "interrupted"


@dataclass(frozen=True)
class RoundRecord:
    """One round of the pool: the task chosen, why, and how its solve ended."""

    round: int  # 1, 2, ... across calls on the same output folder
    task: str
    chosen_by: str  # "curriculum" or "random"
    attempt: int  # this task's try within the call
    seed: int
    status: str  # running / solved / failed / error / interrupted
    run_dir: str  # relative to the pool's output folder
    ranking: tuple[dict[str, Any], ...] = ()  # the curriculum's order that round, every term (Ranked.to_dict)
    metric: str | None = None
    baseline: float | None = None
    best_cv_score: float | None = None
    node_evaluations: int | None = None
    seconds: float | None = None
    error: str | None = None
    started_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ranking": list(self.ranking)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundRecord:
        return cls(**{**data, "ranking": tuple(data.get("ranking", ()))})


@dataclass(frozen=True)
class PoolState:
    """pool.json: the pool's folder, the settings of the last call and every round so far."""

    tasks_dir: str
    settings: dict[str, Any]
    rounds: tuple[RoundRecord, ...] = ()

    @classmethod
    def load(cls, out_dir: Path) -> PoolState | None:
        path = out_dir / STATE_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(data["tasks_dir"], data["settings"], tuple(RoundRecord.from_dict(r) for r in data["rounds"]))
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise PoolError(f"{path}: not a pool state written by `agent solve-all` ({error}); "
                            "pass another --out or delete the file") from error

    def save(self, out_dir: Path) -> None:
        """Written to a temporary file and renamed, so a kill at any moment leaves the old state or the new."""
        out_dir.mkdir(parents=True, exist_ok=True)
        temporary = out_dir / f".{STATE_FILE}.tmp"
        temporary.write_text(json.dumps({"tasks_dir": self.tasks_dir, "settings": self.settings,
                                         "rounds": [record.to_dict() for record in self.rounds]}, indent=1),
                             encoding="utf-8")
        os.replace(temporary, out_dir / STATE_FILE)

    def with_round(self, record: RoundRecord) -> PoolState:
        """The state with `record` added, or replacing the record of the same round."""
        kept = tuple(r for r in self.rounds if r.round != record.round)
        return replace(self, rounds=tuple(sorted((*kept, record), key=lambda r: r.round)))

    @property
    def next_round(self) -> int:
        return max((record.round for record in self.rounds), default=0) + 1

    def last_chosen(self) -> dict[str, int]:
        """Each task's last round."""
        return {record.task: record.round for record in self.rounds}
