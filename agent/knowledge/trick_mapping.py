"""Map a free-text trick (a sentence of a write-up, a card's text) to an executable recipe op.

Two signals, combined per op:
  - meaning: cosine similarity between the trick and the op's description (name, description and
    applies_when from data/recipes.json), with any kb.embedding.Embedder; the embedder's cache keeps
    the descriptions' vectors, so only new tricks are embedded;
  - wording: lexical cues that name the technique ("count encoding", "tf-idf", "log1p of the target",
    "rotated coordinates"...), which are far more precise than meaning alone when present.
A trick whose best op stays under `threshold` maps to None: the caller logs it, nothing is forced.
Only ops of the executable catalogue (agent.knowledge.recipes) are candidates.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent.knowledge.recipes import catalogue

DEFAULT_THRESHOLD = 0.5
CUE_BONUS = 0.35  # added to the similarity of an op whose cue the text's first sentence contains
LATE_CUE_BONUS = 0.2  # ... whose cue only a later sentence contains
# Cues of a technique, in lower-cased text. An op may have several; one match is enough.
CUES: dict[str, tuple[str, ...]] = {
    "frequency_encoding": (r"how often each \w* ?(value|level|category) (occurs|appears)", r"frequency[- ]encod", r"count[- ]?(frequency )?encod", r"countfrequency",
                           r"frequency of (each|the) (categor|level|value)", r"value[_ ]counts?"),
    "target_encoding": (r"target[- ]encod", r"mean[- ]?encod", r"likelihood encod", r"\bwoe\b", r"weight of evidence",
                        r"out[- ]of[- ]fold (target )?(mean|encod)"),
    "one_hot": (r"one[- ]hot", r"get_dummies", r"dummy (variables|columns)"),
    "ordinal_encoding": (r"map\w* .{0,40}to integers", r"ordered (quality )?(grades|levels|categories)", r"label[- ]?encod", r"ordinal[- ]encod", r"integer[- ]cod", r"ordinal codes?"),
    "native_categorical": (r"native categorical", r"categorical_feature", r"enable_categorical", r"cat_features",
                           r"categorical (support|handling) (of|in) (lightgbm|catboost|xgboost)"),
    "tfidf_text": (r"tf[- ]?idf", r"bag[- ]of[- ](words|n-?grams)", r"char(acter)? n-?grams", r"countvectori[sz]er"),
    "tfidf_svd": (r"(tf[- ]?idf|tfidf).{0,80}(svd|truncated|lsa|reduc)", r"truncated ?svd", r"latent semantic"),
    "text_stats": (r"(number|count) of (words|characters|chars|punctuation|capital|upper)", r"text length",
                   r"word count", r"char(acter)? count", r"length of the (text|essay|comment)"),
    "log_target": (r"log1p.{0,40}(target|price|sales|label|y\b)", r"(target|price|sales|label).{0,40}log1p",
                   r"log[- ]transform\w* (of )?the (target|price|sales|label)", r"log of the (target|price|sales)",
                   r"(predict|train)\w* (on )?(the )?log", r"log\((target|price|y)", r"expm1"),
    "power_target": (r"(yeo[- ]johnson|box[- ]cox).{0,60}(target|label|y\b)",
                     r"(target|label).{0,60}(yeo[- ]johnson|box[- ]cox)"),
    "log_features": (r"log1p.{0,40}(feature|column|variable|skew)", r"log[- ]transform\w* (of )?(the )?(skewed )?"
                     r"(numeric )?(features|columns|variables)", r"skewed (numeric )?(features|columns)"),
    "quantile_transform": (r"quantile ?transform", r"rank ?gauss", r"gauss ?rank"),
    "coordinate_rotation": (r"rotat\w*.{0,60}(coordinat|lat|lon)", r"(coordinat|lat|lon)\w*.{0,60}rotat"),
    "early_stopping": (r"early[- _]?stop",),
    "low_lr_more_trees": (r"learning rate (against|vs\.?|versus) (the )?number of trees", r"(lower|smaller|small|reduc\w*|decreas\w*) (the )?learning rate.{0,80}(more|larger|number of)"
                          r" (trees|rounds|iterations|estimators)", r"learning rate (of )?0?\.0[01]\d*.{0,60}"
                          r"(trees|rounds|iterations|estimators)"),
    "class_weights": (r"class[_ -]weight", r"scale_pos_weight", r"is_unbalance", r"balanced (class )?weights",
                      r"weight(ed|ing)? (the )?(minority|rare) class"),
    "missing_indicators": (r"missing[- ](value )?(indicator|flag)", r"is[_-]?(missing|null|nan)\b", r"isnull flag",
                           r"(flag|indicator)s? for missing"),
    "impute_numeric": (r"imput", r"fill\w* (the )?(missing|nan|null)", r"fillna"),
    "impute_categorical": (r"\bna as .{0,30}absent", r"(missing|na) (means|as) .{0,20}absent", r"(missing|nan) (categor|level)", r"'?__?missing__?'? (level|category)"),
    "row_missing_count": (r"count (the )?(missing|nan|null)\w* (values )?per row", r"(number|count) of (missing|nan|null)\w*( values)? (per|in each|in the|in a) row",
                          r"nan count", r"missing count (per|of each) row", r"row[- ]wise (missing|nan) count"),
    "group_stats": (r"aggregat\w* (over|per|by)", r"per[- ]entity", r"group ?by", r"aggregat\w* (features|statistics|stats)", r"group (mean|statistics|stats)",
                    r"(mean|std|statistics) (of \w+ )?(per|by|within) (group|category|customer|store|neighbo)"),
    "numeric_ratios": (r"\bratios?\b", r"per[- ](unit|capita|room|area)", r"divid\w* (one|two|\w+) (feature|column)"),
    "numeric_interactions": (r"products and differences", r"totals of (the )?parts", r"sum of (the )?parts", r"interaction (feature|term)s?", r"product of (two )?(features|columns)",
                             r"(sum|difference) of (two )?(features|columns)", r"polynomial features"),
    "datetime_parts": (r"calendar(,)? (and \w+ )?(features|event)", r"(day of (the )?week|dayofweek|weekday|month|hour|year) (features|from the date|of the date)",
                       r"date(time)? (parts|features|components)", r"extract\w* (the )?(year|month|day|hour)"),
    "cyclical_encoding": (r"cyclic(al)?", r"sin(e)?[ /-]+(and )?cos(ine)?", r"periodic (encoding|features)"),
    "split_composite_string": (r"group (id|size)", r"extract\w* \w+ (and \w+ )?from (a|the) \w+ (column|string)", r"split\w* (the )?['\"`]?\w+['\"`]? (column|string|feature|field) into",
                               r"split\w* (it |them )?into (deck|parts|components|group)", r"deck/num/side",
                               r"(group|passenger) ?id (prefix|part)"),
    "rare_level_grouping": (r"levels? that appear only in test", r"unseen (levels|categories)", r"rare (categor|level|value)", r"infrequent (categor|level|value)",
                            r"group\w* (the )?rare", r"(merg|lump)\w* (rare|infrequent|small)"),
    "drop_constant_columns": (r"constant (columns|features)", r"zero[- ]variance", r"single unique value",
                              r"drop\w* (the )?(quasi-)?constant"),
    "drop_id_columns": (r"drop\w* (the )?id\b", r"remov\w* (the )?id (column|feature)"),
    "binning": (r"\bbinning\b", r"\bbinned\b", r"discreti[sz]", r"bin\w* (the )?\w+ into (\d+ )?(bins|buckets|intervals)"),
    "winsorize_features": (r"winsori[sz]", r"clip\w* (the )?(extreme|outlier)", r"cap\w* (the )?(extreme|outlier)"),
    "standard_scale": (r"standard ?scal", r"standardi[sz]", r"z-?score", r"zero mean and unit variance"),
    "set_model": (r"\b(random forest|extra trees|logistic regression|ridge|lasso|elasticnet|catboost|xgboost|lightgbm|histgradientboosting|gbdt)\b.{0,40}(baseline|for |as |with |across)", r"\b(lightgbm|lgbm|xgboost|catboost)\b.{0,40}(baseline|first model|as the model|model of choice)",
                  r"(start|begin|use) \w* ?(with )?(a |an )?(lightgbm|lgbm|xgboost|catboost|gbdt)"),
    "loss_for_metric": (r"\b(l1|mae|absolute[- ]error) (loss|objective)", r"(loss|objective) (that )?match\w* the (evaluation |competition )?metric",
                        r"\bmedian regression\b", r"optimi[sz]\w* (the )?(mae|mean absolute error) directly"),
    "seed_bagging": (r"(averag|blend|ensembl|mean|bag)\w* (of |over |across |with )?(the )?(\d+|two|three|four|five|several|multiple|different) (random )?seeds",
                     r"(\d+|two|three|four|five|several|multiple|different) (random )?seeds", r"seed[- ](averag|bagg|ensembl|blend)"),
    "gbdt_params": (r"\bobjective", r"\bdart\b", r"\bloss\b.{0,40}\bmetric", r"num_leaves", r"min_child_(samples|weight)", r"colsample_bytree", r"max_depth",
                    r"(shallow|deep)(er)? trees", r"min_data_in_leaf"),
}
_COMPILED = {op: tuple(re.compile(cue) for cue in cues) for op, cues in CUES.items()}


@dataclass(frozen=True)
class RecipeMatch:
    op: str
    params: dict[str, Any]  # {} = the op's defaults (agent.knowledge.recipes applies them); no value is guessed from text
    confidence: float  # in [0, 1]
    evidence: str  # why: the cue that fired and the similarity to the op's description


def description_text(op: str) -> str:
    """What the trick is compared with: the op's name in words, its description and when it applies."""
    recipe = catalogue()[op]
    return f"{op.replace('_', ' ')}: {recipe.description}"


def cue_hits(text: str) -> dict[str, str]:
    """Ops whose cues occur in the text -> the matching words."""
    return {op: words for op, (words, _) in _cues(text).items()}


def _cues(text: str) -> dict[str, tuple[str, bool]]:
    """Ops whose cues occur in the text -> (the matching words, whether they are in the first sentence)."""
    lowered = " ".join(text.lower().split())
    first = re.split(r"(?<=[.!?:])\s", lowered, maxsplit=1)[0]
    hits = {}
    for op, patterns in _COMPILED.items():
        for pattern in patterns:
            found = pattern.search(lowered)
            if found:
                hits[op] = (found.group(0), found.start() < len(first))
                break
    # A more specific op wins over the general one its cue also fires.
    if "tfidf_svd" in hits:
        hits.pop("tfidf_text", None)
    if "log_target" in hits or "power_target" in hits:
        hits.pop("log_features", None)
    if "row_missing_count" in hits:
        hits.pop("missing_indicators", None)
    return hits


_DESCRIPTION_CACHE: dict[tuple[str, str], np.ndarray] = {}  # (model name, ops) -> description vectors


def _default_embedder():
    from kb.config import resolve_home
    from kb.embedding import default_embedder

    return default_embedder(resolve_home())


def _description_vectors(embedder, ops: Sequence[str]) -> np.ndarray:
    key = (str(getattr(embedder, "name", id(embedder))), "\n".join(ops))
    if key not in _DESCRIPTION_CACHE:
        _DESCRIPTION_CACHE[key] = np.asarray(embedder.embed([description_text(op) for op in ops]), dtype=np.float32)
    return _DESCRIPTION_CACHE[key]


def map_tricks(texts: Sequence[str], embedder=None, threshold: float = DEFAULT_THRESHOLD) -> list[RecipeMatch | None]:
    """Each text's recipe match, or None when no op reaches `threshold`."""
    texts = list(texts)
    if not texts:
        return []
    embedder = embedder if embedder is not None else _default_embedder()
    ops = list(catalogue())
    descriptions = _description_vectors(embedder, ops)
    vectors = np.asarray(embedder.embed([" ".join(text.split()) for text in texts]), dtype=np.float32)
    similarity = vectors @ descriptions.T
    matches: list[RecipeMatch | None] = []
    for text, row in zip(texts, similarity):
        hits = _cues(text)
        # A cue in the first sentence (a card's title, the trick itself) names the technique; later ones may be asides.
        scores = row + np.array([(CUE_BONUS if hits[op][1] else LATE_CUE_BONUS) if op in hits else 0.0 for op in ops])
        best = int(np.argmax(scores))
        confidence = float(np.clip(scores[best], 0.0, 1.0))
        if confidence < threshold:
            matches.append(None)
            continue
        op = ops[best]
        cue = f"cue {hits[op][0]!r}; " if op in hits else ""
        matches.append(RecipeMatch(op, {}, round(confidence, 4),
                                   f"{cue}similarity {row[best]:.3f} to the {op} description"))
    return matches


def map_trick(text: str, embedder=None, threshold: float = DEFAULT_THRESHOLD) -> RecipeMatch | None:
    """The recipe op a free-text trick describes, or None when none is close enough."""
    return map_tricks([text], embedder, threshold)[0]
