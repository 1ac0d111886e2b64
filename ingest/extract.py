"""Split documents into atomic tricks without an LLM.

A write-up is cut into sections (llama-index's markdown parser), blocks and sentences (its
bundled sentence tokenizer); sentences that describe a technique are kept, short continuations
are joined to the sentence they continue, and runs of short bullets under one lead line (e.g. a
hyper-parameter list) become one trick. A paper becomes a summary from AutoMind's perspectives
(task, data, technique, contribution) plus the technique sentences of its body.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from ingest.loaders import SourceDocument

MIN_CHARS = 40
MAX_CHARS = 600
MAX_TRICKS_PER_WRITEUP = 60
MAX_TRICKS_PER_PAPER = 25


@dataclass(frozen=True)
class TrickDraft:
    """Text of one trick before it is labelled and embedded; `role` says what part of a paper it is."""

    text: str
    role: str = "trick"  # "trick" or "summary"


_TECHNIQUE = re.compile(
    r"(?<![a-z])("
    r"lgbm|lightgbm|xgb|xgboost|catboost|gbdt|gbm|boosting|random forest|extra trees|ridge|lasso|"
    r"logistic|svm|knn|linear|neural|mlp|cnn|rnn|lstm|gru|transformer|bert|deberta|roberta|electra|"
    r"longformer|bart|t5|gpt|llm|resnet|efficientnet|unet|yolo|backbone|pooling|attention|embedding|"
    r"feature|encod|one-hot|target|impute|imputation|missing|nan|outlier|normali[sz]|standardi[sz]|"
    r"scal(e|ing)|log|transform|aggregat|lag|rolling|window|ratio|interaction|tf-?idf|n-?gram|"
    r"token|augment|mixup|cutmix|fold|cross-validation|cross validation|\bcv\b|stratif|group ?k|split|"
    r"validation|holdout|leak|ensembl|blend|stack|averag|weight|bagging|seed|pseudo|distill|"
    r"learning rate|\blr\b|epoch|batch|optimi[sz]er|adam|scheduler|warm ?up|early stopping|dropout|"
    r"regulari[sz]|loss|threshold|clip|post-?process|calibrat|tta|fine-?tun|pre-?train|"
    r"hyperparameter|optuna|tuning|tuned|depth|leaves|estimators|rmse|mae|auc|logloss|metric|"
    r"predict|train|model|classifier|regressor|cluster|pca|svd|smote|oversampl|undersampl|"
    r"quantile|tweedie|poisson|forecast|horizon|trend|season|rotation|coordinate|distance"
    r")"
)
_CHATTER = re.compile(
    r"(thank|congrat|grateful|kudos|shout ?out|teammate|my team|our team|kaggle team|organi[sz]er|"
    r"medal|gold|silver|bronze|happy|excited|lucky|learned a lot|first competition|"
    r"upvote|github|notebook here|code here|link|here is|you can find|see you|cheers|\bsorry\b|"
    r"private lb|public lb|leaderboard|shake|\brank(?:ed|ing)?\b(?![- ]?(?:averag|gauss|transform|based))|place\b)",
    re.IGNORECASE,
)
# Words every ML sentence has; alone they do not make a technique.
_GENERIC = {"model", "predict", "train", "target", "feature", "metric", "weight", "split", "linear"}
_CONTINUATION = re.compile(r"^(this|it|these|that|which|so |then|also|here|they|its|as a result|because)\b", re.I)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)]|\(\d+\)|[a-z][.)])\s+")
_NOISE = [
    (re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)?"), " "),  # images
    (re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)?"), r"\1"),  # links keep their words
    (re.compile(r"https?://\S+"), " "),
    (re.compile(r"<[^>]+>"), " "),
    # Emphasis and code marks; an underscore only at a word's edge, so names such as num_leaves stay whole.
    (re.compile(r"[*`]{1,3}|(?<!\w)_{1,3}|_{1,3}(?!\w)"), ""),
    (re.compile(r"@\w+"), " "),
]


def _clean(text: str) -> str:
    for pattern, replacement in _NOISE:
        text = pattern.sub(replacement, text)
    return text


@lru_cache(maxsize=1)
def _sentence_splitter():
    from llama_index.core.node_parser.text.utils import split_by_sentence_tokenizer

    return split_by_sentence_tokenizer()


def _sections(text: str) -> list[str]:
    from llama_index.core import Document
    from llama_index.core.node_parser import MarkdownNodeParser

    nodes = MarkdownNodeParser().get_nodes_from_documents([Document(text=text)])
    return [node.get_content() for node in nodes] or [text]


def technique_score(text: str) -> float:
    """How much a sentence reads like an actionable technique rather than chatter or results."""
    lowered = text.lower()
    words = set(m.group(1) for m in _TECHNIQUE.finditer(lowered))
    hits = len(words - _GENERIC) + 0.4 * len(words & _GENERIC)
    score = min(hits, 4) + (0.5 if re.search(r"\d", lowered) else 0.0)
    if re.search(r"not (?:explicitly )?(?:mentioned|provided|specified|available)|overall,? (?:the|this)", lowered):
        score -= 1.5
    if _CHATTER.search(lowered):
        score -= 2.0
    if lowered.rstrip().endswith("?"):
        score -= 1.0
    if re.match(r"^\s*(cv|lb|public|private|score)\b", lowered) and hits <= 1:
        score -= 1.0
    return score


def _normalise_space(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip(" -*•\t")


def _units(block: str) -> list[str]:
    """Sentences of a block, with fragments too short to stand alone joined to their neighbour."""
    units: list[str] = []
    for sentence in _sentence_splitter()(_normalise_space(block)):
        sentence = sentence.strip()
        if not sentence:
            continue
        if units and (len(sentence) < 25 or len(units[-1]) < 25 or _CONTINUATION.match(sentence)) and \
                len(units[-1]) + len(sentence) < MAX_CHARS:
            units[-1] = f"{units[-1]} {sentence}"
        else:
            units.append(sentence)
    return units


def _blocks(section: str) -> Iterable[str]:
    """Paragraphs of a section; a lead line followed by short bullets is kept as one block."""
    lines = section.splitlines()
    paragraph: list[str] = []
    bullets: list[str] = []
    lead: str | None = None

    def flush_bullets():
        nonlocal bullets, lead
        if bullets:
            short = all(len(b) < 140 for b in bullets) and len(bullets) >= 3
            if short:
                joined = (lead + " " if lead else "") + "; ".join(_BULLET.sub("", b).strip() for b in bullets)
                yield joined[:MAX_CHARS]
            else:
                if lead:
                    yield lead
                for bullet in bullets:
                    yield _BULLET.sub("", bullet)
            bullets, lead = [], None

    for line in lines + [""]:
        stripped = line.strip()
        if stripped.startswith("#") or stripped.startswith("|") or stripped.startswith("```"):
            stripped = ""
        if _BULLET.match(line) and stripped:
            if paragraph and not bullets:
                lead = " ".join(paragraph)
                paragraph = []
            bullets.append(stripped)
            continue
        if bullets and stripped and line.startswith((" ", "\t")):
            bullets[-1] += " " + stripped  # wrapped bullet line
            continue
        yield from flush_bullets()
        if stripped:
            paragraph.append(stripped)
        elif paragraph:
            yield " ".join(paragraph)
            paragraph = []


def _select(candidates: Iterable[str], limit: int, min_score: float) -> list[str]:
    seen: set[str] = set()
    kept: list[tuple[int, float, str]] = []
    for order, text in enumerate(candidates):
        text = _normalise_space(text)
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS].rsplit(" ", 1)[0] + " …"
        key = re.sub(r"[^a-z0-9]+", "", text.lower())
        if len(text) < MIN_CHARS or key in seen:
            continue
        score = technique_score(text)
        if score >= min_score:
            seen.add(key)
            kept.append((order, score, text))
    best = sorted(kept, key=lambda item: -item[1])[:limit]
    return [text for _, _, text in sorted(best)]


def split_writeup(text: str, limit: int = MAX_TRICKS_PER_WRITEUP) -> list[TrickDraft]:
    units: list[str] = []
    for section in _sections(_clean(text)):
        for block in _blocks(section):
            if ";" in block and block.count(";") >= 2 and len(block) <= MAX_CHARS:
                units.append(block)  # a joined bullet list is already one trick
            else:
                units.extend(_units(block))
    kept = _select(units, limit, min_score=2.0)
    if len(kept) < 3:  # short or chatty write-ups: keep their few most technical sentences
        kept = _select(units, 3, min_score=0.5)
    return [TrickDraft(t) for t in kept]


def split_paper(document: SourceDocument, limit: int = MAX_TRICKS_PER_PAPER) -> list[TrickDraft]:
    perspectives = dict(document.sections) if all(
        name in ("task", "data", "data domain", "technique") for name, _ in document.sections
    ) else {}
    abstract_sentences = _units(document.text) if document.text else []
    if not perspectives:
        perspectives = _perspectives_from_abstract(abstract_sentences)
    contribution = next(
        (s for s in abstract_sentences if re.search(r"outperform|state-of-the-art|improv|achiev|surpass", s, re.I)),
        abstract_sentences[-1] if abstract_sentences else "",
    )
    summary_parts = [f"{document.title}."]
    for name in ("task", "data", "technique"):
        if perspectives.get(name):
            summary_parts.append(f"{name.capitalize()}: {_first_sentences(perspectives[name], 2)}")
    if contribution:
        summary_parts.append(f"Contribution: {contribution}")
    drafts = [TrickDraft(" ".join(summary_parts), role="summary")]
    body: list[str] = []
    if perspectives.get("technique"):
        body.extend(_units(perspectives["technique"]))
    for name, section in document.sections:
        if name in ("task", "data", "data domain", "technique") or re.search(
            r"related work|acknowledg|conclusion|reference|appendix", name, re.I
        ):
            continue
        for chunk in _chunks(section):
            body.extend(_units(chunk))
    body.extend(s for s in abstract_sentences if re.search(r"\b(we|our)\b.*\b(propose|use|introduce|design|apply)", s, re.I))
    drafts.extend(TrickDraft(t) for t in _select(body, limit - 1, min_score=2.5))
    return drafts


def _chunks(text: str) -> list[str]:
    """Long sections are cut into ~1k-token chunks by llama-index before sentence splitting."""
    if len(text) < 6000:
        return [text]
    from llama_index.core.node_parser import SentenceSplitter

    return SentenceSplitter(chunk_size=1024, chunk_overlap=0).split_text(text)


def _first_sentences(text: str, n: int) -> str:
    return " ".join(_units(text)[:n])


def _perspectives_from_abstract(sentences: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    rules = {
        "task": r"task|problem|aim|goal|address",
        "data": r"dataset|data set|benchmark|corpus|images|records",
        "technique": r"\b(we|our)\b.*\b(propose|present|introduce|develop|design)",
    }
    for name, pattern in rules.items():
        match = next((s for s in sentences if re.search(pattern, s, re.I)), None)
        if match:
            found[name] = match
    return found


def split(document: SourceDocument) -> list[TrickDraft]:
    if document.kind == "paper":
        return split_paper(document)
    return split_writeup(document.text)


_PLACE = re.compile(r"\b(\d{1,4})\s*(?:st|nd|rd|th)[\s-]+place\b", re.IGNORECASE)


def detect_rank(text: str, name: str = "") -> int | None:
    """The place a write-up states ("24th place solution"), from its name or first lines."""
    for haystack in (name.replace("-", " ").replace("_", " "), text[:1500]):
        match = _PLACE.search(haystack)
        if match:
            return int(match.group(1))
    return None
