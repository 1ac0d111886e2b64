"""Compile tricks at ingest: the recipe op a trick's text describes, with the parameters the text states.

The op (only ops the agent can run, kb.recipes.executable_ops: one change to a candidate, or the search's own
blend, rank average, stack and Optuna study) comes from two signals:
  - meaning: cosine similarity between the trick and the op's description in data/recipes.json;
  - wording: cues that name the technique ("count encoding", "tf-idf", "hill climbing", "optuna"...), far more
    precise than meaning alone when present; a parameter of the op that the text states is further evidence.
Parameters are read from the text under the op's own names in data/recipes.json: numbers with their names
("learning rate 0.01", "5000 trees", "num_leaves=31", "5 seeds", "100 trials", "smoothing 20"), ranges ("char
n-grams 2-5"), choices ("Box-Cox", "uniform bins", "median") and, for the op's column parameters only, the
column names it spells as identifiers ("split Cabin into...", "group by store_id"). A parameter the text does not
state stays at the op's default, which the agent applies. Each one records the words it was read from.
A trick whose best op stays under the threshold compiles to nothing: it stays readable knowledge and the ingest
report counts it; nothing is forced.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kb.recipes import NEEDS_PARAMS, executable_ops, recipe_specs

DEFAULT_THRESHOLD = 0.5
# Without a cue, meaning alone must be closer: generic sentences ("LightGBM is a gradient boosting framework") sit
# at 0.5-0.6 from the GBDT description and carry no technique.
SIMILARITY_ONLY_THRESHOLD = 0.6
# The agent runs these on gradient-boosted trees: a sentence about training a neural network ("Adam with a learning
# rate of 0.00005", "early stopping after 3 epochs") that names no GBDT is about something else.
GBDT_OPS = ("gbdt_params", "low_lr_more_trees", "early_stopping")
_NEURAL = re.compile(r"\b(epochs?|adamw?|optimi[sz]er|neural|transformers?|deberta|bert|roberta|lstm|gru|cnn|batch[ _]size|"
                     r"fine-?tun\w*|warm-?up|dropout|keras|torch|pytorch)\b")
_GBDT = re.compile(r"\b(lightgbm|lgbm|lgb|xgb\w*|catboost|gbdt|gbm|\w*boost\w*|trees?|num_leaves|n_estimators|estimators|"
                   r"leaves|max_depth|depth|colsample\w*|subsample|l2_leaf_reg|min_child\w*|num_boost_round)\b")
CUE_BONUS = 0.35  # added to the similarity of an op whose cue the text's first sentence contains
LATE_CUE_BONUS = 0.2  # ... whose cue only a later sentence contains
PARAM_BONUS = 0.05  # ... and for each parameter of a cued op the text states (up to MAX_PARAM_BONUS)
MAX_PARAM_BONUS = 0.15

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
                               r"split\w* (the )?\w+ into (\w+, )+(\w+ )?and \w+",
                               r"(group|passenger) ?id (prefix|part)"),
    "rare_level_grouping": (r"levels? that appear only in test", r"unseen (levels|categories)", r"rare (categor|level|value)", r"infrequent (categor|level|value)",
                            r"group\w* (the )?rare", r"(merg|lump)\w* (rare|infrequent|small)"),
    "drop_constant_columns": (r"constant (columns|features)", r"zero[- ]variance", r"single unique value",
                              r"drop\w* (the )?(quasi-)?constant"),
    "drop_id_columns": (r"drop\w* (the )?id\b", r"remov\w* (the )?id (column|feature)"),
    "binning": (r"\bbinning\b", r"\bbinned\b", r"discreti[sz]", r"bin\w* (the )?\w+ into (\d+ )?(bins|buckets|intervals)"),
    "winsorize_features": (r"winsori[sz]", r"clip\w* (the )?(extreme|outlier)", r"cap\w* (the )?(extreme|outlier)",
                           r"(clip|cap)\w* .{0,40}(percentile|quantile)"),
    "standard_scale": (r"standard ?scal", r"standardi[sz]", r"z-?score", r"zero mean and unit variance"),
    "set_model": (r"\b(random forest|extra trees|logistic regression|ridge|lasso|elasticnet|catboost|xgboost|lightgbm|histgradientboosting|gbdt)\b.{0,40}(baseline|as |with |across)", r"\b(lightgbm|lgbm|xgboost|catboost)\b.{0,40}(baseline|first model|as the model|model of choice)",
                  r"(start|begin|use) \w* ?(with )?(a |an )?(lightgbm|lgbm|xgboost|catboost|gbdt)"),
    "loss_for_metric": (r"\b(l1|mae|absolute[- ]error) (loss|objective)", r"(loss|objective) (that )?match\w* the (evaluation |competition )?metric",
                        r"\bmedian regression\b", r"optimi[sz]\w* (the )?(mae|mean absolute error) directly"),
    "seed_bagging": (r"(averag|blend|ensembl|mean|bag)\w* (of |over |across |with )?(the )?(\d+|two|three|four|five|several|multiple|different) (random )?seeds",
                     r"(\d+|two|three|four|five|several|multiple|different) (random )?seeds", r"seed[- ](averag|bagg|ensembl|blend)"),
    "gbdt_params": (r"\bobjective\s*[=:]", r"(tweedie|poisson|huber|quantile|gamma) (loss|objective)", r"\bdart\b", r"\bloss\b.{0,40}\bmetric", r"num_leaves", r"min_child_(samples|weight)", r"colsample_bytree", r"max_depth",
                    r"(shallow|deep)(er)? trees", r"min_data_in_leaf", r"n_estimators", r"num_boost_round", r"reg_(alpha|lambda)",
                    r"lambda_l[12]", r"l2_leaf_reg", r"(feature|bagging)_fraction", r"\bsubsample\b",
                    r"\bdepth (of |=|: ?)?\d", r"learning[ _]rate (of |=|: ?)?0?\.\d"),
    # The search's own ops: its final combination of nodes and its Optuna study.
    "hill_climbing_ensemble": (r"hill[- ]?climb", r"greedy (ensemble|forward|model)? ?selection", r"caruana",
                               r"ensemble selection"),
    "average_ensemble": (r"\bblend(s|ed|ing)?\b", r"weighted (averag|mean|ensemble|sum)", r"(simple|plain|equal[- ]weight\w*) (average|mean)",
                         r"averag\w* (of |the )?(the )?(predictions|outputs|models|oofs?)\b", r"ensembl\w* (of |the )?(\w+ ){0,3}(models|predictions)"),
    "rank_average_ensemble": (r"rank[- ]?(averag|ensembl|blend|mean|based blend)", r"averag\w* (of )?(the )?ranks"),
    "stacking_linear": (r"\bstack(ed|ing)?\b(?!.{0,40}\b(layers?|blocks?|modules?|convolutions?)\b)", r"meta[- ]?(model|learner)", r"(second|2nd)[- ]level model", r"level[- ]?2 model"),
    "optuna_search": (r"\boptuna\b", r"bayesian (hyper-?parameter )?optimi[sz]", r"\bhyperopt\b", r"\btpe\b",
                      r"hyper-?parameters? (were |was )?(tuned|searched|optimi[sz]ed) (with|by|using)"),
}
_COMPILED = {op: tuple(re.compile(cue) for cue in cues) for op, cues in CUES.items()}
# Just before a cue: "no stacking/blending" is not a technique, nor the loser of "works better than Standard Scaler".
_NEGATION = re.compile(r"\b(no|not|without|never|than|instead of)\b")
# A sentence that reports its technique failed is knowledge to read, not a recipe to run.
# ("does not improve" stays: it is how early stopping is described.)
_REJECTED = re.compile(r"\b(poor results|did ?n[o']t (help|work|improve)|does ?n[o']t (help|work)|"
                       r"no (improvement|gain|boost)|no (high |big |real |significant )?effect|"
                       r"made (it|things|the \w+) worse)\b")
# Seeds that measure rather than average: repeated splits, experiments reported over seeds ("each experiment with 4
# different seeds and report the mean"). Such a text is seed bagging only when it also averages predictions or models.
_SEEDS_MEASURE = re.compile(r"\b(report\w*|statistics?|experiments?|splits?|\w*k-?fold|cross-validation|"
                            r"standard (deviation|error)|std)\b")
_SEEDS_AVERAGE = re.compile(r"\b(ensembl\w*|bag\w*|blend\w*|predictions?|predictors?|submission|"
                            r"averag\w* (of |over |the )*(models|seeds|outputs))\b")
# A more specific op wins over the general one its cue also fires: op -> the ops it silences.
# (The model named beside an ensemble or a parameter set is one of its members, or the family the parameters are for.)
_SPECIFIC = {
    "tfidf_svd": ("tfidf_text",),
    "log_target": ("log_features",),
    "power_target": ("log_features",),
    "row_missing_count": ("missing_indicators",),
    "seed_bagging": ("average_ensemble", "set_model"),
    "hill_climbing_ensemble": ("average_ensemble", "set_model"),
    "rank_average_ensemble": ("average_ensemble", "set_model"),
    "average_ensemble": ("set_model",),
    "stacking_linear": ("set_model",),
    "gbdt_params": ("set_model",),
}


@dataclass(frozen=True)
class CompiledRecipe:
    """A trick compiled to a recipe op: its parameters as the text states them, and why."""

    op: str
    params: Mapping[str, Any]  # only what the text states; the op's defaults (data/recipes.json) fill the rest
    confidence: float  # in [0, 1]
    why: str  # the cue that fired, the similarity to the op's description, each parameter with its words
    cue: str = ""  # the words that name the technique, "" when meaning alone chose the op
    rejected: bool = False  # the text reports that the technique did not help

    def ref(self) -> dict[str, Any]:
        """The recipe ref a trick stores: {"op", "params"} (kb.records.Trick.recipe)."""
        return {"op": self.op, "params": dict(self.params)}


# ---- parameters


@dataclass(frozen=True)
class Number:
    """A number named in the text: `after` names it before its value ("learning rate 0.01", "num_leaves=31"),
    `before` after it ("5000 trees", "5-fold"). Values outside [low, high] are some other number."""

    after: str = ""
    before: str = ""
    low: float = -math.inf
    high: float = math.inf
    percent: bool = False  # "80%" means 0.8
    not_after: str = ""  # words that, just before the number, make it another parameter's ("stopping ... 100 rounds")


@dataclass(frozen=True)
class Choice:
    """One of an op's values, each named by a pattern: the one the text names first (ties: this order)."""

    values: Mapping[str, str]


@dataclass(frozen=True)
class Several:
    """Some of an op's values (models, aggregations, calendar parts), in the order the text names them."""

    values: Mapping[str, str]
    at_least: int = 1


@dataclass(frozen=True)
class Flag:
    """True when the text says so."""

    pattern: str


@dataclass(frozen=True)
class Columns:
    """Column names the text spells as identifiers after `after` ("group by store_id and dept_id")."""

    after: str
    many: bool = False


@dataclass(frozen=True)
class Special:
    """A parameter with its own reader: text -> (value, the words it came from) or None."""

    read: Callable[[str], tuple[Any, str] | None] = field(repr=False)
    cased: bool = False  # reads the text as written (column names), not lower-cased


Reader = Number | Choice | Several | Flag | Columns | Special

_INTEGER = r"(?:\d{1,3}(?:,\d{3})+|\d+)"  # 10,000 or 10000
_NUMBER = rf"(-?{_INTEGER}(?:\.\d+)?(?:e-?\d+)?|-?\.\d+)(\s?k\b|\s?%)?"
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
          "ten": 10, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "fifty": 50, "hundred": 100}
_COUNT = rf"({_INTEGER}(?:\.\d+)?|{'|'.join(_WORDS)})(\s?k\b)?"
_LINK = r"\s*(?:[:=]|\(|\bof\b|\bis\b|\bto\b|\bat\b|\bwas\b|\bset to\b|\baround\b|\babout\b|~|≈)?\s*(?:about |around |~)?"
# Capitalised words that are not column names.
_NOT_COLUMNS = {"lightgbm", "lgbm", "xgboost", "xgb", "catboost", "gbdt", "cv", "nan", "nans", "na", "the", "a", "an",
                "and", "or", "each", "every", "all", "it", "them", "this", "that", "these", "those", "our", "their",
                "train", "test", "data", "target", "feature", "features", "column", "columns", "tf-idf", "svd", "pca",
                "knn", "mlp", "nn", "gpu", "cpu", "kfold", "k-fold", "optuna", "deberta", "bert", "roberta", "i", "we"}
_IDENTIFIER = r"['\"]?([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)*|[a-z]+[A-Z][A-Za-z0-9]*)['\"]?"
_QUOTED = r"['\"]([A-Za-z][\w ]{0,30}?)['\"]"


def _to_number(value: str, suffix: str | None) -> float | None:
    value = value.replace(",", "")
    try:
        number = float(_WORDS.get(value.lower(), value))
    except ValueError:
        return None
    suffix = (suffix or "").strip().lower()
    return number * 1000 if suffix == "k" else number / 100 if suffix == "%" else number


def _read_number(reader: Number, text: str, default: Any) -> tuple[Any, str] | None:
    integral = isinstance(default, int) and not isinstance(default, bool)
    candidates = []
    if reader.after:
        candidates += re.finditer(rf"(?:{reader.after}){_LINK}{_NUMBER}", text)
    if reader.before:
        candidates += re.finditer(rf"\b{_COUNT}\s?-?\s?(?:{reader.before})", text)
    for found in sorted(candidates, key=lambda match: match.start()):
        value = _to_number(found.group(found.re.groups - 1), found.group(found.re.groups))
        if value is None or (found.group(found.re.groups) or "").strip() == "%" and not reader.percent:
            continue
        if reader.not_after and re.search(reader.not_after, text[max(0, found.start() - 30):found.start()]):
            continue
        if not reader.low <= value <= reader.high or integral and value != int(value):
            continue
        return (int(value) if integral else float(value)), found.group(0).strip()
    return None


def _read(reader: Reader, text: str, original: str, default: Any) -> tuple[Any, str] | None:
    """(value, the words it came from) or None; `text` is lower-cased, `original` as written."""
    if isinstance(reader, Number):
        return _read_number(reader, text, default)
    if isinstance(reader, Choice):
        named = [(found.start(), order, value, found.group(0)) for order, (value, pattern) in enumerate(reader.values.items())
                 for found in [re.search(pattern, text)] if found]
        return min(named)[2:] if named else None
    if isinstance(reader, Several):
        named = sorted((found.start(), value, found.group(0)) for value, pattern in reader.values.items()
                       for found in [re.search(pattern, text)] if found)
        if len(named) < reader.at_least:
            return None
        return [value for _, value, _ in named], " … ".join(words for _, _, words in named)
    if isinstance(reader, Flag):
        found = re.search(reader.pattern, text)
        return (True, found.group(0)) if found else None
    if isinstance(reader, Columns):
        return _read_columns(reader, original)
    return reader.read(original if reader.cased else text)


def _read_columns(reader: Columns, original: str) -> tuple[Any, str] | None:
    """Column names after the reader's words, in the text's own spelling: identifiers (snake_case, CamelCase,
    a capitalised word) or quoted names; plain lower-case words are too often not columns."""
    for found in re.finditer(rf"(?:{reader.after})\s+(?:the\s+)?", original, re.IGNORECASE):
        rest = original[found.end():found.end() + 120]
        names = []
        while True:
            token = re.match(rf"{_QUOTED}|{_IDENTIFIER}", rest)
            if not token or (token.group(1) or token.group(2)).lower() in _NOT_COLUMNS:
                break
            names.append(token.group(1) or token.group(2))
            joint = re.match(r"\s*(?:,\s*(?:and\s+)?|and\s+|&\s*|/\s*)", rest[token.end():])
            if not reader.many or not joint:
                break
            rest = rest[token.end() + joint.end():]
        if names:
            return (names if reader.many else names[0]), f"{found.group(0)}{', '.join(names)}".strip()
    return None


def _ngram_range(text: str) -> tuple[Any, str] | None:
    patterns = (
        r"n-?gram_?range\s*[=:]?\s*\(?\s*(\d+)\s*,\s*(\d+)",
        r"(?:n-?grams?|grams?)\s*(?:of\s+|from\s+|in\s+|range\s+|\()?\s*(?:length\s+)?(\d+)\s*(?:-|–|to|,|\.\.)\s*(\d+)",
        r"\b(\d+)\s*(?:-|–|to)\s*(\d+)[- ]?(?:char(?:acter)?[- ]?|word[- ]?)?(?:n-?)?grams?",
    )
    for pattern in patterns:
        found = re.search(pattern, text)
        if found:
            low, high = int(found.group(1)), int(found.group(2))
            if 1 <= low <= high <= 10:
                return [low, high], found.group(0)
    named = [(words, size) for words, size in (("unigram", 1), ("bigram", 2), ("trigram", 3)) if words in text]
    if named:
        sizes = [size for _, size in named]
        return [min(sizes), max(sizes)], " and ".join(words + "s" for words, _ in named)
    return None


def _quantile_bounds(text: str) -> tuple[tuple[float, float], str] | None:
    """Clip bounds as percentiles ("1st and 99th percentiles") or quantiles ("[0.01, 0.99] quantiles")."""
    found = re.search(r"(\d+(?:\.\d+)?)(?:st|nd|rd|th|%)?\s*(?:and|-|–|to)\s*(\d+(?:\.\d+)?)(?:st|nd|rd|th|%)?\s*percentiles?", text)
    if found:
        low, high = float(found.group(1)) / 100, float(found.group(2)) / 100
    else:
        found = re.search(r"[\[(]?\s*(0?\.\d+)\s*,\s*(0?\.\d+)\s*[\])]?\s*quantiles?|quantiles?\s*(?:of\s+)?[\[(]?\s*(0?\.\d+)\s*(?:,|and|to)\s*(0?\.\d+)", text)
        if not found:
            return None
        low, high = (float(value) for value in (found.group(1) or found.group(3), found.group(2) or found.group(4)))
    return ((low, high), found.group(0)) if 0 <= low < high <= 1 else None


def _bound(which: int) -> Special:
    def read(text: str) -> tuple[Any, str] | None:
        found = _quantile_bounds(text)
        return (found[0][which], found[1]) if found else None

    return Special(read)


def _angles(text: str) -> tuple[Any, str] | None:
    found = re.search(r"rotat\w*[^.]{0,40}?[(\[]?((?:\d{1,2}(?:\.\d+)?\s*(?:°|degrees?)?\s*(?:,|and|/)\s*)+\d{1,2}(?:\.\d+)?)\s*(?:°|degrees?)?", text)
    if not found:
        return None
    angles = [float(value) for value in re.findall(r"\d{1,2}(?:\.\d+)?", found.group(1))]
    return (angles, found.group(0)) if len(angles) >= 2 and all(0 < angle < 90 for angle in angles) else None


def _coordinates(which: str) -> Special:
    """A latitude or longitude column named as an identifier (pickup_latitude, Lat, lon)."""
    pattern = {"lat": r"\b([A-Za-z]+_lat(?:itude)?|lat(?:itude)?_[A-Za-z]+|Lat(?:itude)?)\b",
               "lon": r"\b([A-Za-z]+_lo?ng?(?:itude)?|lo?ng?(?:itude)?_[A-Za-z]+|Lon(?:gitude)?|Lng)\b"}[which]

    def read(text: str) -> tuple[Any, str] | None:
        found = re.search(pattern, text)
        return (found.group(1), found.group(0)) if found else None

    return Special(read, cased=True)


_MODELS = {"lightgbm": r"\blightgbm|\blgbm|\blgb\b", "xgboost": r"\bxgboost|\bxgb\b", "catboost": r"\bcatboost",
           "random_forest": r"random ?forest|\brf\b", "extra_trees": r"extra ?trees",
           "hist_gradient_boosting": r"histgradientboosting|hist gradient boosting",
           "linear": r"\bridge\b|logistic regression|\blasso\b|linear regression"}
_RATE = Number(after=r"learning[ _-]?rates?|\blr\b|\beta\b", low=1e-3, high=1.0)  # a GBDT's; networks' are smaller
_TREES = Number(after=r"n_estimators|num_boost_round|num_iterations|num_rounds|nrounds|number of (?:trees|estimators|"
                      r"boosting rounds|iterations)|iterations",
                before=r"(?:boosting )?(?:trees|estimators|boosting (?:rounds|iterations)|iterations|rounds)\b",
                low=10, high=1e6, not_after=r"stop|patience")
_STOP_ROUNDS = Number(after=r"early[_ -]?stopping[_ -]?rounds|early[- ]stop\w*(?: (?:of|with|at|after|patience))?"
                            r"|patience",
                      before=r"(?:rounds|iterations|epochs) (?:of|without|with no) (?:improvement|early)", low=1, high=1e5)

# Readers by parameter name, for every op that has the parameter; `_OP_READERS` overrides one op's.
_READERS: dict[str, Reader] = {
    "learning_rate": _RATE,
    "n_estimators": _TREES,
    "num_leaves": Number(after=r"num_leaves|max_leaves|number of leaves", before=r"leaves", low=2, high=1e5),
    "max_depth": Number(after=r"max_depth|max(?:imum)? depth|depth", before=r"(?:levels? )?deep\b", low=1, high=64),
    "min_child_samples": Number(after=r"min_child_samples|min_data_in_leaf|min_samples_leaf", low=1, high=1e5),
    "subsample": Number(after=r"(?<!column )subsample(?: ratio)?|bagging_fraction|row sampling", low=0.05, high=1.0,
                        percent=True),
    "colsample_bytree": Number(after=r"colsample_bytree|feature_fraction|column sampling|column subsample(?: ratio)?",
                               low=0.05, high=1.0, percent=True),
    "reg_alpha": Number(after=r"reg_alpha|lambda_l1|l1 regulari[sz]ation", low=0, high=1e4),
    "reg_lambda": Number(after=r"reg_lambda|lambda_l2|l2_leaf_reg|l2 regulari[sz]ation|regulari[sz]ation lambda", low=0,
                         high=1e4),
    "preset": Choice({"shallow": r"shallow(?:er)? trees", "deep": r"deep(?:er)? trees",
                      "regularized": r"(?:strong|heav\w*|more) regulari[sz]"}),
    # "objective 'quantile'", "quantile loss", "Tweedie objective": the objectives a GBDT takes (agent.knowledge.model_recipes)
    "objective": Choice({name: rf"\bobjective\W{{0,4}}{words}|\b{words} (?:loss|objective|regression)" for name, words in
                         (("tweedie", "tweedie"), ("poisson", "poisson"), ("huber", "huber"), ("quantile", "quantile"),
                          ("gamma", "gamma"), ("mae", "(?:l1|mae)"))}),
    "boosting_type": Choice({"dart": r"\bdart\b"}),
    "early_stopping_rounds": _STOP_ROUNDS,
    "rounds": _STOP_ROUNDS,
    "n_seeds": Number(before=r"(?:different |random )*seeds?\b", after=r"n_seeds|number of seeds", low=2, high=200),
    "ngram_range": Special(_ngram_range),
    "analyzer": Choice({"char_wb": r"char_wb", "char": r"char(?:acter)?[- ]?(?:level|n-?grams?|grams?|\d)",
                        "word": r"word[- ]?(?:level|n-?grams?|grams?|\d)"}),
    "max_features": Number(after=r"max_features|vocabulary (?:size )?(?:of|to)|top", before=r"(?:terms|tokens|words|"
                                                                                          r"features)", low=100, high=1e7),
    "min_df": Number(after=r"min_df|minimum document frequency", low=1, high=1e4),
    "n_components": Number(after=r"n_components|svd (?:to|with)|reduced? to", before=r"(?:svd |dense |latent )?"
                                                                                     r"(?:components|dimensions|dims)",
                           low=2, high=5000),
    "smoothing": Number(after=r"smoothing(?: factor| parameter)?", low=0, high=1e5),
    "n_inner_folds": Number(before=r"(?:inner )?folds?\b", low=2, high=20),
    "n_bins": Number(before=r"(?:equal[- ]\w+ |quantile |uniform )?(?:bins|buckets|intervals)", after=r"n_bins",
                     low=2, high=1000),
    "strategy": Choice({"quantile": r"quantile (?:bins|binning)|equal[- ]frequency", "uniform": r"uniform (?:bins|binning)|equal[- ]width"}),
    "max_levels": Number(after=r"(?:fewer|less) than|at most|up to|max_categories", before=r"(?:unique )?(?:levels|categories|values)",
                         low=2, high=1000),
    "min_count": Number(after=r"(?:fewer|less) than|min_count|below", before=r"(?:times|occurrences|rows|samples)", low=1, high=1e5),
    "method": Choice({"box-cox": r"box[- ]?cox", "yeo-johnson": r"yeo[- ]?johnson"}),
    "output_distribution": Choice({"uniform": r"\buniform\b", "normal": r"\bnormal\b|gauss"}),
    "n_quantiles": Number(after=r"n_quantiles", low=10, high=1e5),
    "skew_threshold": Number(after=r"skew(?:ness)? (?:above|over|greater than|>|of more than)", low=0.1, high=10),
    "lower_q": _bound(0),
    "upper_q": _bound(1),
    "angles": Special(_angles),
    "lat_col": _coordinates("lat"),
    "lon_col": _coordinates("lon"),
    "parts": Several({"year": r"\byears?\b", "month": r"\bmonths?\b", "day": r"\bday of (?:the )?month|\bday\b(?! of)",
                      "dayofweek": r"day ?of ?(?:the )?week|weekday", "dayofyear": r"day ?of ?(?:the )?year",
                      "hour": r"\bhours?\b", "is_weekend": r"weekend"}, at_least=2),
    "aggs": Several({"mean": r"\bmean\b|\baverage\b", "std": r"\bstd\b|standard deviation", "count": r"\bcount\b",
                     "min": r"\bmin(?:imum)?\b", "max": r"\bmax(?:imum)?\b", "median": r"\bmedian\b",
                     "sum": r"\bsum\b", "nunique": r"nunique|number of unique"}),
    "group_cols": Columns(r"group(?:ed|ing)?[ -]?by|grouped over|aggregat\w* (?:over|per|by)|for each|within each|per", many=True),
    "agg_cols": Columns(r"(?:mean|average|std|median|sum|max|min) (?:of|for)", many=True),
    "column": Columns(r"split(?:ting|s)?(?: up)?(?: the)?(?: column)?|extract\w* \w+ (?:and \w+ )?from(?: the)?"),
    "columns": Columns(r"bin(?:ning|ned|s)?(?: the)?", many=True),
    "stats": Several({"n_chars": r"(?:number|count) of char|char(?:acter)? count|text length|length of the",
                      "n_words": r"(?:number|count) of words|word count", "n_unique_words": r"unique words",
                      "upper_ratio": r"upper ?case|capital", "n_digits": r"digits", "n_punct": r"punctuation"}),
    "model": Choice(_MODELS),
    "models": Several(_MODELS, at_least=2),
    "space": Choice({"log": r"log[- ]space|geometric mean"}),
    "meta_model": Choice({"logistic": r"logistic regression", "ridge": r"\bridge\b|linear regression|linear model"}),
    "n_trials": Number(after=r"n_trials|number of trials", before=r"(?:optuna )?trials", low=2, high=1e5),
    "max_iters": Number(after=r"max_iters", low=2, high=1e4),
    "min_missing_frac": Number(after=r"more than|over|at least", before=r"(?:of )?(?:values )?missing", low=0.0,
                               high=0.99, percent=True),
    "count_zeros": Flag(r"(?:number|count) of zeros|zeros? (?:count|per row)"),
    "numeric": Flag(r"numeric(?:al)? (?:columns|features|variables)"),
    "max_cat_to_onehot": Number(after=r"max_cat_to_onehot", low=1, high=1e3),
    "cat_smooth": Number(after=r"cat_smooth", low=0, high=1e4),
    "min_data_per_group": Number(after=r"min_data_per_group", low=1, high=1e5),
    "max_weight": Number(after=r"(?:max(?:imum)? (?:class )?weight|capped at|cap of)", low=1, high=1e4),
    "fill_value": Number(after=r"fill\w*(?: \w+){0,4}? (?:with|by|as)|fillna\(", low=-1e9, high=1e9),
    "offset": Number(after=r"offset|log\(\s*(?:y|target|price)\s*\+", low=1e-9, high=1e6),
}
_OP_READERS: dict[tuple[str, str], Reader] = {
    ("impute_numeric", "strategy"): Choice({"median": r"\bmedian", "mean": r"\bmean\b|\baverage", "constant": r"\bconstant|fill\w* (?:\w+ ){0,4}?(?:with|by|as) -?\d"}),
    ("impute_categorical", "strategy"): Choice({"most_frequent": r"most frequent|\bmode\b", "constant": r"\bconstant|(?:new|own|separate) (?:level|category)"}),
    ("impute_categorical", "fill_value"): Special(lambda text: (lambda found: (found.group(1), found.group(0)) if found else None)(
        re.search(r"(?:with|as|by) (?:a |the )?(?:level |category |string )?['\"]([^'\"]{1,20})['\"]", text))),
    ("stacking_linear", "alpha"): Number(after=r"alpha", low=1e-6, high=1e6),
    ("optuna_search", "timeout_s"): Special(lambda text: (lambda found: (
        float(found.group(1)) * {"h": 3600, "m": 60, "s": 1}[found.group(2)[0]], found.group(0)) if found else None)(
        re.search(r"(\d+(?:\.\d+)?) ?(hours?|hrs?\b|minutes?|mins?\b|seconds?)", text))),
}


def read_params(op: str, text: str) -> tuple[dict[str, Any], list[str]]:
    """The parameters of `op` (data/recipes.json names) the text states, and the words each was read from."""
    spec = recipe_specs()[op]
    original = " ".join(text.split())
    lowered = original.lower()
    params: dict[str, Any] = {}
    evidence: list[str] = []
    for name, default in spec.params.items():
        reader = _OP_READERS.get((op, name)) or _READERS.get(name)
        if reader is None or isinstance(reader, Columns) and name not in spec.column_params:
            continue
        found = _read(reader, lowered, original, default)
        if found is None:
            continue
        value, words = found
        params[name] = list(value) if isinstance(value, tuple) else value
        evidence.append(f"{name}={params[name]!r} from {words!r}")
    if op == "impute_numeric" and "fill_value" in params:  # a fill value means a constant fill
        params["strategy"] = "constant"
    return params, evidence


# ---- ops


def description_text(op: str) -> str:
    """What a trick is compared with: the op's name in words and its description."""
    return f"{op.replace('_', ' ')}: {recipe_specs()[op].description}"


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
            found = next((found for found in pattern.finditer(lowered)
                          if not _NEGATION.search(lowered[max(0, found.start() - 12):found.start()])), None)
            if found:
                hits[op] = (found.group(0), found.start() < len(first))
                break
    if "seed_bagging" in hits and _SEEDS_MEASURE.search(lowered) and not _SEEDS_AVERAGE.search(lowered):
        hits.pop("seed_bagging")
    for specific, general in _SPECIFIC.items():
        if specific in hits:
            for op in general:
                hits.pop(op, None)
    return hits


class TrickCompiler:
    """Compiles tricks with one embedder; the op descriptions are embedded once per compiler."""

    def __init__(self, embedder, threshold: float = DEFAULT_THRESHOLD):
        self.embedder = embedder
        self.threshold = threshold
        self.ops = list(executable_ops())
        self._gbdt = np.array([op in GBDT_OPS for op in self.ops])
        self._descriptions: np.ndarray | None = None

    def _description_vectors(self) -> np.ndarray:
        if self._descriptions is None:
            self._descriptions = np.asarray(self.embedder.embed([description_text(op) for op in self.ops]),
                                            dtype=np.float32)
        return self._descriptions

    def best(self, texts: Sequence[str], vectors: np.ndarray | None = None) -> list[CompiledRecipe | None]:
        """Each text's best op with its confidence, however low (None for a blank text)."""
        texts = [" ".join(text.split()) for text in texts]
        if not texts:
            return []
        if vectors is None:
            vectors = self.embedder.embed(texts)
        similarity = np.asarray(vectors, dtype=np.float32) @ self._description_vectors().T
        results: list[CompiledRecipe | None] = []
        for text, row in zip(texts, similarity):
            if not text:
                results.append(None)
                continue
            hits = _cues(text)
            lowered = text.lower()
            about_networks = bool(_NEURAL.search(lowered)) and not _GBDT.search(lowered)
            if about_networks:
                for op in GBDT_OPS:
                    hits.pop(op, None)
            read = {op: read_params(op, text) for op in hits}
            # An op that keeps every parameter another cued op would and more is what the text describes
            # ("learning rate 0.01, 5000 trees and num_leaves 31" is a parameter set, not only a lower rate).
            for op, (params, _) in list(read.items()):
                if any(set(params) < set(other) for other, _ in read.values()):
                    hits.pop(op)
                    read.pop(op)
            # A cue in the first sentence (a card's title, the trick itself) names the technique; later ones may be
            # asides. Each parameter the text states for a cued op is one more sign that the op is meant.
            bonus = np.array([(CUE_BONUS if hits[op][1] else LATE_CUE_BONUS)
                              + min(MAX_PARAM_BONUS, PARAM_BONUS * len(read[op][0])) if op in hits else 0.0
                              for op in self.ops])
            scores = np.where(self._gbdt, -np.inf, row + bonus) if about_networks else row + bonus
            best = int(np.argmax(scores))
            op = self.ops[best]
            params, evidence = read.get(op) or read_params(op, text)
            cue = f"cue {hits[op][0]!r}; " if op in hits else ""
            stated = f"; {'; '.join(evidence)}" if evidence else "; parameters at the op's defaults"
            results.append(CompiledRecipe(op, params, round(float(np.clip(scores[best], 0.0, 1.0)), 4),
                                          f"{cue}similarity {row[best]:.3f} to the {op} description{stated}",
                                          hits[op][0] if op in hits else "", bool(_REJECTED.search(lowered))))
        return results

    def compile(self, texts: Sequence[str], vectors: np.ndarray | None = None) -> list[CompiledRecipe | None]:
        """Each text's recipe, or None when it is not good enough (see `good`)."""
        return [match if self.good(match) else None for match in self.best(texts, vectors)]

    def good(self, match: CompiledRecipe | None) -> bool:
        """Confident enough to store (see `shortfall`)."""
        return self.shortfall(match) is None

    def shortfall(self, match: CompiledRecipe | None) -> str | None:
        """Why a best match is not stored, None when it is: it must reach the threshold with a cue and
        SIMILARITY_ONLY_THRESHOLD without one, an op of NEEDS_PARAMS needs a stated parameter, and the text must not
        report that the technique failed."""
        if match is None:
            return "blank text"
        if match.rejected:
            return f"the text reports that {match.op} did not help"
        if match.op in NEEDS_PARAMS and not match.params:
            return f"names {match.op} but states no parameter"
        bar = self.threshold if match.cue else max(self.threshold, SIMILARITY_ONLY_THRESHOLD)
        if match.confidence < bar:
            return f"nearest op {match.op} at confidence {match.confidence:.2f} < {bar}{'' if match.cue else ' (no cue)'}"
        return None


def compile_trick(text: str, embedder, threshold: float = DEFAULT_THRESHOLD) -> CompiledRecipe | None:
    """The recipe a free-text trick describes, or None when no op is close enough."""
    return TrickCompiler(embedder, threshold).compile([text])[0]
