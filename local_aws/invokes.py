"""Invocations in flight in the local AWS, and the requests their handlers send to it.

Every Invoke the local Lambda serves is an `Invocation` while it runs: `current_invocation()`
in the thread serving the Invoke, `find_invocation(request_id)` anywhere; listeners hear when
one starts and ends (the fault campaign counts the deliveries that overlapped in time).

A handler's requests to the local AWS carry its invocation's id (local_aws.lambda_context).
`HandlerRequests`, in front of moto's routing, gives each such request to the registered hooks
before it is served (a hook may hold it, or move the clock) and after (a hook may answer that
the handler dies right after it: the answer carries a die directive). Requests without the id
(clients, Step Functions' own calls, the campaign's observer) pass untouched.
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from local_aws.clock import LOCAL_CLOCK
from local_aws.lambda_context import DIE_HEADER, INVOKE_HEADER

_WSGI_INVOKE_HEADER = "HTTP_" + INVOKE_HEADER.upper().replace("-", "_")


@dataclass
class Invocation:
    """One Invoke of a function while it runs (`ended` is set when it has answered)."""

    function_name: str
    event: Any
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=LOCAL_CLOCK.now)  # the local clock
    started_real: float = field(default_factory=time.monotonic)
    ended: float | None = None
    ended_real: float | None = None
    ran: bool = True  # False when Lambda refused it (throttled) before any handler ran
    notes: dict[str, Any] = field(default_factory=dict)  # what hooks noted (a nemesis fired)


Listener = Callable[[str, Invocation], None]  # ("start" | "end", invocation)
_CURRENT: ContextVar[Invocation | None] = ContextVar("saga_local_invocation", default=None)
_IN_FLIGHT: dict[str, Invocation] = {}
_LISTENERS: dict[str, Listener] = {}
_LOCK = threading.Lock()


def current_invocation() -> Invocation | None:
    """The invocation the calling thread serves (None outside an Invoke)."""
    return _CURRENT.get()


def find_invocation(request_id: str) -> Invocation | None:
    with _LOCK:
        return _IN_FLIGHT.get(request_id)


def on_invocations(name: str, listener: Listener) -> None:
    """Call `listener(phase, invocation)` when an invocation starts and ends (once per name)."""
    with _LOCK:
        _LISTENERS[name] = listener


def remove_invocation_listener(name: str) -> None:
    with _LOCK:
        _LISTENERS.pop(name, None)


def _notify(phase: str, invocation: Invocation) -> None:
    with _LOCK:
        listeners = list(_LISTENERS.values())
    for listener in listeners:
        listener(phase, invocation)


@contextmanager
def invocation(function_name: str, event: Any) -> Iterator[Invocation]:
    """The block serves one Invoke of `function_name` (reentrant: an inner call reuses it)."""
    existing = _CURRENT.get()
    if existing is not None and existing.function_name == function_name:
        yield existing
        return
    record = Invocation(function_name, event)
    with _LOCK:
        _IN_FLIGHT[record.request_id] = record
    token = _CURRENT.set(record)
    _notify("start", record)
    try:
        yield record
    finally:
        _CURRENT.reset(token)
        record.ended, record.ended_real = LOCAL_CLOCK.now(), time.monotonic()
        with _LOCK:
            _IN_FLIGHT.pop(record.request_id, None)
        _notify("end", record)


# -- the requests handlers send ------------------------------------------------------------------


@dataclass
class HandlerRequest:
    """A request a handler sent, as the server received it."""

    invocation: Invocation | None  # None: its invocation already answered (a late request)
    request_id: str
    operation: str  # the API operation ("TransactWriteItems"), from X-Amz-Target or Action
    body: bytes

    def document(self) -> Any:
        """The body as JSON (the JSON protocols: DynamoDB, SQS, KMS, Step Functions), or {}."""
        try:
            return json.loads(self.body or b"{}")
        except ValueError:
            return {}


class RequestHook(Protocol):
    def before(self, request: HandlerRequest) -> None:
        """Before the request is served (it may wait, or move the clock)."""

    def after(self, request: HandlerRequest, status: int) -> str | None:
        """After it was served with `status`: a die directive (lambda_context.die_directive)
        when the handler dies right after this request, else None."""


_HOOKS: dict[str, RequestHook] = {}


def add_request_hook(name: str, hook: RequestHook) -> None:
    with _LOCK:
        _HOOKS[name] = hook


def remove_request_hook(name: str) -> None:
    with _LOCK:
        _HOOKS.pop(name, None)


def _operation(environ: dict[str, Any]) -> str:
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target:
        return target.rpartition(".")[2]
    query = str(environ.get("QUERY_STRING", ""))
    for part in query.split("&"):
        if part.startswith("Action="):
            return part.partition("=")[2]
    return ""


class HandlerRequests:
    """WSGI middleware: the request hooks around every request a handler sent."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request_id = environ.get(_WSGI_INVOKE_HEADER)
        with _LOCK:
            hooks = list(_HOOKS.values())
        if not request_id or not hooks:
            result: Iterable[bytes] = self.app(environ, start_response)
            return result
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        request = HandlerRequest(find_invocation(request_id), request_id, _operation(environ), body)
        for hook in hooks:
            hook.before(request)

        def answer(status: str, headers: list[tuple[str, str]], *rest: Any) -> Any:
            code = int(status.split(maxsplit=1)[0])
            directives = [d for d in (hook.after(request, code) for hook in hooks) if d]
            if directives:
                headers = [*headers, (DIE_HEADER, directives[0])]
            return start_response(status, headers, *rest)

        served: Iterable[bytes] = self.app(environ, answer)
        return served
