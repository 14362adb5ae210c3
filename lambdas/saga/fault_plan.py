"""A case's fault plan (docs/design.md §8, `sandbox.faults`): the vocabulary of the case contract.

Per downstream, a list of faults; each call to that downstream (creates and lookups alike)
consumes one entry, in order, and after the list runs out calls behave normally. The case model
validates a plan with this module; the sandbox acts the faults out (saga.sandbox), and with
payments=stripe the local Stripe server acts out the refund's (local_aws.stripe), three more
of them Stripe's own answers (`STRIPE_SERVER_FAULTS`: only that server acts them out). Never part
of any digest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from saga.errors import InvalidRequest

FAIL_BEFORE_COMMIT: Final = "fail_before_commit"  # nothing happens; a transient error
LOSE_RESPONSE: Final = "lose_response"  # the effect commits; the caller sees a timeout
REJECT: Final = "reject"  # a permanent rejection
TIMEOUT: Final = "timeout"  # no effect; the caller sees a timeout
UNAVAILABLE: Final = "unavailable"  # this and every later call of the case get no answer
IN_FLIGHT: Final = "in_flight"  # the payment provider only: no answer, the refund commits late

# Stripe's answers only the local Stripe server acts out (refund only; ValidateCase refuses them
# where refunds go to the sandbox's provider).
SERVER_ERROR: Final = "server_error"  # a 500 after execution began, replayed for the key
RATE_LIMITED: Final = "rate_limited"  # a 429: not processed
KEY_IN_USE: Final = "key_in_use"  # a 409: another request holds the key

FAULT_NAMES: Final[tuple[str, ...]] = (
    FAIL_BEFORE_COMMIT,
    LOSE_RESPONSE,
    REJECT,
    TIMEOUT,
    UNAVAILABLE,
    IN_FLIGHT,
)
STRIPE_SERVER_FAULTS: Final[tuple[str, ...]] = (SERVER_ERROR, RATE_LIMITED, KEY_IN_USE)
DOWNSTREAMS: Final[tuple[str, ...]] = ("reserve", "refund", "shipment", "release")
# Faults only some downstreams can act out.
_ONLY_FOR: Final[dict[str, str]] = {
    IN_FLIGHT: "refund",
    **dict.fromkeys(STRIPE_SERVER_FAULTS, "refund"),
}


def validate_faults(downstream: str, faults: Sequence[str]) -> tuple[str, ...]:
    """Check one downstream's fault list; raises ValueError naming the bad entry."""
    if downstream not in DOWNSTREAMS:
        raise ValueError(
            f"sandbox.faults: unknown downstream {downstream!r} (expected one of "
            f"{', '.join(DOWNSTREAMS)})"
        )
    if isinstance(faults, str) or not isinstance(faults, Sequence):
        raise ValueError(f"sandbox.faults.{downstream} must be a list of fault names")
    for index, fault in enumerate(faults):
        if fault not in FAULT_NAMES + STRIPE_SERVER_FAULTS:
            raise ValueError(
                f"sandbox.faults.{downstream}[{index}]: unknown fault {fault!r} (expected one of "
                f"{', '.join(FAULT_NAMES + STRIPE_SERVER_FAULTS)})"
            )
        only = _ONLY_FOR.get(fault)
        if only is not None and downstream != only:
            raise ValueError(
                f"sandbox.faults.{downstream}[{index}]: {fault!r} is a fault of the {only!r} "
                "downstream only"
            )
    return tuple(faults)


def validate_fault_plan(plan: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """Check a whole `sandbox.faults` mapping; raises ValueError naming the bad field."""
    return {downstream: validate_faults(downstream, faults) for downstream, faults in plan.items()}


def check_sandbox_faults(case_id: str, refund_faults: Sequence[str]) -> None:
    """ValidateCase where refunds go to the sandbox's provider: refuse the faults only the local
    Stripe server acts out (the sandbox would ignore them), as InvalidRequest."""
    asked = sorted({fault for fault in refund_faults if fault in STRIPE_SERVER_FAULTS})
    if asked:
        raise InvalidRequest(
            f"case {case_id}: sandbox.faults.refund: {', '.join(asked)}: only the local Stripe "
            "server acts these out (`sagactl local up --payments stripe`), and refunds go to "
            "the sandbox here: remove them"
        )
