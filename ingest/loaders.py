"""Read files of every supported format into `SourceDocument`s, or fail with a one-line reason.

Formats: markdown, plain text and Kaggle `.case` write-ups, html, pdf, json and jsonl. JSON is
recognised by shape: a dict of paper summaries, a full extracted paper, or trick cards.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".case", ".text"}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | {".html", ".htm", ".pdf", ".json", ".jsonl"}
DEFAULT_MAX_BYTES = 25 * 1024 * 1024


class LoadError(Exception):
    """A file that cannot be ingested; the message is one line saying why and what to do."""


class NotKnowledge(LoadError):
    """A file ingest recognises and passes over: it holds no write-up, paper or trick (a label taxonomy, say)."""


@dataclass(frozen=True)
class SourceDocument:
    """One document to turn into tricks. A collection file (e.g. many paper summaries) yields several."""

    source: str
    kind: str  # "solution" or "paper"
    title: str
    text: str
    # Named parts: a paper's perspectives (task, data, technique...) or sections.
    sections: tuple[tuple[str, str], ...] = ()
    # Pre-split trick cards (bundled knowledge): dicts with text, labels, stage, recipe...
    cards: tuple[Mapping[str, Any], ...] = field(default=(), hash=False, compare=False)
    # Stated by the write-up's own header lines (`competition: slug`, `place: 3rd`): they outrank any guess.
    competition: str | None = None
    place: int | None = None


@dataclass(frozen=True)
class LoadedFile:
    source: str
    sha256: str
    documents: tuple[SourceDocument, ...]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def discover(paths: list[str]) -> Iterator[tuple[str, Path | None, str | None]]:
    """(source as given, path, error) for every file under the given paths, in a stable order."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(
                p for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not any(unsupported_type(p) is None for p in files):
                yield given, None, f"no supported files in this folder (looked for {', '.join(sorted(SUPPORTED_SUFFIXES))})"
                continue
            # Unsupported files come too (an INDEX.tsv beside the write-ups), so ingest can say why it skips them.
            for file in files:
                yield str(file), file, None
        elif path.is_file():
            yield given, path, None
        else:
            yield given, None, "no such file or folder; check the path"


def unsupported_type(path: Path) -> str | None:
    """Why a file's type cannot be ingested, or None when it can."""
    suffix = path.suffix.lower()
    if suffix in SUPPORTED_SUFFIXES:
        return None
    return f"unsupported file type {suffix or '(none)'}; supported: {', '.join(sorted(SUPPORTED_SUFFIXES))}"


def _read_text(path: Path, raw: bytes) -> str:
    if b"\x00" in raw[:8192]:
        raise LoadError("binary file (NUL bytes), not text; convert it to .md/.txt/.pdf first")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise LoadError(f"not valid UTF-8 at byte {error.start}; re-save the file as UTF-8") from None


def _title_from(text: str, path: Path) -> str:
    for line in text.splitlines():
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            if line.lstrip().startswith("#") and len(stripped) <= 120:
                return stripped
            break
    return re.sub(r"[-_]+", " ", path.stem).strip().capitalize()


_HEADER_LINE = re.compile(r"^(source|competition|place):[ \t]*(.*?)[ \t]*$", re.IGNORECASE)
_ORDINAL = re.compile(r"\b(\d{1,5})(?:st|nd|rd|th)\b", re.IGNORECASE)


def _split_header(text: str) -> tuple[dict[str, str], str]:
    """The `key: value` lines (source, competition, place) that open a write-up, and the text after them.

    A curated corpus states its competition and place this way; the lines are no technique, so they leave the text.
    """
    lines = text.splitlines(keepends=True)
    header: dict[str, str] = {}
    for number, line in enumerate(lines):
        match = _HEADER_LINE.match(line.strip())
        if not match:
            if header and not line.strip():
                continue
            return header, "".join(lines[number:]) if header else text
        header[match.group(1).lower()] = match.group(2)
    return header, ""


def _place_from_header(value: str) -> int | None:
    """The first ordinal of a `place:` line ("13th (official); ..." is 13; "top 3%" states none)."""
    match = _ORDINAL.search(value)
    return int(match.group(1)) if match else None


def _html_text(raw: str) -> tuple[str, str | None]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(raw, "html.parser")
    for tag in soup(["script", "style", "nav", "footer", "head"]):
        if tag.name == "head" and soup.title:
            continue
        tag.decompose()
    title = soup.title.get_text(strip=True) if soup.title else None
    if not title and soup.h1:
        title = soup.h1.get_text(strip=True)
    body = soup.body or soup
    for item in body.find_all("li"):
        item.insert_before("\n- ")
    for block in body.find_all(["p", "h1", "h2", "h3", "h4", "div", "br", "tr"]):
        block.insert_after("\n")
    text = re.sub(r"\n{3,}", "\n\n", body.get_text())
    return text.strip(), title


def _pdf_text(path: Path) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(str(path), strict=False)
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, OSError, TypeError, IndexError) as error:
        raise LoadError(f"unreadable or truncated PDF ({type(error).__name__}: {error}); re-export the PDF") from None
    text = "\n\n".join(pages).strip()
    if not text:
        raise LoadError("PDF has no extractable text (scanned or truncated); run OCR or re-export it")
    return text


_LATEX_DROP = re.compile(r"\\(?:label|cite[pt]?|ref|eqref|url|footnote)\*?(?:\[[^\]]*\])?\{[^}]*\}")
_LATEX_CMD = re.compile(r"\\[a-zA-Z]+\*?(?:\[[^\]]*\])?")


def latex_to_text(text: str) -> str:
    """Readable prose from extracted LaTeX: comments, citations and commands removed, math kept short."""
    text = re.sub(r"(?<!\\)%.*", "", text)
    text = _LATEX_DROP.sub("", text)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = _LATEX_CMD.sub("", text)
    text = text.replace("{", "").replace("}", "").replace("~", " ")
    return re.sub(r"[ \t]+", " ", re.sub(r"\n{3,}", "\n\n", text)).strip()


def _paper_sections(content: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for key, value in content.items():
        if isinstance(value, Mapping):
            name = f"{prefix}{value.get('name', key)}"
            body = value.get("content")
            if isinstance(body, str) and body.strip():
                yield name, latex_to_text(body)
            yield from _paper_sections({k: v for k, v in value.items() if isinstance(v, Mapping)}, name + " / ")


PAPER_PERSPECTIVES = (("Task", "task"), ("Data_type", "data"), ("Data_domain", "data domain"), ("ML_phase", "technique"))


def _from_json(source: str, data: Any) -> list[SourceDocument]:
    if isinstance(data, Mapping) and "meta_info" in data and "latex_extraction" in data:
        meta = data["meta_info"] or {}
        content = (data["latex_extraction"] or {}).get("content") or {}
        if not isinstance(content, Mapping):
            raise LoadError("full paper JSON has no latex_extraction.content sections")
        sections = tuple(_paper_sections(content))
        return [SourceDocument(source, "paper", str(meta.get("title") or Path(source).stem).strip(),
                               str(meta.get("abstract") or "").strip(), sections)]
    if isinstance(data, Mapping) and data and all(
        isinstance(v, Mapping) and "title" in v and ("abs" in v or "abstract" in v) for v in data.values()
    ):
        return [
            SourceDocument(
                f"{source}#{key}", "paper", str(value["title"]).strip(),
                str(value.get("abs") or value.get("abstract") or "").strip(),
                tuple((name, str(value[field_])) for field_, name in PAPER_PERSPECTIVES if value.get(field_)),
            )
            for key, value in data.items()
        ]
    cards = data if isinstance(data, list) else data.get("tricks") if isinstance(data, Mapping) else None
    if isinstance(data, Mapping) and "text" in data:
        cards = [data]
    if isinstance(cards, list) and cards and all(isinstance(c, Mapping) and c.get("text") for c in cards):
        return [_card_document(source, cards)]
    if isinstance(data, Mapping) and data and all(
        isinstance(v, Mapping) and "description" in v and isinstance(v.get("category"), list) for v in data.values()
    ):  # AutoMind's two-level labels, as ../shared/corpus/taxonomy holds them beside the write-ups
        raise NotKnowledge(f"a label taxonomy ({len(data)} top-level labels with their categories), not write-ups, "
                           "papers or tricks: passed over; casebook labels tricks with data/taxonomy.json")
    raise LoadError(
        "unrecognised JSON layout; expected paper summaries {key: {title, abs, ...}}, "
        "a full paper {meta_info, latex_extraction}, or trick cards [{text, labels, stage}]"
    )


def _card_document(source: str, cards: list[Mapping[str, Any]]) -> SourceDocument:
    kinds = {str(c.get("kind", "solution")) for c in cards}
    title = str(cards[0].get("collection") or Path(source.split("#")[0]).stem.replace("_", " ")).strip()
    return SourceDocument(source, kinds.pop() if len(kinds) == 1 else "solution", title, "", (), tuple(cards))


def load_file(source: str, path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> LoadedFile:
    suffix = path.suffix.lower()
    if reason := unsupported_type(path):
        raise LoadError(reason)
    size = path.stat().st_size
    if size == 0:
        raise LoadError("empty file; remove it or add content")
    if size > max_bytes:
        raise LoadError(f"file is {size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.0f} MiB limit; split it or raise --max-mb")
    raw = path.read_bytes()
    sha = hashlib.sha256(raw).hexdigest()
    if suffix == ".pdf":
        if not raw.startswith(b"%PDF"):
            raise LoadError("not a PDF (missing %PDF header); check the file")
        text = _pdf_text(path)
        documents = [SourceDocument(source, "paper", _title_from(text, path), text)]
    elif suffix in (".html", ".htm"):
        text, title = _html_text(_read_text(path, raw))
        documents = [SourceDocument(source, "solution", title or _title_from(text, path), text)]
    elif suffix == ".json":
        try:
            data = json.loads(_read_text(path, raw))
        except json.JSONDecodeError as error:
            raise LoadError(f"invalid JSON at line {error.lineno} column {error.colno}: {error.msg}; fix the file") from None
        documents = _from_json(source, data)
    elif suffix == ".jsonl":
        records = []
        for number, line in enumerate(_read_text(path, raw).splitlines(), start=1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise LoadError(f"invalid JSON on line {number}: {error.msg}; fix or remove that line") from None
        if not records:
            raise LoadError("no JSON records in this .jsonl file; add one object per line")
        if all(isinstance(r, Mapping) and r.get("text") for r in records):
            documents = [_card_document(source, records)]
        else:
            documents = []
            for number, record in enumerate(records, start=1):
                documents.extend(_from_json(f"{source}#{number}", record))
    else:
        header, text = _split_header(_read_text(path, raw))
        if not text.strip():
            raise LoadError("file has only white space; remove it or add content")
        competition = re.sub(r"[^a-z0-9]+", "-", header.get("competition", "").lower()).strip("-") or None
        documents = [SourceDocument(source, "solution", _title_from(text, path), text,
                                    competition=competition, place=_place_from_header(header.get("place", "")))]
    return LoadedFile(source, sha, tuple(documents))
