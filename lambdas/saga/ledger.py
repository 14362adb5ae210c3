"""The action ledger: one approved action, at most one effect, whatever fails (design.md §2-§4, §6).

Every side-effecting tool runs its effect through `ActionLedger`. A delivery *claims* the action
with one conditional `PutItem` (`attribute_not_exists(action_key)`,
`ReturnValuesOnConditionCheckFailure=ALL_OLD`); when the condition fails, the returned old item
is the whole answer (no follow-up read) and `decide()` maps it to one row of the decision table
in design.md §3. Outcomes (COMPLETED, FAILED, UNKNOWN, a released lease) are conditional
`UpdateItem`s that require `owner = this attempt`, so a worker that lost its lease can never
overwrite the new owner's outcome. A takeover of an expired lease (or of an UNKNOWN outcome) is a
conditional update on the old owner, lease, status and attempt count, and always reconciles
with the downstream before anything is re-dispatched. `attempts` counts every delivery over the
action's lifetime: workflow retries, redrives and manual replays all start from the same record,
so the budget is the one counter a redrive cannot reset (§6).

Request counts (DynamoDB requests, measured in tests with botocore event hooks): first execution
of an external effect = 2 (claim, complete); replay of a completed action = 1 (the claim whose
condition fails returns the record); a DynamoDB-native effect = 1 `TransactWriteItems`.

Why not only Powertools' idempotency utility
--------------------------------------------
`aws_lambda_powertools.utilities.idempotency` stores a hash of the event and replays the
response, which is the right tool for a pure function of its input. The ledger needs more:

- When the decorated function raises, the utility *deletes* its record so the next call runs
  again. For a payment whose call timed out that is exactly wrong: the refund may have happened,
  and running again is a second refund. The ledger keeps the record and marks it UNKNOWN.
- It has no UNKNOWN state and no reconciliation step: a record is INPROGRESS, COMPLETED or gone.
- It has no lifetime attempt budget that survives workflow retries and redrives.
- Its in-progress expiry is tied to the Lambda's remaining time, and an expired in-progress
  record simply lets the next call run the function again: a blind re-run, where the ledger
  takes over the lease conditionally and reconciles first.
- Its key is a hash of (part of) the payload; an action key here is the case's own identity, and
  the payload digest is checked separately so a changed request under the same key is rejected
  (KeyConflict) instead of being treated as a different action.

Where it does fit: read-only or naturally idempotent steps with no downstream effect, e.g.
guarding the reconcile tool's lookups or ValidateCase's case-record write against duplicate
deliveries. The ledger does not use it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, ReadTimeoutError

from saga import clock as saga_clock
from saga.errors import (
    ActionPending,
    ActionSettled,
    BudgetExhausted,
    BusinessRejection,
    KeyConflict,
    OutcomeUnknown,
    ReplayWindowExpired,
    SagaError,
    TransientError,
    error_from_record,
)
from saga.identity import action_key, canonical_json

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

    TransactWriteItem = TransactWriteItemTypeDef
else:
    TransactWriteItem = dict

Item = Mapping[str, Any]  # a DynamoDB item in low-level (AttributeValue) format

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()
_MAX_DECISION_ROUNDS = 4  # a contended takeover re-decides from the winner's record
_MAX_DECISION_TEXT = 200  # of a person's decision quoted in an error message
_TRANSIENT_DYNAMODB_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
    }
)
CLAIM_CONDITION = "attribute_not_exists(action_key)"
_ALIASED = ("status", "owner", "result", "error")  # reserved words in DynamoDB expressions


class LedgerStatus(StrEnum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"


OPEN_STATUSES = frozenset({LedgerStatus.IN_PROGRESS, LedgerStatus.UNKNOWN})


class Decision(StrEnum):
    """The decision-table rows of design.md §3 (plus the ledger's own outcome events)."""

    CLAIMED = "claimed"
    OWN_CLAIM = "own_claim"  # our claim's response was lost and the SDK retried it
    REPLAYED = "replayed"  # COMPLETED: return the recorded result
    RECORDED_FAILURE = "recorded_failure"  # FAILED: raise the recorded error again
    CONFLICT = "conflict"
    PENDING = "pending"
    TAKEOVER = "takeover"  # expired lease or UNKNOWN: take over, reconcile first
    RESUME_RELEASED = "resume_released"  # lease given up after a TransientError: take over
    LATE_REPLAY = "late_replay"  # an open record past its retention: take over, reconcile first
    BUDGET_EXHAUSTED = "budget_exhausted"
    ESCALATED = "escalated"  # reconciliation handed it to a person: never dispatched again
    SETTLED = "settled"  # a person decided the action: never dispatched again
    # outcome events
    COMPLETED = "completed"
    FAILED = "failed"
    UNKNOWN = "unknown"
    RELEASED = "released"
    RELEASE_FAILED = "release_failed"  # the lease could not be given up: it simply runs out
    LEASE_LOST = "lease_lost"
    RECONCILED = "reconciled"


# decisions that end a delivery without any write: raised as typed errors
_REJECTIONS = frozenset({Decision.CONFLICT, Decision.RECORDED_FAILURE, Decision.PENDING})
# decisions after which a delivery takes the record over and looks the action up first
_TAKEOVERS = frozenset({Decision.TAKEOVER, Decision.LATE_REPLAY, Decision.RESUME_RELEASED})
# A record written more than this before its retention ended may have been deleted by TTL.
_RETENTION_MARGIN_SECONDS = 3600


@dataclass(frozen=True)
class LedgerPolicy:
    # Library defaults (tests, sagactl) are cdk.json's `ledger` values, pinned equal by
    # tests/infra/test_config.py; a deployed function gets them from its environment.
    attempt_budget: int = 8  # lifetime deliveries per action (claims + takeovers)
    retention_seconds: int = 30 * 86400
    lease_margin_seconds: int = 10  # lease = attempt.remaining_seconds + margin
    min_lease_seconds: int = 5

    def __post_init__(self) -> None:
        if self.attempt_budget < 1:
            raise ValueError("attempt_budget must be at least 1")
        if self.retention_seconds <= 0:
            raise ValueError("retention_seconds must be positive")
        if self.lease_margin_seconds < 0 or self.min_lease_seconds <= 0:
            raise ValueError("lease margin must be >= 0 and min lease > 0")

    def lease_seconds(self, remaining_seconds: float) -> float:
        """A lease outlives the attempt that holds it, so a live lease means a live owner."""
        return max(float(self.min_lease_seconds), remaining_seconds + self.lease_margin_seconds)


@dataclass(frozen=True)
class ActionRequest:
    tenant_id: str
    operation: str  # saga.identity.Operation value
    action_id: str
    digest: str  # saga.identity.request_digest(...)
    case_id: str
    execution_arn: str | None = None
    compensates: str | None = None  # action key of the compensated action
    business_ref: str | None = None  # defaults to action_id

    @property
    def key(self) -> str:
        return action_key(self.tenant_id, self.operation, self.action_id)

    @property
    def reference(self) -> str:
        return self.business_ref or self.action_id


@dataclass(frozen=True)
class Attempt:
    attempt_id: str  # lease owner; never the action identity
    remaining_seconds: float  # from the Lambda context; sizes the lease
    # When this delivery's execution started (redrives keep it): every delivery of the action
    # came after it, which bounds when a record of it can have been written (and deleted).
    execution_started_at: float | None = None


@dataclass(frozen=True)
class EffectResult:
    result: dict[str, Any]  # JSON-able business result (replayed to duplicates)
    downstream_ref: str | None = None


@dataclass(frozen=True)
class Found:
    result: dict[str, Any]
    downstream_ref: str | None = None


@dataclass(frozen=True)
class Absent:
    pass


@dataclass(frozen=True)
class Undeterminable:
    reason: str


Reconciliation = Found | Absent | Undeterminable


@dataclass(frozen=True)
class ActionOutcome:
    action_key: str
    status: str  # "COMPLETED"
    result: dict[str, Any]
    downstream_ref: str | None
    replayed: bool  # True when returned from the record, no effect run now
    reconciled: bool  # True when the result came from reconciliation
    attempts: int


@dataclass(frozen=True)
class ReconcileDecision:
    decision: str  # "RESUME" | "RETRY" | "ESCALATE"
    reason: str
    outcome: ActionOutcome | None  # set when RESUME
    attempts: int
    budget: int


@dataclass(frozen=True)
class Resolution:
    """A person's decision (design.md §5): who decided what, and when (ISO 8601, UTC)."""

    by: str
    decision: str
    at: str

    def __post_init__(self) -> None:
        for name in ("by", "decision", "at"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"a resolution needs a non-empty {name!r}")

    def to_record(self) -> dict[str, str]:
        return {"by": self.by, "decision": self.decision, "at": self.at}


@dataclass(frozen=True)
class LedgerRecord:
    """One ledger item, decoded. `item` keeps the raw attributes for exact conditions."""

    action_key: str
    status: LedgerStatus
    request_digest: str
    owner: str | None
    lease_expires_at: float
    attempts: int
    result: dict[str, Any] | None
    error: dict[str, str] | None
    downstream_ref: str | None
    business_ref: str | None
    case_id: str | None
    execution_arn: str | None
    compensates: str | None
    created_at: float
    updated_at: float
    expires_at: int
    # RETRY answers the reconcile tool has given: bounds the reconcile -> re-attempt loop even
    # when the re-attempts never reach the ledger (e.g. they time out before claiming).
    reconcile_rounds: int = 0
    # When the current owner claimed (or took over) the action.
    claimed_at: float = 0.0
    # Set once any delivery may have reached the downstream (it ended UNKNOWN, or its lease ran
    # out with no outcome): the claim time of the earliest such delivery. Absent means no
    # delivery can have had an effect, so a released lease may be resumed without a lookup.
    first_dispatch_at: float | None = None
    # A person's decision on the action ({by, decision, at}; see ActionLedger.settle).
    resolution: dict[str, str] | None = None
    # When reconciliation answered ESCALATE: the action waits for a person from then on.
    escalated_at: float | None = None
    # Written before deliveries recorded `claimed_at` and `first_dispatch_at`: a given-back lease
    # then did not prove that nothing was sent (a 409 "in progress" gave it back).
    legacy: bool = False
    item: Item = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_item(cls, item: Item) -> LedgerRecord:
        values = {name: _DESERIALIZER.deserialize(value) for name, value in item.items()}
        return cls(
            action_key=str(values["action_key"]),
            status=LedgerStatus(values["status"]),
            request_digest=str(values["request_digest"]),
            owner=_optional_str(values.get("owner")),
            lease_expires_at=float(values.get("lease_expires_at", 0)),
            attempts=int(values.get("attempts", 0)),
            result=_from_dynamo(values["result"]) if "result" in values else None,
            error=_from_dynamo(values["error"]) if "error" in values else None,
            downstream_ref=_optional_str(values.get("downstream_ref")),
            business_ref=_optional_str(values.get("business_ref")),
            case_id=_optional_str(values.get("case_id")),
            execution_arn=_optional_str(values.get("execution_arn")),
            compensates=_optional_str(values.get("compensates")),
            created_at=float(values.get("created_at", 0)),
            updated_at=float(values.get("updated_at", 0)),
            expires_at=int(values.get("expires_at", 0)),
            reconcile_rounds=int(values.get("reconcile_rounds", 0)),
            claimed_at=float(values.get("claimed_at", values.get("updated_at", 0))),
            first_dispatch_at=(
                float(values["first_dispatch_at"]) if "first_dispatch_at" in values else None
            ),
            resolution=_from_dynamo(values["resolution"]) if "resolution" in values else None,
            escalated_at=float(values["escalated_at"]) if "escalated_at" in values else None,
            legacy="claimed_at" not in values,
            item=dict(item),
        )

    def lease_live(self, now: float) -> bool:
        return self.owner is not None and self.lease_expires_at > now

    def abandoned(self, now: float) -> bool:
        """An owner held it and left no outcome (crashed, timed out, lost its lease)."""
        return (
            self.status is LedgerStatus.IN_PROGRESS
            and self.owner is not None
            and not self.lease_live(now)
        )

    def may_have_dispatched_since(self, now: float) -> float | None:
        """The earliest claim time of a delivery that may have reached the downstream, or None
        when no delivery can have had an effect (never dispatched, or only provably not)."""
        if self.first_dispatch_at is not None:
            return self.first_dispatch_at
        if self.legacy and self.status in OPEN_STATUSES:
            return self.created_at
        if self.abandoned(now) or (self.status is LedgerStatus.UNKNOWN and self.owner is not None):
            return self.claimed_at
        return None


class LedgerObserver(Protocol):
    def on_decision(
        self, name: str, request: ActionRequest, record: LedgerRecord | None
    ) -> None: ...


_METRIC_BY_DECISION: dict[str, str] = {
    Decision.CLAIMED: "ActionClaimed",
    Decision.REPLAYED: "ActionReplayed",
    Decision.RECORDED_FAILURE: "ActionReplayed",
    Decision.CONFLICT: "KeyConflict",
    Decision.PENDING: "ActionPending",
    Decision.TAKEOVER: "LeaseTakeover",
    Decision.RESUME_RELEASED: "LeaseTakeover",
    Decision.UNKNOWN: "OutcomeUnknown",
    Decision.LEASE_LOST: "OutcomeUnknown",
    Decision.BUDGET_EXHAUSTED: "BudgetExhausted",
    Decision.LATE_REPLAY: "LateReplay",
    Decision.ESCALATED: "ActionEscalated",
    Decision.SETTLED: "ActionSettled",
}


class PowertoolsObserver:
    """Logs every decision with `action_key`, `case_id`, `status`; emits the EMF metrics."""

    def on_decision(self, name: str, request: ActionRequest, record: LedgerRecord | None) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        from saga.observability import logger, metrics

        logger.info(
            f"ledger decision: {name}",
            extra={
                "action_key": request.key,
                "case_id": request.case_id,
                "status": record.status.value if record else None,
                "decision": name,
                "attempts": record.attempts if record else None,
                "owner": record.owner if record else None,
            },
        )
        metric = _METRIC_BY_DECISION.get(name)
        if metric is not None:
            metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)


def decide(
    record: LedgerRecord,
    *,
    digest: str,
    attempt_id: str,
    now: float,
    budget: int,
    check_expiry: bool = True,
) -> Decision:
    """Map an existing record to a row of the decision table (design.md §3). Pure.

    `check_expiry=False` is for reconciliation, which only reads the downstream and renews the
    record with every write: an expired record must still be reconciled, never executed.
    """
    if record.request_digest != digest:
        return Decision.CONFLICT
    # A person's decision ends the automation's part, whatever the status, budget or retention.
    if record.resolution is not None:
        return Decision.SETTLED
    # A closed record says what happened, past its retention too.
    if record.status is LedgerStatus.COMPLETED:
        return Decision.REPLAYED
    if record.status is LedgerStatus.FAILED:
        return Decision.RECORDED_FAILURE
    if record.escalated_at is not None:
        return Decision.ESCALATED  # a late delivery must not act behind a person's back
    if record.status is LedgerStatus.IN_PROGRESS:
        if record.owner == attempt_id:
            return Decision.OWN_CLAIM
        if record.lease_live(now):
            return Decision.PENDING
    # expired or released IN_PROGRESS, or UNKNOWN: a new delivery would be one more attempt
    if record.attempts + 1 > budget:
        return Decision.BUDGET_EXHAUSTED
    # TTL deletion lags by up to days: an expired record may vanish under the delivery, so it
    # is taken over (renewed) and the action looked up first, never dispatched blind.
    if check_expiry and record.expires_at <= now:
        return Decision.LATE_REPLAY
    if (
        record.status is LedgerStatus.IN_PROGRESS
        and record.owner is None
        and record.first_dispatch_at is None
        and not record.legacy
    ):
        return Decision.RESUME_RELEASED  # every earlier delivery provably sent nothing
    return Decision.TAKEOVER


def client_request_token(transact_items: list[TransactWriteItem]) -> str:
    """TransactWriteItems idempotency token (<= 36 chars) that names exactly one request body.

    DynamoDB applies a token's transaction once and, for 10 minutes, answers the same token with
    the same request as a success without applying it again, and with any other request as
    IdempotentParameterMismatch. So the token is derived from the whole body: the SDK's retry of
    one request (a lost response) is idempotent, and a different body (another delivery, or the
    same delivery deciding again from a record it found) can never reuse it. Between requests,
    the ledger condition in the transaction decides.
    """
    return hashlib.sha256(canonical_json(transact_items).encode()).hexdigest()[:36]


class ActionLedger:
    """Claim / decide / record for one ledger table (design.md §3)."""

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient,
        policy: LedgerPolicy,
        clock: Callable[[], float] = saga_clock.now,
        observer: LedgerObserver | None = None,
    ) -> None:
        self.table_name = table_name
        self.client = client
        self.policy = policy
        self.clock = clock
        self.observer: LedgerObserver = observer or PowertoolsObserver()

    # --- external effects ------------------------------------------------------------------
    def execute(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        effect: Callable[[], EffectResult],
        reconcile: Callable[[], Reconciliation],
        reattempt_window_seconds: float | None = None,
    ) -> ActionOutcome:
        """Run `effect` at most once for the action, or replay / reject per design.md §3.

        effect() raising: BusinessRejection -> recorded FAILED, re-raised; TransientError ->
        (nothing was sent) lease given up, re-raised; OutcomeUnknown -> recorded UNKNOWN,
        re-raised; anything else -> recorded UNKNOWN, raised as OutcomeUnknown. A record that an
        earlier delivery may have dispatched from (an expired lease, UNKNOWN, a released lease
        after an uncertain delivery) is taken over and reconcile() is asked first: Found ->
        COMPLETED without an effect; Absent -> effect() with the same key, but only while a
        request still in flight would be deduplicated (`reattempt_window_seconds` after the
        first possible dispatch; None: the lookup sees every request, so Absent is proof);
        otherwise, or Undeterminable -> UNKNOWN and OutcomeUnknown.

        No record is proof of no earlier delivery only while none can have expired: in an
        execution older than the retention, a fresh claim is looked up first as well. With the
        budget spent, the action is only looked up (never dispatched): found -> COMPLETED.
        """
        held, existing = self._claim(request, attempt)
        if existing is None:
            self._observe(Decision.CLAIMED, request, None)
            if held.first_dispatch_at is not None:  # an earlier record may have expired
                return self._reconcile_then_dispatch(
                    request,
                    attempt,
                    held,
                    effect,
                    reconcile,
                    reattempt_window_seconds=reattempt_window_seconds,
                )
            return self._dispatch(request, attempt, held.claimed_at, effect)
        record = existing
        for _ in range(_MAX_DECISION_ROUNDS):
            decision = self._decide(request, attempt, record)
            if decision is Decision.OWN_CLAIM:
                return self._dispatch(request, attempt, record.claimed_at, effect)
            if decision is Decision.BUDGET_EXHAUSTED:
                found = self._look_up_without_dispatch(request, record, reconcile)
                if found is None:
                    record = self.get(request.key) or record
                    continue
                return found
            if decision not in _TAKEOVERS:
                return self._replay_or_raise(decision, request, record)
            taken, current = self._take_over(request, attempt, record)
            if taken is None:
                if current is None:
                    raise ReplayWindowExpired(
                        f"ledger record {request.key} disappeared (retention passed); "
                        "not executing, reconcile instead"
                    )
                record = current
                continue
            if decision is Decision.RESUME_RELEASED:
                return self._dispatch(request, attempt, taken.claimed_at, effect)
            return self._reconcile_then_dispatch(
                request,
                attempt,
                taken,
                effect,
                reconcile,
                reattempt_window_seconds=reattempt_window_seconds,
            )
        raise ActionPending(f"action {request.key} is contended; try again later")

    # --- DynamoDB-native effects -----------------------------------------------------------
    def execute_transaction(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        effect_items: list[TransactWriteItem],
        result: dict[str, Any],
        downstream_ref: str | None = None,
        explain_failure: Callable[[Mapping[int, dict[str, Any]]], SagaError],
    ) -> ActionOutcome:
        """The ledger record (written COMPLETED) and the effect items in ONE TransactWriteItems.

        Both commit or neither does, so the effect happened iff the COMPLETED record exists.
        `ClientRequestToken` (a digest of the request body, see `client_request_token`) makes
        the SDK's retry of the same request idempotent, but DynamoDB honours it for 10 minutes
        only. What protects every other repeat is the ledger condition in the transaction
        (`attribute_not_exists(action_key)`, or the record exactly as seen): a repeat is
        cancelled and decided from the record in the cancellation reasons (ALL_OLD).

        explain_failure({i: reason, ...}) turns the failed conditions of effect_items (every
        one that failed, by index: DynamoDB checks them all) into one error; a
        BusinessRejection is recorded FAILED (see record_failure) and raised. Cancellations for
        other reasons (a conflicting transaction, throttling) wrote nothing: TransientError.
        """
        seen: LedgerRecord | None = None  # an open record this delivery takes over
        for _ in range(_MAX_DECISION_ROUNDS):
            item = self._new_item(
                request,
                attempt,
                self.clock(),
                status=LedgerStatus.COMPLETED,
                attempts=1 if seen is None else seen.attempts + 1,
                result=result,
                downstream_ref=downstream_ref,
                carried=seen,
            )
            ledger_put: TransactWriteItem = {
                "Put": {
                    "TableName": self.table_name,
                    "Item": item,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    **self._put_condition(seen),  # type: ignore[typeddict-item]
                }
            }
            transact_items = [ledger_put, *effect_items]
            try:
                self.client.transact_write_items(
                    TransactItems=transact_items,
                    ClientRequestToken=client_request_token(transact_items),
                )
            except ClientError as exc:
                decided = self._decide_cancelled_transaction(request, attempt, exc, explain_failure)
                if isinstance(decided, ActionOutcome):
                    return decided
                seen = decided
                continue
            except (ConnectionError, ReadTimeoutError) as exc:
                # Committed or not, a repeat is safe: the token or the ledger condition catches it.
                raise TransientError(f"ledger transaction for {request.key}: {exc}") from exc
            record = LedgerRecord.from_item(item)
            self._observe(Decision.CLAIMED, request, record)
            self._observe(Decision.COMPLETED, request, record)
            return _outcome(record, replayed=False, reconciled=False)
        raise ActionPending(f"action {request.key} is contended; try again later")

    def record_failure(
        self, request: ActionRequest, attempt: Attempt, error: BusinessRejection
    ) -> ActionOutcome:
        """Record a rejection decided before the native transaction, then raise it.

        Writes FAILED if no record exists (a conditional PutItem) and raises `error`. If a record
        exists, it decides: the recorded failure, a conflict, pending, ... are raised; only a
        record that is already COMPLETED (an earlier delivery did commit) is returned, because
        the action did happen and a later rejection does not undo it.
        """
        seen: LedgerRecord | None = None
        for _ in range(_MAX_DECISION_ROUNDS):
            item = self._new_item(
                request,
                attempt,
                self.clock(),
                status=LedgerStatus.FAILED,
                attempts=1 if seen is None else seen.attempts + 1,
                error=error.to_record(),
                carried=seen,
            )
            existing = self._put_new(item, over=seen)
            if existing is None:
                self._observe(Decision.FAILED, request, LedgerRecord.from_item(item))
                raise error
            decision = self._decide(request, attempt, existing)
            if decision in _TAKEOVERS:
                # Native path: the effect commits only together with a COMPLETED record, so an
                # open record that nobody holds proves it did not happen. Record the rejection.
                seen = existing
                continue
            if decision is Decision.OWN_CLAIM:
                raise OutcomeUnknown(
                    f"action {request.key} is open ({existing.status.value}) and cannot be marked "
                    f"FAILED by this attempt; reconcile it"
                )
            return self._replay_or_raise(decision, request, existing)
        raise ActionPending(f"action {request.key} is contended; try again later")

    # --- reconciliation --------------------------------------------------------------------
    def reconcile(
        self,
        request: ActionRequest,
        attempt: Attempt,
        *,
        reconcile: Callable[[], Reconciliation],
        reattempt_window_seconds: float | None = None,
    ) -> ReconcileDecision:
        """For the Reconcile tool: settle an uncertain action from the downstream. Never dispatches.

        COMPLETED -> RESUME (replayed); FAILED -> the recorded error; settled by a person ->
        ESCALATE, without asking the downstream or writing anything (the decision is theirs);
        a live lease of another owner -> ActionPending; otherwise reconcile(): Found ->
        COMPLETED, RESUME; Absent -> RETRY inside the budget while a re-attempt cannot make a
        second effect (see `execute`), else ESCALATE (UNKNOWN when an earlier request may still
        commit); Undeterminable -> UNKNOWN, ESCALATE. It works on a record past its retention
        too, and every write renews the retention.
        """
        budget = self.policy.attempt_budget
        for _ in range(_MAX_DECISION_ROUNDS):
            record = self.get(request.key)
            if record is None:
                return self._reconcile_without_record(
                    request, attempt, reconcile, reattempt_window_seconds
                )
            decision = decide(
                record,
                digest=request.digest,
                attempt_id=attempt.attempt_id,
                now=self.clock(),
                budget=budget,
                check_expiry=False,
            )
            if decision is Decision.SETTLED:
                self._observe(decision, request, record)
                return ReconcileDecision(
                    "ESCALATE", _settled_text(request.key, record), None, record.attempts, budget
                )
            if decision is Decision.ESCALATED:  # answered before: the same answer again
                self._observe(decision, request, record)
                return ReconcileDecision(
                    "ESCALATE", _escalated_text(request.key, record), None, record.attempts, budget
                )
            if decision is Decision.REPLAYED:
                self._observe(decision, request, record)
                return ReconcileDecision(
                    "RESUME",
                    "already completed",
                    _outcome(record, replayed=True, reconciled=False),
                    record.attempts,
                    budget,
                )
            if decision in _REJECTIONS:
                self._observe(decision, request, record)
                self._replay_or_raise(decision, request, record)
            # open and not held by a live attempt (budget or not): ask the downstream
            answer = _ask(reconcile)
            if isinstance(answer, Found):
                written = self._settle_seen(request, record, found=answer)
                if written is None:
                    continue  # the record changed under us: decide again from the new state
                self._observe(Decision.RECONCILED, request, written)
                return ReconcileDecision(
                    "RESUME",
                    "found at the downstream",
                    _outcome(written, replayed=False, reconciled=True),
                    written.attempts,
                    budget,
                )
            if isinstance(answer, Absent):
                refused = self._reattempt_refused(record, reattempt_window_seconds, attempt)
                if refused is None:
                    if record.attempts < budget and record.reconcile_rounds < budget:
                        counted = self._count_retry(request, record)
                        if counted is None:
                            continue
                        return _retry(counted, budget)
                    reason = (
                        f"not found at the downstream and the budget of {budget} attempts is "
                        f"spent ({record.attempts} attempts, {record.reconcile_rounds} "
                        "re-attempts)"
                    )
                    marked = self._mark_escalated(request, record)
                    if marked is None:
                        continue
                    self._observe(Decision.BUDGET_EXHAUSTED, request, marked)
                    return ReconcileDecision("ESCALATE", reason, None, record.attempts, budget)
                recorded, reason = refused, refused
            else:
                recorded, reason = answer.reason, f"outcome cannot be determined: {answer.reason}"
            written = self._settle_seen(request, record, unknown_reason=recorded)
            if written is None:
                continue
            self._observe(Decision.UNKNOWN, request, written)
            return ReconcileDecision("ESCALATE", reason, None, written.attempts, budget)
        raise ActionPending(f"action {request.key} is contended; try again later")

    def get(self, action_key: str) -> LedgerRecord | None:
        """Consistent read of one record, for tools and the CLI."""
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

    # --- a person's decision ---------------------------------------------------------------
    def settle(self, action_key: str, resolution: Resolution) -> LedgerRecord | None:
        """Record a person's decision on an open action; the record as it is afterwards.

        The record keeps its status and history (an UNKNOWN stays UNKNOWN: the system still does
        not know), gains `resolution` {by, decision, at}, and loses `open_status`, so the
        sweeper's sparse index no longer finds it (no more escalation messages, the stuck-action
        alarm clears), and `expires_at`, so TTL never deletes the decision and no late delivery
        can claim the action afresh. From then on every delivery is refused with ActionSettled
        before any write, and reconciliation answers ESCALATE: nothing is dispatched again.

        The write is conditional on the record exactly as read (re-read and decided again when
        it changed). None: no record; a closed record (COMPLETED, FAILED) is returned as it is,
        nothing to settle. Raises ActionPending while a live attempt holds the action and
        ActionSettled when a person has settled it already.
        """
        for _ in range(_MAX_DECISION_ROUNDS):
            seen = self.get(action_key)
            if seen is None or (seen.status not in OPEN_STATUSES and seen.resolution is None):
                return seen
            update = self.settle_write(seen, resolution)["Update"]
            try:
                response = self.client.update_item(**update, ReturnValues="ALL_NEW")
            except ClientError as exc:
                if _is_condition_failure(exc):
                    continue  # changed since read: decide again from the record as it is now
                raise TransientError(f"ledger write for {action_key} failed: {exc}") from exc
            except BotoCoreError as exc:
                raise TransientError(f"ledger write for {action_key} failed: {exc}") from exc
            return LedgerRecord.from_item(response["Attributes"])
        raise ActionPending(f"action {action_key} is contended; try again later")

    def settle_write(self, seen: LedgerRecord, resolution: Resolution) -> TransactWriteItem:
        """The write of `settle` as one TransactWriteItems item, conditional on the record
        exactly as `seen`: for a caller that records the same decision elsewhere in the same
        transaction (the case record's resolution). Raises ActionSettled, ActionPending (a live
        attempt holds the action) or ValueError (a closed record has nothing to settle)."""
        key = seen.action_key
        if seen.resolution is not None:
            raise ActionSettled(f"{_settled_text(key, seen)}; it cannot be settled twice")
        if seen.status not in OPEN_STATUSES:
            raise ValueError(f"action {key} is {seen.status.value}: nothing open to settle")
        now = self.clock()
        if seen.lease_live(now):
            raise ActionPending(
                f"action {key} is held by attempt {seen.owner} until "
                f"{_iso(seen.lease_expires_at)}: it can be settled once that attempt has ended"
            )
        values: dict[str, Any] = {
            ":seen_status": {"S": seen.status.value},
            ":resolution": _to_dynamo(resolution.to_record()),
            ":now": _n(now),
        }
        condition = "#status = :seen_status" + self._same_as_seen(seen, values)
        expression = (
            "SET resolution = :resolution, updated_at = :now REMOVE open_status, expires_at"
        )
        update: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {"action_key": {"S": key}},
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": _names(expression, condition),
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        return cast("TransactWriteItem", {"Update": update})

    # --- internals: claim and decide -------------------------------------------------------
    def _claim(
        self, request: ActionRequest, attempt: Attempt
    ) -> tuple[LedgerRecord, LedgerRecord | None]:
        """The claim PutItem: (the record written, None) when claimed; else (the record this
        claim would have written, the record already there)."""
        now = self.clock()
        lease = now + self.policy.lease_seconds(attempt.remaining_seconds)
        item = self._new_item(
            request,
            attempt,
            now,
            status=LedgerStatus.IN_PROGRESS,
            attempts=1,
            lease_expires_at=lease,
            first_dispatch_at=self._earlier_record_may_have_expired(attempt, now),
        )
        # A ledger that cannot be reached (after botocore's retries) raises TransientError:
        # nothing was dispatched.
        return LedgerRecord.from_item(item), self._put_new(item)

    def _earlier_record_may_have_expired(self, attempt: Attempt, now: float) -> float | None:
        """When no record is found: the start of this delivery's execution if a record of an
        earlier delivery may have expired and been deleted since (the execution is older than
        the retention, less a margin), else None (nothing found proves nothing was written).

        Every delivery of an action belongs to the one execution that owns the case (a new
        execution of the case is a duplicate), and each writes its record after that execution
        started; retention counts from the latest write. Chained redrives whose deliveries never
        reach the ledger (throttled, failing before the claim) renew nothing.
        """
        started = attempt.execution_started_at
        if started is None:
            return None
        if now - started < self.policy.retention_seconds - _RETENTION_MARGIN_SECONDS:
            return None
        return started

    def _put_new(
        self, item: dict[str, Any], *, over: LedgerRecord | None = None
    ) -> LedgerRecord | None:
        """Put `item` if no record exists (or, with `over`, only while the record is exactly as
        `over` saw it). None = written; otherwise the record that was there."""
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=item,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **self._put_condition(over),
            )
        except ClientError as exc:
            old = _condition_failed_item(exc)
            if old is None:
                # Every new record is written before anything is dispatched: safe to repeat.
                key = item["action_key"]["S"]
                raise TransientError(f"ledger write for {key} failed: {exc}") from exc
            return LedgerRecord.from_item(old)
        except BotoCoreError as exc:
            key = item["action_key"]["S"]
            raise TransientError(f"ledger write for {key} failed: {exc}") from exc
        return None

    def _decide(self, request: ActionRequest, attempt: Attempt, record: LedgerRecord) -> Decision:
        decision = decide(
            record,
            digest=request.digest,
            attempt_id=attempt.attempt_id,
            now=self.clock(),
            budget=self.policy.attempt_budget,
        )
        self._observe(decision, request, record)
        return decision

    def _replay_or_raise(
        self, decision: Decision, request: ActionRequest, record: LedgerRecord
    ) -> ActionOutcome:
        """The decisions that need no write: return a replay or raise the decided error."""
        if decision is Decision.REPLAYED:
            return _outcome(record, replayed=True, reconciled=False)
        if decision is Decision.CONFLICT:
            raise KeyConflict(
                f"action {request.key} was already requested with different parameters "
                f"(recorded {record.request_digest}, now {request.digest}); not executed"
            )
        if decision is Decision.LATE_REPLAY:
            raise ReplayWindowExpired(
                f"ledger record {request.key} expired at {record.expires_at}; it no longer "
                "protects the action, so it is not executed: reconcile instead"
            )
        if decision is Decision.RECORDED_FAILURE:
            raise error_from_record(record.error or {})
        if decision is Decision.SETTLED:
            raise ActionSettled(
                f"{_settled_text(request.key, record)}; not dispatched automatically again"
            )
        if decision is Decision.PENDING:
            raise ActionPending(
                f"action {request.key} is held by another attempt until "
                f"{record.lease_expires_at:.3f}; try again later"
            )
        if decision is Decision.ESCALATED:
            raise OutcomeUnknown(_escalated_text(request.key, record))
        if decision is Decision.BUDGET_EXHAUSTED:
            raise BudgetExhausted(
                f"action {request.key} has used {record.attempts} of "
                f"{self.policy.attempt_budget} attempts; not dispatched: reconcile or escalate"
            )
        raise OutcomeUnknown(
            f"action {request.key} is {record.status.value}; it must be reconciled"
        )

    def _take_over(
        self, request: ActionRequest, attempt: Attempt, old: LedgerRecord
    ) -> tuple[LedgerRecord | None, LedgerRecord | None]:
        """Conditional takeover: (new record, None) if won, else (None, the current record)."""
        now = self.clock()
        lease = now + self.policy.lease_seconds(attempt.remaining_seconds)
        values: dict[str, Any] = {
            ":me": {"S": attempt.attempt_id},
            ":lease": _n(lease),
            ":one": {"N": "1"},
            ":in_progress": {"S": LedgerStatus.IN_PROGRESS.value},
            ":now": _n(now),
            ":expires": self._expires(now),
            ":old_status": {"S": old.status.value},
        }
        sets = (
            "SET #owner = :me, lease_expires_at = :lease, attempts = attempts + :one, "
            "#status = :in_progress, open_status = :in_progress, updated_at = :now, "
            "claimed_at = :now, expires_at = :expires"
        )
        dispatched_since = old.may_have_dispatched_since(now)
        if dispatched_since is not None:
            # The owner before us may have reached the downstream: remember it for good.
            values[":since"] = _n(dispatched_since)
            sets += ", first_dispatch_at = if_not_exists(first_dispatch_at, :since)"
        condition = "#status = :old_status" + self._same_as_seen(old, values)
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
            if not _is_condition_failure(exc):
                # Nothing was taken over; the delivery is safe to repeat.
                raise TransientError(f"ledger takeover of {request.key} failed: {exc}") from exc
            current_item = _condition_failed_item(exc)
            current = LedgerRecord.from_item(current_item) if current_item else None
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

    @classmethod
    def _put_condition(cls, over: LedgerRecord | None) -> dict[str, Any]:
        """Condition arguments of a whole-record Put: a new record, or over the one seen."""
        if over is None:
            return {"ConditionExpression": CLAIM_CONDITION}
        values: dict[str, Any] = {":old_status": {"S": over.status.value}}
        condition = "#status = :old_status" + cls._same_as_seen(over, values)
        return {
            "ConditionExpression": condition,
            "ExpressionAttributeNames": _names(condition),
            "ExpressionAttributeValues": values,
        }

    @staticmethod
    def _same_as_seen(old: LedgerRecord, values: dict[str, Any]) -> str:
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

    # --- internals: dispatch and outcome writes --------------------------------------------
    def _reconcile_then_dispatch(
        self,
        request: ActionRequest,
        attempt: Attempt,
        held: LedgerRecord,
        effect: Callable[[], EffectResult],
        reconcile: Callable[[], Reconciliation],
        *,
        reattempt_window_seconds: float | None,
    ) -> ActionOutcome:
        # An expired lease proves lost ownership, not a failed effect: ask before re-running.
        answer = _ask(reconcile)
        if isinstance(answer, Found):
            written = self._finish(
                request,
                attempt,
                LedgerStatus.COMPLETED,
                result=answer.result,
                downstream_ref=answer.downstream_ref,
            )
            self._observe(Decision.RECONCILED, request, written)
            return _outcome(written, replayed=False, reconciled=True)
        if isinstance(answer, Absent):
            refused = self._reattempt_refused(held, reattempt_window_seconds, attempt)
            if refused is None:
                return self._dispatch(request, attempt, held.claimed_at, effect)
            reason = refused
        else:
            reason = f"outcome of an earlier attempt cannot be determined: {answer.reason}"
        unknown = OutcomeUnknown(f"action {request.key}: {reason}")
        self._finish(request, attempt, LedgerStatus.UNKNOWN, error=unknown.to_record())
        raise unknown

    def _reattempt_refused(
        self, record: LedgerRecord, window_seconds: float | None, attempt: Attempt
    ) -> str | None:
        """Why a downstream's "not found" does not allow a re-attempt now (None: it does).

        "Not found" proves nothing while an earlier request may still be in flight. A repeat with
        the same idempotency key is one effect only while the downstream still keeps the key
        (`window_seconds` after the first possible dispatch, counted conservatively from that
        delivery's claim); a downstream whose lookup sees every request (window None) proves
        absence outright, as does a record that no delivery can have dispatched from.
        """
        return self._window_refusal(
            record.may_have_dispatched_since(self.clock()), window_seconds, attempt
        )

    def _window_refusal(
        self, since: float | None, window_seconds: float | None, attempt: Attempt
    ) -> str | None:
        """`_reattempt_refused` for a first possible dispatch at `since` (None: none)."""
        now = self.clock()
        if since is None or window_seconds is None:
            return None
        closes = since + window_seconds
        # The re-attempt dispatches within this delivery's lease: it must land inside the window.
        if now + self.policy.lease_seconds(attempt.remaining_seconds) < closes:
            return None
        return (
            f"not found at the downstream, but a request sent since {_iso(since)} may still "
            f"commit and the downstream deduplicates a repeat only until {_iso(closes)}: "
            "a re-attempt now could make a second effect"
        )

    def _dispatch(
        self,
        request: ActionRequest,
        attempt: Attempt,
        claimed_at: float,
        effect: Callable[[], EffectResult],
    ) -> ActionOutcome:
        try:
            done = effect()
        except BusinessRejection as rejection:
            self._finish(request, attempt, LedgerStatus.FAILED, error=rejection.to_record())
            raise
        except TransientError:
            # Only a failure that provably sent nothing is a TransientError (design.md §3).
            self._release(request, attempt)
            raise
        except OutcomeUnknown as uncertain:
            self._finish(
                request,
                attempt,
                LedgerStatus.UNKNOWN,
                error=uncertain.to_record(),
                dispatched_at=claimed_at,
            )
            raise
        except Exception as exc:
            unknown = OutcomeUnknown(
                f"action {request.key}: effect ended with {type(exc).__name__}: {exc}"
            )
            self._finish(
                request,
                attempt,
                LedgerStatus.UNKNOWN,
                error=unknown.to_record(),
                dispatched_at=claimed_at,
            )
            raise unknown from exc
        written = self._finish(
            request,
            attempt,
            LedgerStatus.COMPLETED,
            result=done.result,
            downstream_ref=done.downstream_ref,
        )
        return _outcome(written, replayed=False, reconciled=False)

    def _finish(
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

        `dispatched_at`: this delivery (claimed then) may have reached the downstream.
        """
        now = self.clock()
        values: dict[str, Any] = {
            ":me": {"S": attempt.attempt_id},
            ":in_progress": {"S": LedgerStatus.IN_PROGRESS.value},
            ":status": {"S": status.value},
            ":now": _n(now),
            ":expires": self._expires(now),
        }
        sets = ["#status = :status", "updated_at = :now", "expires_at = :expires"]
        if dispatched_at is not None:
            values[":dispatched"] = _n(dispatched_at)
            sets.append("first_dispatch_at = if_not_exists(first_dispatch_at, :dispatched)")
        removes: list[str] = []
        if status is LedgerStatus.COMPLETED:
            values[":result"] = _to_dynamo(result or {})
            sets.append("#result = :result")
            removes += ["open_status", "#error"]
            if downstream_ref is not None:
                values[":ref"] = {"S": downstream_ref}
                sets.append("downstream_ref = :ref")
        elif status is LedgerStatus.FAILED:
            values[":error"] = _to_dynamo(error or {})
            sets.append("#error = :error")
            removes.append("open_status")
        else:  # UNKNOWN stays open for the sweeper (GSI sorted by when it became unknown)
            values[":error"] = _to_dynamo(error or {})
            sets += ["#error = :error", "open_status = :status", "lease_expires_at = :now"]
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key={"action_key": {"S": request.key}},
                UpdateExpression=expression,
                ConditionExpression="#owner = :me AND #status = :in_progress",
                ExpressionAttributeNames=_names(expression, "#owner #status"),
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                raise _unrecorded(request, status, exc) from exc
            current_item = _condition_failed_item(exc)
            current = LedgerRecord.from_item(current_item) if current_item else None
            if current and current.owner == attempt.attempt_id and current.status is status:
                return current  # our own write, retried by the SDK after a lost response
            self._observe(Decision.LEASE_LOST, request, current)
            raise OutcomeUnknown(
                f"lease lost on {request.key}: now "
                f"{current.status.value if current else 'gone'}, owner "
                f"{current.owner if current else None}; the {status.value} outcome of attempt "
                f"{attempt.attempt_id} was not recorded and is left to reconciliation"
            ) from exc
        except BotoCoreError as exc:
            raise _unrecorded(request, status, exc) from exc
        written = LedgerRecord.from_item(response["Attributes"])
        self._observe(Decision(status.value.lower()), request, written)
        return written

    def _release(self, request: ActionRequest, attempt: Attempt) -> None:
        """Give the lease up after a TransientError: this delivery sent nothing.

        The record stays IN_PROGRESS (its `attempts` is the budget) with no owner and an expired
        lease. The next delivery takes it over; it skips the lookup only if no earlier delivery
        may have reached the downstream (no `first_dispatch_at`).
        """
        now = self.clock()
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={"action_key": {"S": request.key}},
                UpdateExpression=(
                    "SET lease_expires_at = :now, updated_at = :now, expires_at = :expires "
                    "REMOVE #owner"
                ),
                ConditionExpression="#owner = :me AND #status = :in_progress",
                ExpressionAttributeNames={"#status": "status", "#owner": "owner"},
                ExpressionAttributeValues={
                    ":me": {"S": attempt.attempt_id},
                    ":in_progress": {"S": LedgerStatus.IN_PROGRESS.value},
                    ":now": _n(now),
                    ":expires": self._expires(now),
                },
            )
        except ClientError as exc:
            if not _is_condition_failure(exc):
                # The caller's TransientError still stands: the lease simply runs out, and the
                # next delivery takes over and reconciles first.
                self._observe(Decision.RELEASE_FAILED, request, None)
                return
            self._observe(Decision.LEASE_LOST, request, None)
            return
        except BotoCoreError:
            self._observe(Decision.RELEASE_FAILED, request, None)
            return
        self._observe(Decision.RELEASED, request, None)

    def _settle_seen(
        self,
        request: ActionRequest,
        seen: LedgerRecord,
        *,
        found: Found | None = None,
        unknown_reason: str | None = None,
    ) -> LedgerRecord | None:
        """Reconcile tool's write: COMPLETED or UNKNOWN, only if the record is still as seen."""
        now = self.clock()
        values: dict[str, Any] = {
            ":seen_status": {"S": seen.status.value},
            ":now": _n(now),
            ":expires": self._expires(now),
        }
        condition = "#status = :seen_status" + self._same_as_seen(seen, values)
        if found is not None:
            values[":completed"] = {"S": LedgerStatus.COMPLETED.value}
            values[":result"] = _to_dynamo(found.result)
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
            values[":error"] = _to_dynamo(error)
            # Only reconciliation writes UNKNOWN here, when it escalates: from now on a person
            # decides, and no late delivery may act on the record.
            expression = (
                "SET #status = :unknown, open_status = :unknown, #error = :error, "
                "lease_expires_at = :now, updated_at = :now, expires_at = :expires, "
                "escalated_at = :now"
            ) + self._remember_dispatch(seen, now, values)
        return self._update_if(request, expression, condition, values)

    @staticmethod
    def _remember_dispatch(seen: LedgerRecord, now: float, values: dict[str, Any]) -> str:
        """SET clause keeping, for good, that a delivery before `seen` may have dispatched."""
        since = seen.may_have_dispatched_since(now)
        if since is None:
            return ""
        values[":since"] = _n(since)
        return ", first_dispatch_at = if_not_exists(first_dispatch_at, :since)"

    def _update_if(
        self, request: ActionRequest, expression: str, condition: str, values: dict[str, Any]
    ) -> LedgerRecord | None:
        """One conditional UpdateItem: the new record, or None when the condition failed."""
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key={"action_key": {"S": request.key}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=_names(expression, condition),
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _is_condition_failure(exc):
                return None
            # Reconciliation writes are conditional on the record as seen: safe to repeat.
            raise TransientError(f"ledger write for {request.key} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise TransientError(f"ledger write for {request.key} failed: {exc}") from exc
        return LedgerRecord.from_item(response["Attributes"])

    def _mark_escalated(self, request: ActionRequest, seen: LedgerRecord) -> LedgerRecord | None:
        """Reconciliation escalates with the record as it is (only if it is still as seen):
        no late delivery may act on it any more. None when the record changed."""
        now = self.clock()
        values: dict[str, Any] = {
            ":seen_status": {"S": seen.status.value},
            ":now": _n(now),
            ":expires": self._expires(now),
        }
        condition = "#status = :seen_status" + self._same_as_seen(seen, values)
        expression = "SET escalated_at = :now, updated_at = :now, expires_at = :expires"
        return self._update_if(request, expression, condition, values)

    def _look_up_without_dispatch(
        self,
        request: ActionRequest,
        seen: LedgerRecord,
        reconcile: Callable[[], Reconciliation],
    ) -> ActionOutcome | None:
        """The budget is spent: no dispatch, but the lookup is free of effects. Found -> the
        record COMPLETED (None if it changed meanwhile); else BudgetExhausted."""
        answer = _ask(reconcile)
        if not isinstance(answer, Found):
            self._replay_or_raise(Decision.BUDGET_EXHAUSTED, request, seen)
        assert isinstance(answer, Found)
        written = self._settle_seen(request, seen, found=answer)
        if written is None:
            return None
        self._observe(Decision.RECONCILED, request, written)
        return _outcome(written, replayed=False, reconciled=True)

    def _count_retry(self, request: ActionRequest, seen: LedgerRecord) -> LedgerRecord | None:
        """Count one RETRY answer on the record, only if it is still as seen (else None)."""
        now = self.clock()
        values: dict[str, Any] = {
            ":seen_status": {"S": seen.status.value},
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
            ":now": _n(now),
            ":expires": self._expires(now),
        }
        condition = "#status = :seen_status" + self._same_as_seen(seen, values)
        expression = (
            "SET reconcile_rounds = if_not_exists(reconcile_rounds, :zero) + :one, "
            "updated_at = :now, expires_at = :expires"
        ) + self._remember_dispatch(seen, now, values)
        return self._update_if(request, expression, condition, values)

    def _reconcile_without_record(
        self,
        request: ActionRequest,
        attempt: Attempt,
        reconcile: Callable[[], Reconciliation],
        reattempt_window_seconds: float | None,
    ) -> ReconcileDecision:
        budget = self.policy.attempt_budget
        answer = _ask(reconcile)
        now = self.clock()
        # No record may still hide one that expired (an old execution): then a delivery may have
        # dispatched since the execution started.
        since = self._earlier_record_may_have_expired(attempt, now)
        refused = (
            self._window_refusal(since, reattempt_window_seconds, attempt)
            if isinstance(answer, Absent)
            else None
        )
        if isinstance(answer, Absent) and refused is None:
            # A placeholder nobody holds, so that the RETRY it answers is counted even when the
            # re-attempt never reaches the ledger (the loop ends within the budget), and the
            # re-attempt takes it over (a lookup first when `since` says an earlier delivery
            # may have dispatched).
            item = self._new_item(
                request,
                attempt,
                now,
                status=LedgerStatus.IN_PROGRESS,
                attempts=0,
                owner=False,
                reconcile_rounds=1,
                first_dispatch_at=since,
            )
        elif isinstance(answer, Found):
            item = self._new_item(
                request,
                attempt,
                now,
                status=LedgerStatus.COMPLETED,
                attempts=1,
                result=answer.result,
                downstream_ref=answer.downstream_ref,
            )
        else:
            # Recorded, escalated: no later delivery may act on it (a person decides).
            reason = refused or (
                answer.reason if isinstance(answer, Undeterminable) else "undeterminable"
            )
            item = self._new_item(
                request,
                attempt,
                now,
                status=LedgerStatus.UNKNOWN,
                attempts=0,
                error=OutcomeUnknown(reason).to_record(),
                owner=False,
                first_dispatch_at=since,
                escalated=True,
            )
        existing = self._put_new(item)
        if existing is not None:  # someone wrote it meanwhile: let the caller decide again
            raise ActionPending(f"action {request.key} changed during reconciliation; retry")
        written = LedgerRecord.from_item(item)
        if isinstance(answer, Found):
            self._observe(Decision.RECONCILED, request, written)
            return ReconcileDecision(
                "RESUME",
                "found at the downstream",
                _outcome(written, replayed=False, reconciled=True),
                written.attempts,
                budget,
            )
        if written.status is LedgerStatus.IN_PROGRESS:
            return _retry(written, budget)
        self._observe(Decision.UNKNOWN, request, written)
        reason = refused or f"outcome cannot be determined: {getattr(answer, 'reason', '')}"
        return ReconcileDecision("ESCALATE", reason, None, 0, budget)

    def _new_item(
        self,
        request: ActionRequest,
        attempt: Attempt,
        now: float,
        *,
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
    ) -> dict[str, Any]:
        """A whole record. `carried`: the record it replaces (keeps its history fields)."""
        if carried is not None:
            reconcile_rounds = carried.reconcile_rounds
            first_dispatch_at = carried.first_dispatch_at
        item: dict[str, Any] = {
            "action_key": {"S": request.key},
            "status": {"S": status.value},
            "request_digest": {"S": request.digest},
            "lease_expires_at": _n(now if lease_expires_at is None else lease_expires_at),
            "attempts": {"N": str(attempts)},
            "business_ref": {"S": request.reference},
            "case_id": {"S": request.case_id},
            "created_at": carried.item.get("created_at", _n(now)) if carried else _n(now),
            "updated_at": _n(now),
            "claimed_at": _n(now),
            "expires_at": self._expires(now),
        }
        if first_dispatch_at is not None:
            item["first_dispatch_at"] = _n(first_dispatch_at)
        if escalated:
            item["escalated_at"] = _n(now)
        if reconcile_rounds:
            item["reconcile_rounds"] = {"N": str(reconcile_rounds)}
        if owner is True:
            item["owner"] = {"S": attempt.attempt_id}
        if status in OPEN_STATUSES:
            item["open_status"] = {"S": status.value}
        if result is not None:
            item["result"] = _to_dynamo(result)
        if error is not None:
            item["error"] = _to_dynamo(error)
        optional = {
            "downstream_ref": downstream_ref,
            "execution_arn": request.execution_arn,
            "compensates": request.compensates,
        }
        for name, value in optional.items():
            if value is not None:
                item[name] = {"S": value}
        return item

    def _decide_cancelled_transaction(
        self,
        request: ActionRequest,
        attempt: Attempt,
        exc: ClientError,
        explain_failure: Callable[[Mapping[int, dict[str, Any]]], SagaError],
    ) -> ActionOutcome | LedgerRecord:
        """The replayed outcome, or an open record nobody holds (the caller takes it over);
        everything else is raised."""
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "IdempotentParameterMismatchException":
            # The token is a digest of the body, so this cannot come from our own requests; if it
            # does, nothing of this request was applied: the record says what happened.
            seen = self.get(request.key)
            if seen is None:
                raise TransientError(
                    f"ledger transaction for {request.key}: the token was used in the last 10 "
                    "minutes and nothing is recorded; retry"
                ) from exc
            return self._decide_existing_for_transaction(request, attempt, seen)
        if code == "TransactionInProgressException":
            raise ActionPending(f"action {request.key}: the same transaction is in flight") from exc
        if code in _TRANSIENT_DYNAMODB_CODES:
            raise TransientError(f"ledger transaction for {request.key}: {code}") from exc
        if code != "TransactionCanceledException":
            raise exc
        reasons = cast("list[dict[str, Any]]", exc.response.get("CancellationReasons", []))
        ledger_reason = reasons[0] if reasons else {}
        if ledger_reason.get("Code") == "ConditionalCheckFailed":
            old_item = ledger_reason.get("Item")
            record = LedgerRecord.from_item(old_item) if old_item else self.get(request.key)
            if record is None:
                raise TransientError(f"action {request.key}: record vanished; retry") from exc
            return self._decide_existing_for_transaction(request, attempt, record)
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

    def _decide_existing_for_transaction(
        self, request: ActionRequest, attempt: Attempt, record: LedgerRecord
    ) -> ActionOutcome | LedgerRecord:
        decision = self._decide(request, attempt, record)
        if decision in _TAKEOVERS:
            # The effect commits only with a COMPLETED record, so an open record that nobody
            # holds (a reconcile's placeholder, an UNKNOWN) proves it has not happened.
            return record
        return self._replay_or_raise(decision, request, record)

    def _expires(self, now: float) -> dict[str, str]:
        """Retention counts from the latest delivery, so chained redrives (each within 14 days
        of a close) never meet a record that expired under them."""
        return {"N": str(int(now) + self.policy.retention_seconds)}

    def _observe(
        self, decision: Decision, request: ActionRequest, record: LedgerRecord | None
    ) -> None:
        self.observer.on_decision(decision.value, request, record)


# --- helpers -------------------------------------------------------------------------------
def _unrecorded(request: ActionRequest, status: LedgerStatus, exc: Exception) -> OutcomeUnknown:
    """An outcome write that failed for another reason than ownership: the record stays open
    (IN_PROGRESS) and a later delivery takes it over and reconciles."""
    return OutcomeUnknown(
        f"the {status.value} outcome of {request.key} could not be recorded ({exc}); "
        "left to reconciliation"
    )


def _settled_text(key: str, record: LedgerRecord) -> str:
    resolution = record.resolution or {}
    decision = str(resolution.get("decision", ""))
    if len(decision) > _MAX_DECISION_TEXT:
        decision = decision[: _MAX_DECISION_TEXT - 3] + "..."
    return (
        f"action {key} ({record.status.value}) was settled by {resolution.get('by')} at "
        f"{resolution.get('at')}: {decision!r}"
    )


def _retry(record: LedgerRecord, budget: int) -> ReconcileDecision:
    return ReconcileDecision(
        "RETRY",
        f"not found at the downstream; re-attempt {record.reconcile_rounds} of {budget}",
        None,
        record.attempts,
        budget,
    )


def _ask(reconcile: Callable[[], Reconciliation]) -> Reconciliation:
    """A reconciliation that itself fails has not determined anything."""
    try:
        return reconcile()
    except Exception as exc:
        return Undeterminable(f"reconciliation failed: {type(exc).__name__}: {exc}")


def _outcome(record: LedgerRecord, *, replayed: bool, reconciled: bool) -> ActionOutcome:
    return ActionOutcome(
        action_key=record.action_key,
        status=record.status.value,
        result=dict(record.result or {}),
        downstream_ref=record.downstream_ref,
        replayed=replayed,
        reconciled=reconciled,
        attempts=record.attempts,
    )


def _is_condition_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _condition_failed_item(exc: ClientError) -> Item | None:
    """The old item a failed condition returned (ALL_OLD); None if it was another error."""
    if not _is_condition_failure(exc):
        return None
    item: Item = exc.response.get("Item", {})  # type: ignore[assignment]
    return item


def _names(*expressions: str) -> dict[str, str]:
    """ExpressionAttributeNames for the placeholders used (DynamoDB rejects unused ones)."""
    used = " ".join(expressions)
    return {f"#{name}": name for name in _ALIASED if f"#{name}" in used}


def _n(value: float) -> dict[str, str]:
    """A DynamoDB number with millisecond precision, in plain (non-exponent) notation."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return {"N": text if text not in ("", "-0") else "0"}


def _to_dynamo(value: dict[str, Any]) -> dict[str, Any]:
    return cast("dict[str, Any]", _SERIALIZER.serialize(_floats_to_decimal(value)))


def _floats_to_decimal(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {key: _floats_to_decimal(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_floats_to_decimal(item) for item in value]
    return value


def _from_dynamo(value: Any) -> Any:
    """Decimals back to int/float so a replayed result equals the original one."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _from_dynamo(item) for key, item in value.items()}
    if isinstance(value, list | set | tuple):
        return [_from_dynamo(item) for item in value]
    return value


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _escalated_text(key: str, record: LedgerRecord) -> str:
    reason = (record.error or {}).get("message") or "the outcome could not be established"
    at = _iso(record.escalated_at or 0)
    return (
        f"action {key} was escalated to a person at {at} ({reason}); it is never dispatched "
        "automatically again"
    )


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
