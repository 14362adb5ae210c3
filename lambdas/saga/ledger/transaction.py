"""Same-account effects (design.md §3.9): the ledger record, written COMPLETED, and the effect's
items in ONE TransactWriteItems, so the effect happened iff the COMPLETED record exists.

`ClientRequestToken` (a digest of the request body, saga.dynamodb.client_request_token) makes
the SDK's retry of the same request idempotent, but DynamoDB honours it for 10 minutes only.
What protects every other repeat is the ledger condition in the transaction
(`attribute_not_exists(action_key)`, or the record exactly as seen): a repeat is cancelled and
decided from the record in the cancellation reasons (ALL_OLD). A first delivery or a replay is
1 DynamoDB request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError, ConnectionError, ReadTimeoutError

from saga.dynamodb import TransactWriteItem, cancellation_reasons, error_code
from saga.errors import (
    ActionPending,
    BusinessRejection,
    OutcomeUnknown,
    SagaError,
    TransientError,
)
from saga.identity import ActionRequest
from saga.ledger.core import MAX_DECISION_ROUNDS, Operations, contended
from saga.ledger.decisions import TAKEOVERS, Decision
from saga.ledger.items import put_condition, record_item
from saga.ledger.observer import LedgerEvent
from saga.ledger.records import ActionOutcome, Attempt, LedgerRecord, LedgerStatus

ExplainFailure = Callable[[Mapping[int, dict[str, Any]]], SagaError]
# A downstream's way to its table: calls the write (the transaction), or raises without it.
Commit = Callable[[Callable[[], ActionOutcome]], ActionOutcome]

_TRANSIENT_DYNAMODB_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
    }
)


def direct(write: Callable[[], ActionOutcome]) -> ActionOutcome:
    """The commit of a downstream with nothing between the ledger and its table."""
    return write()


class NativeEffects(Operations):
    def execute_transaction(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        effect_items: list[TransactWriteItem],
        result: dict[str, Any],
        downstream_ref: str | None,
        explain_failure: ExplainFailure,
        commit: Commit | None = None,
    ) -> ActionOutcome:
        """ActionLedger.execute_transaction."""
        writing = False

        def write() -> ActionOutcome:
            nonlocal writing
            writing = True
            return self._transact(
                request,
                attempt,
                effect_items=effect_items,
                result=result,
                downstream_ref=downstream_ref,
                explain_failure=explain_failure,
            )

        try:
            return (commit or direct)(write)
        except BusinessRejection as refused:
            if writing:
                raise  # decided (and recorded) from the transaction itself
            # The downstream refused before anything was written: recorded like any rejection.
            return self.record_failure(request, attempt, refused)

    def record_failure(
        self, request: ActionRequest, attempt: Attempt, error: BusinessRejection
    ) -> ActionOutcome:
        """ActionLedger.record_failure."""
        core = self.core
        seen: LedgerRecord | None = None
        for _ in range(MAX_DECISION_ROUNDS):
            now = core.clock()
            item = record_item(
                request,
                attempt,
                now,
                expires_at=core.policy.expires_at(now),
                status=LedgerStatus.FAILED,
                attempts=1 if seen is None else seen.attempts + 1,
                error=error.to_record(),
                carried=seen,
            )
            existing = core.store.put_new(item, over=seen)
            if existing is None:
                core.observe(LedgerEvent.FAILED, request, LedgerRecord.from_item(item))
                raise error
            decision = core.decide(request, attempt, existing)
            if decision in TAKEOVERS:
                # The effect commits only together with a COMPLETED record, so an open record
                # that nobody holds proves it did not happen. Record the rejection.
                seen = existing
                continue
            if decision is Decision.OWN_CLAIM:
                raise OutcomeUnknown(
                    f"action {request.key} is open ({existing.status.value}) and cannot be marked "
                    f"FAILED by this attempt; reconcile it"
                )
            return core.answer(decision, request, existing)
        raise contended(request.key)

    def _transact(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        effect_items: list[TransactWriteItem],
        result: dict[str, Any],
        downstream_ref: str | None,
        explain_failure: ExplainFailure,
    ) -> ActionOutcome:
        core = self.core
        seen: LedgerRecord | None = None  # an open record this delivery takes over
        for _ in range(MAX_DECISION_ROUNDS):
            now = core.clock()
            item = record_item(
                request,
                attempt,
                now,
                expires_at=core.policy.expires_at(now),
                status=LedgerStatus.COMPLETED,
                attempts=1 if seen is None else seen.attempts + 1,
                result=result,
                downstream_ref=downstream_ref,
                carried=seen,
            )
            ledger_put: TransactWriteItem = {
                "Put": {
                    "TableName": core.store.table_name,
                    "Item": item,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    **put_condition(seen),  # type: ignore[typeddict-item]
                }
            }
            try:
                core.store.transact([ledger_put, *effect_items])
            except ClientError as exc:
                decided = self._decide_cancelled(request, attempt, exc, explain_failure)
                if isinstance(decided, ActionOutcome):
                    return decided
                seen = decided
                continue
            except (ConnectionError, ReadTimeoutError) as exc:
                # Committed or not, a repeat is safe: the token or the ledger condition catches it.
                raise TransientError(f"ledger transaction for {request.key}: {exc}") from exc
            record = LedgerRecord.from_item(item)
            core.observe(Decision.CLAIMED, request, record)
            core.observe(LedgerEvent.COMPLETED, request, record)
            return ActionOutcome.of(record, replayed=False, reconciled=False)
        raise contended(request.key)

    def _decide_cancelled(
        self,
        request: ActionRequest,
        attempt: Attempt,
        exc: ClientError,
        explain_failure: ExplainFailure,
    ) -> ActionOutcome | LedgerRecord:
        """The replayed outcome, or an open record nobody holds (the caller takes it over);
        everything else is raised."""
        code = error_code(exc)
        if code == "IdempotentParameterMismatchException":
            # The token is a digest of the body, so this cannot come from our own requests; if it
            # does, nothing of this request was applied: the record says what happened.
            seen = self.core.store.get(request.key)
            if seen is None:
                raise TransientError(
                    f"ledger transaction for {request.key}: the token was used in the last 10 "
                    "minutes and nothing is recorded; retry"
                ) from exc
            return self._decide_found(request, attempt, seen)
        if code == "TransactionInProgressException":
            raise ActionPending(f"action {request.key}: the same transaction is in flight") from exc
        if code in _TRANSIENT_DYNAMODB_CODES:
            raise TransientError(f"ledger transaction for {request.key}: {code}") from exc
        if code != "TransactionCanceledException":
            raise exc
        reasons = cancellation_reasons(exc)
        ledger_reason = reasons[0] if reasons else {}
        if ledger_reason.get("Code") == "ConditionalCheckFailed":
            old_item = ledger_reason.get("Item")
            record = (
                LedgerRecord.from_item(old_item) if old_item else self.core.store.get(request.key)
            )
            if record is None:
                raise TransientError(f"action {request.key}: record vanished; retry") from exc
            return self._decide_found(request, attempt, record)
        failed = {
            index: reason
            for index, reason in enumerate(reasons[1:])
            if reason.get("Code") == "ConditionalCheckFailed"
        }
        if failed:
            error = explain_failure(failed)
            if isinstance(error, BusinessRejection):
                return self.record_failure(request, attempt, error)
            raise error from exc
        codes = ", ".join(str(reason.get("Code")) for reason in reasons)
        raise TransientError(
            f"ledger transaction for {request.key} cancelled ({codes}); nothing was written"
        ) from exc

    def _decide_found(
        self, request: ActionRequest, attempt: Attempt, record: LedgerRecord
    ) -> ActionOutcome | LedgerRecord:
        decision = self.core.decide(request, attempt, record)
        if decision in TAKEOVERS:
            # The effect commits only with a COMPLETED record, so an open record that nobody
            # holds (a reconcile's placeholder, an UNKNOWN) proves it has not happened.
            return record
        return self.core.answer(decision, request, record)
