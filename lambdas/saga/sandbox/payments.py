"""The sandbox payment provider: refunds with a Stripe-like idempotency contract.

Refunds are items in PAYMENTS_TABLE (one per refund made; a rejected call makes none). Each
idempotency key is an item `idem#<key>` in SANDBOX_TABLE (payment_keys.py):

- first use: the key is claimed IN_FLIGHT (conditional put), the request runs, and its response
  (status + body) is stored on the key **in the same transaction** as the refund item;
- same key + same parameters: the stored status and body are replayed (a stored rejection too);
- same key + other parameters: 400 `idempotency_key_mismatch`, nothing stored;
- same key while the first request is still in flight: 409 `idempotency_key_in_use`, nothing
  stored (safe to repeat later);
- after `key_retention_seconds` (24 h by default, as Stripe) the key is forgotten: the same key
  makes a NEW refund. That is why callers reconcile by business reference after the retention.

The `in_flight` fault is a request the provider accepted and keeps processing after the caller
gave up (a read timeout): its key stays IN_FLIGHT and the refund commits late, after the next
call or lookup for that reference has been answered "in progress" (409) or "not found", and
always within the key retention of the first call (a call after that finds it committed). It
is the interleaving in which a blind repeat after the key retention would refund twice.

Responses are HTTP-like (`ProviderResponse`); faults that leave the caller without a response
are raised as port errors (`saga.ports`), as a real HTTP client would see them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from saga import clock as saga_clock
from saga import fault_plan, formats
from saga.clock import Clock
from saga.dynamodb import cancellation_codes, read_item, to_item
from saga.ports import DownstreamNotDispatched, DownstreamTimeout
from saga.sandbox.calls import (
    append_reference_update,
    classify_failure,
    draw_fault,
    find_by_reference,
    lost_response,
)
from saga.sandbox.faults import FaultInjector
from saga.sandbox.payment_keys import (
    DOWNSTREAM,
    PAYMENT_KEY_RETENTION_SECONDS,
    PaymentKeys,
    ProviderResponse,
    answer_for_held_key,
    error_body,
    lost_key,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

# How long a request accepted `in_flight` is remembered, so that it commits at the next call even
# when nobody asked about it within the key retention.
IN_FLIGHT_RECORD_RETENTION_SECONDS: Final = 30 * 86400

REFERENCE_KIND: Final = "refunds"


def in_flight_item_key(business_ref: str) -> str:
    return f"inflight#{business_ref}"


class SandboxPaymentsService:
    """The provider's server side, backed by DynamoDB."""

    def __init__(
        self,
        client: DynamoDBClient,
        *,
        payments_table: str,
        sandbox_table: str,
        key_retention_seconds: int = PAYMENT_KEY_RETENTION_SECONDS,
        clock: Clock = saga_clock.now,
        new_refund_id: Callable[[], str] = lambda: f"re_{uuid.uuid4().hex}",
    ) -> None:
        if key_retention_seconds <= 0:
            raise ValueError("key_retention_seconds must be positive")
        self.client = client
        self.payments_table = payments_table
        self.sandbox_table = sandbox_table
        self.key_retention_seconds = key_retention_seconds
        self.clock = clock
        self.new_refund_id = new_refund_id
        self._keys = PaymentKeys(client, sandbox_table, key_retention_seconds, clock=clock)

    # --- refunds ----------------------------------------------------------------------------
    def create_refund(
        self,
        *,
        idempotency_key: str,
        case_id: str,
        business_ref: str,
        payment_reference: str,
        amount_minor: int,
        currency: str,
        faults: FaultInjector,
    ) -> ProviderResponse:
        """POST /refunds with an Idempotency-Key."""
        action = f"refund {business_ref}"
        fault = draw_fault(faults, action=action)
        params = {
            "case_id": case_id,
            "business_ref": business_ref,
            "payment_reference": payment_reference,
            "amount_minor": amount_minor,
            "currency": currency,
        }
        invalid = _invalid_parameter(params) or (
            None if idempotency_key else "idempotency_key: must not be empty"
        )
        if invalid is not None:
            # Failed validation: the endpoint never ran, so nothing is stored for the key.
            return ProviderResponse(400, error_body("invalid_request_error", "invalid", invalid))

        self._commit_in_flight(business_ref, faults, only_if_overdue=True)
        if fault == fault_plan.IN_FLIGHT:
            self._accept_in_flight(idempotency_key, params, action)
            raise DownstreamTimeout(
                f"{action}: no response from the provider (sandbox fault: in_flight); the "
                "request is still being processed",
                downstream=DOWNSTREAM,
            )
        response = self._handle(idempotency_key, params, fault=fault, action=action)
        if response.status == 409:
            self._commit_in_flight(business_ref, faults)  # answered "in progress": it commits
        if fault == fault_plan.LOSE_RESPONSE:
            # Whatever happened (a refund, a replay) has happened; only the answer is lost.
            raise lost_response(faults, action=action)
        return response

    def list_refunds(self, business_ref: str, *, faults: FaultInjector) -> list[dict[str, Any]]:
        """GET /refunds?business_ref=...: every refund made for the reference, oldest first."""
        self._commit_in_flight(business_ref, faults, only_if_overdue=True)
        found = find_by_reference(
            self.client,
            self.sandbox_table,
            REFERENCE_KIND,
            business_ref,
            faults=faults,
            action=f"list refunds {business_ref}",
        )
        if not found:
            self._commit_in_flight(business_ref, faults)  # answered "not found": it commits
        return found

    # --- a request accepted but still being processed (the in_flight fault) -------------------
    def _accept_in_flight(self, idempotency_key: str, params: dict[str, Any], action: str) -> None:
        """Claim the key for a request that will commit late; nothing is committed now."""
        claim = self._keys.claim(
            idempotency_key,
            params,
            action=action,
            locked_for=self.key_retention_seconds,  # it is alive: nobody may take the key over
        )
        if claim.existing is not None:
            return  # the key is known already: this call only loses its answer
        self.client.put_item(
            TableName=self.sandbox_table,
            Item=to_item(
                {
                    "pk": in_flight_item_key(params["business_ref"]),
                    "kind": "payment_in_flight",
                    "idempotency_key": idempotency_key,
                    "params": params,
                    "owner": claim.owner,
                    "accepted_at": claim.now,
                    # Halfway through the key retention at the latest: a call after that finds
                    # it committed, whether or not anyone asked in between.
                    "commit_by": claim.now + self.key_retention_seconds // 2,
                    "expires_at": claim.now + IN_FLIGHT_RECORD_RETENTION_SECONDS,
                }
            ),
        )

    def _commit_in_flight(
        self, business_ref: str, faults: FaultInjector, *, only_if_overdue: bool = False
    ) -> None:
        """Commit the request in flight for this reference, if any (only an overdue one: one
        that must have committed by now, always within the key retention of its call)."""
        if fault_plan.IN_FLIGHT not in faults.faults:
            return  # no request of this case can be in flight: no lookup on the happy path
        pending = read_item(
            self.client, self.sandbox_table, {"pk": in_flight_item_key(business_ref)}
        )
        if pending is None:
            return
        now = int(self.clock())
        if only_if_overdue and now < int(pending["commit_by"]):
            return
        key_record = self._keys.read(pending["idempotency_key"])
        # The key may be gone (its retention passed while nobody asked): the refund commits all
        # the same, it was accepted inside the retention; only the stored answer is lost.
        holds_key = key_record.get("owner") == pending["owner"] and (
            int(key_record.get("expires_at", 0)) > now
        )
        self._commit_refund(
            pending["idempotency_key"],
            dict(pending["params"]),
            pending["owner"],
            int(pending["accepted_at"]),
            f"refund {business_ref} (in flight)",
            also=[
                {
                    "Delete": {
                        "TableName": self.sandbox_table,
                        "Key": {"pk": {"S": in_flight_item_key(business_ref)}},
                    }
                }
            ],
            store_on_key=holds_key,
        )

    # --- the idempotency-key state machine -----------------------------------------------
    def _handle(
        self, idempotency_key: str, params: dict[str, Any], *, fault: str | None, action: str
    ) -> ProviderResponse:
        claim = self._keys.claim(idempotency_key, params, action=action)
        if claim.existing is not None:
            return answer_for_held_key(claim.existing, claim.digest)
        if fault == fault_plan.REJECT:
            return self._keys.store_rejection(idempotency_key, claim.owner, action)
        return self._commit_refund(idempotency_key, params, claim.owner, claim.now, action)

    def _commit_refund(  # noqa: PLR0917 (the request's parts, in the order it carries them)
        self,
        idempotency_key: str,
        params: dict[str, Any],
        owner: str,
        now: int,
        action: str,
        also: list[TransactWriteItemTypeDef] | None = None,
        *,
        store_on_key: bool = True,
    ) -> ProviderResponse:
        refund_id = self.new_refund_id()
        refund = {
            "refund_id": refund_id,
            **params,
            "idempotency_key": idempotency_key,
            "status": "succeeded",
            "created_at": now,
        }
        body = {
            "id": refund_id,
            "object": "refund",
            "status": "succeeded",
            "amount_minor": params["amount_minor"],
            "currency": params["currency"],
            "payment_reference": params["payment_reference"],
            "business_ref": params["business_ref"],
            "created": now,
        }
        response = ProviderResponse(200, body)
        receipt = {
            "refund_id": refund_id,
            "business_ref": params["business_ref"],
            "amount_minor": params["amount_minor"],
            "currency": params["currency"],
            "status": "succeeded",
            "created_at": now,
        }
        key_update: list[TransactWriteItemTypeDef] = (
            [{"Update": self._keys.complete_update(idempotency_key, owner, response)}]
            if store_on_key
            else []
        )
        try:
            # The refund, the stored response and the reference index commit together: a request
            # that dies before this line leaves nothing behind but an in-flight key.
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.payments_table,
                            "Item": to_item(refund),
                            "ConditionExpression": "attribute_not_exists(refund_id)",
                        }
                    },
                    *key_update,
                    append_reference_update(
                        self.sandbox_table, REFERENCE_KIND, params["business_ref"], receipt
                    ),
                    *(also or []),
                ]
            )
        except (BotoCoreError, ClientError) as exc:
            # Item 1 of the transaction is the key update: its condition failing means our lock
            # was taken over.
            codes = cancellation_codes(exc) if isinstance(exc, ClientError) else []
            if store_on_key and len(codes) > 1 and codes[1] == "ConditionalCheckFailed":
                raise lost_key(action) from exc
            failure = classify_failure(exc, downstream=DOWNSTREAM, action=action)
            if isinstance(failure, DownstreamNotDispatched):
                self._keys.release(idempotency_key, owner)
            raise failure from exc
        return response


def _invalid_parameter(params: dict[str, Any]) -> str | None:
    for name in ("case_id", "business_ref", "payment_reference"):
        if not isinstance(params[name], str) or not params[name]:
            return f"{name}: must be a non-empty string"
    amount = params["amount_minor"]
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        return "amount_minor: must be a positive integer (minor units)"
    problem = formats.currency_problem(params["currency"])
    return None if problem is None else f"currency: {problem}"
