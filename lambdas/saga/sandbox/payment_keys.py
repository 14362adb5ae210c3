"""The sandbox payment provider's idempotency keys, Stripe-like (the contract is in payments.py).

Each key is an item `idem#<key>` in SANDBOX_TABLE: claimed IN_FLIGHT by the first request, then
COMPLETED with that request's response (status + body) stored on it, which every repeat with the
same parameters is answered with. This module holds the key's states and its writes; the refunds
themselves are the service's (payments.py).
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from saga import clock as saga_clock
from saga.clock import Clock
from saga.dynamodb import (
    condition_failed_item,
    from_item,
    is_condition_failure,
    read_item,
    to_attr,
    to_item,
)
from saga.identity import sha256_hex
from saga.ports import DownstreamConflict, DownstreamNotDispatched
from saga.sandbox.calls import classify_failure

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import UpdateTypeDef

DOWNSTREAM: Final = "refund"  # the fault list it draws from, and the label on its errors
PAYMENT_KEY_RETENTION_SECONDS: Final = 24 * 3600
# A claimed key whose request died mid-flight (nothing committed: the refund and the response are
# one transaction) may be taken over by a retry with the same parameters after this long.
IN_FLIGHT_LOCK_SECONDS: Final = 30

IN_FLIGHT: Final = "IN_FLIGHT"
COMPLETED: Final = "COMPLETED"
# Only the request that holds the key may complete or release it.
_HELD_BY_OWNER: Final = "#state = :in_flight AND #owner = :owner"


@dataclass(frozen=True)
class ProviderResponse:
    """What the provider answered: an HTTP-like status and a JSON body."""

    status: int
    body: dict[str, Any]
    # Stripe's `Idempotent-Replayed: true`: the body is the stored answer of an earlier request.
    replayed: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def error_body(kind: str, code: str, message: str) -> dict[str, Any]:
    return {"error": {"type": kind, "code": code, "message": message}}


def idempotency_item_key(idempotency_key: str) -> str:
    return f"idem#{idempotency_key}"


@dataclass(frozen=True)
class Claim:
    """One request's claim of a key: `existing` is the key's record when it was held already."""

    owner: str
    now: int
    digest: str
    existing: dict[str, Any] | None


class PaymentKeys:
    """The idempotency-key items in the sandbox control table."""

    def __init__(
        self,
        client: DynamoDBClient,
        sandbox_table: str,
        retention_seconds: int,
        clock: Clock = saga_clock.now,
    ) -> None:
        self.client = client
        self.sandbox_table = sandbox_table
        self.retention_seconds = retention_seconds
        self.clock = clock

    def claim(
        self,
        idempotency_key: str,
        params: dict[str, Any],
        *,
        action: str,
        locked_for: int = IN_FLIGHT_LOCK_SECONDS,
    ) -> Claim:
        """Claim the key for this request, or read the record of the request that holds it."""
        digest = "sha256:" + sha256_hex(params)
        owner = uuid.uuid4().hex
        now = int(self.clock())
        item = {
            "pk": idempotency_item_key(idempotency_key),
            "kind": "payment_idempotency_key",
            "idempotency_key": idempotency_key,
            "state": IN_FLIGHT,
            "request_digest": digest,
            "owner": owner,
            "locked_until": now + locked_for,
            "case_id": params["case_id"],
            "business_ref": params["business_ref"],
            "created_at": now,
            "expires_at": now + self.retention_seconds,
        }
        try:
            self.client.put_item(
                TableName=self.sandbox_table,
                Item=to_item(item),
                # New key, a key past its retention (TTL deletion lags, so check it here), or a
                # request that died in flight with the same parameters (nothing was committed).
                ConditionExpression=(
                    "attribute_not_exists(pk) OR expires_at <= :now OR "
                    "(#state = :in_flight AND locked_until <= :now AND request_digest = :digest)"
                ),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={
                    ":now": {"N": str(now)},
                    ":in_flight": {"S": IN_FLIGHT},
                    ":digest": {"S": digest},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except (BotoCoreError, ClientError) as exc:
            old = condition_failed_item(exc) if isinstance(exc, ClientError) else None
            if old:
                return Claim(owner, now, digest, existing=from_item(old))
            # Claiming writes no refund: whatever the claim did, no money moved.
            raise DownstreamNotDispatched(
                f"{action}: idempotency key not claimed ({exc})", downstream=DOWNSTREAM
            ) from exc
        return Claim(owner, now, digest, existing=None)

    def read(self, idempotency_key: str) -> dict[str, Any]:
        """The key's record ({} when there is none: never used, or its retention passed)."""
        key = {"pk": idempotency_item_key(idempotency_key)}
        return read_item(self.client, self.sandbox_table, key) or {}

    def complete_update(
        self, idempotency_key: str, owner: str, response: ProviderResponse
    ) -> UpdateTypeDef:
        """The conditional update that stores the response on the key this request owns."""
        return {
            "TableName": self.sandbox_table,
            "Key": {"pk": {"S": idempotency_item_key(idempotency_key)}},
            "UpdateExpression": (
                "SET #state = :completed, response_status = :status, response_body = :body "
                "REMOVE locked_until"
            ),
            "ConditionExpression": _HELD_BY_OWNER,
            "ExpressionAttributeNames": {"#state": "state", "#owner": "owner"},
            "ExpressionAttributeValues": {
                ":completed": {"S": COMPLETED},
                ":in_flight": {"S": IN_FLIGHT},
                ":owner": {"S": owner},
                ":status": {"N": str(response.status)},
                ":body": to_attr(response.body),
            },
        }

    def store_rejection(self, idempotency_key: str, owner: str, action: str) -> ProviderResponse:
        """Decline the request and store the decline on its key (a repeat is declined too)."""
        response = ProviderResponse(
            402,
            error_body(
                "refund_error", "refund_rejected", "the refund was declined (sandbox fault: reject)"
            ),
        )
        try:
            self.client.update_item(**self.complete_update(idempotency_key, owner, response))
        except (BotoCoreError, ClientError) as exc:
            if isinstance(exc, ClientError) and is_condition_failure(exc):
                raise lost_key(action) from exc
            raise classify_failure(exc, downstream=DOWNSTREAM, action=action) from exc
        return response

    def release(self, idempotency_key: str, owner: str) -> None:
        """Nothing committed: free the key so a retry need not wait for the lock to expire."""
        with contextlib.suppress(BotoCoreError, ClientError):  # the lock expires on its own
            self.client.delete_item(
                TableName=self.sandbox_table,
                Key={"pk": {"S": idempotency_item_key(idempotency_key)}},
                ConditionExpression=_HELD_BY_OWNER,
                ExpressionAttributeNames={"#state": "state", "#owner": "owner"},
                ExpressionAttributeValues={
                    ":in_flight": {"S": IN_FLIGHT},
                    ":owner": {"S": owner},
                },
            )


def answer_for_held_key(record: dict[str, Any], digest: str) -> ProviderResponse:
    """The answer to a request whose key another request holds (or held): a replay of the
    stored response, or why there is none."""
    if record.get("request_digest") != digest:
        return ProviderResponse(
            400,
            error_body(
                "idempotency_error",
                "idempotency_key_mismatch",
                "Keys for idempotent requests can only be used with the same parameters "
                "they were first used with.",
            ),
        )
    if record.get("state") != COMPLETED:
        return ProviderResponse(
            409,
            error_body(
                "idempotency_error",
                "idempotency_key_in_use",
                "There is currently another in-progress request using this idempotency "
                "key. Try again later.",
            ),
        )
    return ProviderResponse(
        int(record["response_status"]), dict(record["response_body"]), replayed=True
    )


def lost_key(action: str) -> DownstreamConflict:
    # Our in-flight lock was taken over by a retry of the same request: it owns the key now.
    return DownstreamConflict(
        f"{action}: the idempotency key is now held by another request", downstream=DOWNSTREAM
    )
