"""The ports: what the tools need from each downstream, and nothing about how it is reached.

| port              | its downstream                                | a repeat is safe by          |
|-------------------|-----------------------------------------------|------------------------------|
| `PaymentProvider` | a provider that honours an idempotency key    | the key, then a lookup       |
| `Carrier`         | no idempotency; lookup by business reference  | the lookup before a re-send  |
| `Inventory`       | stock and reservations tables in this account | the ledger's own transaction |

Each port is a module with its request and receipt types (`saga.ports.payments`,
`saga.ports.carrier`, `saga.ports.inventory`: a function imports the one port it calls, not the
three, as each value type costs its cold start about 0.4 ms); what every remote call can end in
is here. The sandbox (saga.sandbox) implements each port with switchable faults; a real provider
or carrier implements the same Protocol (saga.providers: Stripe's payment provider).

What a call to a remote downstream can end in, as its adapter reports it (the tools map these to
saga.errors, docs/design.md §4; on a lookup every one of them means "no answer": only a returned
list is evidence):

| error                     | the caller knows                              | tool maps it to     |
|---------------------------|-----------------------------------------------|---------------------|
| `DownstreamRejected`      | a permanent no; nothing was done              | the business failure|
| `DownstreamNotDispatched` | nothing was done; repeating is safe           | `TransientError`    |
| `DownstreamConflict`      | a request with the same key is in flight and  | `OutcomeUnknown`    |
|                           | may still commit (HTTP 409 "in progress")     |                     |
| `DownstreamTimeout`       | the call may or may not have taken effect     | `OutcomeUnknown`    |
| `DownstreamUnavailable`   | no answer at all; a lookup cannot tell        | `OutcomeUnknown`    |
| `DownstreamKeyMismatch`   | same idempotency key, other parameters        | `OutcomeUnknown`    |

The inventory is not remote: its writes commit in the ledger's own transaction (docs/design.md
§3.9), so its port answers in the workflow's errors directly (the ledger records a refusal);
only its lookups, like every port's, raise a DownstreamError when they cannot answer.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any


# --- what a remote call can end in ---------------------------------------------------------------
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


class Receipt:
    """A remote downstream's answer for one effect (the payment provider's, the carrier's): the
    base of each port's receipt dataclass. Not a dataclass itself, as it has no fields."""

    @property
    def downstream_ref(self) -> str:
        """The downstream's own id for the effect."""
        raise NotImplementedError

    def to_result(self) -> dict[str, Any]:
        """JSON-able form (for the ledger's recorded result): every field of the receipt."""
        fields: dict[str, Any] = asdict(self)  # type: ignore[call-overload]  # a dataclass
        return fields
