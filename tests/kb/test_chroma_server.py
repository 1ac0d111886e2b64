"""What only a Chroma server adds: homes sharing one server keep their own index, and a URL that is wrong or where
nothing answers is one line naming the fix."""

from __future__ import annotations

import socket

from click.testing import CliRunner

from cli.kb import main
from ingest import ingest


def test_homes_sharing_a_server_keep_their_own_index(make_kb, tmp_path, chroma_url):
    notes = {"a": "Seed bagging: average LightGBM over five seeds to cut the variance of the CV score.\n",
             "b": "Target-encode high-cardinality categoricals inside the CV folds to avoid leakage.\n"}
    bases = {}
    for name, text in notes.items():
        note = tmp_path / f"{name}.md"
        note.write_text(text)
        bases[name] = make_kb(name)
        ingest([str(note)], bases[name])
    for name, base in bases.items():
        assert base.stats()["vector_index"] == (chroma_url or str(base.home / "chroma"))  # $CASEBOOK_CHROMA_URL
        assert base.collection.count() == base.count() >= 1
        assert {hit.trick.source for hit in base.search("how to cut the variance", k=10)} == {str(tmp_path / f"{name}.md")}


def test_a_chroma_url_without_a_server_is_one_line(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    for url, message in ((f"http://localhost:{port}", f"error: no Chroma server answers at http://localhost:{port}"),
                         ("localhost:8000", "error: 'localhost:8000' is not a Chroma server URL")):
        result = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "--chroma-url", url, "rebuild"])
        assert result.exit_code == 2
        assert result.stderr.startswith(message) and result.stderr.count("\n") == 1
