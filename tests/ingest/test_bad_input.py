"""Bad input is skipped with a one-line reason, the batch goes on, and nothing stored is lost."""

from __future__ import annotations

import json
import zlib

import pytest
from click.testing import CliRunner

from cli.kb import main
from ingest import ingest

GOOD = ("# Good write-up\n\nWe trained LightGBM with 5-fold stratified cross-validation and early stopping.\n"
        "Frequency encoding of the high-cardinality merchant column added 0.004 AUC.\n")


def _pdf(text: str) -> bytes:
    """A minimal valid one-page PDF with a text layer."""
    stream = zlib.compress(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode())
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    body, offsets = b"%PDF-1.4\n", []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(body))
        body += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(body)
    body += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    body += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    body += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return body


@pytest.fixture
def batch(tmp_path):
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "good.md").write_text(GOOD)
    (folder / "empty.md").write_text("")
    (folder / "blank.txt").write_text("   \n\n")
    (folder / "binary.txt").write_bytes(b"\x00\x01\x02PNG" * 100)
    (folder / "latin1.txt").write_bytes("Caf\xe9 features with target encoding".encode("latin-1"))
    (folder / "broken.json").write_text('{"title": "x", "abs": ')
    (folder / "unknown.json").write_text('{"hello": [1, 2, 3]}')
    (folder / "lines.jsonl").write_text('{"text": "ok card about bagging seeds"}\n{not json}\n')
    pdf = _pdf("Use 5 fold cross validation and blend LightGBM with CatBoost for tabular regression")
    (folder / "paper.pdf").write_bytes(pdf)
    (folder / "truncated.pdf").write_bytes(pdf[: len(pdf) // 3])
    (folder / "fake.pdf").write_text("this is not a pdf")
    (folder / "page.html").write_text(
        "<html><head><title>Winning notes</title><script>var x=1;</script></head><body><h1>Notes</h1>"
        "<p>We used XGBoost with a learning rate of 0.02 and 3000 trees with early stopping.</p>"
        "<ul><li>Added missing-value indicators for every column with NaNs before imputation.</li></ul>"
        "</body></html>"
    )
    (folder / "huge.txt").write_text("gradient boosting with target encoding. " * 40000)
    return folder


def test_every_bad_file_gets_a_reason_and_the_batch_goes_on(make_kb, batch, tmp_path):
    base = make_kb()
    summary = ingest([str(batch), str(tmp_path / "missing-folder")], base, max_bytes=1_000_000)
    outcome = {o.source.rsplit("/", 1)[-1]: o for o in summary.outcomes}
    expected_failures = {
        "empty.md": "empty", "blank.txt": "white space", "binary.txt": "binary", "latin1.txt": "UTF-8",
        "broken.json": "invalid JSON", "unknown.json": "unrecognised JSON", "lines.jsonl": "line 2",
        "truncated.pdf": "PDF", "fake.pdf": "not a PDF", "huge.txt": "limit", "missing-folder": "no such file",
    }
    for name, words in expected_failures.items():
        assert outcome[name].status == "failed", name
        assert words.lower() in outcome[name].error.lower(), (name, outcome[name].error)
        assert "\n" not in outcome[name].error
    for name in ("good.md", "paper.pdf", "page.html"):
        assert outcome[name].status == "added" and outcome[name].tricks >= 1, (name, outcome[name])
    assert not summary.ok
    html = [t for t in base.export() if t.source.endswith("page.html")]
    assert html[0].title == "Winning notes" and not any("var x" in t.text for t in html)
    assert any("missing-value indicators" in t.text for t in html)


def test_empty_folder_is_reported(make_kb, tmp_path):
    (tmp_path / "nothing").mkdir()
    summary = ingest([str(tmp_path / "nothing")], make_kb())
    assert summary.outcomes[0].status == "failed" and "no supported files" in summary.outcomes[0].error


def test_a_file_that_goes_bad_keeps_what_was_stored(make_kb, tmp_path):
    path = tmp_path / "notes.md"
    path.write_text(GOOD)
    base = make_kb()
    ingest([str(path)], base)
    kept = {t.id for t in base.export()}
    path.write_bytes(b"\x00\x00garbage")
    summary = ingest([str(path)], base)
    assert summary.outcomes[0].status == "failed"
    assert {t.id for t in base.export()} == kept
    path.write_text(GOOD)  # fixed again: it is re-read, not skipped as "unchanged"
    assert ingest([str(path)], base).outcomes[0].status == "updated"


def test_cli_exit_status_and_json_summary(batch, tmp_path):
    result = CliRunner().invoke(main, ["--home", str(tmp_path / "home"), "ingest", str(batch / "good.md"),
                                       str(batch / "empty.md"), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["added"] == 1 and data["failed"] == 1
    assert data["failures"][0]["source"].endswith("empty.md")


def test_invalid_card_label_fails_that_file_only(make_kb, tmp_path):
    (tmp_path / "cards.jsonl").write_text(json.dumps({"id": "x1", "text": "Bag five seeds of the GBM.",
                                                      "labels": ["Quantum Basket Weaving"], "stage": "ensembling"}) + "\n")
    (tmp_path / "ok.md").write_text(GOOD)
    summary = ingest([str(tmp_path)], make_kb())
    status = {o.source.rsplit("/", 1)[-1]: o for o in summary.outcomes}
    assert status["cards.jsonl"].status == "failed" and "Quantum Basket Weaving" in status["cards.jsonl"].error
    assert status["ok.md"].status == "added"
