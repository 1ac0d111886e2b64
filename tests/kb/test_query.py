"""Querying the real corpus: filters, task-type look-ups with forgiving names, show/export/remove."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli.kb import main
from kb.taxonomy import UnknownLabelError, load_taxonomy


def run(base, *args):
    result = CliRunner().invoke(main, ["--home", str(base.home), *args])
    return result


def test_query_filters_are_respected(corpus_kb):
    base, _ = corpus_kb
    result = run(base, "query", "lag features and rolling means for sales forecasting", "-k", "8",
                 "--label", "time series", "--stage", "feature engineering", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["tricks"]
    assert rows and all(r["stage"] == "feature engineering" for r in rows)
    assert all(any(l.startswith("Sequential Modeling") for l in r["labels"]) for r in rows)
    assert any("lag" in r["text"].lower() for r in rows[:3])
    papers = json.loads(run(base, "query", "graph neural network on text", "--kind", "paper", "--json").stdout)["tricks"]
    assert papers and all(r["kind"] == "paper" for r in papers)


def test_query_can_drop_a_competition(corpus_kb):
    base, _ = corpus_kb
    text = "rotate latitude and longitude coordinates for california house prices"
    hits = base.search(text, k=10)
    assert any(h.trick.competition == "playground-series-s3e1" for h in hits)
    kept = base.search(text, k=10, exclude_competitions=["playground-series-s3e1"])
    assert kept and all(h.trick.competition != "playground-series-s3e1" for h in kept)


@pytest.mark.parametrize("typed, label", [
    ("General Machine Learning / Classification", "General Machine Learning / Classification"),
    ("tabular classification", "General Machine Learning / Classification"),
    ("Tabular Regression", "General Machine Learning / Regression"),
    ("nlp", "Natural Language Processing"),
    ("text classification", "Natural Language Processing / Text Classification"),
    ("time series forcasting", "Sequential Modeling / Time Series Forecasting"),
])
def test_forgiving_label_names(typed, label):
    assert load_taxonomy().resolve(typed) == label


def test_unknown_label_suggests(corpus_kb):
    with pytest.raises(UnknownLabelError):
        load_taxonomy().resolve("underwater basket weaving")
    result = run(corpus_kb[0], "tricks", "--task-type", "underwater basket weaving")
    assert result.exit_code == 2 and result.output.startswith("error: no label matches")


def test_tricks_for_task_type(corpus_kb):
    base, _ = corpus_kb
    result = run(base, "tricks", "--task-type", "tabular regression", "-k", "15", "--json")
    data = json.loads(result.stdout)
    assert data["label"] == "General Machine Learning / Regression"
    assert len(data["tricks"]) == 15
    assert all("General Machine Learning / Regression" in t["labels"] for t in data["tricks"])
    scores = [t["score"] for t in data["tricks"]]
    assert scores == sorted(scores, reverse=True)
    top_level = json.loads(run(base, "tricks", "--task-type", "NLP", "--stage", "training", "--json").stdout)
    assert top_level["tricks"] and all(t["stage"] == "training" for t in top_level["tricks"])
    assert all(any(l.startswith("Natural Language Processing") for l in t["labels"]) for t in top_level["tricks"])


def test_labels_tree_show_export_stats(corpus_kb):
    base, _ = corpus_kb
    tree = json.loads(run(base, "labels", "--json").stdout)["labels"]
    assert len(tree) == 11 and tree[0]["name"] == "General Machine Learning"
    exported = [json.loads(line) for line in run(base, "export").stdout.splitlines()]
    assert len(exported) == base.count()
    assert {"id", "kind", "source", "competition", "title", "text", "labels", "stage", "recipe"} <= set(exported[0])
    shown = json.loads(run(base, "show", exported[0]["id"], "--json").stdout)
    assert shown == {k: exported[0][k] for k in shown}
    assert run(base, "show", "no-such-id").exit_code == 2
    stats = json.loads(run(base, "stats", "--json").stdout)
    assert stats["tricks"] == base.count()


def test_remove_forgets_a_source(make_kb, tmp_path):
    from ingest import ingest

    note = tmp_path / "notes" / "a.md"
    note.parent.mkdir()
    note.write_text("Seed bagging: average LightGBM over five seeds to cut variance of the CV score.\n")
    base = make_kb()
    ingest([str(note)], base)
    assert base.count() >= 1
    result = run(base, "remove", str(note.parent), "--json")
    assert json.loads(result.stdout)["tricks_removed"] >= 1
    assert base.count() == 0 and base.collection.count() == 0 and base.documents() == []
