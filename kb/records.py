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


@dataclass(frozen=True)
class Trick:
    """One atomic, reusable piece of ML engineering knowledge, with where it came from.

    `labels` are hierarchical "Top-level / Subcategory" strings, most relevant first.
    `recipe` is an optional executable hint for the agent: {"op": name, "params": {...}}
    with op names from data/recipes.json.
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
        )


@dataclass(frozen=True)
class ScoredTrick:
    """A trick returned by a search, with its relevance score (higher is better)."""

    trick: Trick
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {**self.trick.to_dict(), "score": round(self.score, 4)}
