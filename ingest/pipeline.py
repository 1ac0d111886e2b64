"""`kb ingest`: files → documents → tricks → labels and stages → vectors → the knowledge base.

Files are processed in batches so the embedding model sees a few hundred texts at a time; each
file is then written on its own, so a crash or a bad file costs at most that file.
"""

from __future__ import annotations

import hashlib
import heapq
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from ingest.compile import TrickCompiler
from ingest.extract import TrickDraft, detect_rank, split, technique_score
from ingest.llm_extract import Extraction, LLMExtractor
from ingest.loaders import (
    DEFAULT_MAX_BYTES,
    LoadError,
    NotKnowledge,
    SourceDocument,
    discover,
    file_sha256,
    load_file,
    unsupported_type,
)
from kb.competitions import detect as detect_competition
from kb.competitions import from_text as competition_in_text
from kb.competitions import known_competitions
from kb.labeller import HierarchicalLabeller, StageClassifier
from kb.records import STAGES, Trick
from kb.store import DocumentRecord, KnowledgeBase
from kb.taxonomy import UnknownLabelError

BATCH_TRICKS = 256
UNMAPPED_EXAMPLES = 5  # the ingest report's examples of tricks no recipe fits


@dataclass(frozen=True)
class FileOutcome:
    source: str
    # added | updated | unchanged (same sha256, not read again) | failed
    # | unsupported (a type ingest does not read, e.g. an INDEX.tsv, or a file that holds no knowledge, e.g. a label
    #   taxonomy: passed over with its reason, not a failure)
    status: str
    tricks: int = 0
    error: str | None = None


@dataclass(frozen=True)
class IngestSummary:
    outcomes: tuple[FileOutcome, ...]
    seconds: float
    embedded: int = 0
    compiled: int = 0  # tricks whose recipe was compiled from their text (ingest.compile)
    unmapped: int = 0  # tricks no recipe fits well enough: readable knowledge only
    unmapped_examples: tuple[str, ...] = ()  # the nearest misses, with the op each came closest to

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def tricks(self) -> int:
        return sum(o.tricks for o in self.outcomes if o.status in ("added", "updated"))

    @property
    def ok(self) -> bool:
        return self.count("failed") == 0

    def to_dict(self) -> dict:
        return {
            "files": len(self.outcomes),
            **{status: self.count(status) for status in ("added", "updated", "unchanged", "unsupported", "failed")},
            "tricks": self.tricks,
            "seconds": round(self.seconds, 2),
            "tricks_per_second": round(self.tricks / self.seconds, 1) if self.seconds else None,
            "compiled": self.compiled,
            "unmapped": self.unmapped,
            "unmapped_examples": list(self.unmapped_examples),
            "failures": [{"source": o.source, "error": o.error} for o in self.outcomes if o.status == "failed"],
            "unsupported_files": [{"source": o.source, "reason": o.error}
                                  for o in self.outcomes if o.status == "unsupported"],
            "outcomes": [asdict(o) for o in self.outcomes],
        }


@dataclass
class _Pending:
    source: str
    sha256: str
    existed: bool
    documents: tuple[SourceDocument, ...]
    drafts: list[list[TrickDraft]] = field(default_factory=list)


class Ingestor:
    def __init__(self, kb: KnowledgeBase, max_bytes: int = DEFAULT_MAX_BYTES, batch_tricks: int = BATCH_TRICKS,
                 extractor: LLMExtractor | None = None):
        self.kb = kb
        # kb ingest --llm: each document's tricks, stages and labels from an LLM, else (per document) the offline path.
        self.extractor = extractor
        self._extracted: dict[SourceDocument, Extraction] = {}
        self.max_bytes = max_bytes
        self.batch_tricks = batch_tricks
        self.labeller = HierarchicalLabeller(kb.taxonomy, kb.embedder)
        self.stages = StageClassifier(kb.embedder)
        self.compiler = TrickCompiler(kb.embedder)
        self._compiled = 0
        self._unmapped = 0
        self._misses: list[tuple[float, str]] = []  # a heap of the nearest misses: (confidence, example)

    def run(self, paths: Sequence[str], progress: Callable[[int, int, str], None] | None = None) -> IngestSummary:
        """Ingest `paths`; `progress(files done, files, what is being done)` as it goes (a file read counts as done:
        it waits only for its batch's embedding, which is reported as its own step)."""
        started = time.perf_counter()
        self._compiled, self._unmapped, self._misses = 0, 0, []
        found = list(discover(list(paths)))
        outcomes: list[FileOutcome] = []
        pending: list[_Pending] = []
        embedded = 0

        def report(doing: str = "reading files"):
            if progress:
                progress(len(outcomes) + len(pending), len(found), doing)

        def flush():
            nonlocal embedded
            files, tricks = len(pending), sum(len(d) for p in pending for d in p.drafts)
            report(f"embedding, labelling and storing {tricks} tricks of {files} files")
            embedded += self._write(pending, outcomes)
            pending.clear()
            report(f"stored {files} files")

        with self.kb.write_lock():
            report()
            for source, path, error in found:
                if error:
                    outcomes.append(FileOutcome(source, "failed", error=error))
                    report()
                    continue
                if reason := unsupported_type(path):  # not a failure: the rest of a folder is what was meant
                    outcomes.append(FileOutcome(source, "unsupported", error=reason))
                    report()
                    continue
                try:
                    sha = file_sha256(path)
                    if self.kb.is_current(source, sha):
                        outcomes.append(FileOutcome(source, "unchanged"))
                        report()
                        continue
                    loaded = load_file(source, path, self.max_bytes)
                    item = _Pending(source, sha, self.kb.document(source) is not None, loaded.documents)
                    item.drafts = [self._drafts(doc) for doc in loaded.documents]
                except NotKnowledge as reason:
                    outcomes.append(FileOutcome(source, "unsupported", error=str(reason)))
                    report()
                    continue
                except LoadError as failure:
                    self._fail(outcomes, source, None, str(failure))
                    report()
                    continue
                except Exception as failure:  # one bad file never aborts a batch
                    self._fail(outcomes, source, None, f"{type(failure).__name__}: {failure}")
                    report()
                    continue
                pending.append(item)
                if sum(len(d) for p in pending for d in p.drafts) >= self.batch_tricks:
                    flush()
                else:
                    report()
            if pending:
                flush()
        examples = tuple(example for _, example in sorted(self._misses, reverse=True))
        return IngestSummary(tuple(outcomes), time.perf_counter() - started, embedded, self._compiled,
                             self._unmapped, examples)

    def _fail(self, outcomes: list[FileOutcome], source: str, sha: str | None, error: str) -> None:
        self.kb.mark_failed(source, sha, error)
        outcomes.append(FileOutcome(source, "failed", error=error))

    def _drafts(self, document: SourceDocument) -> list[TrickDraft]:
        if document.cards:
            return [TrickDraft(str(card["text"]).strip(), role="card") for card in document.cards]
        extraction = self.extractor.extract(document) if self.extractor is not None else None
        if extraction is not None:
            self._extracted[document] = extraction
            return list(extraction.tricks)
        return split(document)

    def _write(self, batch: list[_Pending], outcomes: list[FileOutcome]) -> int:
        texts = [d.text for item in batch for drafts in item.drafts for d in drafts]
        # Every document also embeds its head (title, competition or task, headings) for its own labels.
        heads = [_document_head(doc) for item in batch for doc in item.documents]
        vectors = self.kb.embedder.embed(texts + heads)
        head_vectors = iter(vectors[len(texts):])
        cursor = 0
        ready: list[tuple[_Pending, tuple]] = []
        for item in batch:
            try:
                made: dict[str, tuple[Trick, np.ndarray, list[float]]] = {}
                doc_labels: list[str] = []
                for document, drafts in zip(item.documents, item.drafts):
                    own = vectors[cursor : cursor + len(drafts)]
                    cursor += len(drafts)
                    head_vector = next(head_vectors)
                    labels = self._document_labels(document, drafts, own, head_vector)
                    doc_labels += labels
                    for trick, vector, scores in self._tricks(item.source, document, drafts, own, labels):
                        made.setdefault(trick.id, (trick, vector, scores))
                tricks, misses = self._compile([t for t, _, _ in made.values()], [v for _, v, _ in made.values()])
                first = item.documents[0]
                title = first.title if len(item.documents) == 1 else f"{len(item.documents)} documents from {Path(item.source).name}"
                competitions = {t.competition for t in tricks}
                record = DocumentRecord(
                    item.source, item.sha256, first.kind, title,
                    competitions.pop() if len(competitions) == 1 else None, tuple(dict.fromkeys(doc_labels)),
                )
                trick_vectors = [v for _, v, _ in made.values()]
                ready.append((item, (record, tricks, trick_vectors, [s for _, _, s in made.values()]), misses))
            except Exception as failure:  # e.g. an invalid card: that file fails, the batch goes on
                self._fail(outcomes, item.source, item.sha256, f"{type(failure).__name__}: {failure}")
        if ready:
            self.kb.write_documents([entry for _, entry, _ in ready])
            outcomes.extend(
                FileOutcome(item.source, "updated" if item.existed else "added", len(entry[1]))
                for item, entry, _ in ready
            )
            for _, entry, misses in ready:
                self._compiled += sum(trick.recipe_confidence is not None for trick in entry[1])
                self._unmapped += len(misses)
                for miss in misses:
                    heapq.heappush(self._misses, miss)
                    if len(self._misses) > UNMAPPED_EXAMPLES:
                        heapq.heappop(self._misses)
        return len(texts) + len(heads)

    def _compile(self, tricks: list[Trick], vectors: list[np.ndarray]) -> tuple[list[Trick], list[tuple[float, str]]]:
        """Each trick without a recipe of its own gets the one its text states (ingest.compile) when the compiler is
        sure enough; the rest stay readable knowledge, returned as (confidence, example) for the ingest report."""
        open_ = [index for index, trick in enumerate(tricks) if trick.recipe is None]
        if not open_:
            return tricks, []
        matches = self.compiler.best([tricks[i].text for i in open_], np.asarray([vectors[i] for i in open_]))
        compiled, misses = list(tricks), []
        for index, match in zip(open_, matches):
            if self.compiler.good(match):
                compiled[index] = replace(tricks[index], recipe=match.ref(), recipe_why=match.why,
                                          recipe_confidence=match.confidence)
            else:
                misses.append((match.confidence if match else 0.0, _example(tricks[index], self.compiler.shortfall(match))))
        return compiled, misses

    def _document_labels(self, document: SourceDocument, drafts: list[TrickDraft], vectors: np.ndarray,
                         head_vector: np.ndarray) -> list[str]:
        """The document's labels, from its head and its strongest technique sentences (cards: none)."""
        if document.cards:
            return []
        if document in self._extracted:  # the LLM's two-level choice
            return list(self._extracted[document].labels)
        strongest = sorted(range(len(drafts)), key=lambda i: -technique_score(drafts[i].text))
        chosen = vectors[strongest[: self.labeller.settings.body_sentences]] if strongest else None
        text = "\n".join([_document_head(document), document.text, *(body for _, body in document.sections)])
        return [label.label for label in self.labeller.label_document(text, head_vector, chosen, _task(document))]

    def _tricks(self, source: str, document: SourceDocument, drafts: list[TrickDraft], vectors: np.ndarray,
                doc_labels: list[str]):
        file_name = Path(source.split("#", 1)[0]).name
        full_text = _document_text(document)
        is_writeup = document.kind == "solution"
        # A header's competition and place outrank the guesses from the file name and the text.
        competition = document.competition or (detect_competition(full_text, file_name) if is_writeup else None)
        rank = document.place or (detect_rank(document.text, file_name) if is_writeup else None)
        extraction = self._extracted.pop(document, None)
        for index, (draft, vector) in enumerate(zip(drafts, vectors)):
            if draft.role == "card":
                card = document.cards[index]
                trick = self._card(source, document, card, vector)
                yield trick, vector, self.labeller.evidence(trick.text, vector, trick.labels)
                continue
            labels = self.labeller.label_trick(draft.text, vector, doc_labels)
            stage = extraction.stages[index] if extraction is not None else \
                "other" if draft.role == "summary" else self.stages.classify(draft.text, vector)
            yield (
                Trick(
                    id=_trick_id(document.source, draft.text), text=draft.text, stage=stage,
                    labels=tuple(labels), kind=document.kind, source=document.source,
                    title=document.title, competition=competition, rank=rank,
                ),
                vector,
                self.labeller.evidence(draft.text, vector, labels),
            )

    def _card(self, source: str, document: SourceDocument, card, vector: np.ndarray) -> Trick:
        text = str(card["text"]).strip()
        raw_labels = card.get("labels") or []
        if isinstance(raw_labels, str):
            raw_labels = [raw_labels]
        try:
            labels = tuple(dict.fromkeys(self.kb.taxonomy.resolve(str(l)) for l in raw_labels))
        except UnknownLabelError as error:
            raise LoadError(f"card {card.get('id', text[:30])!r}: {error}") from None
        if not labels:
            labels = tuple(l.label for l in self.labeller.label(text, vector))
        stage = str(card.get("stage") or "").strip().lower() or self.stages.classify(text, vector)
        if stage not in STAGES:
            raise LoadError(f"card {card.get('id', text[:30])!r}: unknown stage {stage!r}; use one of {', '.join(STAGES)}")
        return Trick(
            id=str(card.get("id") or _trick_id(source, text)), text=text, stage=stage, labels=labels,
            kind=str(card.get("kind") or document.kind), source=source,
            title=str(card.get("title") or document.title), competition=card.get("competition"),
            rank=card.get("rank"), recipe=card.get("recipe"),
            recipe_why="the card's own recipe" if card.get("recipe") else None,
        )


def _example(trick: Trick, shortfall: str | None) -> str:
    """A trick no recipe fits, as the ingest report shows it: id, text and why it was not compiled."""
    text = trick.text if len(trick.text) <= 100 else trick.text[:99] + "…"
    return f"{trick.id}: {text!r} ({shortfall})"


def _trick_id(source: str, text: str) -> str:
    """The same id wherever the file lies (an evaluation set grades tricks by id): the file's name, a record's
    "#key" and the text, never the folder. A sentence repeated in two files of the same name is one trick."""
    path = source.split("#", 1)[0]
    stem = re.sub(r"[^a-z0-9]+", "-", Path(path).stem.lower()).strip("-")[:40]
    name = Path(path).name + source[len(path):]
    digest = hashlib.sha1("\0".join((name, text)).encode("utf-8")).hexdigest()[:12]
    return f"{stem}-{digest}"


def _document_text(document: SourceDocument) -> str:
    return "\n".join([document.title, document.text, *(text for _, text in document.sections)])


def _own_title(document: SourceDocument) -> str:
    """The document's title unless the loader made it from the file name (labels never read the path)."""
    stem = Path(document.source.split("#", 1)[0]).stem
    return "" if document.title == re.sub(r"[-_]+", " ", stem).strip().capitalize() else document.title


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _task(document: SourceDocument) -> str | None:
    """A paper's own statement of its task (its Task perspective), if it has one; write-ups state none."""
    if document.kind != "paper":
        return None
    return next((text for name, text in document.sections if name == "task" and text.strip()), None)


def _document_head(document: SourceDocument) -> str:
    """What a document is about, for its labels: title, the competition (its header line or named in the text,
    never taken from the file name) or a paper's task, and the headings of a write-up."""
    parts = [_own_title(document)]
    if document.kind == "paper":
        parts += [_task(document) or ""]
    elif not document.cards:
        slug = document.competition or competition_in_text(_document_text(document))
        parts += [c.title for c in known_competitions() if c.slug == slug]
        parts += [h.strip("*_` ") for h in _HEADING.findall(document.text)][:12]
    return ". ".join(p.strip() for p in parts if p and p.strip())[:2000]


def ingest(paths: Sequence[str], kb: KnowledgeBase, *, max_bytes: int = DEFAULT_MAX_BYTES,
           batch_tricks: int = BATCH_TRICKS, progress: Callable[[int, int, str], None] | None = None,
           extractor: LLMExtractor | None = None) -> IngestSummary:
    """Ingest files and folders into `kb`; see `IngestSummary` for what happened to each file.

    Files are embedded and committed in batches of about `batch_tricks` tricks: smaller batches
    commit more often, larger ones embed faster. With `extractor` (ingest.llm_extract), an LLM extracts each
    document's tricks and labels, and the offline path takes over for a document it cannot answer for.
    """
    return Ingestor(kb, max_bytes, batch_tricks, extractor).run(paths, progress)
