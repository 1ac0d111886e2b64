"""The knowledge-base tests run twice: on the vector index embedded in the home, and on a Chroma server.

The server is `chroma run` on a free port with its data in a temporary folder, started once per test process.
Under the server, every test sees $CASEBOOK_CHROMA_URL (so the `kb` commands and subprocesses a test starts use
it too), and the real corpus is the embedded one's catalog with its vector index rebuilt on the server.
"""

from __future__ import annotations

import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kb.store import CATALOG_FILE, CHROMA_URL_ENV, COLLECTION, KnowledgeBase, chroma_client

SERVER_START_SECONDS = 60


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """The URL of a Chroma server started for this test process, stopped after it."""
    folder = tmp_path_factory.mktemp("chroma_server")
    port = _free_port()
    url = f"http://localhost:{port}"
    log_path = folder / "server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([str(Path(sys.executable).with_name("chroma")), "run", "--path", str(folder / "data"),
                                   "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + SERVER_START_SECONDS
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"`chroma run` did not answer at {url}: {log_path.read_text()[-500:]}")
            time.sleep(0.2)
    yield url
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


@pytest.fixture(scope="session", params=["embedded", "server"])
def chroma_url(request) -> str | None:
    """None for the index embedded in the home, else the test server's URL."""
    return request.getfixturevalue("chroma_server") if request.param == "server" else None


@pytest.fixture(autouse=True)
def _chroma_env(chroma_url, monkeypatch):
    if chroma_url is None:
        monkeypatch.delenv(CHROMA_URL_ENV, raising=False)
    else:
        monkeypatch.setenv(CHROMA_URL_ENV, chroma_url)


@pytest.fixture(scope="session")
def corpus_kb(corpus_kb, chroma_url, tmp_path_factory):
    """The real corpus (tests/conftest.py); on the server, its catalog copied into a new home and the vector index
    rebuilt there from it, rather than ingested a second time."""
    if chroma_url is None:
        return corpus_kb
    base, summary = corpus_kb
    home = tmp_path_factory.mktemp("corpus_server_home")
    with sqlite3.connect(home / CATALOG_FILE) as copy:
        base.catalog.conn.backup(copy)
    served = KnowledgeBase(home, embedder=base.embedder, chroma_url=chroma_url)
    assert served.rebuild_index() == base.count()
    return served, summary


@pytest.fixture
def lose_index(chroma_url):
    """Destroy a closed knowledge base's vector index, as a crash or an operator might: its folder in the home, or
    its collection on the server. The catalog is left alone."""

    def lose(base: KnowledgeBase) -> None:
        if chroma_url is None:
            shutil.rmtree(base.home / "chroma")
        else:
            chroma_client(base.home, chroma_url).delete_collection(COLLECTION)

    return lose
