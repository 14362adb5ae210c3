"""The ledger table's conditional writes (docs/design.md §3.2, §3.3, §3.7, §3.10). Nothing is
decided here: every write holds only while the record is as its caller saw it, and says what
it found.

- the claim: one `PutItem` on `attribute_not_exists(action_key)`, ALL_OLD on failure (the
  old record is the whole answer, no second read); for a refund under a daily ceiling, that
  put and the counter's charge in one TransactWriteItems (§3.12), as is the takeover of a
  placeholder no delivery claimed;
- a whole record over the one seen (a takeover inside a transaction, a recorded failure);
- a takeover: a conditional update on the owner, the lease, the status and the attempt count;
- reconciliation's writes on the record as seen: found or unknown (`settle_seen`), a counted
  RETRY, an escalation mark; a person's settlement;
- a delivery's outcome and a given-back lease, and the retention rule: outcome_writes.py.

Retention (§3.7): a write that closes a record (COMPLETED, FAILED) sets `expires_at`; every
write that leaves it open (IN_PROGRESS, UNKNOWN) removes it, so an open record is never deleted
by TTL. Failures that left the record untouched are TransientError (safe to repeat); an outcome
that could not be recorded is OutcomeUnknown.
"""

from __future__ import annotations

from typing import Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from saga.ceilings import DailyCharge, utc_day
from saga.dynamodb import (
    TRANSACTION_CANCELLED,
    TransactWriteItem,
    cancellation_codes,
    cancellation_reasons,
    condition_failed_item,
    error_code,
    is_condition_failure,
    number,
    to_attr,
)
from saga.errors import OutcomeUnknown, TransientError
from saga.identity import ActionRequest
from saga.ledger.charges import ChargeRefused, charge_update, counter_total
from saga.ledger.decisions import earlier_record_may_have_expired
from saga.ledger.items import (
    CLAIM_CONDITION,
    names,
    put_condition,
    record_item,
    remember_dispatch,
    same_as_seen,
)
from saga.ledger.outcome_writes import (
    LeaseLost,
    NotCommitted,
    OutcomeWrites,
    SettledMeanwhile,
    record_or_none,
)
from saga.ledger.records import (
    Attempt,
    Found,
    LedgerRecord,
    LedgerStatus,
)

__all__ = ["ChargeRefused", "LeaseLost", "LedgerStore", "NotCommitted", "SettledMeanwhile"]

# Appended to the SET of every update that leaves a record open (§3.7).
_OPEN_KEEPS_NO_RETENTION = " REMOVE expires_at"
_CONDITION_CHECK = "ConditionalCheckFailed"  # a transaction item's cancellation reason


class LedgerStore(OutcomeWrites):
    """The conditional reads and writes of one ledger table."""

    # --- reads -----------------------------------------------------------------------------------
    def get(self, action_key: str) -> LedgerRecord | None:
        """Consistent read of one record."""
        try:
            response = self.client.get_item(
                TableName=self.table_name,
                Key={"action_key": {"S": action_key}},
                ConsistentRead=True,
            )
        except (ClientError, BotoCoreError) as exc:
            raise TransientError(f"ledger read of {action_key} failed: {exc}") from exc
        item = response.get("Item")
        return LedgerRecord.from_item(item) if item else None

    # --- whole records -------------------------------------------------------------------------
    def claim(
        self, request: ActionRequest, attempt: Attempt, charge: DailyCharge | None = None
    ) -> tuple[LedgerRecord, LedgerRecord | None]:
        """The claim PutItem: (the record written, None) when claimed; else (the record this
        claim would have written, the record already there). A ledger that cannot be reached
        (after botocore's retries) raises TransientError: nothing was dispatched. With a
        `charge`, the record says the day it charges and the put goes with the counter's charge
        (`put_new_charged`): ChargeRefused when the day's total would pass the ceiling."""
        now = self.clock()
        day = utc_day(now)  # the ledger's clock: the day a charge goes to
        item = self.record(
            request,
            attempt,
            now,
            LedgerStatus.IN_PROGRESS,
            attempts=1,
            lease_expires_at=now + self.policy.lease_seconds(attempt.remaining_seconds),
            first_dispatch_at=earlier_record_may_have_expired(
                attempt.execution_started_at,
                now=now,
                retention_seconds=self.policy.retention_seconds,
            ),
            charged=(day, charge.amount_minor) if charge is not None else None,
        )
        if charge is None:
            return LedgerRecord.from_item(item), self.put_new(item)
        return LedgerRecord.from_item(item), self.put_new_charged(item, charge, day)

    def record(
        self,
        request: ActionRequest,
        attempt: Attempt,
        now: float,
        status: LedgerStatus,
        **fields: Any,
    ) -> dict[str, Any]:
        """A whole record (items.record_item) written at `now`; a closed one expires the
        policy's retention after it, an open one never (§3.7)."""
        return record_item(
            request, attempt, now, expires_at=self._expiry(status, now), status=status, **fields
        )

    def put_new(
        self, item: dict[str, Any], *, over: LedgerRecord | None = None
    ) -> LedgerRecord | None:
        """Put `item` if no record exists (or, with `over`, only while the record is exactly as
        `over` saw it). None = written; otherwise the record that was there."""
        key = item["action_key"]["S"]
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=item,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **put_condition(over),
            )
        except ClientError as exc:
            old = condition_failed_item(exc)
            if old is None:
                # Every new record is written before anything is dispatched: safe to repeat.
                raise TransientError(f"ledger write for {key} failed: {exc}") from exc
            return LedgerRecord.from_item(old)
        except BotoCoreError as exc:
            raise TransientError(f"ledger write for {key} failed: {exc}") from exc
        return None

    def put_new_charged(
        self, item: dict[str, Any], charge: DailyCharge, day: str
    ) -> LedgerRecord | None:
        """`put_new` of a claim and the charge of `day`'s counter in ONE TransactWriteItems
        (§3.12), repeated through conflicts: None = both written; otherwise the record that was
        there (nothing charged). ChargeRefused when the counter's condition failed (the day's
        total would pass the ceiling), or without a request when the refund alone exceeds it
        (a ceiling lowered since ValidateCase accepted the case): nothing written."""
        key = item["action_key"]["S"]
        if charge.headroom < 0:
            raise ChargeRefused(charge, None, day)
        claim: TransactWriteItem = {
            "Put": {
                "TableName": self.table_name,
                "Item": item,
                "ConditionExpression": CLAIM_CONDITION,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        try:
            self.transact_through_conflicts([claim, charge_update(charge, day)])
        except ClientError as exc:
            found = self._charged_write_refused(key, exc, charge, day)
            if found is None:
                raise TransientError(f"ledger claim of {key} met a record that vanished") from exc
            return found
        except BotoCoreError as exc:
            raise TransientError(f"ledger write for {key} failed: {exc}") from exc
        return None

    def _charged_write_refused(
        self, key: str, exc: ClientError, charge: DailyCharge, day: str
    ) -> LedgerRecord | None:
        """What a cancelled charged write (a claim, a placeholder's takeover) met: the record
        (the ledger's condition failed; None: it returned none), or ChargeRefused (the
        counter's); anything else wrote nothing and is TransientError."""
        if error_code(exc) != TRANSACTION_CANCELLED:
            # Nothing was dispatched: safe to repeat (a lost answer left at most an open record
            # this delivery held, which the next delivery takes over and looks up).
            raise TransientError(f"ledger write for {key} failed: {exc}") from exc
        reasons = [*cancellation_reasons(exc), {}, {}]
        if reasons[0].get("Code") == _CONDITION_CHECK:
            old = reasons[0].get("Item")  # ALL_OLD: absent only if the record vanished since
            return LedgerRecord.from_item(old) if old else None
        if reasons[1].get("Code") == _CONDITION_CHECK:
            raise ChargeRefused(charge, counter_total(reasons[1].get("Item")), day) from exc
        codes = ", ".join(cancellation_codes(exc))
        raise TransientError(
            f"ledger write for {key} cancelled ({codes}); nothing was written: retry"
        ) from exc

    # --- a delivery's updates ------------------------------------------------------------------
    def take_over(
        self,
        request: ActionRequest,
        attempt: Attempt,
        old: LedgerRecord,
        charge: DailyCharge | None = None,
    ) -> tuple[LedgerRecord | None, LedgerRecord | None]:
        """Conditional takeover: (new record, None) if won, else (None, the current record).
        With a `charge` (the record is a placeholder no delivery claimed, §3.12), the takeover
        is the first claim: it charges the day's counter in the same transaction (ChargeRefused
        when the day's total would pass the ceiling)."""
        now = self.clock()
        values: dict[str, Any] = {
            ":me": {"S": attempt.attempt_id},
            ":lease": number(now + self.policy.lease_seconds(attempt.remaining_seconds)),
            ":one": {"N": "1"},
            ":in_progress": {"S": LedgerStatus.IN_PROGRESS.value},
            ":now": number(now),
            ":old_status": {"S": old.status.value},
        }
        sets = (
            "SET #owner = :me, lease_expires_at = :lease, attempts = attempts + :one, "
            "#status = :in_progress, open_status = :in_progress, updated_at = :now, "
            "claimed_at = :now"
        )
        # The owner before us may have reached the downstream: remember it for good.
        sets += remember_dispatch(old, now, values)
        if charge is not None:
            day = utc_day(now)
            values[":charged_day"] = {"S": day}
            values[":charged_minor"] = {"N": str(charge.amount_minor)}
            sets += ", charged_day = :charged_day, charged_minor = :charged_minor"
        sets += _OPEN_KEEPS_NO_RETENTION
        condition = "#status = :old_status" + same_as_seen(old, values)
        if charge is not None:
            return self._take_over_charged(
                request, old, sets=sets, condition=condition, values=values, charge=charge, day=day
            )
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key={"action_key": {"S": request.key}},
                UpdateExpression=sets,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#status": "status", "#owner": "owner"},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                # Nothing was taken over; the delivery is safe to repeat.
                raise TransientError(f"ledger takeover of {request.key} failed: {exc}") from exc
            current = record_or_none(condition_failed_item(exc))
            if (
                current is not None
                and current.owner == attempt.attempt_id
                and current.status is LedgerStatus.IN_PROGRESS
                and current.attempts == old.attempts + 1
            ):
                # Our own takeover, retried by the SDK after a lost response. It must still
                # reconcile first: seen as a plain own claim it would dispatch blind.
                return current, None
            return None, current
        except BotoCoreError as exc:
            raise TransientError(f"ledger takeover of {request.key} failed: {exc}") from exc
        return LedgerRecord.from_item(response["Attributes"]), None

    def _take_over_charged(
        self,
        request: ActionRequest,
        old: LedgerRecord,
        *,
        sets: str,
        condition: str,
        values: dict[str, Any],
        charge: DailyCharge,
        day: str,
    ) -> tuple[LedgerRecord | None, LedgerRecord | None]:
        """The takeover's update and the counter's charge in one transaction. A transaction
        answers no attributes: the record returned is the one seen as the update left it."""
        if charge.headroom < 0:
            raise ChargeRefused(charge, None, day)
        takeover: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {"action_key": {"S": request.key}},
            "UpdateExpression": sets,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#status": "status", "#owner": "owner"},
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        try:
            self.transact_through_conflicts(
                [cast("TransactWriteItem", {"Update": takeover}), charge_update(charge, day)]
            )
        except ClientError as exc:
            return None, self._charged_write_refused(request.key, exc, charge, day)
        except BotoCoreError as exc:
            raise TransientError(f"ledger takeover of {request.key} failed: {exc}") from exc
        item = {name: value for name, value in old.item.items() if name != "expires_at"}
        item |= {
            "owner": values[":me"],
            "lease_expires_at": values[":lease"],
            "attempts": {"N": str(old.attempts + 1)},
            "status": values[":in_progress"],
            "open_status": values[":in_progress"],
            "updated_at": values[":now"],
            "claimed_at": values[":now"],
            "charged_day": values[":charged_day"],
            "charged_minor": values[":charged_minor"],
        }
        if ":since" in values:
            item.setdefault("first_dispatch_at", values[":since"])
        return LedgerRecord.from_item(item), None

    # --- reconciliation's writes, on the record as seen ----------------------------------------
    def settle_seen(
        self,
        request: ActionRequest,
        seen: LedgerRecord,
        *,
        found: Found | None = None,
        unknown_reason: str | None = None,
    ) -> LedgerRecord | None:
        """COMPLETED with what was found, or UNKNOWN and escalated; None if the record changed."""
        now = self.clock()
        values = self._seen_values(seen, now)
        condition = "#status = :seen_status" + same_as_seen(seen, values)
        if found is not None:
            values[":completed"] = {"S": LedgerStatus.COMPLETED.value}
            values[":result"] = to_attr(found.result)
            values[":expires"] = {"N": str(self._expiry(LedgerStatus.COMPLETED, now))}
            expression = (
                "SET #status = :completed, #result = :result, updated_at = :now, "
                "expires_at = :expires"
            )
            if found.downstream_ref is not None:
                values[":ref"] = {"S": found.downstream_ref}
                expression += ", downstream_ref = :ref"
            expression += " REMOVE open_status, #error"
        else:
            error = OutcomeUnknown(unknown_reason or "undeterminable").to_record()
            values[":unknown"] = {"S": LedgerStatus.UNKNOWN.value}
            values[":error"] = to_attr(error)
            # Only reconciliation writes UNKNOWN here, when it escalates: from now on a person
            # decides, and no late delivery may act on the record.
            expression = (
                (
                    "SET #status = :unknown, open_status = :unknown, #error = :error, "
                    "lease_expires_at = :now, updated_at = :now, escalated_at = :now"
                )
                + remember_dispatch(seen, now, values)
                + _OPEN_KEEPS_NO_RETENTION
            )
        return self._update_if(request.key, expression, condition, values)

    def count_retry(self, request: ActionRequest, seen: LedgerRecord) -> LedgerRecord | None:
        """Count one RETRY answer on the record, only if it is still as seen (else None)."""
        now = self.clock()
        values = self._seen_values(seen, now)
        values |= {":zero": {"N": "0"}, ":one": {"N": "1"}}
        condition = "#status = :seen_status" + same_as_seen(seen, values)
        # Reconciliation asks only about open records (a closed one is answered from it).
        expression = (
            (
                "SET reconcile_rounds = if_not_exists(reconcile_rounds, :zero) + :one, "
                "updated_at = :now"
            )
            + remember_dispatch(seen, now, values)
            + _OPEN_KEEPS_NO_RETENTION
        )
        return self._update_if(request.key, expression, condition, values)

    def mark_escalated(self, request: ActionRequest, seen: LedgerRecord) -> LedgerRecord | None:
        """Escalate with the record as it is (only if it is still as seen): no late delivery
        may act on it any more. None when the record changed."""
        now = self.clock()
        values = self._seen_values(seen, now)
        condition = "#status = :seen_status" + same_as_seen(seen, values)
        expression = "SET escalated_at = :now, updated_at = :now" + _OPEN_KEEPS_NO_RETENTION
        return self._update_if(request.key, expression, condition, values)

    # --- a person's settlement -----------------------------------------------------------------
    def apply(self, action_key: str, update: TransactWriteItem) -> LedgerRecord | None:
        """Apply one `Update` item (of `action_key`) alone: the record afterwards, or None when
        its condition failed (the record changed since it was read)."""
        try:
            response = self.client.update_item(**update["Update"], ReturnValues="ALL_NEW")
        except ClientError as exc:
            if is_condition_failure(exc):
                return None
            raise TransientError(f"ledger write for {action_key} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise TransientError(f"ledger write for {action_key} failed: {exc}") from exc
        return LedgerRecord.from_item(response["Attributes"])

    # --- internals -----------------------------------------------------------------------------
    def _update_if(
        self, key: str, expression: str, condition: str, values: dict[str, Any]
    ) -> LedgerRecord | None:
        """One conditional UpdateItem: the new record, or None when the condition failed."""
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key={"action_key": {"S": key}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names(expression, condition),
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return None
            # Reconciliation writes are conditional on the record as seen: safe to repeat.
            raise TransientError(f"ledger write for {key} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise TransientError(f"ledger write for {key} failed: {exc}") from exc
        return LedgerRecord.from_item(response["Attributes"])

    def _seen_values(self, seen: LedgerRecord, now: float) -> dict[str, Any]:
        return {":seen_status": {"S": seen.status.value}, ":now": number(now)}
