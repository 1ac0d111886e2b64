"""Issue 11: documents are labelled in context and every source's label evidence is scored by one rule."""

from __future__ import annotations

import json
import shutil

from ingest import ingest
from kb.labeller import HierarchicalLabeller
from tests.conftest import PAPERS, WRITEUPS, need


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


def test_neutral_gbdt_writeup_on_sales_and_calendar_data_is_sequential_modeling(make_kb, tmp_path):
    # LightGBM, RMSE and hyperparameters everywhere; only "sales, prices, and calendar information" says time series
    labels, _ = _ingest_neutral(
        make_kb, tmp_path, WRITEUPS / "tsa_cases" / "m5-forecasting-accuracy-light-gbm-m5-forecasting-accuracy-forcasting.case")
    assert labels[0].startswith("Sequential Modeling / ")


def test_code_names_count_as_cue_words(make_kb):
    base = make_kb()
    labeller = HierarchicalLabeller(base.taxonomy, base.embedder)
    vector = labeller.label_vector("Sequential Modeling")  # any fixed vector: only the cue evidence differs
    coded, worded = (labeller.evidence(text, vector, ["Sequential Modeling"])[0]
                     for text in ("features: visit_month, lag_7", "features: a visit month, a lag 7"))
    bare = labeller.evidence("features: a, b", vector, ["Sequential Modeling"])[0]
    assert coded == worded > bare


def test_paper_is_labelled_by_its_task_not_its_method(make_kb, tmp_path):
    """A clustering paper whose Task names no area is General ML, though its method text is about graphs; a
    3D detection paper keeps Computer Vision, which its Task names."""
    summaries = json.loads((need(PAPERS) / "paper_summaries.json").read_text(encoding="utf-8"))
    keys = {"clustering": "kdd22/2112.07030v4.json", "voxels": "3D-Object-Detection/1711.06396v1.json"}
    chosen = tmp_path / "summaries.json"
    chosen.write_text(json.dumps({name: summaries[key] for name, key in keys.items()}), encoding="utf-8")
    base = make_kb()
    assert ingest([str(chosen)], base).ok
    firsts = {t.source.rsplit("#", 1)[1]: t.labels[0].split(" / ")[0] for t in base.export()}
    assert firsts == {"clustering": "General Machine Learning", "voxels": "Computer Vision"}


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
