"""chromadb's side of the embedder: imported only when the vector index is opened."""

from __future__ import annotations

from typing import Any

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

from kb.embedding import CachedEmbedder, Embedder, MiniLMEmbedder


@register_embedding_function
class CasebookEmbeddingFunction(EmbeddingFunction[Documents]):
    """chromadb adapter so a reopened collection knows its embedder and never falls back to a download.

    casebook passes vectors explicitly on add and query; this is used only when chromadb itself
    must embed text.
    """

    def __init__(self, cache_path: str | None = None) -> None:
        self.cache_path = cache_path
        self._embedder: Embedder | None = None

    def _get(self) -> Embedder:
        if self._embedder is None:
            inner = MiniLMEmbedder()
            self._embedder = CachedEmbedder(inner, self.cache_path) if self.cache_path else inner
        return self._embedder

    def __call__(self, input: Documents) -> Embeddings:
        return list(self._get().embed(list(input)))

    @staticmethod
    def name() -> str:
        return "casebook-minilm"

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine"]

    def get_config(self) -> dict[str, Any]:
        return {"cache_path": self.cache_path}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> CasebookEmbeddingFunction:
        return CasebookEmbeddingFunction(config.get("cache_path"))
