"""Fault handling and the lookup by business reference, shared by the sandbox downstreams."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from saga.adapters.errors import (
    DownstreamNotDispatched,
    DownstreamRejected,
    DownstreamTimeout,
    DownstreamUnavailable,
)
from saga.sandbox import _dynamo
from saga.sandbox.faults import (
    FAIL_BEFORE_COMMIT,
    IN_FLIGHT,
    LOSE_RESPONSE,
    REJECT,
    TIMEOUT,
    UNAVAILABLE,
    FaultInjector,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def draw_fault(faults: FaultInjector, *, action: str) -> str | None:
    """Consume this call's fault and raise for the ones that stop it before any effect.

    Returns None, `reject`, `lose_response` or `in_flight`: the faults the downstream itself
    acts out.
    """
    downstream = faults.downstream
    try:
        fault = faults.next()
    except (BotoCoreError, ClientError) as exc:
        # The sandbox could not even start handling the call: nothing was done.
        raise DownstreamNotDispatched(
            f"{action}: sandbox control unavailable ({exc})", downstream=downstream
        ) from exc
    if fault == UNAVAILABLE:
        raise DownstreamUnavailable(
            f"{action}: {downstream} is unavailable (sandbox fault)", downstream=downstream
        )
    if fault == TIMEOUT:
        raise DownstreamTimeout(
            f"{action}: no response from {downstream} (sandbox fault: timeout)",
            downstream=downstream,
        )
    if fault == FAIL_BEFORE_COMMIT:
        raise DownstreamNotDispatched(
            f"{action}: {downstream} failed before committing anything (sandbox fault)",
            downstream=downstream,
        )
    return fault


def draw_lookup_fault(faults: FaultInjector, *, action: str) -> None:
    """Lookups consume faults too; every fault leaves the caller without an answer."""
    fault = draw_fault(faults, action=action)
    if fault == REJECT:
        raise DownstreamRejected(
            f"{action}: {faults.downstream} refused the lookup (sandbox fault)",
            downstream=faults.downstream,
        )
    if fault in (LOSE_RESPONSE, IN_FLIGHT):  # a lookup has nothing to commit: no answer only
        raise lost_response(faults, action=action)


def lost_response(faults: FaultInjector, *, action: str) -> DownstreamTimeout:
    return DownstreamTimeout(
        f"{action}: the response from {faults.downstream} was lost (sandbox fault: lose_response)",
        downstream=faults.downstream,
    )


def find_by_reference(
    client: DynamoDBClient,
    sandbox_table: str,
    kind: str,
    business_ref: str,
    *,
    faults: FaultInjector,
    action: str,
) -> list[dict[str, Any]]:
    """A lookup by business reference: consumes this call's fault, then reads the reference
    index (oldest receipt first)."""
    draw_lookup_fault(faults, action=action)
    try:
        return _dynamo.read_references(client, sandbox_table, kind, business_ref)
    except (BotoCoreError, ClientError) as exc:
        raise _dynamo.classify_failure(exc, downstream=faults.downstream, action=action) from exc
