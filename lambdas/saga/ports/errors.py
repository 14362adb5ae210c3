"""What a call to a remote downstream can end in, as its adapter reports it (saga.ports)."""

from __future__ import annotations


class DownstreamError(Exception):
    """Base of every adapter error. `downstream` names the service ("refund", "shipment", ...)."""

    def __init__(self, message: str, *, downstream: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.downstream = downstream


class DownstreamRejected(DownstreamError):
    """The downstream refused for good; repeating the same request gets the same answer."""

    def __init__(self, reason: str, *, downstream: str = "") -> None:
        super().__init__(f"rejected: {reason}", downstream=downstream)
        self.reason = reason


class DownstreamNotDispatched(DownstreamError):
    """The request provably had no effect (it failed before anything was committed)."""


class DownstreamConflict(DownstreamError):
    """A request with the same idempotency key is still in flight (HTTP 409 "in progress").

    This call did nothing, but the request in flight may still commit: the action's outcome is
    pending or unknown, never "nothing happened". A later repeat with the same key is one effect
    only while the provider still keeps the key, so the caller reconciles before repeating.
    """


class DownstreamTimeout(DownstreamError):
    """No response arrived in time: the effect may or may not have happened."""


class DownstreamUnavailable(DownstreamError):
    """The downstream gives no answer (down, unreachable): nothing can be established."""


class DownstreamKeyMismatch(DownstreamError):
    """The idempotency key was already used with different parameters.

    A contract error on the caller's side (the key must identify one set of parameters). An
    effect under this key may exist, so the tool treats it as an unknown outcome and reconciles.
    """
