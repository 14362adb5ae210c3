"""The Stripe SDK's HTTP client, on http.client, that knows whether a request left this process.

The SDK reports every connection failure as one `APIConnectionError`, whether the connection
was refused before a byte was sent or the response was lost after Stripe may have made the
refund. The saga must tell them apart (docs/design.md §3.4): "not sent" lets the ledger give the
lease back and repeat; anything else is an uncertain outcome to reconcile. So this client opens
the connection (TCP, then TLS) as a step of its own: a failure there raises `RequestNotSent`
(no byte of the request was written); a failure at any later point, writing the request or
reading the answer, raises `RequestMaybeSent`. Whatever else goes wrong is `RequestMaybeSent`
too: when unsure, uncertain.

One connection per request, closed after it: a kept-alive connection the server closed would
fail on the write, after the request may have started to leave, and be counted uncertain for
nothing. Connect and read timeouts are explicit; the SDK's own retries are off (the adapter
builds its client with `max_network_retries=0`, and these errors say `should_retry=False`).
The base URL may be `http://` for a local Stripe-compatible server (issue 46); Stripe's own is
`https://`, verified with the CA bundle the SDK ships.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import stripe
from stripe._error import APIConnectionError
from stripe._http_client import HTTPClient

Connection = http.client.HTTPConnection
ConnectionFactory = Callable[[str, str, int | None, float], Connection]


class _ConnectionFailure(APIConnectionError):
    def __init__(self, message: str) -> None:
        super().__init__(message, should_retry=False)  # type: ignore[no-untyped-call]


class RequestNotSent(_ConnectionFailure):
    """The connection failed before any byte of the request was written: nothing happened."""


class RequestMaybeSent(_ConnectionFailure):
    """The request may have reached Stripe (written in part or whole, the answer lost)."""


class DispatchAwareClient(HTTPClient):
    """`stripe.StripeClient(http_client=...)`: one connection per request, not-sent told apart."""

    name = "saga-http.client"

    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        connection_factory: ConnectionFactory | None = None,
    ) -> None:
        super().__init__(verify_ssl_certs=True)
        if connect_timeout <= 0 or read_timeout <= 0:
            raise ValueError("timeouts must be positive")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._connection_factory = connection_factory or self._connection
        self._tls: ssl.SSLContext | None = None

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        post_data: Any = None,
        *,
        _usage: list[str] | None = None,
    ) -> tuple[Any, int, Mapping[str, str]]:
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        connection: Connection | None = None
        try:
            connection = self._connection_factory(
                parts.scheme, parts.hostname or "", parts.port, self.connect_timeout
            )
            connection.connect()  # TCP and TLS: no byte of the request is written yet
        except Exception as exc:  # whatever it is, nothing was sent
            if connection is not None:
                connection.close()
            raise RequestNotSent(
                f"could not connect to {parts.hostname}: {type(exc).__name__}: {exc}"
            ) from exc
        try:
            if connection.sock is not None:
                connection.sock.settimeout(self.read_timeout)
            connection.request(method.upper(), path, body=post_data, headers=dict(headers or {}))
            response = connection.getresponse()
            body = response.read()
        except Exception as exc:  # the request may have left: uncertain
            raise RequestMaybeSent(
                f"no complete answer from {parts.hostname} after sending "
                f"{method.upper()} {parts.path}: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            connection.close()
        answer_headers = {name.lower(): value for name, value in response.getheaders()}
        return body, response.status, answer_headers

    def request_stream(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        post_data: Any = None,
        *,
        _usage: list[str] | None = None,
    ) -> tuple[Any, int, Mapping[str, str]]:
        raise NotImplementedError("the saga reads no streamed Stripe response")

    def close(self) -> None:
        """Nothing to close: every request closes its own connection."""

    def _connection(
        self, scheme: str, host: str, port: int | None, timeout: float
    ) -> http.client.HTTPConnection:
        if scheme == "http":
            return http.client.HTTPConnection(host, port, timeout=timeout)
        if scheme != "https":
            raise ValueError(f"unsupported URL scheme {scheme!r}")
        if self._tls is None:
            self._tls = ssl.create_default_context(cafile=stripe.ca_bundle_path)
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=self._tls)
