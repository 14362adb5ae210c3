"""The daily refund counter's writes (docs/design.md §3.12), always inside a ledger transaction:

- the charge, with the refund's first claim: `ADD total :amount`, conditioned on
  `attribute_not_exists(total) OR total <= :headroom`, `:headroom = ceiling - amount` computed
  here (a condition has no arithmetic);
- the give-back, with the FAILED record of a refund the provider refused: `ADD total -amount`
  on the day the record says it charged, conditioned on `total >= :amount`.

Every refund of a tenant and currency writes one item, so concurrent refunds conflict:
a transaction DynamoDB cancelled for a conflict wrote nothing and is sent again after a full
jitter pause, a bounded number of times (`OutcomeWrites.transact_through_conflicts`), so that
contention does not spend the workflow's attempts. No request is made here.
"""

from __future__ import annotations

import random
import time
from typing import Any, cast

from botocore.exceptions import ClientError

from saga.ceilings import DailyCharge, counter_expires_at
from saga.dynamodb import TRANSACTION_CANCELLED, TransactWriteItem, cancellation_codes, error_code

# Repeats of a transaction cancelled for a conflict, and their full-jitter pauses: at most
# about 3 s in all, well inside a function's time (cdk.json `functions.timeout_seconds`).
CONFLICT_ROUNDS = 10
PAUSE_BASE_SECONDS = 0.02
PAUSE_CAP_SECONDS = 0.5
_TOTAL = {"#total": "total"}  # TOTAL is a reserved word in DynamoDB expressions


class ChargeRefused(Exception):
    """The counter's condition failed: this refund would take the day's total past the ceiling.
    Nothing was written. `used`: the day's total as DynamoDB returned it (None: not read, the
    refund alone exceeds the ceiling)."""

    def __init__(self, charge: DailyCharge, used: int | None, day: str) -> None:
        super().__init__(f"the daily refund ceiling of {charge.key(day)} is reached")
        self.charge = charge
        self.used = used
        self.day = day


def charge_update(charge: DailyCharge, day: str) -> TransactWriteItem:
    """The charge of `day`'s counter, one item of the claim's transaction."""
    update: dict[str, Any] = {
        "TableName": charge.table_name,
        "Key": {"counter_key": {"S": charge.key(day)}},
        "UpdateExpression": (
            "ADD #total :amount SET tenant_id = :tenant, currency = :currency, utc_day = :day, "
            "expires_at = :expires"
        ),
        "ConditionExpression": "attribute_not_exists(#total) OR #total <= :headroom",
        "ExpressionAttributeNames": _TOTAL,
        "ExpressionAttributeValues": {
            ":amount": {"N": str(charge.amount_minor)},
            ":headroom": {"N": str(charge.headroom)},
            ":tenant": {"S": charge.tenant_id},
            ":currency": {"S": charge.currency},
            ":day": {"S": day},
            ":expires": {"N": str(counter_expires_at(day, charge.retention_seconds))},
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    return cast("TransactWriteItem", {"Update": update})


def give_back_update(charge: DailyCharge, day: str, amount_minor: int) -> TransactWriteItem:
    """`amount_minor` back to the counter of `day`, the day the refund's record says it charged:
    one item of the rejection's transaction. Its condition fails on a counter TTL deleted or
    holding less (then nothing is given back: the ceiling only gets stricter)."""
    update: dict[str, Any] = {
        "TableName": charge.table_name,
        "Key": {"counter_key": {"S": charge.key(day)}},
        "UpdateExpression": "ADD #total :minus",
        "ConditionExpression": "#total >= :amount",
        "ExpressionAttributeNames": _TOTAL,
        "ExpressionAttributeValues": {
            ":minus": {"N": str(-amount_minor)},
            ":amount": {"N": str(amount_minor)},
        },
    }
    return cast("TransactWriteItem", {"Update": update})


def counter_total(item: Any) -> int | None:
    """The `total` of a counter item as a cancellation reason returned it (ALL_OLD)."""
    total = (item or {}).get("total", {}).get("N")
    return int(total) if total is not None else None


def conflicted(exc: ClientError) -> bool:
    """DynamoDB cancelled the transaction for a conflict with another one on an item, and for
    nothing a repeat would meet again (a failed condition)."""
    if error_code(exc) != TRANSACTION_CANCELLED:
        return False
    codes = cancellation_codes(exc)
    return "TransactionConflict" in codes and "ConditionalCheckFailed" not in codes


def full_jitter_pause(repeat: int) -> None:
    """Before repeat `repeat` (from 0): uniform(0, min(cap, base * 2**repeat)) seconds."""
    time.sleep(random.uniform(0, min(PAUSE_CAP_SECONDS, PAUSE_BASE_SECONDS * 2**repeat)))
