"""Free-text tricks to recipe ops: real write-up sentences, real chatter, and the bundled cards' own recipes."""

from __future__ import annotations

import json
import re

import pytest

from agent.knowledge.recipes import catalogue
from agent.knowledge.trick_mapping import RecipeMatch, cue_hits, map_trick, map_tricks
from tests.conftest import KNOWLEDGE, WRITEUPS, need


def _writeup_sentences() -> list[str]:
    sentences = []
    for path in sorted(need(WRITEUPS).rglob("*.case")):
        for line in path.read_text(encoding="utf-8", errors="ignore").splitlines():
            sentences += [s for s in re.split(r"(?<=[.!?])\s+", line.strip()) if 20 <= len(s) <= 400]
    return sentences


def _cards() -> list[dict]:
    return [json.loads(line) for path in sorted(KNOWLEDGE.glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# op -> a pattern picking write-up sentences about it, and the share of them that must map to the op.
WRITEUP_CASES = {
    "coordinate_rotation": (r"rotat\w*.{0,40}(coordinat|latitude|longitude)|(coordinat|latitude|longitude).{0,40}rotat", 1.0),
    "one_hot": (r"one-hot encod", 0.9),
    "frequency_encoding": (r"frequency encod|count ?frequency", 1.0),
    "binning": (r"\bbinning\b", 0.9),
    "standard_scale": (r"standardscaler|standard scal", 0.9),
    "early_stopping": (r"early[- ]stopping", 0.8),
    "group_stats": (r"groupby|group by", 0.8),
    "class_weights": (r"class[_ ]weight", 0.8),
    "seed_bagging": (r"(averag|blend|ensembl)\w* (of |over |across )?(\d+|two|three|several|multiple|different) (random )?seeds", 0.8),
}


def test_write_up_sentences_map_to_their_recipe(embedder):
    sentences = _writeup_sentences()
    for op, (pattern, floor) in WRITEUP_CASES.items():
        picked = sorted({s for s in sentences if re.search(pattern, s, re.IGNORECASE)})[:12]
        assert len(picked) >= 2, (op, picked)
        matches = map_tricks(picked, embedder)
        hits = sum(match is not None and match.op == op for match in matches)
        assert hits >= floor * len(picked), (op, [(s, m and m.op) for s, m in zip(picked, matches)])
    rotated = map_trick("- Rotated coordinates (15, 30, 45)", embedder)
    assert isinstance(rotated, RecipeMatch) and rotated.op == "coordinate_rotation"
    assert 0 < rotated.confidence <= 1 and "rotat" in rotated.evidence


def test_chatter_maps_to_nothing(embedder):
    sentences = _writeup_sentences()
    thanks = sorted({s for s in sentences if re.match(r"(thanks|thank you|congrat)", s, re.IGNORECASE)})[:30]
    assert len(thanks) >= 5
    matches = map_tricks(thanks, embedder)
    assert sum(match is None for match in matches) >= 0.9 * len(thanks), [
        (s, m.op) for s, m in zip(thanks, matches) if m is not None]
    assert map_trick("First - thanks for the fun competition, great public solutions and contributions!", embedder) is None


def test_card_sentences_for_text_and_log_tricks(embedder):
    """TF-IDF and log1p do not occur in the write-ups; the bundled cards' sentences about them do."""
    cases = {
        "Build a baseline in minutes: word 1-2 gram plus char 3-5 gram TF-IDF with sublinear tf, fed to logistic "
        "regression or ridge (tuning C or alpha by CV).": "tfidf_text",
        "Compress TF-IDF of a text column into 32-128 dense components with TruncatedSVD and give those to the GBDT; "
        "trees handle a few dense columns far better than a wide sparse matrix.": "tfidf_svd",
        "Train on log1p(target) when the metric is RMSLE or RMSE of logs": "log_target",
        "For ridge, lasso, logistic regression and MLPs, apply log1p to non-negative numeric features with absolute "
        "skew above about 0.75.": "log_features",
    }
    for text, op in cases.items():
        match = map_trick(text, embedder)
        assert match is not None and match.op == op, (text, match)
    assert "tfidf_svd" in cue_hits("TF-IDF then TruncatedSVD") and "tfidf_text" not in cue_hits("TF-IDF then TruncatedSVD")


def test_cards_recover_their_own_recipe_op(embedder):
    ops = catalogue()
    cards = [card for card in _cards() if card.get("recipe") and card["recipe"]["op"] in ops]
    assert len(cards) >= 50
    matches = map_tricks([f"{card['title']}. {card['text']}" for card in cards], embedder)
    correct = sum(match is not None and match.op == card["recipe"]["op"] for card, match in zip(cards, matches))
    accuracy = correct / len(cards)
    print(f"card recipe recovery: {correct}/{len(cards)} = {accuracy:.3f}")
    assert accuracy >= 0.85
    # Cards whose recipe is not executable (ensembles, search, vision...) mostly stay unmapped: all of them, since
    # a sample shifts whenever an op becomes executable.
    others = [card for card in _cards() if not card.get("recipe") or card["recipe"]["op"] not in ops]
    unmapped = sum(match is None for match in map_tricks([f"{c['title']}. {c['text']}" for c in others], embedder))
    print(f"non-executable cards left unmapped: {unmapped}/{len(others)}")
    assert unmapped >= 0.75 * len(others)


def test_empty_batch():
    assert map_tricks([], embedder=object()) == []


@pytest.mark.parametrize("text", ["", "   "])
def test_blank_text_maps_to_nothing(embedder, text):
    assert map_trick(text, embedder) is None
