"""The local AWS's own errors: the traceback of each request it failed with a 500.

An exception in moto's handling of a request reaches werkzeug, which answers "500 Internal
Server Error" and logs the traceback on a logger nobody reads (the campaign's shards drop all
output). `ServerErrors`, the outermost WSGI layer of the local server, keeps the last few, for
whoever reports the failure: the fault campaign puts them in a case that could not run."""

from __future__ import annotations

import threading
import traceback
from collections import deque
from collections.abc import Iterable
from typing import Any

_KEPT = 20
_ERRORS: deque[str] = deque(maxlen=_KEPT)
_LOCK = threading.Lock()


class ServerErrors:
    """WSGI middleware: the traceback of a request whose handling raised, kept, then raised on."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        try:
            result: Iterable[bytes] = self.app(environ, start_response)
        except Exception:
            target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
            head = f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')} {target}"
            with _LOCK:
                _ERRORS.append(head.rstrip() + "\n" + traceback.format_exc())
            raise
        return result


def recent_server_errors() -> list[str]:
    """The tracebacks kept since the last call (oldest first), then forgotten."""
    with _LOCK:
        errors = list(_ERRORS)
        _ERRORS.clear()
    return errors
