"""The hierarchical label set (data/taxonomy.json) and forgiving look-up of label names."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kb.config import data_path

SEPARATOR = " / "
TAXONOMY_PATH = data_path("taxonomy.json")

# Everyday names people type for a top-level category.
_TOP_ALIASES = {
    "tabular": "General Machine Learning",
    "general ml": "General Machine Learning",
    "ml": "General Machine Learning",
    "nlp": "Natural Language Processing",
    "text": "Natural Language Processing",
    "cv": "Computer Vision",
    "vision": "Computer Vision",
    "image": "Computer Vision",
    "time series": "Sequential Modeling",
    "timeseries": "Sequential Modeling",
    "forecasting": "Sequential Modeling",
    "audio": "Signal Processing",
    "graph": "Graph Learning",
    "recsys": "Recommender Systems",
    "rl": "Reinforcement Learning",
}


class UnknownLabelError(ValueError):
    """A label name that matches nothing in the taxonomy."""


@dataclass(frozen=True)
class Label:
    top: str
    sub: str | None
    description: str
    cues: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.top if self.sub is None else f"{self.top}{SEPARATOR}{self.sub}"


def _normalise(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


@dataclass(frozen=True)
class Taxonomy:
    top_levels: tuple[Label, ...]
    subcategories: tuple[Label, ...]

    @classmethod
    def load(cls, path: str | Path | None = None) -> Taxonomy:
        raw = json.loads(Path(path or TAXONOMY_PATH).read_text(encoding="utf-8"))
        tops, subs = [], []
        for category in raw["categories"]:
            top = category["name"]
            tops.append(Label(top, None, category["description"], tuple(category.get("cues", ()))))
            for sub in category["subcategories"]:
                subs.append(Label(top, sub["name"], sub["description"], tuple(sub.get("cues", ()))))
        return cls(tuple(tops), tuple(subs))

    @property
    def labels(self) -> tuple[Label, ...]:
        return self.top_levels + self.subcategories

    def get(self, name: str) -> Label:
        for label in self.labels:
            if label.name == name:
                return label
        raise UnknownLabelError(f"unknown label {name!r}")

    def children(self, top: str) -> tuple[Label, ...]:
        return tuple(label for label in self.subcategories if label.top == top)

    def resolve(self, query: str) -> str:
        """Map what a user typed ("tabular classification", "NLP", "nlp / text classif") to a label name."""
        wanted = _normalise(query)
        if not wanted:
            raise UnknownLabelError("empty label")
        by_name = {_normalise(label.name): label.name for label in self.labels}
        if wanted in by_name:
            return by_name[wanted]
        if wanted in _TOP_ALIASES:
            return _TOP_ALIASES[wanted]
        top_hint, rest = None, wanted
        for alias, top in sorted(
            [*_TOP_ALIASES.items(), *((_normalise(t.top), t.top) for t in self.top_levels)],
            key=lambda item: -len(item[0]),
        ):
            if wanted.startswith(alias + " "):
                top_hint, rest = top, wanted[len(alias) + 1 :]
                break
        candidates = [s for s in self.subcategories if top_hint is None or s.top == top_hint]
        by_sub = {}
        for label in candidates:
            by_sub.setdefault(_normalise(label.sub or ""), []).append(label.name)
        if rest in by_sub and len(by_sub[rest]) == 1:
            return by_sub[rest][0]
        if rest in by_sub:  # same subcategory name under several tops: prefer General ML
            return sorted(by_sub[rest], key=lambda n: not n.startswith("General Machine Learning"))[0]
        close = difflib.get_close_matches(rest, list(by_sub), n=1, cutoff=0.75)
        if close:
            return by_sub[close[0]][0]
        every_sub = {_normalise(label.sub or ""): label.name for label in self.subcategories}
        close = difflib.get_close_matches(wanted, list(every_sub), n=1, cutoff=0.75)
        if close:
            return every_sub[close[0]]
        close = difflib.get_close_matches(wanted, list(by_name), n=1, cutoff=0.75)
        if close:
            return by_name[close[0]]
        suggestions = difflib.get_close_matches(wanted, list(by_name), n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(repr(by_name[s]) for s in suggestions)}?" if suggestions else ""
        raise UnknownLabelError(f"no label matches {query!r}{hint} (see `kb labels`)")

    def tree(self) -> list[dict]:
        return [
            {
                "name": top.top,
                "description": top.description,
                "subcategories": [
                    {"name": sub.sub, "label": sub.name, "description": sub.description}
                    for sub in self.children(top.top)
                ],
            }
            for top in self.top_levels
        ]


@lru_cache(maxsize=4)
def load_taxonomy(path: str | None = None) -> Taxonomy:
    return Taxonomy.load(path)


def top_of(label: str) -> str:
    return label.split(SEPARATOR, 1)[0]
