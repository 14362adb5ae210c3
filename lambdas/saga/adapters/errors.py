"""What a downstream call can end in, as an adapter reports it.

Adapters raise only these; the tools map them to `saga.errors` (design.md §4). They describe
what the caller *knows* after the call, which is what decides the next step:

| error                     | the caller knows                              | tool maps it to     |
|---------------------------|-----------------------------------------------|---------------------|
| `DownstreamRejected`      | a permanent no; nothing was done              | the business failure|
| `DownstreamNotDispatched` | nothing was done; repeating is safe           | `TransientError`    |
| `DownstreamConflict`      | another request with the same key is in flight| `TransientError`    |
| `DownstreamTimeout`       | the call may or may not have taken effect     | `OutcomeUnknown`    |
| `DownstreamUnavailable`   | no answer at all; a lookup cannot tell        | `OutcomeUnknown`    |
| `DownstreamKeyMismatch`   | same idempotency key, other parameters: a bug | `KeyConflict`       |

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


class DownstreamConflict(DownstreamNotDispatched):
    """A request with the same idempotency key is still in flight; this one did nothing.

    Repeating later with the same key is safe: the key makes the two requests one.
    """


class DownstreamTimeout(DownstreamError):
    """No response arrived in time: the effect may or may not have happened."""


class DownstreamUnavailable(DownstreamError):
    """The downstream gives no answer (down, unreachable): nothing can be established."""


class DownstreamKeyMismatch(DownstreamError):
    """The idempotency key was already used with different parameters.

    A contract error on the caller's side (the key must identify one set of parameters), never
    retried: the tool maps it to `KeyConflict`.
    """
