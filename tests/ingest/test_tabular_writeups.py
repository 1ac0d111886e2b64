"""Issue 22: the real tabular write-ups state their competition and place in header lines; their index is no document."""

from __future__ import annotations

import json
import shutil

from ingest import ingest
from tests.conftest import CORPUS, need

TABULAR = CORPUS / "kaggle_writeups_tabular"
# file -> (competition, place) as its header lines state them
HEADERS = {
    "allstate-claims-severity-1st.md": ("allstate-claims-severity", 1),
    "porto-seguro-safe-driver-prediction-3rd-utility.md": ("porto-seguro-safe-driver-prediction", 3),
    "home-credit-default-risk-2nd-ikiri-ds.md": ("home-credit-default-risk", 2),
}


def test_header_lines_give_competition_and_place_and_the_index_is_passed_over(make_kb, tmp_path):
    folder = tmp_path / "tabular"
    folder.mkdir()
    shutil.copy(need(TABULAR / "INDEX.tsv"), folder / "INDEX.tsv")
    for name in HEADERS:
        shutil.copy(need(TABULAR / name), folder / name)
    # under a name that guesses another competition and place, the header still wins
    renamed = "santander-customer-satisfaction-7th.md"
    shutil.copy(need(TABULAR / "allstate-claims-severity-2nd-alno.md"), folder / renamed)
    expected = {**HEADERS, renamed: ("allstate-claims-severity", 2)}

    base = make_kb()
    summary = ingest([str(folder)], base)

    assert summary.ok, summary.to_dict()["failures"]
    outcomes = {o.source.rsplit("/", 1)[-1]: o for o in summary.outcomes}
    assert outcomes["INDEX.tsv"].status == "unsupported" and "unsupported file type .tsv" in outcomes["INDEX.tsv"].error
    assert "\n" not in outcomes["INDEX.tsv"].error
    assert summary.to_dict()["unsupported"] == 1 and base.document(str(folder / "INDEX.tsv")) is None

    tricks = list(base.export())
    for name, (competition, place) in expected.items():
        own = [t for t in tricks if t.source.endswith("/" + name)]
        assert own, name
        assert {(t.competition, t.rank) for t in own} == {(competition, place)}, name
        assert not any(t.text.startswith(("source:", "competition:", "place:")) for t in own), name
    for row in base.documents():
        assert json.loads(row["labels"])[0].startswith("General Machine Learning / "), row["source"]


def test_the_corpus_label_taxonomy_is_passed_over_not_failed(make_kb, tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    shutil.copy(need(CORPUS / "taxonomy" / "automind_labels.json"), folder / "automind_labels.json")
    shutil.copy(need(TABULAR / "allstate-claims-severity-1st.md"), folder / "allstate-claims-severity-1st.md")

    base = make_kb()
    summary = ingest([str(folder)], base)

    assert summary.ok, summary.to_dict()["failures"]
    outcome = next(o for o in summary.outcomes if o.source.endswith("automind_labels.json"))
    assert outcome.status == "unsupported" and outcome.error.startswith("a label taxonomy (")
    assert "\n" not in outcome.error
    assert base.document(str(folder / "automind_labels.json")) is None
    assert not any(t.source.endswith("automind_labels.json") for t in base.export())
    assert any(t.source.endswith("allstate-claims-severity-1st.md") for t in base.export())
