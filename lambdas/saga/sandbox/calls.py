"""How a call to a remote sandbox (the payment provider, the carrier) ends, as its caller sees it:
the faults it acts out before its work or instead of an answer, and what a DynamoDB failure of
its own tables means to the caller. Everything raised here is a port error (saga.ports).

And the lookup by business reference (docs/design.md §3.5), through the reference index: its item
lives in the sandbox control table (`ref#<kind>#<reference>`) and is written in the same
transaction as each effect item, so a consistent read of it is an authoritative answer
to "what exists for this reference?". A secondary index on the effect tables would be eventually
consistent: a lookup right after a lost response could miss the item there and re-send the
effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ParamValidationError,
)

from saga.dynamodb import error_code, read_item, to_attr
from saga.fault_plan import (
    FAIL_BEFORE_COMMIT,
    IN_FLIGHT,
    LOSE_RESPONSE,
    REJECT,
    TIMEOUT,
    UNAVAILABLE,
)
from saga.ports import (
    DownstreamError,
    DownstreamNotDispatched,
    DownstreamRejected,
    DownstreamTimeout,
    DownstreamUnavailable,
)
from saga.sandbox.faults import FaultInjector

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

# Answers after which DynamoDB may or may not have applied the write.
_AMBIGUOUS_CODES = frozenset({"InternalServerError", "ServiceUnavailable", "RequestTimeout"})


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


def classify_failure(exc: Exception, *, downstream: str, action: str) -> DownstreamError:
    """What a failed sandbox write means to the caller: provably nothing, or unknown.

    A ParamValidationError is a bug in the sandbox itself and is not classified (re-raise it).
    """
    if isinstance(exc, ParamValidationError):
        raise exc
    if isinstance(exc, ConnectTimeoutError | EndpointConnectionError):
        # The request never reached the service.
        return DownstreamNotDispatched(f"{action}: not sent ({exc})", downstream=downstream)
    if isinstance(exc, BotoCoreError):
        return DownstreamTimeout(f"{action}: no answer ({exc})", downstream=downstream)
    if isinstance(exc, ClientError) and error_code(exc) in _AMBIGUOUS_CODES:
        return DownstreamTimeout(
            f"{action}: outcome unknown ({error_code(exc)})", downstream=downstream
        )
    # Any other service answer (throttling, cancelled transaction, ...) is a definite "not done".
    return DownstreamNotDispatched(f"{action}: failed ({exc})", downstream=downstream)


# --- the reference index --------------------------------------------------------------------------
def reference_key(kind: str, business_ref: str) -> str:
    return f"ref#{kind}#{business_ref}"


def append_reference_update(
    table_name: str, kind: str, business_ref: str, receipt: dict[str, Any]
) -> TransactWriteItemTypeDef:
    """A TransactWriteItems `Update` adding one receipt to the business-reference index."""
    return {
        "Update": {
            "TableName": table_name,
            "Key": {"pk": {"S": reference_key(kind, business_ref)}},
            "UpdateExpression": (
                "SET receipts = list_append(if_not_exists(receipts, :empty), :receipt), "
                "business_ref = :ref, kind = :kind"
            ),
            "ExpressionAttributeValues": {
                ":empty": {"L": []},
                ":receipt": {"L": [to_attr(receipt)]},
                ":ref": {"S": business_ref},
                ":kind": {"S": f"{kind}_reference"},
            },
        }
    }


def read_references(
    client: DynamoDBClient, table_name: str, kind: str, business_ref: str
) -> list[dict[str, Any]]:
    """Every receipt recorded for the reference, oldest first (a consistent read)."""
    index = read_item(client, table_name, {"pk": reference_key(kind, business_ref)})
    return [dict(receipt) for receipt in (index or {}).get("receipts", [])]


def find_by_reference(
    client: DynamoDBClient,
    sandbox_table: str,
    kind: str,
    business_ref: str,
    *,
    faults: FaultInjector,
    action: str,
) -> list[dict[str, Any]]:
    """A lookup by business reference: consumes this call's fault, then reads the index."""
    draw_lookup_fault(faults, action=action)
    try:
        return read_references(client, sandbox_table, kind, business_ref)
    except (BotoCoreError, ClientError) as exc:
        raise classify_failure(exc, downstream=faults.downstream, action=action) from exc
