"""kill -9 in the middle of an ingest loses nothing committed; a second writer is refused cleanly."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

from ingest import ingest
from tests.conftest import REPO, WRITEUPS, need


def _ok_documents(home) -> int:
    path = home / "catalog.db"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM documents WHERE status = 'ok'").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_kill_minus_nine_then_resume(tmp_path, make_kb, embedding_cache):
    sources = sorted(need(WRITEUPS / "nlp_cases").glob("*.case"))[:30]
    folder = tmp_path / "docs"
    folder.mkdir()
    for source in sources:
        shutil.copy(source, folder)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(embedding_cache, home / "embeddings.db")  # warm cache: the child gets going quickly
    child = subprocess.Popen(
        [sys.executable, "-m", "cli.kb", "--home", str(home), "ingest", str(folder), "--batch-size", "1", "--quiet"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.time() + 240
    while _ok_documents(home) < 5 and child.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert child.poll() is None, f"ingest ended before it could be killed: {child.stderr.read().decode()[-500:]}"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    committed = _ok_documents(home)
    assert 5 <= committed < len(sources)

    from kb.store import KnowledgeBase

    base = KnowledgeBase(home, embedder=make_kb().embedder)
    before = {t.id for t in base.export() if base.document(t.source)["status"] == "ok"}
    summary = ingest([str(folder)], base)
    assert summary.ok
    assert summary.count("unchanged") >= committed  # committed work is not redone
    assert _ok_documents(home) == len(sources)
    ids = [t.id for t in base.export()]
    assert len(ids) == len(set(ids)) and before <= set(ids)
    assert base.collection.count() == len(ids)  # no orphaned or duplicated vectors


def test_second_writer_gets_a_clear_message(make_kb, tmp_path):
    base = make_kb()
    note = tmp_path / "note.md"
    note.write_text("We blended CatBoost and LightGBM with weights tuned on out-of-fold predictions.\n")
    with base.write_lock():
        result = subprocess.run(
            [sys.executable, "-m", "cli.kb", "--home", str(base.home), "ingest", str(note)],
            cwd=REPO, capture_output=True, text=True, timeout=120,
        )
    assert result.returncode == 2
    assert "is being written by pid" in result.stderr and result.stderr.count("\n") == 1
    assert base.count() == 0


def test_index_is_rebuilt_from_the_catalog(make_kb, tmp_path, lose_index, embedding_cache):
    from kb.store import KnowledgeBase

    source = need(WRITEUPS / "tabular_cases")
    base = make_kb()
    ingest([str(source)], base)
    query = "rotate latitude and longitude coordinates"
    before = [h.trick.id for h in base.search(query, k=5)]
    base.close()
    lose_index(base)  # the vector index is lost; the catalog is the record
    with sqlite3.connect(embedding_cache) as cache, sqlite3.connect(base.home / "embeddings.db") as copy:
        cache.backup(copy)  # warm cache (with what its write-ahead log holds): the child embeds nothing again
    fresh = KnowledgeBase(base.home, embedder=base.embedder)
    result = subprocess.run([sys.executable, "-m", "cli.kb", "--home", str(base.home), "rebuild", "--json"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert f'"indexed": {fresh.count()}' in result.stdout
    reopened = KnowledgeBase(base.home, embedder=base.embedder)
    assert reopened.collection.count() == reopened.count()
    assert [h.trick.id for h in reopened.search(query, k=5)] == before
