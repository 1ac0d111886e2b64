"""Ingest of the real corpus: counts, labels by folder, competitions, papers, cards, idempotence."""

from __future__ import annotations

import json
import shutil
from collections import Counter

from ingest import ingest
from tests.conftest import KNOWLEDGE, WRITEUPS, need


def _documents_by_folder(base):
    grouped: dict[str, list[list[str]]] = {}
    for row in base.documents():
        if "/kaggle_writeups/" in row["source"]:
            folder = row["source"].split("/")[-2]
            grouped.setdefault(folder, []).append([l.split(" / ")[0] for l in json.loads(row["labels"])])
    return grouped


def test_corpus_counts(corpus_kb):
    base, summary = corpus_kb
    assert summary.ok, summary.to_dict()["failures"]
    stats = base.stats()
    assert stats["documents_by_status"] == {"ok": stats["documents"]}
    writeups = [r for r in base.documents() if r["source"].endswith(".case")]
    assert len(writeups) == 186
    assert stats["tricks_by_kind"]["solution"] > 1200
    assert stats["tricks_by_kind"]["paper"] > 338  # a summary per paper plus technique tricks
    assert stats["competitions"] == 12
    # every write-up of the 12 competitions is attributed from its own name or text
    assert all(r["competition"] for r in writeups if r["n_tricks"])


def test_labels_follow_the_text(corpus_kb):
    base, _ = corpus_kb
    folders = _documents_by_folder(base)
    share = lambda docs, top: sum(top in tops for tops in docs) / len(docs)  # noqa: E731
    assert share(folders["tabular_cases"], "General Machine Learning") >= 0.9
    assert share(folders["nlp_cases"], "Natural Language Processing") >= 0.85
    assert share(folders["tsa_cases"], "Sequential Modeling") >= 0.6
    # and the first label of a tabular write-up is never a modality it does not have
    firsts = Counter(tops[0] for tops in folders["tabular_cases"])
    assert firsts.most_common(1)[0][0] == "General Machine Learning"


def test_label_comes_from_text_not_path(make_kb, tmp_path):
    """An NLP write-up saved under a tabular-looking name is still labelled NLP."""
    source = need(WRITEUPS / "nlp_cases" / "feedback-prize-2021-1.case")
    disguised = tmp_path / "tabular_cases" / "playground-series-tabular-regression.md"
    disguised.parent.mkdir()
    shutil.copy(source, disguised)
    base = make_kb()
    ingest([str(disguised)], base)
    labels = json.loads(base.documents()[0]["labels"])
    assert labels[0].startswith("Natural Language Processing")


def test_tricks_are_atomic_and_staged(corpus_kb):
    base, _ = corpus_kb
    tricks = [t for t in base.export() if t.kind == "solution" and t.source.endswith(".case")]
    lengths = sorted(len(t.text) for t in tricks)
    assert lengths[len(lengths) // 2] < 350  # median trick is a sentence or two, not a page
    assert max(lengths) <= 610
    stages = Counter(t.stage for t in tricks)
    assert len(stages) >= 6 and stages["modeling"] < 0.6 * len(tricks)
    assert not any("thank" in t.text.lower() and len(t.text) < 120 for t in tricks)


def test_places_are_read_from_writeups(corpus_kb):
    base, _ = corpus_kb
    ranked = {t.source.rsplit("/", 1)[-1]: t.rank for t in base.export() if t.rank}
    assert ranked["feedback-prize-effectiveness-team-hydrogen-1st-place.case"] == 1
    assert ranked["commonlit-evaluate-student-summaries-2nd-place-solution.case"] == 2


def test_papers_get_perspective_summaries(corpus_kb):
    base, _ = corpus_kb
    papers = [t for t in base.export() if t.kind == "paper"]
    summaries = [t for t in papers if t.text.count(": ") >= 2 and "Task:" in t.text]
    assert len(summaries) >= 338
    full = [t for t in papers if t.source.endswith("v1.json") or t.source.endswith("v2.json")]
    assert len(full) >= 10  # long full papers were chunked into several tricks each
    assert all(t.labels for t in papers)


def test_bundled_cards_keep_ids_labels_and_recipes(corpus_kb):
    base, _ = corpus_kb
    cards = [json.loads(line) for path in sorted(KNOWLEDGE.glob("*.jsonl")) for line in path.read_text().splitlines()]
    assert len(cards) >= 150
    stored = base.get(cards[0]["id"])
    assert stored is not None and stored.recipe == cards[0]["recipe"]
    assert list(stored.labels) == cards[0]["labels"]
    stats = base.stats()  # the cards' own recipes, and those compiled from the text of the other tricks
    assert stats["with_recipe"] == sum(1 for c in cards if c.get("recipe")) + stats["compiled_from_text"]
    with_recipe = base.get(next(c["id"] for c in cards if c.get("recipe")))
    assert with_recipe.recipe_why == "the card's own recipe" and with_recipe.recipe_confidence is None


def test_reingest_is_idempotent(corpus_kb):
    base, _ = corpus_kb
    before = base.count()
    again = ingest([str(WRITEUPS), str(KNOWLEDGE)], base)
    assert again.count("unchanged") == len(again.outcomes) and again.tricks == 0
    assert base.count() == before
    assert base.collection.count() == before


def test_changed_file_replaces_its_tricks(make_kb, tmp_path):
    original = need(WRITEUPS / "tabular_cases" / "playground-series-s3e1-ps-s3e1-coordinates-key-to-victory.case")
    copy = tmp_path / "writeup.md"
    shutil.copy(original, copy)
    base = make_kb()
    first = ingest([str(copy)], base)
    old_ids = {t.id for t in base.export()}
    assert first.count("added") == 1 and old_ids
    copy.write_text("# Revised\n\nWe trained LightGBM with 10-fold stratified CV and early stopping at 200 rounds.\n"
                    "Target encoding of the city column was computed inside each fold with smoothing 20.\n")
    second = ingest([str(copy)], base)
    assert second.count("updated") == 1
    new = list(base.export())
    assert {t.id for t in new}.isdisjoint(old_ids)
    assert base.collection.count() == len(new) == second.tricks
    assert any("Target encoding" in t.text for t in new)
