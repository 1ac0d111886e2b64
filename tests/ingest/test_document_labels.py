"""Issue 11: documents are labelled in context and every source's label evidence is scored by one rule."""

from __future__ import annotations

import json
import shutil

from ingest import ingest
from tests.conftest import WRITEUPS, need


def _ingest_neutral(make_kb, tmp_path, source):
    """Ingest one real write-up under a neutral name; return (document labels, its tricks)."""
    neutral = tmp_path / "corpus" / "doc_001.case"
    neutral.parent.mkdir()
    shutil.copy(need(source), neutral)
    base = make_kb()
    summary = ingest([str(neutral)], base)
    assert summary.ok, summary.to_dict()["failures"]
    return json.loads(base.documents()[0]["labels"]), list(base.export())


def test_neutral_nlp_writeup_is_nlp_and_its_tricks_inherit_it(make_kb, tmp_path):
    labels, tricks = _ingest_neutral(make_kb, tmp_path, WRITEUPS / "nlp_cases" / "commonlit-evaluate-student-summaries-1.case")
    assert labels[0].startswith("Natural Language Processing / ")
    assert tricks
    # every trick carries its document's labels first, including generic ones ("5-fold CV", "blend models")
    assert all(t.labels[: len(labels)] == tuple(labels) for t in tricks)


def test_neutral_time_series_writeup_is_sequential_modeling(make_kb, tmp_path):
    labels, tricks = _ingest_neutral(make_kb, tmp_path, WRITEUPS / "tsa_cases" / "m5-forecasting-accuracy-1.case")
    assert labels[0].startswith("Sequential Modeling / ")
    firsts = [t.labels[0].split(" / ")[0] for t in tricks]
    assert firsts.count("Sequential Modeling") == len(firsts)


def test_card_and_writeup_trick_with_same_text_get_the_same_label_score(make_kb, tmp_path):
    text = ("Fine-tune deberta-v3-large on the essays with a max length of 1024 tokens, "
            "layer-wise learning rate decay and mean pooling over the last hidden state.")
    writeup = tmp_path / "doc_001.md"
    writeup.write_text(
        "# Our solution\n\nWe predict essay scores from the student text.\n\n"
        f"## Model\n\n{text}\n\nWe trained with 5-fold cross-validation and averaged the folds.\n",
        encoding="utf-8",
    )
    base = make_kb()
    assert ingest([str(writeup)], base).ok
    trick = next(t for t in base.export() if t.text == text)
    label = trick.labels[0]
    cards = tmp_path / "cards.jsonl"
    cards.write_text(json.dumps({"id": "same-text-card", "text": text, "labels": [label], "stage": "modeling"}) + "\n",
                     encoding="utf-8")
    assert ingest([str(cards)], base).ok

    def score(trick_id):
        return base.catalog.execute(
            "SELECT score FROM trick_labels WHERE trick_id = ? AND label = ?", [trick_id, label]).fetchone()[0]

    assert score("same-text-card") == score(trick.id)
    assert score("same-text-card") < 1.0  # no fixed card bonus
