"""Switchable faults of the sandbox downstreams (design.md §8, `sandbox.faults`).

A case names, per downstream, a list of faults. Each call to that downstream (creates and lookups
alike) consumes one entry, in order; after the list runs out calls behave normally. The position
is an atomic counter in the sandbox control table, so concurrent Lambdas, retries and redrives of
one case all draw from the same sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from saga import clock as saga_clock

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

FAIL_BEFORE_COMMIT: Final = "fail_before_commit"
LOSE_RESPONSE: Final = "lose_response"
REJECT: Final = "reject"
TIMEOUT: Final = "timeout"
UNAVAILABLE: Final = "unavailable"
IN_FLIGHT: Final = "in_flight"  # the payment provider only (design.md §8)

FAULT_NAMES: Final[tuple[str, ...]] = (
    FAIL_BEFORE_COMMIT,
    LOSE_RESPONSE,
    REJECT,
    TIMEOUT,
    UNAVAILABLE,
    IN_FLIGHT,
)
DOWNSTREAMS: Final[tuple[str, ...]] = ("reserve", "refund", "shipment", "release")
# Faults only some downstreams can act out.
_ONLY_FOR: Final[dict[str, str]] = {IN_FLIGHT: "refund"}

# Cursor items only matter while a case runs (redrives included); the table's TTL cleans them
# up afterwards.
CURSOR_RETENTION_SECONDS: Final = 30 * 86400

Clock = Callable[[], float]


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
        if fault not in FAULT_NAMES:
            raise ValueError(
                f"sandbox.faults.{downstream}[{index}]: unknown fault {fault!r} (expected one of "
                f"{', '.join(FAULT_NAMES)})"
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


def cursor_key(case_id: str, downstream: str) -> str:
    return f"faults#{case_id}#{downstream}"


class FaultInjector:
    """Hands out the next fault of one downstream for one case.

    `next()` returns the fault name for this call, or None when the call behaves normally.
    `unavailable` is sticky: the call that consumes it and every later call of this case to this
    downstream return "unavailable". Stickiness follows from the cursor position (the list is
    the same for every call of a case), so it holds even for calls racing the one that consumed
    the entry; the item also gets a flag so an operator can see it.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        case_id: str,
        downstream: str,
        faults: Sequence[str],
        *,
        clock: Clock = saga_clock.now,
    ) -> None:
        if not case_id:
            raise ValueError("FaultInjector needs a case_id")
        self._faults = validate_faults(downstream, faults)
        self._client = client
        self._table_name = table_name
        self._case_id = case_id
        self._downstream = downstream
        self._clock = clock
        self._sticky_from = self._faults.index(UNAVAILABLE) if UNAVAILABLE in self._faults else None

    @property
    def downstream(self) -> str:
        return self._downstream

    @property
    def faults(self) -> tuple[str, ...]:
        return self._faults

    def next(self) -> str | None:
        # The happy path (no faults configured) costs no request at all.
        if not self._faults:
            return None
        index = self._advance_cursor() - 1
        if self._sticky_from is not None and index >= self._sticky_from:
            if index == self._sticky_from:
                self._mark_unavailable()
            return UNAVAILABLE
        return self._faults[index] if index < len(self._faults) else None

    def _advance_cursor(self) -> int:
        response = self._client.update_item(
            TableName=self._table_name,
            Key={"pk": {"S": cursor_key(self._case_id, self._downstream)}},
            UpdateExpression=(
                # Retention from the latest call: a case redriven weeks later must not see its
                # fault list start over.
                "ADD #cursor :one SET case_id = :case_id, downstream = :downstream, "
                "expires_at = :expires_at"
            ),
            # CURSOR is a DynamoDB reserved word.
            ExpressionAttributeNames={"#cursor": "cursor"},
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":case_id": {"S": self._case_id},
                ":downstream": {"S": self._downstream},
                ":expires_at": {"N": str(int(self._clock()) + CURSOR_RETENTION_SECONDS)},
            },
            ReturnValues="UPDATED_NEW",
        )
        return int(response["Attributes"]["cursor"]["N"])

    def _mark_unavailable(self) -> None:
        self._client.update_item(
            TableName=self._table_name,
            Key={"pk": {"S": cursor_key(self._case_id, self._downstream)}},
            UpdateExpression="SET unavailable = :true",
            ExpressionAttributeValues={":true": {"BOOL": True}},
        )
