"""Which Kaggle competition a text or file is about, so retrieval can drop same-competition knowledge."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kb.config import data_path

COMPETITIONS_PATH = data_path("competitions.json")
_URL = re.compile(r"kaggle\.com/(?:c|competitions)/([a-z0-9][a-z0-9-]+[a-z0-9])", re.IGNORECASE)


@dataclass(frozen=True)
class Competition:
    slug: str
    title: str
    aliases: tuple[str, ...]


def _words(text: str) -> str:
    return " " + re.sub(r"[^a-z0-9]+", " ", text.lower()).strip() + " "


@lru_cache(maxsize=1)
def known_competitions(path: str | None = None) -> tuple[Competition, ...]:
    raw = json.loads(Path(path or COMPETITIONS_PATH).read_text(encoding="utf-8"))
    return tuple(Competition(c["slug"], c["title"], tuple(c.get("aliases", ()))) for c in raw["competitions"])


def from_name(name: str) -> str | None:
    """The known slug a file or folder name starts with (longest wins), e.g. 'm5-forecasting-accuracy-3'."""
    stem = re.sub(r"[^a-z0-9]+", "-", Path(name).stem.lower()).strip("-")
    matches = [c.slug for c in known_competitions() if stem == c.slug or stem.startswith(c.slug + "-")]
    return max(matches, key=len) if matches else None


def from_text(text: str) -> str | None:
    """A competition named in a text: a Kaggle URL first, else a known title or alias."""
    url = _URL.search(text)
    if url:
        return url.group(1).lower()
    words = _words(text[:20000])
    best: tuple[int, str] | None = None
    for competition in known_competitions():
        for phrase in (competition.title, competition.slug, *competition.aliases):
            needle = _words(phrase)
            if len(needle.strip()) >= 4 and needle in words:
                if best is None or len(needle) > best[0]:
                    best = (len(needle), competition.slug)
    return best[1] if best else None


def detect(text: str, name: str | None = None) -> str | None:
    """Slug for a document: from its file name when that names a known competition, else its content."""
    return (from_name(name) if name else None) or from_text(text)
