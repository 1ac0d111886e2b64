"""The case library's store: sqlite tables (sqlite-utils) for the full records, a chromadb collection of task
embeddings (description and structure) for finding similar tasks. Both live in the casebook home, beside the
knowledge base: `memory.db`, and the collection `memory_tasks` in `chroma/` (or on the knowledge base's Chroma
server, `kb.store.chroma_client`).

Crash-safe like ingest. A run first writes its task's two vectors, then, in one sqlite transaction, the task row
that makes them live and the run row. Each node's memories (and the repair a debug node brings to its parent's
error) are one transaction; so is a run's outcome with the forgetting it triggers. kill -9 at any point leaves
every memory whole or absent: vectors without a task row are ignored, and a task row whose vectors went missing
gets them again from its texts (the embedding cache makes that free).

A recall is read here (the tasks, their cosines from the collection, their memories) and scored in
agent.memory.recall.

Forgetting (Agent K): once a task is solved, what said it failed goes — its runs without a solution, its set-up
failures and its errors no debug step repaired — so similar tasks stop being penalised. Measured harms (a trick
that made a node worse) and repaired errors stay: they are facts about ops, not about the task.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlite_utils

from agent.memory.recall import SIMILAR_TASKS, Similarity, most_similar, scored_recall
from agent.memory.records import (
    ERROR,
    IMPROVEMENT,
    LEAKAGE,
    SETUP,
    SOLUTION,
    TASK_FAILURES,
    WORSE,
    Memory,
    NegativeMemory,
    Recall,
    Repair,
    SolutionMemory,
    TaskMemory,
    TaskSignature,
    memory_from_dict,
    task_key,
)
from agent.memory.text import description_text, error_message, files_text, structure_text
from kb.config import resolve_home
from kb.embedding import Embedder
from kb.store import HomeVectors, resolve_chroma_url
from retrieval.profile import DESCRIPTION_FILE, TaskProfile

MEMORY_FILE = "memory.db"
COLLECTION = "memory_tasks"
DESCRIPTION, STRUCTURE = "description", "structure"  # the two embeddings of a task


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def memory_id(*parts: Any) -> str:
    """A memory's id, from what makes it unique (its run, node and kind): writing it again replaces it."""
    return hashlib.sha1("\0".join(str(part) for part in parts).encode()).hexdigest()[:12]


class UnknownMemoryError(LookupError):
    """forget/show of something the case library does not hold."""


class MemoryStore(HomeVectors):
    """The case library of one casebook home (see the module docstring)."""

    collection_name = COLLECTION

    def __init__(self, home: str | os.PathLike[str] | None = None, embedder: Embedder | None = None,
                 chroma_url: str | None = None):
        self.home = resolve_home(home)
        self.chroma_url = resolve_chroma_url(chroma_url)  # None: the vectors are embedded in the home, as the KB's
        self.home.mkdir(parents=True, exist_ok=True)
        self._embedder = embedder
        # The solve's recall runs on a worker thread while the search writes node memories: one lock serialises them.
        self._lock = threading.RLock()
        self.db = sqlite_utils.Database(sqlite3.connect(self.home / MEMORY_FILE, check_same_thread=False))
        self.db.conn.execute("PRAGMA busy_timeout = 60000")
        if self.db.journal_mode != "wal":
            self.db.enable_wal()
        self._ensure_schema()

    @staticmethod
    def exists(home: str | os.PathLike[str] | None = None) -> bool:
        """Whether `home` holds a case library, without creating one."""
        return (resolve_home(home) / MEMORY_FILE).is_file()

    def _ensure_schema(self) -> None:
        # if_not_exists throughout: two processes may open a new home at once.
        db = self.db
        with self._lock, db.atomic():
            db["tasks"].create({"task_key": str, "name": str, "description": str, "structure": str, "signature": str,
                                "solved": int, "best_score": float, "oriented_best": float, "metric": str, "runs": int,
                                "last_run_at": str, "created_at": str}, pk="task_key", if_not_exists=True)
            db["runs"].create({"run_id": str, "task_key": str, "started_at": str, "finished_at": str, "status": str,
                               "reuse_own": int}, pk="run_id", if_not_exists=True)
            db["runs"].create_index(["task_key"], if_not_exists=True)
            # The record is the JSON of the dataclass; the other columns are what queries filter on.
            db["memories"].create({"id": str, "polarity": str, "kind": str, "task_key": str, "run_id": str,
                                   "node_id": int, "op": str, "trick_id": str, "failure": str, "error_class": str,
                                   "repaired": int, "created_at": str, "record": str}, pk="id", if_not_exists=True)
            db["memories"].create_index(["task_key", "kind"], if_not_exists=True)
            db["memories"].create_index(["kind", "repaired"], if_not_exists=True)

    def close(self) -> None:
        self._close_vectors()
        self.db.conn.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ writing

    def begin_run(self, profile: TaskProfile, *, reuse_own: bool = False) -> str:
        """Remember the task (its vectors first, then its row) and open a run of it; returns the run id."""
        key = task_key(profile.task_dir, profile.target)
        description, structure = description_text(profile), structure_text(profile)
        self._write_vectors(key, description, structure)
        run_id = uuid.uuid4().hex[:12]
        now = _now()
        with self._lock, self.db.atomic():
            existing = self._task_row(key)
            self.db["tasks"].upsert({
                "task_key": key, "name": profile.name, "description": description, "structure": structure,
                "signature": json.dumps(TaskSignature.of(profile).to_dict()), "metric": profile.metric,
                "runs": (existing["runs"] if existing else 0) + 1, "last_run_at": now,
                "solved": existing["solved"] if existing else 0, "created_at": existing["created_at"] if existing else now,
            }, pk="task_key")
            self.db["runs"].insert({"run_id": run_id, "task_key": key, "started_at": now, "finished_at": None,
                                    "status": "running", "reuse_own": int(reuse_own)}, pk="run_id")
        return run_id

    def write_node(self, memories: Sequence[Memory], repairs: Sequence[tuple[str, Repair]] = ()) -> None:
        """One finished node's memories, and the repair it brings to an earlier error memory (its id), in one
        transaction."""
        with self._lock, self.db.atomic():
            for memory in memories:
                self._upsert(memory)
            for error_id, repair in repairs:
                row = self._row(error_id)
                if row is None:  # the error was forgotten meanwhile
                    continue
                failed = NegativeMemory.from_dict(json.loads(row["record"]))
                failed_op = failed.failed_op or next(iter(repair.change.ops), None)
                self._upsert(replace(failed, repair=repair, failed_op=failed_op))

    def write_run(self, run_id: str, outcome: SolutionMemory | NegativeMemory) -> None:
        """A run's outcome: its verified solution (the task is solved; what said it failed is forgotten), or a
        NO_SOLUTION memory. One transaction."""
        with self._lock, self.db.atomic():
            self._upsert(outcome)
            task = self._task_row(outcome.task_key)
            solved = isinstance(outcome, SolutionMemory)
            if solved:
                update: dict[str, Any] = {"solved": 1}
                if task is None or task["oriented_best"] is None or outcome.oriented_score > task["oriented_best"]:
                    update.update(best_score=outcome.score, oriented_best=outcome.oriented_score,
                                  metric=outcome.metric)
                self.db["tasks"].update(outcome.task_key, update)
                self._forget_failures(outcome.task_key)
            self.db["runs"].update(run_id, {"finished_at": _now(), "status": "solved" if solved else "failed"})

    def write_setup_failure(self, task_dir: str | os.PathLike[str], error: str, *, name: str | None = None,
                            target: str | None = None) -> NegativeMemory:
        """A task that could not be set up (the profile or the dataset raised): a SETUP memory and a task row, so
        the curriculum sees it failed. Its structure is its files, since nothing else could be read."""
        task_dir = Path(task_dir)
        key = task_key(task_dir, target)
        name = name or task_dir.resolve().name
        readme = task_dir / DESCRIPTION_FILE
        description = (readme.read_text(encoding="utf-8", errors="replace").strip() if readme.is_file() else "") \
            or f"{name}: a task that could not be set up"
        files = sorted(str(p.relative_to(task_dir)) for p in task_dir.rglob("*") if p.is_file()) \
            if task_dir.is_dir() else []
        structure = f"Files: {files_text(task_dir, files)}."
        self._write_vectors(key, description, structure)
        now = _now()
        memory = NegativeMemory(memory_id(key, SETUP, now, uuid.uuid4().hex), SETUP, key, name, None, None,
                                error_message(error), created_at=now)
        with self._lock, self.db.atomic():
            existing = self._task_row(key)
            self.db["tasks"].upsert({
                "task_key": key, "name": name, "description": description, "structure": structure,
                "runs": (existing["runs"] if existing else 0) + 1, "last_run_at": now,
                "solved": existing["solved"] if existing else 0, "created_at": existing["created_at"] if existing else now,
            }, pk="task_key")
            self._upsert(memory)
        return memory

    def _upsert(self, memory: Memory) -> None:
        record = memory.to_dict()
        trick = record.get("trick") or {}
        self.db["memories"].upsert({
            "id": memory.id, "polarity": memory.polarity, "kind": memory.kind, "task_key": memory.task_key,
            "run_id": memory.run_id, "node_id": record.get("node_id"), "op": record.get("op"),
            "trick_id": trick.get("id"), "failure": record.get("failure"), "error_class": record.get("error_class"),
            "repaired": int(record.get("repair") is not None), "created_at": memory.created_at,
            "record": json.dumps(record, default=str),
        }, pk="id")

    def _forget_failures(self, key: str) -> int:
        """Inside a transaction: delete what said the task failed (see the module docstring)."""
        cursor = self.db.execute(
            f"DELETE FROM memories WHERE task_key = ? AND (kind IN ({','.join('?' * len(TASK_FAILURES))}) "
            f"OR (kind IN (?, ?) AND repaired = 0))", [key, *TASK_FAILURES, ERROR, LEAKAGE])
        return cursor.rowcount

    def _write_vectors(self, key: str, description: str, structure: str) -> None:
        vectors = self.embedder.embed([description, structure])
        self.collection.upsert(ids=[f"{key}:{DESCRIPTION}", f"{key}:{STRUCTURE}"], embeddings=list(vectors),
                               documents=[description, structure],
                               metadatas=[{"task_key": key, "field": DESCRIPTION}, {"task_key": key, "field": STRUCTURE}])

    # ------------------------------------------------------------------------------------------ forgetting

    def forget(self, target: str) -> int:
        """Forget one memory (by id) or a whole task (by task key or name: its memories, runs and vectors);
        returns the memories removed. UnknownMemoryError when nothing matches."""
        with self._lock:
            if self._row(target) is not None:
                with self.db.atomic():
                    self.db["memories"].delete(target)
                return 1
            keys = [row["task_key"] for row in self.db["tasks"].rows_where("task_key = ? OR name = ?", [target, target])]
            if not keys:
                raise UnknownMemoryError(f"no memory or task {target!r} in {self.home / MEMORY_FILE}; "
                                         "see `agent memory list`")
            removed = 0
            with self.db.atomic():
                for key in keys:
                    removed += self.db["memories"].count_where("task_key = ?", [key])
                    self.db["memories"].delete_where("task_key = ?", [key])
                    self.db["runs"].delete_where("task_key = ?", [key])
                    self.db["tasks"].delete(key)
            # Vectors after the rows: a crash in between leaves vectors that no task row makes live.
            self.collection.delete(ids=[f"{key}:{field}" for key in keys for field in (DESCRIPTION, STRUCTURE)])
            return removed

    # ------------------------------------------------------------------------------------------ reading

    def _row(self, memory_id: str) -> dict[str, Any] | None:
        rows = list(self.db["memories"].rows_where("id = ?", [memory_id]))
        return rows[0] if rows else None

    def _task_row(self, key: str) -> dict[str, Any] | None:
        rows = list(self.db["tasks"].rows_where("task_key = ?", [key]))
        return rows[0] if rows else None

    def tasks(self) -> list[TaskMemory]:
        """Every remembered task, solved or not, oldest first (the curriculum's positive and negative memory)."""
        with self._lock:
            return [_task(row) for row in self.db["tasks"].rows_where(order_by="created_at, task_key")]

    def task(self, key: str) -> TaskMemory | None:
        with self._lock:
            row = self._task_row(key)
        return _task(row) if row else None

    def runs(self, key: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            where = ("task_key = ?", [key]) if key else (None, None)
            return list(self.db["runs"].rows_where(*where, order_by="started_at, rowid"))

    def list(self, *, kind: str | Sequence[str] | None = None, polarity: str | None = None,
             task: str | None = None) -> list[Memory]:
        """Memories, oldest first; filtered by kind(s), polarity (positive/negative) and task (key or name)."""
        clauses, params = [], []
        kinds = [kind] if isinstance(kind, str) else list(kind or ())
        if kinds:
            clauses.append(f"kind IN ({','.join('?' * len(kinds))})")
            params += kinds
        if polarity:
            clauses.append("polarity = ?")
            params.append(polarity)
        if task:
            clauses.append("task_key IN (SELECT task_key FROM tasks WHERE task_key = ? OR name = ?)")
            params += [task, task]
        with self._lock:
            rows = self.db["memories"].rows_where(" AND ".join(clauses) or None, params or None,
                                                  order_by="created_at, rowid")
            return [memory_from_dict(json.loads(row["record"])) for row in rows]

    def show(self, memory_id: str) -> Memory:
        with self._lock:
            row = self._row(memory_id)
        if row is None:
            raise UnknownMemoryError(f"no memory {memory_id!r} in {self.home / MEMORY_FILE}; see `agent memory list`")
        return memory_from_dict(json.loads(row["record"]))

    # ------------------------------------------------------------------------------------------ recall

    def recall(self, profile: TaskProfile, *, reuse_own: bool = False, k: int = SIMILAR_TASKS) -> Recall:
        """What the case library knows that fits `profile`, scored by agent.memory.recall: the k most similar tasks
        with their best solutions, the measured effects of tricks and ops on them, and repaired errors from any
        task. The task's own memories are left out unless `reuse_own`."""
        own = task_key(profile.task_dir, profile.target)
        tasks = [task for task in self.tasks() if reuse_own or task.task_key != own]
        if not tasks:
            return Recall(own, reused_own=reuse_own)
        keys = [task.task_key for task in tasks]
        similarity = self._similarities(profile, keys)
        similar = most_similar(tasks, similarity, self._memories_of(keys, (SOLUTION,)), k)
        measured = self._memories_of([task.task.task_key for task in similar], (IMPROVEMENT, WORSE))
        return scored_recall(own, similar, measured, self._memories_of(keys, (ERROR, LEAKAGE)), similarity,
                             reuse_own=reuse_own)

    def _similarities(self, profile: TaskProfile, keys: Sequence[str]) -> dict[str, Similarity]:
        """The cosine similarity of each remembered task to `profile`, from the collection; a task whose vectors
        went missing (a crash between the two stores) gets them again first."""
        self._restore_vectors(keys)
        description, structure = self.embedder.embed([description_text(profile), structure_text(profile)])
        found: dict[str, dict[str, float]] = {key: {} for key in keys}
        for field, vector in ((DESCRIPTION, description), (STRUCTURE, structure)):
            result = self.collection.query(
                query_embeddings=[vector], n_results=len(keys), include=["distances", "metadatas"],
                where={"$and": [{"field": field}, {"task_key": {"$in": list(keys)}}]})
            for metadata, distance in zip(result["metadatas"][0], result["distances"][0]):
                found[metadata["task_key"]][field] = 1.0 - float(distance)
        return {key: Similarity((values.get(DESCRIPTION, 0.0) + values.get(STRUCTURE, 0.0)) / 2,
                                values.get(DESCRIPTION, 0.0), values.get(STRUCTURE, 0.0))
                for key, values in found.items()}

    def _restore_vectors(self, keys: Sequence[str]) -> None:
        ids = [f"{key}:{field}" for key in keys for field in (DESCRIPTION, STRUCTURE)]
        present = set(self.collection.get(ids=ids, include=[])["ids"])
        for key in keys:
            if f"{key}:{DESCRIPTION}" not in present or f"{key}:{STRUCTURE}" not in present:
                task = self.task(key)
                if task is not None:
                    self._write_vectors(key, task.description, task.structure)

    def _memories_of(self, keys: Sequence[str], kinds: Sequence[str]) -> list[Any]:
        if not keys:
            return []
        with self._lock:
            rows = self.db["memories"].rows_where(
                f"task_key IN ({','.join('?' * len(keys))}) AND kind IN ({','.join('?' * len(kinds))})",
                [*keys, *kinds], order_by="created_at, rowid")
            return [memory_from_dict(json.loads(row["record"])) for row in rows]


def _task(row: Mapping[str, Any]) -> TaskMemory:
    return TaskMemory.from_dict({**row, "signature": json.loads(row["signature"]) if row.get("signature") else None})

