"""The decision table of docs/design.md §3.2, and the rules a delivery decides by. Pure: no request.

`decide()` maps a record some delivery found to one row of the table; `answer()` gives the
rows that need no write their answer (a replay, or the typed error the workflow routes);
`reattempt_refusal()` says whether a "not found" allows a re-attempt (§3.6), and
`earlier_record_may_have_expired()` whether finding no record proves anything (§3.2).
"""

from __future__ import annotations

from enum import StrEnum

from saga.clock import iso
from saga.errors import (
    ActionPending,
    ActionSettled,
    BudgetExhausted,
    KeyConflict,
    OutcomeUnknown,
    ReplayWindowExpired,
    error_from_record,
)
from saga.identity import ActionRequest
from saga.ledger.records import ActionOutcome, LedgerRecord, LedgerStatus

# A record written more than this before its retention ended may have been deleted by TTL.
RETENTION_MARGIN_SECONDS = 3600


class Decision(StrEnum):
    """The rows of the decision table (docs/design.md §3.2): what a delivery does with what it
    found.

    What the ledger then writes, and how that ends, are events (observer.LedgerEvent)."""

    CLAIMED = "claimed"  # nothing found: the claim wrote the record, dispatch
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


# decisions that end a delivery without any write: raised as typed errors
REJECTIONS = frozenset({Decision.CONFLICT, Decision.RECORDED_FAILURE, Decision.PENDING})
# decisions after which a delivery takes the record over and looks the action up first
TAKEOVERS = frozenset({Decision.TAKEOVER, Decision.LATE_REPLAY, Decision.RESUME_RELEASED})


def decide(
    record: LedgerRecord,
    *,
    digest: str,
    attempt_id: str,
    now: float,
    budget: int,
    check_expiry: bool = True,
) -> Decision:
    """Map an existing record to a row of the decision table (docs/design.md §3).

    `check_expiry=False` is for reconciliation, which only reads the downstream and renews the
    record with every write: an expired record must still be reconciled, never executed.
    """
    # A person's decision ends the automation's part, whatever the status, budget or retention;
    # a record settled before any delivery wrote one has no digest to conflict with.
    if record.resolution is not None and record.request_digest in (None, digest):
        return Decision.SETTLED
    if record.request_digest != digest:
        return Decision.CONFLICT
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
    # Only records written before open ones stopped carrying a retention (§3.7) have one here.
    if check_expiry and record.expires_at is not None and record.expires_at <= now:
        return Decision.LATE_REPLAY
    if (
        record.status is LedgerStatus.IN_PROGRESS
        and record.owner is None
        and record.first_dispatch_at is None
        and not record.legacy
    ):
        return Decision.RESUME_RELEASED  # every earlier delivery provably sent nothing
    return Decision.TAKEOVER


def answer(
    decision: Decision, request: ActionRequest, record: LedgerRecord, *, budget: int
) -> ActionOutcome:
    """The decisions that need no write: return a replay or raise the decided error."""
    if decision is Decision.REPLAYED:
        return ActionOutcome.of(record, replayed=True, reconciled=False)
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
            f"{settled_text(request.key, record)}; not dispatched automatically again"
        )
    if decision is Decision.PENDING:
        raise ActionPending(
            f"action {request.key} is held by another attempt until "
            f"{record.lease_expires_at:.3f}; try again later"
        )
    if decision is Decision.ESCALATED:
        raise OutcomeUnknown(escalated_text(request.key, record))
    if decision is Decision.BUDGET_EXHAUSTED:
        raise BudgetExhausted(
            f"action {request.key} has used {record.attempts} of {budget} attempts; "
            "not dispatched: reconcile or escalate"
        )
    raise OutcomeUnknown(f"action {request.key} is {record.status.value}; it must be reconciled")


def settled_text(key: str, record: LedgerRecord) -> str:
    """Who settled the action and when; never the decision's text (case data stays out of
    errors and logs: `sagactl escalations show` shows it)."""
    resolution = record.resolution or {}
    return (
        f"action {key} ({record.status.value}) was settled by {resolution.get('by')} at "
        f"{resolution.get('at')}"
    )


def escalated_text(key: str, record: LedgerRecord) -> str:
    reason = (record.error or {}).get("message") or "the outcome could not be established"
    at = iso(record.escalated_at or 0)
    return (
        f"action {key} was escalated to a person at {at} ({reason}); it is never dispatched "
        "automatically again"
    )


# --- re-attempts and missing records -------------------------------------------------------------
def reattempt_refusal(
    since: float | None, window_seconds: float | None, *, now: float, lease_seconds: float
) -> str | None:
    """Why a downstream's "not found" does not allow a re-attempt now (None: it does).

    "Not found" proves nothing while an earlier request may still be in flight. A repeat with
    the same idempotency key is one effect only while the downstream still keeps the key
    (`window_seconds` after `since`, the first possible dispatch, counted conservatively from
    that delivery's claim); a downstream whose lookup sees every request (window None) proves
    absence outright, as does a record that no delivery can have dispatched from (since None).
    """
    if since is None or window_seconds is None:
        return None
    closes = since + window_seconds
    # The re-attempt dispatches within this delivery's lease: it must land inside the window.
    if now + lease_seconds < closes:
        return None
    return (
        f"not found at the downstream, but a request sent since {iso(since)} may still "
        f"commit and the downstream deduplicates a repeat only until {iso(closes)}: "
        "a re-attempt now could make a second effect"
    )


def earlier_record_may_have_expired(
    execution_started_at: float | None, *, now: float, retention_seconds: int
) -> float | None:
    """When no record is found: the start of this delivery's execution if a record of an
    earlier delivery may have expired and been deleted since (the execution is older than the
    retention, less a margin), else None (nothing found proves nothing was written).

    Every delivery of an action belongs to the one execution that owns the case (a new execution
    of the case is a duplicate), and each writes its record after that execution started;
    retention counts from the latest write. Chained redrives whose deliveries never reach the
    ledger (throttled, failing before the claim) renew nothing.
    """
    if execution_started_at is None:
        return None
    if now - execution_started_at < retention_seconds - RETENTION_MARGIN_SECONDS:
        return None
    return execution_started_at
