"""`kb ingest --llm MODEL`: an LLM reads each write-up or paper, extracts its tricks with their pipeline stages and
labels the document by AutoMind's two-level choice, with kb.taxonomy as the menu: first the top-level categories
(with their descriptions), then one subcategory within each chosen category (from that category's menu).

The document reaches the LLM as delimited data (kb.llm), in the cached prefix, so the second call pays the cache-read
price for it. Answers are checked against the taxonomy and the stages (an answer outside them is re-asked once); a
document the LLM cannot answer for (retries used up, budget spent, still malformed) goes through the offline
pipeline (ingest.extract and kb.labeller), and the extractor records which and why. Trick cards are never sent:
they come split and labelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ingest.extract import MAX_CHARS, MIN_CHARS, TrickDraft
from ingest.loaders import SourceDocument
from kb.llm import Document, LLMAnswerError, LLMClient, LLMError
from kb.records import STAGES
from kb.taxonomy import SEPARATOR, Taxonomy, UnknownLabelError

MAX_DOCUMENT_CHARS = 40_000  # of a document's text sent (a long paper's start: its abstract, method and results)
MAX_TRICKS = 40
MAX_CATEGORIES = 3
MAX_FAILURES = 3  # documents in a row the LLM failed on before the rest of the ingest is offline


@dataclass(frozen=True)
class Extraction:
    """What the LLM read in one document: its tricks with a stage each, and its labels ("Top / Sub", first first)."""

    tricks: tuple[TrickDraft, ...]
    stages: tuple[str, ...]
    labels: tuple[str, ...]


class LLMExtractor:
    """Tricks, stages and labels of a document from an LLM; None (and the reason recorded) when it cannot."""

    def __init__(self, client: LLMClient, taxonomy: Taxonomy, *, max_failures: int = MAX_FAILURES):
        self.client = client
        self.taxonomy = taxonomy
        self.max_failures = max_failures
        self.extracted = 0
        self.fallbacks: list[dict[str, str]] = []  # {"source", "reason"} for each document left to the offline path
        self.failures = 0  # in a row
        self.disabled: str | None = None

    def extract(self, document: SourceDocument) -> Extraction | None:
        reason = self.disabled
        if reason is None:
            try:
                extraction = self._extract(document)
            except LLMError as error:
                reason = str(error)
                self.failures += 1
                if error.permanent or self.failures >= self.max_failures:
                    self.disabled = reason if error.permanent else \
                        f"{self.failures} documents in a row failed, the last: {reason}"
            else:
                self.failures = 0
                self.extracted += 1
                return extraction
        self.fallbacks.append({"source": document.source, "reason": reason})
        return None

    def record(self) -> dict[str, Any]:
        """The ingest summary's `llm` section."""
        return {**self.client.record(), "documents": self.extracted, "fallbacks": self.fallbacks,
                "offline_since": self.disabled}

    # ---- the two calls

    def _extract(self, document: SourceDocument) -> Extraction:
        text = "\n\n".join([document.title, document.text, *(f"{name}: {body}" for name, body in document.sections)])
        documents = [Document(document.kind if document.kind == "paper" else "write-up", text[:MAX_DOCUMENT_CHARS],
                              document.source)]
        tricks, categories = self.client.ask(self._system(), documents, self._first_question(), validate=self._first).value
        labels = self.client.ask(self._system(), documents, self._second_question(categories),
                                 validate=lambda data: self._second(data, categories)).value
        return Extraction(tuple(TrickDraft(text) for text, _ in tricks), tuple(stage for _, stage in tricks), labels)

    def _system(self) -> str:
        menu = "\n".join(f"- {top.name}: {top.description}" for top in self.taxonomy.top_levels)
        return ("You read machine-learning competition write-ups and research papers for casebook's knowledge base, "
                "as AutoMind builds its expert knowledge. Answer with one JSON object and nothing else.\n\n"
                f"Pipeline stages: {', '.join(STAGES)}.\n\nTop-level categories:\n{menu}")

    @staticmethod
    def _first_question() -> str:
        return ("Action: extract\n\nList the techniques (tricks) the document describes that another practitioner "
                "could reuse: each one atomic, self-contained (name the model, feature or setting it concerns) and "
                f"{MIN_CHARS} to {MAX_CHARS} characters, at most {MAX_TRICKS}; skip thanks, rankings and chatter. Give "
                "each its pipeline stage. Then choose the document's top-level categories, 1 to "
                f"{MAX_CATEGORIES}, most relevant first (a tabular task is General Machine Learning). Answer "
                '{"tricks": [{"text": "...", "stage": "..."}], "categories": ["..."]}.')

    def _second_question(self, categories: Sequence[str]) -> str:
        lines = ["Action: choose subcategories", "",
                 f"The document's categories: {', '.join(categories)}. For each, choose the one subcategory that fits "
                 "the document best, from its menu:"]
        for top in categories:
            lines.append(f"{top}:")
            lines += [f"- {label.sub}: {label.description}" for label in self.taxonomy.children(top)]
        lines += ["", 'Answer {"labels": ["<category> / <subcategory>", ...]}, in the order of the categories.']
        return "\n".join(lines)

    def _first(self, data: Mapping[str, Any]) -> tuple[list[tuple[str, str]], list[str]]:
        raw = data.get("tricks")
        if not isinstance(raw, list):
            raise LLMAnswerError('"tricks" must be a list of {"text": ..., "stage": ...}')
        tricks = []
        for item in raw[:MAX_TRICKS]:
            text = " ".join(str(item.get("text") or "").split()) if isinstance(item, dict) else ""
            stage = str(item.get("stage") or "").strip().lower() if isinstance(item, dict) else ""
            if stage not in STAGES:
                raise LLMAnswerError(f"stage {stage!r} of trick {text[:60]!r} is not one of: {', '.join(STAGES)}")
            if len(text) >= MIN_CHARS:
                tricks.append((text[:MAX_CHARS], stage))
        raw_categories = data.get("categories")
        if not isinstance(raw_categories, list) or not 1 <= len(raw_categories) <= MAX_CATEGORIES:
            raise LLMAnswerError(f'"categories" must list 1 to {MAX_CATEGORIES} top-level categories')
        tops = {top.name.lower(): top.name for top in self.taxonomy.top_levels}
        unknown = [name for name in raw_categories if str(name).strip().lower() not in tops]
        if unknown:
            raise LLMAnswerError(f"categories {unknown} are not top-level categories of the menu: "
                                 f"{', '.join(tops.values())}")
        return tricks, list(dict.fromkeys(tops[str(name).strip().lower()] for name in raw_categories))

    def _second(self, data: Mapping[str, Any], categories: Sequence[str]) -> tuple[str, ...]:
        raw = data.get("labels")
        if not isinstance(raw, list) or not raw:
            raise LLMAnswerError('"labels" must list one "<category> / <subcategory>" per category')
        labels = []
        for name in raw:
            try:
                label = self.taxonomy.get(" / ".join(part.strip() for part in str(name).split("/", 1)))
            except UnknownLabelError:
                raise LLMAnswerError(f"label {name!r} is not in the menu: write it as \"<category>{SEPARATOR}"
                                     "<subcategory>\" with names from the menu") from None
            if label.top not in categories or label.sub is None:
                raise LLMAnswerError(f"label {name!r} is not a subcategory of the chosen categories "
                                     f"{', '.join(categories)}")
            labels.append(label.name)
        missing = [top for top in categories if top not in {label.split(SEPARATOR, 1)[0] for label in labels}]
        if missing:
            raise LLMAnswerError(f"no subcategory chosen for {', '.join(missing)}")
        return tuple(dict.fromkeys(labels))
