"""The ledger table and a delivery's outcome writes (docs/design.md §3.3, §3.4, §3.7, §3.11).

- COMPLETED, FAILED, UNKNOWN: conditional updates on this delivery owning the IN_PROGRESS record
  (`finish`); COMPLETED with another table's write in one TransactWriteItems (`complete_with`),
  or that write alone after a completion recorded before (`write_companion`);
- FAILED with the daily refund counter's give-back in one TransactWriteItems
  (`fail_giving_back`, §3.12), and transactions repeated through conflicts
  (`transact_through_conflicts`);
- a given-back lease (`release`): the delivery sent nothing;
- the one retention rule (`_expiry`): a closed record expires, an open one never.

An outcome that could not be recorded is OutcomeUnknown; one another delivery's record refused
is LeaseLost. LedgerStore (store.py) adds the claim, the takeover and reconciliation's writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from saga.ceilings import DailyCharge
from saga.dynamodb import (
    TRANSACTION_CANCELLED,
    TransactWriteItem,
    cancellation_reasons,
    client_request_token,
    condition_failed_item,
    error_code,
    from_item,
    is_condition_failure,
    number,
)
from saga.errors import OutcomeUnknown, TransientError
from saga.identity import ActionRequest
from saga.ledger.charges import CONFLICT_ROUNDS, conflicted, full_jitter_pause, give_back_update
from saga.ledger.items import OWNED, Outcome, names, outcome_update
from saga.ledger.observer import LedgerEvent
from saga.ledger.records import (
    CLOSED_STATUSES,
    Attempt,
    CompanionWrite,
    LedgerPolicy,
    LedgerRecord,
    LedgerStatus,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

_CONDITION_CHECK = "ConditionalCheckFailed"  # a transaction item's cancellation reason


class LeaseLost(Exception):
    """An outcome write found the record no longer held by this delivery: it wrote nothing.
    `current` is the record as it is now (None: gone)."""

    def __init__(self, message: str, current: LedgerRecord | None) -> None:
        super().__init__(message)
        self.current = current


class SettledMeanwhile(Exception):
    """A completion transaction met the record this delivery holds settled by a person (§3.10):
    the completion was written alone, with the decision (`record`), the companion never;
    `item` is the companion table's item as it is (None: its condition held)."""

    def __init__(self, record: LedgerRecord, item: dict[str, Any] | None) -> None:
        super().__init__("the action was settled while this delivery held it")
        self.record = record
        self.item = item


class NotCommitted(Exception):
    """A transaction with a companion write wrote nothing, though this delivery still owns the
    record: the companion's condition failed (`item`: that table's item as it is) or DynamoDB
    cancelled it for another reason (a conflict, throttling: `item` None)."""

    def __init__(self, item: dict[str, Any] | None) -> None:
        super().__init__("the transaction was cancelled; nothing was written")
        self.item = item


class OutcomeWrites:
    """One ledger table: a delivery's outcome writes, transactions, and the retention rule."""

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient,
        policy: LedgerPolicy,
        clock: Callable[[], float],
    ) -> None:
        self.table_name = table_name
        self.client = client
        self.policy = policy
        self.clock = clock
        self.pause: Callable[[int], None] = full_jitter_pause  # between conflicted repeats

    def transact(self, transact_items: list[TransactWriteItem]) -> None:
        """One TransactWriteItems whose token is a digest of its body (docs/design.md §3.9).
        Raises what DynamoDB answered: the caller decides from the cancellation reasons."""
        self.client.transact_write_items(
            TransactItems=transact_items,
            ClientRequestToken=client_request_token(transact_items),
        )

    def transact_through_conflicts(self, transact_items: list[TransactWriteItem]) -> None:
        """`transact`, sent again after a full-jitter pause while DynamoDB cancels it for a
        conflict with another transaction (nothing was written, so a repeat is safe), at most
        CONFLICT_ROUNDS times (§3.12: every refund of a tenant and currency writes one counter).
        Each repeat has its own token: a cancelled request may have bound the first. Raises
        what the last answer was: the caller decides from it (a conflict still: contended)."""
        for repeat in range(CONFLICT_ROUNDS):
            try:
                self.client.transact_write_items(
                    TransactItems=transact_items,
                    ClientRequestToken=client_request_token(transact_items, repeat),
                )
                return
            except ClientError as exc:
                if repeat + 1 == CONFLICT_ROUNDS or not conflicted(exc):
                    raise
            self.pause(repeat)

    # --- a delivery's outcome -----------------------------------------------------------------
    def finish(
        self,
        request: ActionRequest,
        attempt: Attempt,
        status: LedgerStatus,
        *,
        result: dict[str, Any] | None = None,
        downstream_ref: str | None = None,
        error: dict[str, str] | None = None,
        dispatched_at: float | None = None,
    ) -> LedgerRecord:
        """Write an outcome, conditional on this attempt still owning the IN_PROGRESS record.

        `dispatched_at`: this delivery (claimed then) may have reached the downstream. A record a
        person settled while this delivery held it (§3.10: only a clock skewed past the
        allowance lets that happen) still gets the outcome, for what happened must stay on
        record, but keeps the decision: no retention, no `open_status`; the caller sees the
        record's `resolution`. Raises LeaseLost when another delivery owns the record,
        OutcomeUnknown when the write failed otherwise (the record stays open; a later delivery
        takes it over and reconciles).
        """
        outcome = Outcome(status, result, downstream_ref, error, dispatched_at)
        try:
            return self._write_outcome(request, attempt, outcome, settled=False)
        except LeaseLost as lost:
            if not _settled_while_held(lost.current, attempt):
                raise
        return self._write_outcome(request, attempt, outcome, settled=True)

    def _write_outcome(
        self, request: ActionRequest, attempt: Attempt, outcome: Outcome, *, settled: bool
    ) -> LedgerRecord:
        status = outcome.status
        update = self._outcome_update(request, attempt, outcome, self.clock(), settled=settled)
        try:
            response = self.client.update_item(
                **update,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise _unrecorded(request, status, exc) from exc
            current = record_or_none(condition_failed_item(exc))
            if current and current.owner == attempt.attempt_id and current.status is status:
                return current  # our own write, retried by the SDK after a lost response
            raise _lease_lost(request, attempt, status, current) from exc
        except BotoCoreError as exc:
            raise _unrecorded(request, status, exc) from exc
        return LedgerRecord.from_item(response["Attributes"])

    def complete_with(
        self,
        request: ActionRequest,
        attempt: Attempt,
        companion: CompanionWrite,
        *,
        result: dict[str, Any],
        downstream_ref: str | None,
    ) -> float:
        """COMPLETED (as `finish` writes it) and the companion's update in ONE TransactWriteItems
        (docs/design.md §3.11); the time written. Raises LeaseLost when another delivery owns the
        record (nothing written), NotCommitted when the transaction wrote nothing for another
        reason (the companion's condition: its `item` is that table's item; a conflict or
        throttling: None), SettledMeanwhile when a person settled the record this delivery
        holds (the completion then written alone, with the decision), OutcomeUnknown when
        DynamoDB did not answer (committed or not)."""
        now = self.clock()
        outcome = Outcome(LedgerStatus.COMPLETED, result, downstream_ref, None, None)
        update = self._outcome_update(request, attempt, outcome, now, settled=False)
        completion = cast(
            "TransactWriteItem",
            {"Update": {**update, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        )
        try:
            self.transact([completion, companion.update])
        except ClientError as exc:
            if error_code(exc) != TRANSACTION_CANCELLED:
                raise _unrecorded(request, LedgerStatus.COMPLETED, exc) from exc
            reasons = [*cancellation_reasons(exc), {}, {}]
            if reasons[0].get("Code") == _CONDITION_CHECK:
                current = record_or_none(reasons[0].get("Item"))
                refused = reasons[1].get("Code") == _CONDITION_CHECK
                if _settled_while_held(current, attempt):
                    # A person settled the action meanwhile (§3.10): the completion is written
                    # alone, with the decision, and the companion never.
                    written = self._write_outcome(request, attempt, outcome, settled=True)
                    item = from_item(reasons[1].get("Item") or {}) if refused else None
                    raise SettledMeanwhile(written, item) from exc
                raise _lease_lost(request, attempt, LedgerStatus.COMPLETED, current) from exc
            refused = reasons[1].get("Code") == _CONDITION_CHECK
            raise NotCommitted(
                from_item(reasons[1].get("Item") or {}) if refused else None
            ) from exc
        except BotoCoreError as exc:
            raise _unrecorded(request, LedgerStatus.COMPLETED, exc) from exc
        return now

    def fail_giving_back(
        self,
        request: ActionRequest,
        attempt: Attempt,
        held: LedgerRecord,
        error: dict[str, str],
        charge: DailyCharge,
    ) -> LedgerRecord:
        """FAILED (as `finish` writes it) and the charged amount back to the counter of the day
        `held` says it charged, in ONE TransactWriteItems (§3.12): the amount comes back iff the
        rejection is recorded, once. The record afterwards. A repeat of the same rejection
        write (a lost response) finds its own FAILED and gives nothing again; a counter TTL
        deleted or holding less, or conflicts past the rounds: the rejection is recorded alone
        and the counter keeps the amount (stricter, never looser); a person's settlement met
        meanwhile: recorded with the decision (§3.10), nothing given back. Raises LeaseLost and
        OutcomeUnknown as `finish` does."""
        day, amount = held.charged_day, held.charged_minor
        if day is None or not amount:
            return self.finish(request, attempt, LedgerStatus.FAILED, error=error)
        now = self.clock()
        outcome = Outcome(LedgerStatus.FAILED, error=error)
        update = self._outcome_update(request, attempt, outcome, now, settled=False)
        failed = cast(
            "TransactWriteItem",
            {"Update": {**update, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        )
        try:
            self.transact_through_conflicts([failed, give_back_update(charge, day, amount)])
        except ClientError as exc:
            if error_code(exc) != TRANSACTION_CANCELLED:
                raise _unrecorded(request, LedgerStatus.FAILED, exc) from exc
            reasons = [*cancellation_reasons(exc), {}]
            if reasons[0].get("Code") != _CONDITION_CHECK:
                # The counter refused the give-back, or conflicts outlasted the rounds.
                return self.finish(request, attempt, LedgerStatus.FAILED, error=error)
            current = record_or_none(reasons[0].get("Item"))
            if (
                current is not None
                and current.owner == attempt.attempt_id
                and current.status is LedgerStatus.FAILED
            ):
                return current  # our own rejection, committed with its give-back before
            if _settled_while_held(current, attempt):
                return self._write_outcome(request, attempt, outcome, settled=True)
            raise _lease_lost(request, attempt, LedgerStatus.FAILED, current) from exc
        except BotoCoreError as exc:
            raise _unrecorded(request, LedgerStatus.FAILED, exc) from exc
        # A transaction answers no attributes: the record is the one held, as just failed.
        return replace(
            held,
            status=LedgerStatus.FAILED,
            error=dict(error),
            updated_at=now,
            expires_at=self._expiry(LedgerStatus.FAILED, now),
        )

    def write_companion(self, companion: CompanionWrite) -> None:
        """The companion's update alone (after the COMPLETED record): raises its `refused` error
        when its condition fails, TransientError when the table did not answer (the record is
        written: a repeat replays it and writes this again)."""
        update = dict(companion.update["Update"])
        table = update.pop("TableName")
        try:
            self.client.update_item(TableName=table, **update)  # type: ignore[arg-type]
        except ClientError as exc:
            if is_condition_failure(exc):
                old = condition_failed_item(exc)
                raise companion.refused(from_item(old) if old else None) from exc
            raise TransientError(
                f"write to {table} after the action completed failed: {exc}"
            ) from exc
        except BotoCoreError as exc:
            raise TransientError(
                f"write to {table} after the action completed failed: {exc}"
            ) from exc

    def _outcome_update(
        self,
        request: ActionRequest,
        attempt: Attempt,
        outcome: Outcome,
        now: float,
        *,
        settled: bool,
    ) -> dict[str, Any]:
        """The UpdateItem of an outcome (its table, key, expressions), conditional on this
        attempt owning the IN_PROGRESS record (items.outcome_update); a closed outcome carries
        the retention (§3.7), one on a settled record none."""
        expiry = None if settled else self._expiry(outcome.status, now)
        expression, condition, values = outcome_update(
            outcome, attempt.attempt_id, now, expires_at=expiry, settled=settled
        )
        return {
            "TableName": self.table_name,
            "Key": {"action_key": {"S": request.key}},
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names(expression, condition),
            "ExpressionAttributeValues": values,
        }

    def release(self, request: ActionRequest, attempt: Attempt) -> LedgerEvent:
        """Give the lease up after a TransientError: this delivery sent nothing.

        The record stays IN_PROGRESS (its `attempts` is the budget) with no owner and an expired
        lease. The next delivery takes it over; it skips the lookup only if no earlier delivery
        may have reached the downstream (no `first_dispatch_at`). A release that fails changes
        nothing the caller reports: the lease simply runs out.
        """
        now = self.clock()
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={"action_key": {"S": request.key}},
                UpdateExpression=(
                    "SET lease_expires_at = :now, updated_at = :now REMOVE #owner, expires_at"
                ),
                ConditionExpression=OWNED,
                ExpressionAttributeNames={"#status": "status", "#owner": "owner"},
                ExpressionAttributeValues={
                    ":me": {"S": attempt.attempt_id},
                    ":in_progress": {"S": LedgerStatus.IN_PROGRESS.value},
                    ":now": number(now),
                },
            )
        except ClientError as exc:
            return (
                LedgerEvent.LEASE_LOST if is_condition_failure(exc) else LedgerEvent.RELEASE_FAILED
            )
        except BotoCoreError:
            return LedgerEvent.RELEASE_FAILED
        return LedgerEvent.RELEASED

    def _expiry(self, status: LedgerStatus, now: float) -> int | None:
        """The one retention rule (§3.7): a closed record expires, an open one never does."""
        return self.policy.expires_at(now) if status in CLOSED_STATUSES else None


def _settled_while_held(current: LedgerRecord | None, attempt: Attempt) -> bool:
    """The record this delivery still holds, settled by a person meanwhile (§3.10)."""
    return (
        current is not None
        and current.owner == attempt.attempt_id
        and current.status is LedgerStatus.IN_PROGRESS
        and current.resolution is not None
    )


def record_or_none(item: Any) -> LedgerRecord | None:
    return LedgerRecord.from_item(item) if item else None


def _lease_lost(
    request: ActionRequest, attempt: Attempt, status: LedgerStatus, current: LedgerRecord | None
) -> LeaseLost:
    return LeaseLost(
        f"lease lost on {request.key}: now "
        f"{current.status.value if current else 'gone'}, owner "
        f"{current.owner if current else None}; the {status.value} outcome of attempt "
        f"{attempt.attempt_id} was not recorded and is left to reconciliation",
        current,
    )


def _unrecorded(request: ActionRequest, status: LedgerStatus, exc: Exception) -> OutcomeUnknown:
    """An outcome write that failed for another reason than ownership: the record stays open
    (IN_PROGRESS) and a later delivery takes it over and reconciles."""
    return OutcomeUnknown(
        f"the {status.value} outcome of {request.key} could not be recorded ({exc}); "
        "left to reconciliation"
    )
