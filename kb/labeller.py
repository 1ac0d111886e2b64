"""Offline hierarchical labelling: choose top-level categories first, then subcategories within them.

Evidence is the text itself (never its file path): cosine similarity between the text's embedding
and each label's description, plus lexical cues listed in data/taxonomy.json. The same labeller
serves ingest (documents and tricks) and retrieval (task descriptions).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kb.embedding import Embedder
from kb.records import STAGES
from kb.taxonomy import SEPARATOR, Label, Taxonomy


@dataclass(frozen=True)
class LabelScore:
    label: str
    score: float


@dataclass(frozen=True)
class LabellerSettings:
    lexical_weight: float = 0.35  # how much cue evidence counts against description similarity
    second_top_ratio: float = 0.8  # a second top-level must score this close to the best ...
    second_top_min_cues: int = 2  # ... and show at least this many distinct cues
    # General-ML evidence (boosting, CV, features) is in nearly every write-up; a modality that
    # comes this close to it, with enough cues, is the more specific label and goes first.
    specific_ratio: float = 0.75
    generic_top: str = "General Machine Learning"
    # Only data modalities outrank General ML this way; domains (recommenders, RL...) must win outright.
    modalities: tuple[str, ...] = ("Natural Language Processing", "Computer Vision", "Sequential Modeling",
                                   "Signal Processing", "Cross-Modal Processing", "Graph Learning")
    max_labels: int = 3
    # Documents: the share of description similarity taken from the head (title, competition or task,
    # headings); the rest comes from the mean of the document's strongest technique sentences.
    head_weight: float = 0.3
    body_sentences: int = 15
    # A whole write-up names its modality many times: a modality with this many distinct cues goes before
    # General ML when it comes this close.
    document_specific_ratio: float = 0.65
    document_specific_min_cues: int = 2
    # A trick adds a top-level of its own (beyond its document's) only when that top-level is the trick's
    # own best, with at least this many distinct cues and at least this score.
    own_label_min_cues: int = 2
    own_label_min_score: float = 0.45
    # A document with a task statement (a paper's Task) is labelled by its task, as AutoMind labels a task: an area
    # the statement names by none of its cues scores this share, since a paper's method (a GNN, a transformer) fills
    # its text with cues of an area its task need not be in. Soft, not zero: cue lists are never complete.
    unstated_area_factor: float = 0.5


def _cue_text(text: str) -> str:
    """Text as cues are matched against it: lower case, and code names read as words ("visit_month", "lag_7")."""
    return text.lower().replace("_", " ")


def _cue_pattern(cues: Sequence[str]) -> re.Pattern | None:
    cleaned = sorted({_cue_text(c).strip() for c in cues if c.strip()}, key=len, reverse=True)
    if not cleaned:
        return None
    return re.compile(r"(?<![a-z0-9])(" + "|".join(re.escape(c) for c in cleaned) + r")(?![a-z0-9])")


def _lexical(pattern: re.Pattern | None, text: str) -> tuple[float, int]:
    """Saturating evidence from distinct cue matches, and how many distinct cues matched."""
    if pattern is None:
        return 0.0, 0
    hits: dict[str, int] = {}
    for match in pattern.finditer(text):
        hits[match.group(1)] = hits.get(match.group(1), 0) + 1
    strength = sum(1.0 + math.log(count) for count in hits.values())
    return 1.0 - math.exp(-strength / 2.5), len(hits)


class HierarchicalLabeller:
    def __init__(self, taxonomy: Taxonomy, embedder: Embedder, settings: LabellerSettings | None = None):
        self.taxonomy = taxonomy
        self.embedder = embedder
        self.settings = settings or LabellerSettings()
        self._patterns = {
            label.name: _cue_pattern(
                label.cues
                if label.sub is not None
                else label.cues + tuple(c for s in taxonomy.children(label.top) for c in s.cues)
            )
            for label in taxonomy.labels
        }

    @cached_property
    def taxonomy_names(self) -> frozenset[str]:
        return frozenset(label.name for label in self.taxonomy.labels)

    @cached_property
    def _vectors(self) -> dict[str, np.ndarray]:
        labels = self.taxonomy.labels
        texts = [self.describe(label) for label in labels]
        return dict(zip((label.name for label in labels), self.embedder.embed(texts)))

    @staticmethod
    def describe(label: Label) -> str:
        return f"{label.name}: {label.description}"

    def label_vector(self, name: str) -> np.ndarray:
        return self._vectors[name]

    def _score(self, label: Label, text: str, vector: np.ndarray) -> tuple[float, int]:
        lexical, n_cues = _lexical(self._patterns[label.name], text)
        similarity = float(np.dot(vector, self._vectors[label.name]))
        return similarity + self.settings.lexical_weight * lexical, n_cues

    def label(
        self,
        text: str,
        vector: np.ndarray | None = None,
        prior: Mapping[str, float] | None = None,
        prior_weight: float = 0.6,
    ) -> list[LabelScore]:
        """Ranked "Top / Sub" labels for a text.

        `prior` (label name → score, e.g. the labels of the document a trick came from) is
        blended in with `prior_weight`, so a short trick inherits its document's context.
        """
        lowered = _cue_text(text)
        if vector is None:
            vector = self.embedder.embed([text])[0]
        prior = prior or {}

        def blend(name: str, own: float) -> float:
            if not prior:
                return own
            return (1 - prior_weight) * own + prior_weight * prior.get(name, 0.0)

        tops = []
        for top in self.taxonomy.top_levels:
            own, n_cues = self._score(top, lowered, vector)
            tops.append((blend(top.name, own), n_cues, top))
        return self._choose(tops, lambda sub: blend(sub.name, self._score(sub, lowered, vector)[0]),
                            lambda name: prior.get(name, 0) > 0)

    def _choose(self, tops: list[tuple[float, int, Label]], sub_score, primed=lambda name: False,
                specific_ratio: float | None = None, specific_min_cues: int | None = None) -> list[LabelScore]:
        """Top-levels ranked (a close modality before General ML), then the best subcategory of each."""
        tops = sorted(tops, key=lambda item: -item[0])
        best = tops[0][0]
        ratio = self.settings.specific_ratio if specific_ratio is None else specific_ratio
        min_cues = self.settings.second_top_min_cues if specific_min_cues is None else specific_min_cues
        if tops[0][2].name == self.settings.generic_top:
            specific = next(
                (item for item in tops[1:] if item[0] >= ratio * best
                 and item[1] >= min_cues and item[2].name in self.settings.modalities),
                None,
            )
            if specific is not None:
                tops.remove(specific)
                tops.insert(0, specific)
        chosen = [tops[0]] + [
            item
            for item in tops[1:]
            if item[0] >= self.settings.second_top_ratio * best
            and (item[1] >= self.settings.second_top_min_cues or primed(item[2].name))
        ]
        results: list[LabelScore] = []
        for top_score, _, top in chosen[: self.settings.max_labels]:
            subs = [(sub_score(sub), sub) for sub in self.taxonomy.children(top.name)]
            if not subs:
                results.append(LabelScore(top.name, round(top_score, 4)))
                continue
            best_sub, sub = max(subs, key=lambda item: item[0])
            results.append(LabelScore(sub.name, round((top_score + best_sub) / 2, 4)))
        return results[: self.settings.max_labels]

    def label_document(self, text: str, head_vector: np.ndarray, sentence_vectors: np.ndarray | None = None,
                       task: str | None = None) -> list[LabelScore]:
        """Labels of a whole document, as AutoMind labels a task: from its context, not sentence by sentence.

        `text` is what the cues are read from (title, competition or task, headings and body);
        `head_vector` embeds the head (title, competition or task description, headings) and
        `sentence_vectors` the document's strongest technique sentences. Description similarity is
        `head_weight` × head + the rest × the sentences' mean, so generic sentences ("5-fold CV")
        cannot outvote what the document is about. `task`, the document's own task statement where it has one,
        demotes every specific area it names by no cue (`unstated_area_factor`); General ML needs no cue.
        """
        lowered = _cue_text(text)
        vector = np.asarray(head_vector, dtype=float)
        if sentence_vectors is not None and len(sentence_vectors):
            body = np.asarray(sentence_vectors, dtype=float)[: self.settings.body_sentences].mean(axis=0)
            body = body / (np.linalg.norm(body) or 1.0)
            weight = self.settings.head_weight
            vector = weight * vector + (1 - weight) * body  # dot products are linear: the weighted similarity
        tops = [(*self._score(top, lowered, vector), top) for top in self.taxonomy.top_levels]
        if task:
            stated = _cue_text(task)
            tops = [(score if top.name == self.settings.generic_top or _lexical(self._patterns[top.name], stated)[1]
                     else score * self.settings.unstated_area_factor, n_cues, top) for score, n_cues, top in tops]
        return self._choose(tops, lambda sub: self._score(sub, lowered, vector)[0],
                            specific_ratio=self.settings.document_specific_ratio,
                            specific_min_cues=self.settings.document_specific_min_cues)

    def label_trick(self, text: str, vector: np.ndarray, document_labels: Sequence[str]) -> list[str]:
        """A trick's labels: its document's, plus a top-level of its own only on clear evidence.

        E.g. "tokenise the text column with TF-IDF" in a tabular write-up also gets an NLP label.
        """
        labels = list(document_labels)
        if not labels:
            return [item.label for item in self.label(text, vector)]
        own = self.label(text, vector)
        if own:
            first = own[0]
            top = self.taxonomy.get(first.label).top
            _, n_cues = _lexical(self._patterns[top], _cue_text(text))
            known_tops = {label.split(SEPARATOR, 1)[0] for label in labels}
            if (top not in known_tops and top != self.settings.generic_top and first.score >= self.settings.own_label_min_score
                    and n_cues >= self.settings.own_label_min_cues):
                labels.append(first.label)
        return labels

    def evidence(self, text: str, vector: np.ndarray | None, labels: Sequence[str]) -> list[float]:
        """How strongly a text itself supports each of `labels`: one rule for every source.

        A "Top / Sub" label scores the mean of its top-level's and its subcategory's evidence
        (description similarity plus weighted cue evidence), as `label` does; the document or card the
        text came from plays no part, so the same text always gets the same score for the same label.
        """
        lowered = _cue_text(text)
        if vector is None:
            vector = self.embedder.embed([text])[0]
        scores = []
        for name in labels:
            label = self.taxonomy.get(name)
            top_score = self._score(self.taxonomy.get(label.top), lowered, vector)[0]
            if label.sub is None:
                scores.append(round(top_score, 4))
            else:
                scores.append(round((top_score + self._score(label, lowered, vector)[0]) / 2, 4))
        return scores

    def scores(self, labels: Sequence[LabelScore]) -> dict[str, float]:
        """Label scores as a prior for `label`: each "Top / Sub" also credits its top-level."""
        prior: dict[str, float] = {}
        for item in labels:
            prior[item.label] = max(prior.get(item.label, 0.0), item.score)
            top = item.label.split(SEPARATOR, 1)[0]
            prior[top] = max(prior.get(top, 0.0), item.score)
        return prior


# Pipeline stages: lexical cues first (they are precise), then description similarity.
STAGE_DESCRIPTIONS: dict[str, str] = {
    "data preprocessing": "Cleaning raw data: missing value imputation, outlier removal, deduplication, type fixes, text normalisation, resizing images, scaling.",
    "feature engineering": "Creating new input features: encodings of categorical columns, aggregations, ratios, lags, rolling statistics, embeddings, TF-IDF.",
    "modeling": "Choosing the model architecture or algorithm: gradient boosting, linear models, neural network backbones, transformers, loss functions.",
    "training": "How the model is trained: learning rate schedules, epochs, batch size, early stopping, optimisers, regularisation, hyperparameter tuning, pseudo labelling.",
    "validation": "How performance is estimated: cross-validation folds, stratified or group k-fold, time-based splits, hold-out sets, leakage checks, correlation of CV and leaderboard.",
    "post-processing": "Adjusting predictions after the model: thresholds, clipping, rounding, calibration, rule-based corrections, test-time augmentation.",
    "ensembling": "Combining several models: averaging, weighted blending, rank averaging, stacking with a meta model, seed bagging, hill climbing.",
    "other": "General remarks, hardware, competition background, lessons learned.",
}

_STAGE_CUES: dict[str, tuple[str, ...]] = {
    "ensembling": ("ensembl", "blend", "stacking", "stacked", "meta-model", "meta model", "weighted average", "averag", "rank average", "hill climb", "seed bagging", "bagging"),
    "validation": ("cross-validation", "cross validation", "k-fold", "kfold", "stratified", "groupkfold", "group k-fold", "fold", "holdout", "hold-out", "validation", " cv ", "leak", "adversarial validation", "public lb", "leaderboard"),
    "post-processing": ("post-process", "postprocess", "threshold", "clip", "round", "calibrat", "tta", "test time augmentation", "test-time augmentation"),
    "training": ("learning rate", "epoch", "batch size", "early stopping", "optimizer", "optimiser", "scheduler", "warmup", "optuna", "hyperparameter", "tuning", "pseudo", "fine-tun", "finetun", "awp", "fgm", "layer-wise", "weight decay", "gradient accumulation"),
    "feature engineering": ("feature", "encoding", "encoder", "aggregat", "lag", "rolling", "ratio", "interaction", "tf-idf", "tfidf", "embedding", "one-hot", "one hot", "target encod", "frequency encod", "rotation", "count"),
    "data preprocessing": ("missing", "imput", "nan", "outlier", "duplicate", "clean", "normaliz", "normalis", "scal", "preprocess", "remove", "drop", "resize", "augment"),
    "modeling": ("lightgbm", "lgbm", "xgboost", "catboost", "model", "architecture", "backbone", "deberta", "roberta", "bert", "transformer", "lstm", "gru", "cnn", "resnet", "efficientnet", "regression", "classifier", "loss", "head", "pooling"),
}
_STAGE_PATTERNS = {stage: re.compile("|".join(re.escape(c) for c in cues)) for stage, cues in _STAGE_CUES.items()}
assert set(STAGE_DESCRIPTIONS) == set(STAGES)


class StageClassifier:
    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    @cached_property
    def _vectors(self) -> np.ndarray:
        return self.embedder.embed([f"{s}: {d}" for s, d in STAGE_DESCRIPTIONS.items()])

    def classify(self, text: str, vector: np.ndarray | None = None) -> str:
        lowered = f" {text.lower()} "
        if vector is None:
            vector = self.embedder.embed([text])[0]
        similarity = self._vectors @ vector
        best_stage, best_score = "other", -1.0
        for index, stage in enumerate(STAGE_DESCRIPTIONS):
            pattern = _STAGE_PATTERNS.get(stage)
            hits = len(pattern.findall(lowered)) if pattern else 0
            score = float(similarity[index]) + 0.12 * min(hits, 3)
            if score > best_score:
                best_stage, best_score = stage, score
        return best_stage
