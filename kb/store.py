"""The knowledge base: chromadb for vector search, a sqlite catalog (sqlite-utils) as the record.

Write order makes a crash harmless: a document row goes in as 'pending', its vectors replace any
earlier ones in chromadb, and one sqlite transaction then swaps its tricks and marks it 'ok'.
A re-run redoes every file that is not 'ok' with its current hash; trick ids are deterministic,
so nothing is duplicated. Writers take an exclusive lock on the home folder.

The vectors are embedded in the home (home/chroma) or, with a URL, on a Chroma server (`chroma_client`); the
catalog always stays in the home.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import sqlite_utils

from kb.config import resolve_home
from kb.embedding import Embedder, default_embedder
from kb.recipes import executable_ops
from kb.records import SOURCE_KINDS, ScoredTrick, Trick, source_kind
from kb.taxonomy import SEPARATOR, Taxonomy, load_taxonomy

COLLECTION = "tricks"


CATALOG_FILE = "catalog.db"
CHROMA_URL_ENV = "CASEBOOK_CHROMA_URL"
SERVER_DATABASE_FILE = "chroma-database.txt"  # with a Chroma server: the home's database there


class KBLockedError(RuntimeError):
    """Another process is writing to the same knowledge base."""


class UnknownSourceError(LookupError):
    """remove() of a path nothing was ingested from."""


class EmptyKnowledgeBaseError(RuntimeError):
    """A query against a home with nothing ingested."""


@dataclass(frozen=True)
class DocumentRecord:
    source: str
    sha256: str
    kind: str
    title: str
    competition: str | None
    labels: tuple[str, ...] = ()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class ChromaServerError(RuntimeError):
    """The Chroma server URL (--chroma-url, $CASEBOOK_CHROMA_URL) is malformed or nothing answers there."""


def resolve_chroma_url(url: str | None = None) -> str | None:
    """The Chroma server a home's vectors live on: `url`, else $CASEBOOK_CHROMA_URL, else None (embedded in the home)."""
    return url or os.environ.get(CHROMA_URL_ENV) or None


def home_collection(client, name: str, home: os.PathLike[str]):
    """A collection of the home's (tricks, or the case library's tasks): cosine space, embedded with casebook's own
    model and embedding cache (kb.chroma), never chromadb's default model."""
    from kb.chroma import CasebookEmbeddingFunction

    return client.get_or_create_collection(
        name, embedding_function=CasebookEmbeddingFunction(os.path.join(home, "embeddings.db")),
        configuration={"hnsw": {"space": "cosine"}})


def chroma_client(home: os.PathLike[str], url: str | None = None):
    """The chromadb client for a casebook home (the knowledge base's tricks, the case library's tasks).

    Embedded in home/chroma, or with `url` (or $CASEBOOK_CHROMA_URL) on a Chroma server (`chroma run`), where the
    home keeps its collections, under the same names, in a database of its own: homes sharing a server never share
    an index, and the sqlite catalog beside them stays the record.
    """
    import chromadb
    from chromadb.config import Settings
    from chromadb.errors import ChromaError, NotFoundError

    url = resolve_chroma_url(url)
    if url is None:
        return chromadb.PersistentClient(path=os.path.join(home, "chroma"),
                                         settings=Settings(anonymized_telemetry=False))
    host, port, ssl = _server_address(url)
    database = _server_database(home)

    def connect():
        return chromadb.HttpClient(host, port, ssl, settings=Settings(anonymized_telemetry=False), database=database)

    try:
        try:
            return connect()
        except NotFoundError:  # the home's first use of this server
            admin = chromadb.AdminClient(Settings(
                chroma_api_impl="chromadb.api.fastapi.FastAPI", chroma_server_host=host, chroma_server_http_port=port,
                chroma_server_ssl_enabled=ssl, anonymized_telemetry=False))
            try:
                admin.create_database(database)
            except ChromaError:
                pass  # made meanwhile by another process opening the same home: connecting again tells
            return connect()
    except ValueError as error:  # chromadb's "Could not connect to a Chroma server"
        raise ChromaServerError(f"no Chroma server answers at {url} ({error}): start one with `chroma run --path DIR "
                                f"--port {port}` there, or fix --chroma-url / ${CHROMA_URL_ENV}") from None


def _server_address(url: str) -> tuple[str, int, bool]:
    """(host, port, ssl) of an http(s)://HOST[:PORT] URL; the port defaults to `chroma run`'s 8000 (443 for https)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/") or port == -1:
        raise ChromaServerError(f"{url!r} is not a Chroma server URL: give http://HOST:PORT, e.g. "
                                f"http://localhost:8000, in --chroma-url or ${CHROMA_URL_ENV}")
    ssl = parts.scheme == "https"
    return parts.hostname, port or (443 if ssl else 8000), ssl


def _server_database(home: os.PathLike[str]) -> str:
    """The name of the home's database on a Chroma server, made once and kept in the home (so a moved home keeps
    its index)."""
    path = Path(home) / SERVER_DATABASE_FILE
    if not path.exists():
        staged = path.with_name(f"{path.name}.{os.getpid()}")
        staged.write_text(f"casebook-{uuid.uuid4().hex}\n")
        try:
            os.link(staged, path)  # whole or not at all, and refused when another process named it first
        except FileExistsError:
            pass
        finally:
            staged.unlink()
    return path.read_text().strip()


class HomeVectors:
    """A home's embedder and one chromadb collection of it, opened on first use: the part the knowledge base
    (its tricks) and the case library (its tasks) share. A subclass sets `collection_name`, and `home`,
    `chroma_url` and `_embedder` in its constructor."""

    collection_name: str
    home: Path
    chroma_url: str | None
    _embedder: Embedder | None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder(self.home)
        return self._embedder

    @cached_property
    def _chroma(self):
        return chroma_client(self.home, self.chroma_url)

    @cached_property
    def collection(self):
        return home_collection(self._chroma, self.collection_name, self.home)

    def _close_vectors(self) -> None:
        """Release the collection and its client (chromadb shares one client per folder inside a process)."""
        self.__dict__.pop("collection", None)
        client = self.__dict__.pop("_chroma", None)
        if client is not None:
            client.close()


class KnowledgeBase(HomeVectors):
    collection_name = COLLECTION

    def __init__(self, home: str | os.PathLike[str] | None = None, embedder: Embedder | None = None,
                 taxonomy: Taxonomy | None = None, chroma_url: str | None = None):
        self.home = resolve_home(home)
        self.chroma_url = resolve_chroma_url(chroma_url)  # None: the vector index is embedded in the home
        self.home.mkdir(parents=True, exist_ok=True)
        self._embedder = embedder
        self.taxonomy = taxonomy or load_taxonomy()
        # Readers may hand the store to a worker thread (the agent retrieves while a candidate is evaluated);
        # one thread uses it at a time, and writers hold the write lock.
        self.catalog = sqlite_utils.Database(sqlite3.connect(self.home / CATALOG_FILE, check_same_thread=False))
        self.catalog.conn.execute("PRAGMA busy_timeout = 60000")
        if self.catalog.journal_mode != "wal":
            self.catalog.enable_wal()
        self._ensure_schema()

    # -- set-up -----------------------------------------------------------------------------
    def _ensure_schema(self) -> None:
        db = self.catalog
        if "documents" not in db.table_names():
            db["documents"].create(
                {"source": str, "sha256": str, "kind": str, "title": str, "competition": str,
                 "labels": str, "n_tricks": int, "status": str, "error": str, "ingested_at": str},
                pk="source",
            )
        if "tricks" not in db.table_names():
            db["tricks"].create(
                {"id": str, "document": str, "source": str, "kind": str, "title": str, "competition": str,
                 "rank": int, "stage": str, "text": str, "labels": str, "recipe": str, "recipe_why": str,
                 "recipe_confidence": float},
                pk="id",
            )
            db["tricks"].create_index(["document"])
        for column, kind in (("recipe_why", str), ("recipe_confidence", float)):  # catalogs from before compiling
            if column not in db["tricks"].columns_dict:
                db["tricks"].add_column(column, kind)
        if "trick_labels" not in db.table_names():
            db["trick_labels"].create(
                {"trick_id": str, "label": str, "top": str, "position": int, "score": float},
                pk=("trick_id", "label"),
            )
            db["trick_labels"].create_index(["label", "score"])
            db["trick_labels"].create_index(["top", "score"])

    @staticmethod
    def exists(home: str | os.PathLike[str] | None = None) -> bool:
        """Whether `home` holds a knowledge base, without creating one there."""
        return (resolve_home(home) / CATALOG_FILE).is_file()

    def close(self) -> None:
        """Release the vector index and the catalog. chromadb shares one client per folder inside a
        process, so a store must be closed before another process replaces its index (`kb rebuild`)
        and this process opens it again."""
        self._close_vectors()
        self.catalog.conn.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        lock_path = self.home / "write.lock"
        with open(lock_path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise KBLockedError(
                    f"{self.home} is being written by {holder}; wait for it to finish or use another --home"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}")
            handle.flush()
            try:
                yield
            finally:
                handle.seek(0)
                handle.truncate()
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- writing ----------------------------------------------------------------------------
    def document(self, source: str) -> dict | None:
        rows = list(self.catalog["documents"].rows_where("source = ?", [source]))
        return rows[0] if rows else None

    def is_current(self, source: str, sha256: str) -> bool:
        row = self.document(source)
        return bool(row and row["status"] == "ok" and row["sha256"] == sha256)

    def write_documents(self, batch: Sequence[tuple[DocumentRecord, Sequence[Trick], np.ndarray, Sequence[Sequence[float]]]]) -> None:
        """Replace everything stored for each record's source with its tricks (see module doc for order).

        Each item is (record, tricks, one vector per trick, label scores per trick).
        """
        for record, tricks, vectors, _ in batch:
            if len(tricks) != len(vectors):
                raise ValueError(f"{record.source}: one vector per trick is required")
        self.catalog["documents"].upsert_all(
            [{"source": r.source, "sha256": r.sha256, "kind": r.kind, "title": r.title,
              "competition": r.competition, "labels": json.dumps(list(r.labels)), "n_tricks": len(t),
              "status": "pending", "error": None, "ingested_at": _now()} for r, t, _, _ in batch],
            pk="source",
        )
        self.collection.delete(where={"document": {"$in": [r.source for r, _, _, _ in batch]}})
        ids, vectors, texts, metadatas = [], [], [], []
        for record, tricks, trick_vectors, _ in batch:
            ids += [t.id for t in tricks]
            vectors += list(trick_vectors)
            texts += [t.text for t in tricks]
            metadatas += [self._metadata(record.source, t) for t in tricks]
        for start in range(0, len(ids), 2000):
            self.collection.upsert(
                ids=ids[start : start + 2000], embeddings=vectors[start : start + 2000],
                documents=texts[start : start + 2000], metadatas=metadatas[start : start + 2000],
            )
        for record, tricks, _, scores in batch:
            with self.catalog.conn:
                self.catalog.execute(
                    "DELETE FROM trick_labels WHERE trick_id IN (SELECT id FROM tricks WHERE document = ?)",
                    [record.source],
                )
                self.catalog["tricks"].delete_where("document = ?", [record.source])
                self.catalog["tricks"].insert_all(
                    ({**self._row(t), "document": record.source} for t in tricks), pk="id", replace=True
                )
                self.catalog["trick_labels"].insert_all(
                    (
                        {"trick_id": t.id, "label": label, "top": label.split(SEPARATOR, 1)[0],
                         "position": position, "score": float(score)}
                        for t, row_scores in zip(tricks, scores)
                        for position, (label, score) in enumerate(zip(t.labels, row_scores))
                    ),
                    pk=("trick_id", "label"),
                    replace=True,
                )
                self.catalog["documents"].update(record.source, {"status": "ok"})

    def mark_failed(self, source: str, sha256: str | None, error: str) -> None:
        """Record a failure without touching what an earlier good version of the file stored."""
        existing = self.document(source)
        if existing:
            self.catalog["documents"].update(source, {"status": "failed", "error": error, "ingested_at": _now()})
        else:
            self.catalog["documents"].insert(
                {"source": source, "sha256": sha256, "kind": None, "title": None, "competition": None,
                 "labels": "[]", "n_tricks": 0, "status": "failed", "error": error, "ingested_at": _now()},
                pk="source",
            )

    def rebuild_index(self) -> int:
        """Recreate the vector index from the catalog (the record); vectors come from the embedding
        cache, so only texts never embedded before cost model time. Returns tricks indexed."""
        with self.write_lock():
            from chromadb.errors import NotFoundError

            try:
                self._chroma.delete_collection(COLLECTION)
            except NotFoundError:
                pass  # the index is already gone, which is what a rebuild is for
            self.__dict__.pop("collection", None)
            by_document: dict[str, list[Trick]] = {}
            for row in self.catalog["tricks"].rows_where(order_by="document, id"):
                by_document.setdefault(row["document"], []).append(Trick.from_dict(row))
            indexed = 0
            for document, tricks in by_document.items():
                vectors = self.embedder.embed([t.text for t in tricks])
                for start in range(0, len(tricks), 2000):
                    chunk = tricks[start : start + 2000]
                    self.collection.upsert(
                        ids=[t.id for t in chunk], embeddings=vectors[start : start + 2000],
                        documents=[t.text for t in chunk],
                        metadatas=[self._metadata(document, t) for t in chunk],
                    )
                indexed += len(tricks)
            return indexed

    def remove(self, source: str) -> int:
        """Forget a file (or every file under a folder) and its tricks; returns tricks removed. UnknownSourceError
        when nothing was ingested at or under `source` (a mistyped path is an error, not "0 removed")."""
        with self.write_lock():
            prefix = source.rstrip("/") + "/"
            sources = [
                row["source"] for row in self.catalog["documents"].rows
                if row["source"] == source or row["source"].startswith(prefix)
            ]
            if not sources:
                raise UnknownSourceError(f"nothing was ingested from {source!r} or a folder under it; sources are "
                                         "kept as they were given to `kb ingest` (`kb export` lists them)")
            removed = 0
            for document in sources:
                removed += self.catalog["tricks"].count_where("document = ?", [document])
                self.collection.delete(where={"document": document})
                with self.catalog.conn:
                    self.catalog.execute(
                        "DELETE FROM trick_labels WHERE trick_id IN (SELECT id FROM tricks WHERE document = ?)",
                        [document],
                    )
                    self.catalog["tricks"].delete_where("document = ?", [document])
                    self.catalog["documents"].delete(document)
            return removed

    @staticmethod
    def _metadata(document: str, trick: Trick) -> dict:
        tops = list(dict.fromkeys(label.split(SEPARATOR, 1)[0] for label in trick.labels))
        return {
            "document": document, "kind": trick.kind, "stage": trick.stage,
            "competition": trick.competition or "", "rank": trick.rank if trick.rank is not None else -1,
            "labels": list(trick.labels) or ["(none)"], "tops": tops or ["(none)"],
        }

    @staticmethod
    def _row(trick: Trick) -> dict:
        record = trick.to_dict()
        record["labels"] = json.dumps(record["labels"])
        record["recipe"] = json.dumps(record["recipe"]) if record["recipe"] is not None else None
        return record

    # -- reading ----------------------------------------------------------------------------
    def count(self) -> int:
        return self.catalog["tricks"].count

    def get(self, trick_id: str) -> Trick | None:
        rows = list(self.catalog["tricks"].rows_where("id = ?", [trick_id]))
        return Trick.from_dict(rows[0]) if rows else None

    def _hydrate(self, ids: Sequence[str]) -> dict[str, Trick]:
        found: dict[str, Trick] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            for row in self.catalog["tricks"].rows_where(f"id IN ({','.join('?' * len(chunk))})", chunk):
                found[row["id"]] = Trick.from_dict(row)
        return found

    def _where(self, label: str | None, stage: str | None, kind: str | None,
               exclude_competitions: Iterable[str]) -> dict | None:
        clauses = []
        if label:
            field = "labels" if SEPARATOR in label else "tops"
            clauses.append({field: {"$contains": label}})
        if stage:
            clauses.append({"stage": stage})
        if kind:
            clauses.append({"kind": kind})
        excluded = [c for c in exclude_competitions if c]
        if excluded:
            clauses.append({"competition": {"$nin": excluded}})
        if not clauses:
            return None
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def executable_ids(self) -> list[str]:
        """Ids of the tricks with a recipe (a card's own, or compiled from the text at ingest): what the agent runs."""
        return [row["id"] for row in self.catalog["tricks"].rows_where("recipe IS NOT NULL", select="id")]

    def search(self, query: str | np.ndarray, k: int = 10, *, label: str | None = None,
               stage: str | None = None, kind: str | None = None,
               exclude_competitions: Iterable[str] = (), among: Sequence[str] | None = None) -> list[ScoredTrick]:
        """Nearest tricks to a text (or a vector), with optional label/stage/kind filters; `among` limits the
        search to those trick ids."""
        if self.count() == 0:
            raise EmptyKnowledgeBaseError(f"the knowledge base in {self.home} is empty; run `kb ingest PATH` first")
        if among is not None and not among:
            return []
        vector = self.embedder.embed([query])[0] if isinstance(query, str) else np.asarray(query, dtype=np.float32)
        result = self.collection.query(
            query_embeddings=[vector], n_results=k, ids=list(among) if among is not None else None,
            where=self._where(label, stage, kind, exclude_competitions), include=["distances"],
        )
        ids, distances = result["ids"][0], result["distances"][0]
        tricks = self._hydrate(ids)
        return [ScoredTrick(tricks[i], 1.0 - float(d)) for i, d in zip(ids, distances) if i in tricks]

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        got = self.collection.get(ids=list(ids), include=["embeddings"])
        return {i: np.asarray(v, dtype=np.float32) for i, v in zip(got["ids"], got["embeddings"])}

    def tricks_for_label(self, label: str, k: int = 10, *, stage: str | None = None, kind: str | None = None,
                         exclude_competitions: Iterable[str] = ()) -> list[ScoredTrick]:
        """Tricks carrying a label (or any label under a top-level), best label evidence first.

        Served from the sqlite catalog alone: no model, no vector index.
        """
        column = "label" if SEPARATOR in label else "top"
        sql = [
            "SELECT t.*, MAX(l.score - 0.05 * l.position) AS relevance FROM trick_labels l",
            "JOIN tricks t ON t.id = l.trick_id WHERE l." + column + " = ?",
        ]
        params: list = [label]
        if stage:
            sql.append("AND t.stage = ?")
            params.append(stage)
        if kind:
            sql.append("AND t.kind = ?")
            params.append(kind)
        excluded = [c for c in exclude_competitions if c]
        if excluded:
            sql.append(f"AND COALESCE(t.competition, '') NOT IN ({','.join('?' * len(excluded))})")
            params.extend(excluded)
        sql.append("GROUP BY t.id ORDER BY relevance DESC, t.id LIMIT ?")
        params.append(k)
        cursor = self.catalog.execute(" ".join(sql), params)
        columns = [c[0] for c in cursor.description]
        rows = cursor.fetchall()
        result = []
        for row in rows:
            record = dict(zip(columns, row))
            result.append(ScoredTrick(Trick.from_dict(record), float(record["relevance"])))
        return result

    def export(self) -> Iterator[Trick]:
        for row in self.catalog["tricks"].rows_where(order_by="document, id"):
            yield Trick.from_dict(row)

    def documents(self) -> list[dict]:
        return list(self.catalog["documents"].rows_where(order_by="source"))

    def stats(self) -> dict:
        db = self.catalog

        def grouped(sql: str) -> dict:
            return {key or "(none)": count for key, count in db.execute(sql).fetchall()}

        return {
            "home": str(self.home),
            "vector_index": self.chroma_url or str(self.home / "chroma"),
            "documents": db["documents"].count,
            "documents_by_status": grouped("SELECT status, COUNT(*) FROM documents GROUP BY status"),
            "tricks": db["tricks"].count,
            "tricks_by_kind": grouped("SELECT kind, COUNT(*) FROM tricks GROUP BY kind"),
            "tricks_by_stage": grouped("SELECT stage, COUNT(*) FROM tricks GROUP BY stage ORDER BY 2 DESC"),
            "tricks_by_top_label": grouped(
                "SELECT top, COUNT(DISTINCT trick_id) FROM trick_labels GROUP BY top ORDER BY 2 DESC"
            ),
            "competitions": db.execute(
                "SELECT COUNT(DISTINCT competition) FROM tricks WHERE competition IS NOT NULL"
            ).fetchone()[0],
            "with_recipe": db["tricks"].count_where("recipe IS NOT NULL"),
            "compiled_from_text": db["tricks"].count_where("recipe_confidence IS NOT NULL"),
            "executable_by_source": self.executable_by_source(),
        }

    def executable_by_source(self) -> dict[str, int]:
        """Tricks whose recipe the agent can run (kb.recipes), by source kind: card, write-up, paper."""
        executable = set(executable_ops())
        counts = dict.fromkeys(SOURCE_KINDS, 0)
        rows = self.catalog.execute("SELECT kind, source, recipe FROM tricks WHERE recipe IS NOT NULL")
        for kind, source, recipe in rows:
            if (json.loads(recipe) or {}).get("op") in executable:
                counts[source_kind(kind, source)] += 1
        return counts

    def label_scores(self, ids: Sequence[str], label: str) -> dict[str, float]:
        """Labeller evidence that each trick carries `label` (a "Top / Sub" or a top-level)."""
        column = "label" if SEPARATOR in label else "top"
        found: dict[str, float] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            rows = self.catalog.execute(
                f"SELECT trick_id, MAX(score) FROM trick_labels WHERE {column} = ? "
                f"AND trick_id IN ({','.join('?' * len(chunk))}) GROUP BY trick_id",
                [label, *chunk],
            )
            found.update({trick_id: float(score) for trick_id, score in rows})
        return found
