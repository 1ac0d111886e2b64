"""A local fake of Anthropic's Messages API (pytest-httpserver on 127.0.0.1) that the real `anthropic` client talks to
through ANTHROPIC_BASE_URL, with a fake key: it replays scripted answers and failures and records every request.

Token counts are estimated as the Messages API would report them: about four characters a token; the prefix up to
the last `cache_control` block is a cache write the first time it is seen (when it is at least 1,024 tokens, the
smallest prefix the API caches) and a cache read after that; the rest is uncached input.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from werkzeug import Request, Response

FAKE_KEY = "sk-ant-fake-test-key-0123456789"
MIN_CACHED_TOKENS = 1024


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


@dataclass(frozen=True)
class Failure:
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    kind: str = "api_error"


def request_text(body: Mapping[str, Any]) -> str:
    """Everything a request says, system prompt and messages, as one text."""
    return "\n".join(text for text, _ in _blocks(body))


def _blocks(body: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """(text, has cache_control) for the system blocks, then each message's blocks, in prompt order."""
    blocks = []
    system = body.get("system") or []
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
        blocks.append((block["text"], "cache_control" in block))
    for message in body["messages"]:
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            blocks.append((block.get("text", ""), "cache_control" in block))
    return blocks


class FakeMessagesAPI:
    """Answers POST /v1/messages from a script (answers and failures, in order), then from `responder`."""

    def __init__(self, server):
        self.server = server
        self.script: deque[Any] = deque()
        self.responder: Callable[[Mapping[str, Any]], Any] | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.answered = 0
        self._prefixes: set[str] = set()
        server.expect_request("/v1/messages", method="POST").respond_with_handler(self._handle)

    # ---- the script

    def answer(self, *answers: Any) -> FakeMessagesAPI:
        """Answers in order: a dict is sent as its JSON text, a str as it is."""
        self.script.extend(answers)
        return self

    def fail(self, status: int, times: int = 1, *, retry_after: str | None = "0.01",
             kind: str = "api_error") -> FakeMessagesAPI:
        """`times` failures with this status; `retry_after` seconds (the SDK honours fractions) keep retries quick."""
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        self.script.extend([Failure(status, headers, kind)] * times)
        return self

    # ---- what was asked

    @property
    def texts(self) -> list[str]:
        return [request_text(body) for body in self.requests]

    def question(self, index: int = -1) -> str:
        """The last text block of a request's first user turn: the question after the documents."""
        return self.requests[index]["messages"][0]["content"][-1]["text"]

    # ---- the server side

    def _handle(self, request: Request) -> Response:
        body = request.get_json()
        self.requests.append(body)
        self.headers.append({key.lower(): value for key, value in request.headers.items()})
        if self.script:
            item = self.script.popleft()
        elif self.responder is not None:
            item = self.responder(body)
        else:
            item = Failure(500, {"retry-after": "0.01"})  # an empty script: the server is down
        if isinstance(item, Failure):
            error = {"type": "error", "error": {"type": item.kind, "message": f"fake failure {item.status}"}}
            return Response(json.dumps(error), status=item.status, headers=dict(item.headers),
                            content_type="application/json")
        text = item if isinstance(item, str) else json.dumps(item)
        self.answered += 1
        message = {"id": f"msg_fake_{self.answered}", "type": "message", "role": "assistant", "model": body["model"],
                   "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                   "usage": self._usage(body, text)}
        return Response(json.dumps(message), content_type="application/json")

    def _usage(self, body: Mapping[str, Any], answer: str) -> dict[str, int]:
        blocks = _blocks(body)
        last_cached = max((i for i, (_, cached) in enumerate(blocks) if cached), default=-1)
        prefix = "".join(text for text, _ in blocks[: last_cached + 1])
        rest = "".join(text for text, _ in blocks[last_cached + 1:])
        written = read = 0
        if prefix and tokens(prefix) >= MIN_CACHED_TOKENS:
            key = hashlib.sha256(f"{body['model']}\0{prefix}".encode()).hexdigest()
            if key in self._prefixes:
                read = tokens(prefix)
            else:
                written = tokens(prefix)
                self._prefixes.add(key)
        else:
            rest = prefix + rest
        return {"input_tokens": tokens(rest) if rest else 0, "output_tokens": tokens(answer),
                "cache_creation_input_tokens": written, "cache_read_input_tokens": read}


@pytest.fixture(scope="session")
def feature_cards_kb(tmp_path_factory, embedder):
    """The bundled feature-engineering cards (encodings, dates, text, interactions): enough tricks, quick to embed."""
    from ingest import ingest
    from kb.store import KnowledgeBase
    from tests.conftest import KNOWLEDGE

    base = KnowledgeBase(tmp_path_factory.mktemp("feature_cards"), embedder=embedder)
    assert ingest([str(KNOWLEDGE / "tabular_features.jsonl")], base).ok
    return base


@pytest.fixture
def fake_llm(httpserver_ipv4, monkeypatch) -> FakeMessagesAPI:
    """The fake Messages API, with the real client pointed at it through the environment."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", httpserver_ipv4.url_for("/").rstrip("/"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    return FakeMessagesAPI(httpserver_ipv4)
