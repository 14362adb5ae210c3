"""What a downstream call can end in, as an adapter reports it.

Adapters raise only these; the tools map them to `saga.errors` (design.md §4). They describe
what the caller *knows* after the call, which is what decides the next step:

| error                     | the caller knows                              | tool maps it to     |
|---------------------------|-----------------------------------------------|---------------------|
| `DownstreamRejected`      | a permanent no; nothing was done              | the business failure|
| `DownstreamNotDispatched` | nothing was done; repeating is safe           | `TransientError`    |
| `DownstreamConflict`      | a request with the same key is in flight and  | `OutcomeUnknown`    |
|                           | may still commit (HTTP 409 "in progress")     |                     |
| `DownstreamTimeout`       | the call may or may not have taken effect     | `OutcomeUnknown`    |
| `DownstreamUnavailable`   | no answer at all; a lookup cannot tell        | `OutcomeUnknown`    |
| `DownstreamKeyMismatch`   | same idempotency key, other parameters        | `OutcomeUnknown`    |

On a lookup every one of them means "no answer": only a returned list is evidence.
"""

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
