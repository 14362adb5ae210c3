"""What the ledger reads, writes and answers: its record, a delivery, a downstream's evidence.

Plain values only: no DynamoDB request and no decision is made here (decisions.py decides,
store.py writes). `ActionRequest`, the action's identity, lives in saga.identity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from saga.dynamodb import Item, TransactWriteItem, from_item


class LedgerStatus(StrEnum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    # No delivery's record: a person resolved the case while the action had none (§3.10).
    SETTLED = "SETTLED"


OPEN_STATUSES = frozenset({LedgerStatus.IN_PROGRESS, LedgerStatus.UNKNOWN})
# The statuses whose record keeps a retention (`expires_at`, §3.7): an open one never expires.
CLOSED_STATUSES = frozenset({LedgerStatus.COMPLETED, LedgerStatus.FAILED})
# How far a person's clock may run ahead of the Lambda clock that sized a lease (§3.10): a
# lease is settled only once it ended this long ago on the settling clock. AWS refuses a
# request signed more than 5 minutes off its own time (15 for S3), and boto3 does not correct
# a skewed clock, so no caller that can write the ledger is further off.
SETTLE_SKEW_SECONDS = 15 * 60


# --- one delivery --------------------------------------------------------------------------------
class DeliveryInfo(Protocol):
    """How the state machine describes a delivery (saga.models.AttemptInfo)."""

    def attempt_id(self, request_id: str) -> str: ...

    @property
    def started(self) -> str | None: ...


class LambdaContextLike(Protocol):
    """The parts of the Lambda context object a delivery needs."""

    @property
    def aws_request_id(self) -> str: ...

    def get_remaining_time_in_millis(self) -> int: ...


@dataclass(frozen=True)
class Attempt:
    """One delivery of a task to a tool: the lease owner, its time left, its execution's start."""

    attempt_id: str  # lease owner; never the action identity
    remaining_seconds: float  # from the Lambda context; sizes the lease
    # When this delivery's execution started (redrives keep it): every delivery of the action
    # came after it, which bounds when a record of it can have been written (and deleted).
    execution_started_at: float | None = None

    @classmethod
    def of_delivery(cls, info: DeliveryInfo, context: LambdaContextLike) -> Attempt:
        """This delivery: the lease owner id (`execution#state#redrive#retry:request-id`), the
        time it has left (which sizes the lease) and when its execution started."""
        return cls(
            attempt_id=info.attempt_id(context.aws_request_id),
            remaining_seconds=max(context.get_remaining_time_in_millis(), 0) / 1000,
            execution_started_at=_epoch(info.started),
        )


def _epoch(timestamp: str | None) -> float | None:
    """`$states.context.Execution.StartTime` (ISO 8601) as epoch seconds; None if absent."""
    if timestamp is None:
        return None
    try:
        parsed = datetime.fromisoformat(timestamp)
    except ValueError:
        return None  # not worth failing a delivery over: the age rule just does not apply
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


# --- what a downstream says ----------------------------------------------------------------------
@dataclass(frozen=True)
class EffectResult:
    """What a forward effect returned: its business result and the downstream's own id."""

    result: dict[str, Any]  # JSON-able business result (replayed to duplicates)
    downstream_ref: str | None = None


@dataclass(frozen=True)
class Found:
    """A lookup found the effect: its result, as the downstream reports it."""

    result: dict[str, Any]
    downstream_ref: str | None = None


@dataclass(frozen=True)
class Absent:
    """A lookup proved the effect absent: nothing was done under this action."""

    pass


@dataclass(frozen=True)
class Undeterminable:
    """A lookup could not tell whether the effect exists (the reason says why)."""

    reason: str


Reconciliation = Found | Absent | Undeterminable


@dataclass(frozen=True)
class CompanionWrite:
    """A conditional `Update` of another table that says what the action's completion means
    there (the case record's COMPLETED with the shipment's, docs/design.md §3.11): written in
    one TransactWriteItems with the COMPLETED record, or after it, never before. `refused(item)`
    is the error its failed condition means, given that table's item as it is (None: none)."""

    update: TransactWriteItem
    refused: Callable[[dict[str, Any] | None], Exception]


# --- the record ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LedgerRecord:
    """One ledger item, decoded. `item` keeps the raw attributes for exact conditions."""

    action_key: str
    status: LedgerStatus
    request_digest: str | None  # None only on a SETTLED record (no delivery wrote it)
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
    expires_at: int | None  # the TTL attribute: only closed records carry one (§3.7)
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
    # The UTC day and amount its first claim charged to the tenant's daily refund counter
    # (docs/design.md §3.12); None: nothing charged (no ceiling, or not claimed yet).
    charged_day: str | None = None
    charged_minor: int | None = None
    item: Item = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_item(cls, item: Item) -> LedgerRecord:
        values = from_item(item)
        return cls(
            action_key=str(values["action_key"]),
            status=LedgerStatus(values["status"]),
            request_digest=_optional_str(values.get("request_digest")),
            owner=_optional_str(values.get("owner")),
            lease_expires_at=float(values.get("lease_expires_at", 0)),
            attempts=int(values.get("attempts", 0)),
            result=values.get("result"),
            error=values.get("error"),
            downstream_ref=_optional_str(values.get("downstream_ref")),
            business_ref=_optional_str(values.get("business_ref")),
            case_id=_optional_str(values.get("case_id")),
            execution_arn=_optional_str(values.get("execution_arn")),
            compensates=_optional_str(values.get("compensates")),
            created_at=float(values.get("created_at", 0)),
            updated_at=float(values.get("updated_at", 0)),
            expires_at=_optional_int(values.get("expires_at")),
            reconcile_rounds=int(values.get("reconcile_rounds", 0)),
            claimed_at=float(values.get("claimed_at", values.get("updated_at", 0))),
            first_dispatch_at=_optional_float(values.get("first_dispatch_at")),
            resolution=values.get("resolution"),
            escalated_at=_optional_float(values.get("escalated_at")),
            legacy="claimed_at" not in values,
            charged_day=_optional_str(values.get("charged_day")),
            charged_minor=_optional_int(values.get("charged_minor")),
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

    @property
    def unclaimed(self) -> bool:
        """No delivery has claimed it and nothing is charged for it: a placeholder reconciliation
        wrote where it found no record (§3.8). Its first claim is the takeover (§3.12)."""
        return self.attempts == 0 and self.charged_day is None

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


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


# --- what the ledger answers ---------------------------------------------------------------------
@dataclass(frozen=True)
class ActionOutcome:
    """A completed action as the ledger answers it to the tool (first run or replay)."""

    action_key: str
    status: str  # "COMPLETED"
    result: dict[str, Any]
    downstream_ref: str | None
    replayed: bool  # True when returned from the record, no effect run now
    reconciled: bool  # True when the result came from reconciliation
    attempts: int

    @classmethod
    def of(cls, record: LedgerRecord, *, replayed: bool, reconciled: bool) -> ActionOutcome:
        return cls(
            action_key=record.action_key,
            status=record.status.value,
            result=dict(record.result or {}),
            downstream_ref=record.downstream_ref,
            replayed=replayed,
            reconciled=reconciled,
            attempts=record.attempts,
        )


class ReconcileAnswer(StrEnum):
    """What the workflow does after reconciling an uncertain step (docs/design.md §3.8)."""

    RESUME = "RESUME"  # the step's effect is recorded: go on
    RETRY = "RETRY"  # provably absent: re-enter the step with the same key
    ESCALATE = "ESCALATE"  # a person decides


@dataclass(frozen=True)
class ReconcileDecision:
    """What reconciling an uncertain step decided, with the budget it was decided against."""

    decision: ReconcileAnswer
    reason: str
    outcome: ActionOutcome | None  # set when RESUME
    attempts: int
    budget: int


@dataclass(frozen=True)
class Resolution:
    """A person's decision (docs/design.md §5): who decided what, and when (ISO 8601, UTC)."""

    by: str
    decision: str
    at: str

    def __post_init__(self) -> None:
        for name in ("by", "decision", "at"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"a resolution needs a non-empty {name!r}")

    def to_record(self) -> dict[str, str]:
        return {"by": self.by, "decision": self.decision, "at": self.at}


# --- the policy: the lifetime attempt budget, the retention, how a lease is sized -----------------
@dataclass(frozen=True)
class LedgerPolicy:
    """The attempt budget, the retention and how a lease is sized."""

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

    def expires_at(self, now: float) -> int:
        """The retention of a record closed at `now` (docs/design.md §3.7): it counts from the
        closing write. An open record carries none: it is kept until it is closed or settled."""
        return int(now) + self.retention_seconds
