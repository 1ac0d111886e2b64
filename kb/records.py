"""The knowledge base's data model: what a trick is, and what the catalog records about a file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

STAGES: tuple[str, ...] = (
    "data preprocessing",
    "feature engineering",
    "modeling",
    "training",
    "validation",
    "post-processing",
    "ensembling",
    "other",
)
KINDS: tuple[str, ...] = ("solution", "paper")
# Where a trick came from, finer than its kind: a hand-written card, a solution write-up or a paper.
CARD, WRITE_UP, PAPER = "card", "write-up", "paper"
SOURCE_KINDS = (CARD, WRITE_UP, PAPER)
CARD_SUFFIXES = (".json", ".jsonl")  # the files trick cards are written in (ingest.loaders reads them as cards)


def source_kind(kind: str, source: str) -> str:
    """CARD, WRITE_UP or PAPER for a trick's `kind` and `source`.

    Ingest gives a paper's tricks kind "paper" (a paper summary, a full-paper JSON or a PDF). Trick cards and
    write-ups both have kind "solution"; a card comes from a JSON or JSONL file of cards, a write-up from a
    text, markdown, Kaggle .case or html file. A source may end in "#key" (one record of a file)."""
    if kind == "paper":
        return PAPER
    path = source.split("#", 1)[0].strip().lower()
    return CARD if path.endswith(CARD_SUFFIXES) else WRITE_UP


@dataclass(frozen=True)
class Trick:
    """One atomic, reusable piece of ML engineering knowledge, with where it came from.

    `labels` are hierarchical "Top-level / Subcategory" strings, most relevant first.
    `recipe` is an optional executable hint for the agent: {"op": name, "params": {...}}
    with op names from data/recipes.json: a card's own, or compiled from the text at ingest
    (ingest.compile), when `recipe_why` says which words it was read from and `recipe_confidence` how sure
    the compiler was.
    """

    id: str
    text: str
    stage: str
    labels: tuple[str, ...]
    kind: str
    source: str
    title: str
    competition: str | None = None
    rank: int | None = None
    recipe: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)
    recipe_why: str | None = field(default=None, compare=False)
    recipe_confidence: float | None = field(default=None, compare=False)  # None: not compiled (a card's own)

    @property
    def source_kind(self) -> str:
        return source_kind(self.kind, self.source)

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"unknown stage {self.stage!r}; expected one of {', '.join(STAGES)}")
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}; expected one of {', '.join(KINDS)}")

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["labels"] = list(self.labels)
        record["recipe"] = dict(self.recipe) if self.recipe is not None else None
        return record

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Trick:
        labels = record.get("labels") or ()
        recipe = record.get("recipe")
        if isinstance(labels, str):
            labels = json.loads(labels)
        if isinstance(recipe, str):
            recipe = json.loads(recipe)
        return cls(
            id=record["id"],
            text=record["text"],
            stage=record["stage"],
            labels=tuple(labels),
            kind=record["kind"],
            source=record["source"],
            title=record["title"],
            competition=record.get("competition"),
            rank=record.get("rank"),
            recipe=recipe,
            recipe_why=record.get("recipe_why"),
            recipe_confidence=record.get("recipe_confidence"),
        )


@dataclass(frozen=True)
class ScoredTrick:
    """A trick returned by a search, with its relevance score (higher is better)."""

    trick: Trick
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {**self.trick.to_dict(), "score": round(self.score, 4)}
