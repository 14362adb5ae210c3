"""The cases table: one item per case, bound to the execution that owns it (docs/design.md §8).

`outcome` is IN_PROGRESS from validation until the saga ends, COMPENSATION_PENDING while a
compensation is unfinished, then COMPLETED or ESCALATED. The record binds the execution that
owns the case (its ARN and start time), so ValidateCase tells that execution's own retries and
redrives from a new execution of the same case: a new execution, under any name and at any age
(Step Functions forgets an execution name after 90 days, the ledger forgets records after its
retention), is a DUPLICATE and is never run forward. This table has no TTL.

Every write is conditional (one case id, one approved digest, one owning execution, no
resolution yet), and a write the table did not answer is a TransientError: nothing is decided on
an unanswered write.

A person closes an escalation with `resolve` (docs/design.md §5): who decided what and when goes in
a
separate `resolution` attribute, written once, together with the settlement of the case's open
ledger actions in one transaction; `outcome` keeps what the automation recorded (§8). After it,
every write of the automation is refused with ActionSettled and changes nothing (§3.10): the
owning execution's own ValidateCase (a redrive), COMPENSATION_PENDING, the terminal record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from saga import clock as saga_clock
from saga.clock import now_iso
from saga.dynamodb import (
    CONDITION_FAILED,
    TRANSACTION_CANCELLED,
    TransactWriteItem,
    cancellation_reasons,
    client_request_token,
    error_code,
    from_item,
    read_item,
    to_item,
)
from saga.errors import (
    ActionSettled,
    CaseRecordRefused,
    KeyConflict,
    ReservationNotHeld,
    TransientError,
)
from saga.four_eyes import RECORD_FIELD as APPROVALS_REQUIRED
from saga.models import Case

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

Clock = saga_clock.Clock


class CaseOutcome(StrEnum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPENSATION_PENDING = "COMPENSATION_PENDING"
    COMPLETED = "COMPLETED"
    ESCALATED = "ESCALATED"


class ResolveConflict(Exception):
    """The resolve transaction wrote nothing: a record is no longer as it was read. `case` is
    the case record as it is now when the case was the cause, else None (one of the ledger
    actions changed: a delivery took it over, or a person settled it meanwhile)."""

    def __init__(self, message: str, case: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.case = case


@dataclass(frozen=True)
class OwningExecution:
    """The execution a case belongs to: its ARN and start time (`$states.context.Execution`).

    A redrive keeps both; a new execution under a reused name (after 90 days) has the same ARN
    but another start time, so the pair, not the name, identifies the owner.
    """

    arn: str
    started_at: str | None = None

    @classmethod
    def of_record(cls, record: Mapping[str, Any]) -> OwningExecution | None:
        arn = record.get("execution_arn")
        if not isinstance(arn, str):
            return None  # recorded before cases were bound to an execution
        started = record.get("execution_started_at")
        return cls(arn, started if isinstance(started, str) else None)


class CaseRecords:
    """The cases table: one record per case, written by the saga's own steps."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, clock: Clock = saga_clock.now
    ) -> None:
        self.client = client
        self.table_name = table_name
        self.clock = clock

    def get(self, case_id: str) -> dict[str, Any] | None:
        try:
            return read_item(self.client, self.table_name, {"case_id": case_id})
        except (ClientError, BotoCoreError) as exc:
            raise TransientError(f"case {case_id}: the cases table did not answer ({exc})") from exc

    def accepted(self, case: Case, digest: str) -> bool:
        """ValidateCase accepted exactly these parameters for this tenant before."""
        record = self.get(case.case_id)
        return (
            record is not None
            and record.get("tenant_id") == case.tenant_id
            and record.get("digest") == digest
        )

    def create(
        self,
        case: Case,
        digest: str,
        execution: OwningExecution,
        *,
        approvals_required: int,
    ) -> OwningExecution | None:
        """Write the IN_PROGRESS record bound to `execution`, once, with how many distinct
        approvers ValidateCase required (saga.four_eyes: the tools after it read that count);
        returns the owner on record.

        The owner is `execution` for the first write and for that execution's own retries and
        redrives; another owner (or None for a record that predates execution binding) means
        this is a new execution of a case that already ran. The same case id with another digest
        is a different request under the same identity: KeyConflict.
        """
        now = now_iso(self.clock)
        values: dict[str, Any] = {
            "case_id": case.case_id,
            "tenant_id": case.tenant_id,
            "digest": digest,
            "outcome": CaseOutcome.IN_PROGRESS.value,
            "execution_arn": execution.arn,
            APPROVALS_REQUIRED: approvals_required,
            "created_at": now,
            "updated_at": now,
        }
        if execution.started_at is not None:
            values["execution_started_at"] = execution.started_at
        old = self._write(
            case,
            put=to_item(values),
            condition="attribute_not_exists(case_id)",
        )
        if old is None:
            return execution
        self._check_same_case(case, digest, old)
        owner = OwningExecution.of_record(old)
        if owner == execution:
            # The owning execution again (a redrive): a new execution stays a DUPLICATE.
            self._check_not_resolved(case, old)
        return owner

    def mark_compensation_pending(self, case: Case, digest: str, execution_arn: str) -> None:
        """Say COMPENSATION_PENDING until the saga records its terminal outcome (idempotent).

        Written before the compensation runs, so an execution that ends FAILED at the
        compensation task leaves a record that says so. A terminal record is left alone.
        """
        now = now_iso(self.clock)
        old = self._write(
            case,
            update=(
                "SET outcome = :pending, updated_at = :now, tenant_id = :tenant, "
                "digest = :digest, execution_arn = if_not_exists(execution_arn, :arn), "
                "created_at = if_not_exists(created_at, :now)"
            ),
            condition=(
                "attribute_not_exists(case_id) OR (digest = :digest AND "
                "NOT outcome IN (:completed, :escalated) AND "
                "(attribute_not_exists(execution_arn) OR execution_arn = :arn) AND "
                "attribute_not_exists(resolution))"
            ),
            values={
                ":pending": CaseOutcome.COMPENSATION_PENDING.value,
                ":now": now,
                ":tenant": case.tenant_id,
                ":digest": digest,
                ":arn": execution_arn,
                ":completed": CaseOutcome.COMPLETED.value,
                ":escalated": CaseOutcome.ESCALATED.value,
            },
        )
        if old is not None:
            self._check_same_case(case, digest, old)
            self._check_owner(case, execution_arn, old)
            self._check_not_resolved(case, old)
            if old.get("outcome") in (CaseOutcome.COMPLETED.value, CaseOutcome.ESCALATED.value):
                # A closed case compensated already or kept its stock on purpose (shipped, or
                # left to a person); the ledger record that would stop a second release may
                # have expired since, so a late or replayed delivery stops here.
                raise ReservationNotHeld(
                    f"release for {case.case_id}: the case is {old.get('outcome')}: its "
                    "reservation is settled, nothing to release"
                )

    def record_outcome(
        self,
        case: Case,
        digest: str,
        *,
        execution_arn: str,
        outcome: str,
        steps: Mapping[str, Any],
        compensations: list[Any],
        escalation: Mapping[str, Any] | None,
    ) -> None:
        """The terminal record, written by the owning execution. Repeating it is harmless."""
        now = now_iso(self.clock)
        old = self._write(
            case,
            update=(
                "SET outcome = :outcome, steps = :steps, compensations = :compensations, "
                "escalation = :escalation, updated_at = :now, tenant_id = :tenant, "
                "digest = :digest, execution_arn = if_not_exists(execution_arn, :arn), "
                "created_at = if_not_exists(created_at, :now)"
            ),
            condition=(
                "attribute_not_exists(case_id) OR (digest = :digest AND "
                "(attribute_not_exists(execution_arn) OR execution_arn = :arn) AND "
                "attribute_not_exists(resolution))"
            ),
            values={
                ":outcome": outcome,
                ":steps": dict(steps),
                ":compensations": list(compensations),
                ":escalation": dict(escalation) if escalation is not None else None,
                ":now": now,
                ":tenant": case.tenant_id,
                ":digest": digest,
                ":arn": execution_arn,
            },
        )
        if old is not None:
            self._check_same_case(case, digest, old)
            self._check_owner(case, execution_arn, old)
            self._check_not_resolved(case, old)
            raise AssertionError("unreachable: a failed condition with the same digest and owner")

    def completed_update(self, case: Case, digest: str, execution_arn: str) -> TransactWriteItem:
        """The case record's COMPLETED as one TransactWriteItems `Update`, written with the last
        effect's ledger completion (docs/design.md §3.11): only on this case's record (its
        digest), owned by `execution_arn`, under way or COMPLETED already (a repeat), and not
        resolved. `completion_refused` says what its failed condition means."""
        update: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {"case_id": {"S": case.case_id}},
            "UpdateExpression": "SET outcome = :completed, updated_at = :now",
            "ConditionExpression": (
                "digest = :digest AND "
                "(attribute_not_exists(execution_arn) OR execution_arn = :arn) AND "
                "outcome IN (:in_progress, :completed) AND attribute_not_exists(resolution)"
            ),
            "ExpressionAttributeValues": to_item(
                {
                    ":completed": CaseOutcome.COMPLETED.value,
                    ":in_progress": CaseOutcome.IN_PROGRESS.value,
                    ":digest": digest,
                    ":arn": execution_arn,
                    ":now": now_iso(self.clock),
                }
            ),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        return cast("TransactWriteItem", {"Update": update})

    @staticmethod
    def completion_refused(
        case: Case,
        digest: str,
        execution_arn: str,
        effect: str,
        old: Mapping[str, Any] | None,
    ) -> CaseRecordRefused:
        """What a refused `completed_update` means, from the case record as it is (`old`)."""
        if old is None:
            why = "the case has no record"
        elif isinstance(old.get("resolution"), Mapping):
            why = resolved_text(case.case_id, old["resolution"])
        elif old.get("digest") != digest:
            why = f"the case record holds approval digest {old.get('digest')}, not {digest}"
        elif old.get("execution_arn") not in (None, execution_arn):
            why = f"the case belongs to execution {old.get('execution_arn')}, not {execution_arn}"
        else:
            why = f"the case is {old.get('outcome')} already"
        return CaseRecordRefused(
            f"{effect} is recorded COMPLETED in the ledger, but case {case.case_id} could not be "
            f"recorded COMPLETED: {why}. Nothing more is done automatically: tell whoever "
            f"decides the case (`sagactl escalations show {case.case_id}`)"
        )

    def resolve(
        self,
        seen: Mapping[str, Any],
        resolution: Mapping[str, Any],
        *,
        settle: Sequence[TransactWriteItem] = (),
    ) -> None:
        """Write a person's decision in the case record's `resolution`, once, and in the same
        TransactWriteItems the `settle` items (ActionLedger.settle_write of each open action of
        the case): all of it or nothing.

        Conditional on the record as `seen` (the same outcome, no resolution yet) and on each
        action as its settle item saw it; a failed condition is a ResolveConflict. The token is
        a digest of the request, so the SDK's retry of a lost response is not a second write.
        """
        case_id = str(seen["case_id"])
        case_update: dict[str, Any] = {
            "Update": {
                "TableName": self.table_name,
                "Key": {"case_id": {"S": case_id}},
                "UpdateExpression": "SET resolution = :resolution",
                "ConditionExpression": "attribute_not_exists(resolution) AND outcome = :outcome",
                "ExpressionAttributeValues": to_item(
                    {":resolution": dict(resolution), ":outcome": seen.get("outcome")}
                ),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        items = [cast("TransactWriteItem", case_update), *settle]
        try:
            self.client.transact_write_items(
                TransactItems=items, ClientRequestToken=client_request_token(items)
            )
        except ClientError as exc:
            if error_code(exc) != TRANSACTION_CANCELLED:
                raise TransientError(
                    f"case {case_id}: the resolution was not written ({exc})"
                ) from exc
            reasons = cancellation_reasons(exc)
            codes = [str(reason.get("Code")) for reason in reasons]
            first = reasons[0] if reasons else {}
            current = (
                from_item(first["Item"])
                if first.get("Code") == "ConditionalCheckFailed" and first.get("Item")
                else None
            )
            raise ResolveConflict(
                f"case {case_id}: the resolution was not written (cancelled: {', '.join(codes)})",
                current,
            ) from exc
        except BotoCoreError as exc:
            raise TransientError(f"case {case_id}: the resolution was not written ({exc})") from exc

    def _write(
        self,
        case: Case,
        *,
        condition: str,
        put: dict[str, Any] | None = None,
        update: str | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """One conditional write: None when written, else the record that failed the condition."""
        try:
            if put is not None:
                self.client.put_item(
                    TableName=self.table_name,
                    Item=put,
                    ConditionExpression=condition,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            else:
                assert update is not None and values is not None
                self.client.update_item(
                    TableName=self.table_name,
                    Key={"case_id": {"S": case.case_id}},
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeValues=to_item(values),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
        except ClientError as exc:
            if error_code(exc) == CONDITION_FAILED:
                return from_item(exc.response.get("Item", {}))  # type: ignore[arg-type]
            raise _unanswered(case, exc) from exc
        except BotoCoreError as exc:
            raise _unanswered(case, exc) from exc
        return None

    @staticmethod
    def _check_same_case(case: Case, digest: str, old: Mapping[str, Any]) -> None:
        if old.get("tenant_id") not in (None, case.tenant_id):
            # Case ids are global (they name executions): say so, without the other's details.
            raise KeyConflict(
                f"case id {case.case_id} is already used by another tenant's case: choose "
                "another case id"
            )
        if old.get("digest") != digest:
            raise KeyConflict(
                f"case {case.case_id} is already recorded with approval digest "
                f"{old.get('digest')}, not {digest}: one case id, one approved request"
            )

    @staticmethod
    def _check_not_resolved(case: Case, old: Mapping[str, Any]) -> None:
        resolution = old.get("resolution")
        if isinstance(resolution, Mapping):
            raise ActionSettled(resolved_text(case.case_id, resolution))

    @staticmethod
    def _check_owner(case: Case, execution_arn: str, old: Mapping[str, Any]) -> None:
        owner = old.get("execution_arn")
        if isinstance(owner, str) and owner != execution_arn:
            raise KeyConflict(
                f"case {case.case_id} belongs to execution {owner}, not {execution_arn}: "
                "only the execution that owns a case may record it"
            )


def resolved_text(case_id: str, resolution: Mapping[str, Any]) -> str:
    """Who resolved the case and when; never the decision's text (case data stays out of errors
    and logs: `sagactl escalations show` shows it)."""
    return (
        f"case {case_id} was resolved by {resolution.get('by')} at {resolution.get('at')}: a "
        "person's decision is final, the automation does nothing more on it"
    )


def _unanswered(case: Case, exc: Exception) -> TransientError:
    # Throttling, a timeout, an unreachable table: nothing was decided; repeating is safe.
    return TransientError(f"case {case.case_id}: the cases table did not answer ({exc})")
