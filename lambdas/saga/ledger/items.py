"""The ledger record as DynamoDB holds it (docs/design.md §3.1): a whole item, and the conditions
that
hold only while a record is exactly as a delivery saw it. No request is made here (store.py).
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

from saga.dynamodb import TransactWriteItem, number, to_attr
from saga.identity import ActionRequest, parse_action_key
from saga.ledger.records import OPEN_STATUSES, Attempt, LedgerRecord, LedgerStatus, Resolution

CLAIM_CONDITION = "attribute_not_exists(action_key)"
OWNED = "#owner = :me AND #status = :in_progress"
_ALIASED = ("status", "owner", "result", "error")  # reserved words in DynamoDB expressions


def record_item(
    request: ActionRequest,
    attempt: Attempt,
    now: float,
    *,
    expires_at: int | None,
    status: LedgerStatus,
    attempts: int,
    lease_expires_at: float | None = None,
    result: dict[str, Any] | None = None,
    error: dict[str, str] | None = None,
    downstream_ref: str | None = None,
    owner: bool = True,
    carried: LedgerRecord | None = None,
    reconcile_rounds: int = 0,
    first_dispatch_at: float | None = None,
    escalated: bool = False,
    charged: tuple[str, int] | None = None,
) -> dict[str, Any]:
    """A whole record. `carried`: the record it replaces (keeps its history fields).
    `expires_at`: its retention, None for an open record (§3.7). `charged`: the UTC day and
    amount its first claim charges to the daily refund counter (§3.12)."""
    if carried is not None:
        reconcile_rounds = carried.reconcile_rounds
        first_dispatch_at = carried.first_dispatch_at
        if carried.charged_day is not None:
            charged = (carried.charged_day, carried.charged_minor or 0)
    item: dict[str, Any] = {
        "action_key": {"S": request.key},
        "status": {"S": status.value},
        "request_digest": {"S": request.digest},
        "lease_expires_at": number(now if lease_expires_at is None else lease_expires_at),
        "attempts": {"N": str(attempts)},
        "business_ref": {"S": request.reference},
        "case_id": {"S": request.case_id},
        "created_at": carried.item.get("created_at", number(now)) if carried else number(now),
        "updated_at": number(now),
        "claimed_at": number(now),
    }
    if expires_at is not None:
        item["expires_at"] = {"N": str(expires_at)}
    if first_dispatch_at is not None:
        item["first_dispatch_at"] = number(first_dispatch_at)
    if escalated:
        item["escalated_at"] = number(now)
    if reconcile_rounds:
        item["reconcile_rounds"] = {"N": str(reconcile_rounds)}
    if owner:
        item["owner"] = {"S": attempt.attempt_id}
    if charged is not None:
        item["charged_day"] = {"S": charged[0]}
        item["charged_minor"] = {"N": str(charged[1])}
    if status in OPEN_STATUSES:
        item["open_status"] = {"S": status.value}
    if result is not None:
        item["result"] = to_attr(result)
    if error is not None:
        item["error"] = to_attr(error)
    optional = {
        "downstream_ref": downstream_ref,
        "execution_arn": request.execution_arn,
        "compensates": request.compensates,
    }
    for name, value in optional.items():
        if value is not None:
            item[name] = {"S": value}
    return item


def put_condition(over: LedgerRecord | None) -> dict[str, Any]:
    """Condition arguments of a whole-record Put: a new record, or over the one seen."""
    if over is None:
        return {"ConditionExpression": CLAIM_CONDITION}
    values: dict[str, Any] = {":old_status": {"S": over.status.value}}
    condition = "#status = :old_status" + same_as_seen(over, values)
    return {
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names(condition),
        "ExpressionAttributeValues": values,
    }


def same_as_seen(old: LedgerRecord, values: dict[str, Any]) -> str:
    """Condition clauses that hold only while the record is exactly as `old` saw it.

    Every record a delivery acts on was seen unsettled (a settled one is decided SETTLED), so
    a person's decision made after that read fails the write: no takeover, retry count or
    reconciled outcome lands on a settled record.
    """
    values[":old_lease"] = old.item.get("lease_expires_at", {"N": "0"})
    values[":old_attempts"] = old.item.get("attempts", {"N": "0"})
    clauses = (
        " AND lease_expires_at = :old_lease AND attempts = :old_attempts"
        " AND attribute_not_exists(resolution)"
    )
    if old.owner is None:
        return clauses + " AND attribute_not_exists(#owner)"
    values[":old_owner"] = {"S": old.owner}
    return clauses + " AND #owner = :old_owner"


def remember_dispatch(seen: LedgerRecord, now: float, values: dict[str, Any]) -> str:
    """SET clause keeping, for good, that a delivery before `seen` may have dispatched."""
    since = seen.may_have_dispatched_since(now)
    if since is None:
        return ""
    values[":since"] = number(since)
    return ", first_dispatch_at = if_not_exists(first_dispatch_at, :since)"


def names(*expressions: str) -> dict[str, str]:
    """ExpressionAttributeNames for the placeholders used (DynamoDB rejects unused ones)."""
    used = " ".join(expressions)
    return {f"#{name}": name for name in _ALIASED if f"#{name}" in used}


def settlement_update(
    table_name: str, seen: LedgerRecord, resolution: Resolution, now: float
) -> TransactWriteItem:
    """A person's settlement of an open record (docs/design.md §3.10) as one TransactWriteItems
    item,
    conditional on the record exactly as `seen`: it keeps its status, gains `resolution`, loses
    `open_status` (the sweeper's index) and `expires_at` (TTL never deletes the decision)."""
    values: dict[str, Any] = {
        ":seen_status": {"S": seen.status.value},
        ":resolution": to_attr(resolution.to_record()),
        ":now": number(now),
    }
    condition = "#status = :seen_status" + same_as_seen(seen, values)
    expression = "SET resolution = :resolution, updated_at = :now REMOVE open_status, expires_at"
    update: dict[str, Any] = {
        "TableName": table_name,
        "Key": {"action_key": {"S": seen.action_key}},
        "UpdateExpression": expression,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names(expression, condition),
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    return cast("TransactWriteItem", {"Update": update})


def settled_placeholder(
    table_name: str,
    action_key: str,
    *,
    case_id: str,
    resolution: Resolution,
    now: float,
    compensates: str | None = None,
) -> TransactWriteItem:
    """A person's decision on an action that has no record (docs/design.md §3.10), as one
    TransactWriteItems item: a SETTLED record, written only where none exists (the claim's own
    condition), so that whichever comes second loses: a claim after it meets SETTLED, and it
    fails (the transaction with it) after a claim. No request digest (the parameters are not
    known here), no attempt, no owner, no retention, no `open_status`."""
    _, _, action_id = parse_action_key(action_key)
    item: dict[str, Any] = {
        "action_key": {"S": action_key},
        "status": {"S": LedgerStatus.SETTLED.value},
        "resolution": to_attr(resolution.to_record()),
        "attempts": {"N": "0"},
        "lease_expires_at": {"N": "0"},
        "business_ref": {"S": action_id},
        "case_id": {"S": case_id},
        "created_at": number(now),
        "updated_at": number(now),
        "claimed_at": number(now),
    }
    if compensates is not None:
        item["compensates"] = {"S": compensates}
    put: dict[str, Any] = {
        "TableName": table_name,
        "Item": item,
        "ConditionExpression": CLAIM_CONDITION,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    return cast("TransactWriteItem", {"Put": put})


class Outcome(NamedTuple):
    """What a delivery learned, to be written on the record it holds (§3.4)."""

    status: LedgerStatus
    result: dict[str, Any] | None = None
    downstream_ref: str | None = None
    error: dict[str, str] | None = None
    dispatched_at: float | None = None  # this delivery (claimed then) may have dispatched


def outcome_update(
    outcome: Outcome, owner: str, now: float, *, expires_at: int | None, settled: bool
) -> tuple[str, str, dict[str, Any]]:
    """(UpdateExpression, ConditionExpression, values) of an outcome written by the delivery
    that holds the record (§3.3). An unsettled record only; or, `settled`, a record a person
    settled meanwhile (§3.10), which keeps its `resolution` and gets no `open_status` and no
    retention: the decision stays, and so does what the delivery did."""
    status = outcome.status
    values: dict[str, Any] = {
        ":me": {"S": owner},
        ":in_progress": {"S": LedgerStatus.IN_PROGRESS.value},
        ":status": {"S": status.value},
        ":now": number(now),
    }
    sets = ["#status = :status", "updated_at = :now"]
    removes = ["open_status"]
    if outcome.dispatched_at is not None:
        values[":dispatched"] = number(outcome.dispatched_at)
        sets.append("first_dispatch_at = if_not_exists(first_dispatch_at, :dispatched)")
    if expires_at is not None:
        values[":expires"] = {"N": str(expires_at)}
        sets.append("expires_at = :expires")
    else:
        removes.append("expires_at")
    if status is LedgerStatus.COMPLETED:
        values[":result"] = to_attr(outcome.result or {})
        sets.append("#result = :result")
        removes.append("#error")
        if outcome.downstream_ref is not None:
            values[":ref"] = {"S": outcome.downstream_ref}
            sets.append("downstream_ref = :ref")
    else:
        values[":error"] = to_attr(outcome.error or {})
        sets.append("#error = :error")
    if status is LedgerStatus.UNKNOWN:
        sets.append("lease_expires_at = :now")
        if not settled:  # UNKNOWN stays open for the sweeper (its index sorts by this status)
            sets.append("open_status = :status")
            removes.remove("open_status")
    expression = f"SET {', '.join(sets)} REMOVE {', '.join(removes)}"
    settlement = "attribute_exists(resolution)" if settled else "attribute_not_exists(resolution)"
    return expression, f"{OWNED} AND {settlement}", values
