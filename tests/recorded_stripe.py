"""Recorded Stripe answers served on 127.0.0.1, for the real SDK through the saga's HTTP client.

`RecordedStripe` is an HTTP server on a loopback port that answers each request with the next
answer scripted for its method and path (tests/fixtures/stripe, SOURCES.md there), and records
every request it read (method, path, query, headers, form body). The adapter under test is the
real one (saga.providers.stripe_provider.stripe_client with `api_base` = this server): the SDK
encodes the request, sends it through saga.providers.stripe_http, parses the answer and raises
its own error classes; only the network is this server. An answer can also be "hang up" (the
request is read, the connection closed without a response: a lost answer). Not a Stripe
emulator (issue 46 builds one): it knows nothing of Stripe's rules.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import defaultdict, deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "stripe"
HANG_UP = "hang up"


def fixture(name: str, **fields: Any) -> dict[str, Any]:
    """A recorded object (refund, payment_intent, charge) with the fields a scenario sets."""
    recorded: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return {**copy.deepcopy(recorded), **fields}


def error(name: str) -> tuple[int, dict[str, Any]]:
    """A documented error answer (status, body)."""
    recorded = json.loads((FIXTURES / "errors.json").read_text(encoding="utf-8"))[name]
    return int(recorded["status"]), dict(recorded["body"])


def page(refunds: list[dict[str, Any]], *, has_more: bool) -> dict[str, Any]:
    return {"object": "list", "data": refunds, "has_more": has_more, "url": "/v1/refunds"}


@dataclass(frozen=True)
class Seen:
    """One request the server read."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # lower-case names
    form: Mapping[str, list[str]]


Answer = tuple[int, dict[str, Any]] | str


class RecordedStripe:
    """Scripted answers by (method, path); every request recorded in `seen`."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], deque[Answer]] = defaultdict(deque)
        self.seen: list[Seen] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def answer(self, method: str, path: str, *answers: Answer) -> None:
        self.answers[(method, path)].extend(answers)

    def requests(self, method: str, path: str) -> list[Seen]:
        return [s for s in self.seen if (s.method, s.path) == (method, path)]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        recorded = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                recorded.seen.append(
                    Seen(
                        self.command,
                        parts.path,
                        parse_qs(parts.query),
                        {k.lower(): v for k, v in self.headers.items()},
                        parse_qs(body),
                    )
                )
                queue = recorded.answers.get((self.command, parts.path))
                if not queue:
                    status, payload = 500, {"error": {"type": "api_error", "message": "unscripted"}}
                else:
                    answer = queue.popleft()
                    if answer == HANG_UP:
                        self.close_connection = True
                        self.connection.close()
                        return
                    assert not isinstance(answer, str)
                    status, payload = answer
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

        return Handler

    @contextmanager
    def running(self) -> Iterator[RecordedStripe]:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            thread.join(timeout=5)
