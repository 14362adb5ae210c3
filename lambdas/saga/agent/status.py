"""What `get_replacement` answers (docs/design.md §10), built from records already proven to be
this draft's (saga.agent.tools checks the tenant and digest first): each answer is a status an
agent can act on, with `next` saying how.

A case record's own facts decide a closed case: its outcome, its escalation. The answers here
never read anything; a record or an execution that is not the draft's never reaches them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga.four_eyes import progress_text

APPROVE_HINT = "a person approves it with `sagactl case approve --case {case_id}`"
RUNNING_STATUSES = ("RUNNING", "PENDING_REDRIVE")


def pending_status(case_id: str, *, given: int = 0, required: int = 1) -> dict[str, Any]:
    """Not approved yet; with four eyes (docs/design.md §9), `given` of `required` distinct
    approvers signed so far."""
    if given == 0:
        who = APPROVE_HINT.format(case_id=case_id)
    else:
        who = (
            f"{progress_text(given, required)}: another approver of the tenant approves it "
            f"with `sagactl case approve --case {case_id} --as APPROVER`"
        )
    return {"status": "APPROVAL_PENDING", "next": f"wait: {who}; then start_replacement"}


def approved_status() -> dict[str, Any]:
    return {"status": "APPROVED", "next": "call start_replacement"}


def running_status(arn: str, current_step: str | None) -> dict[str, Any]:
    return {
        "status": "RUNNING",
        "execution_arn": arn,
        "current_step": current_step,
        "next": "poll get_replacement",
    }


def closed_status(execution: Mapping[str, Any], record: Mapping[str, Any] | None) -> dict[str, Any]:
    """The case as its own execution (no longer running) and its own case record tell it. A
    DUPLICATE execution is answered by the caller from the execution that owns the case."""
    status = str(execution["status"])
    arn = str(execution["executionArn"])
    if record is not None and isinstance(record.get("resolution"), Mapping):
        return resolved_status(record, arn)
    outcome = record.get("outcome") if record else None
    if status == "SUCCEEDED" and outcome == "COMPLETED":
        return {"status": "COMPLETED", "execution_arn": arn, "next": "nothing: done"}
    if status == "SUCCEEDED" and outcome == "ESCALATED":
        return escalated_status(record or {}, arn)
    if status == "SUCCEEDED":
        return {"status": "RUNNING", "execution_arn": arn, "next": "poll get_replacement"}
    # FAILED, TIMED_OUT, ABORTED: rejected at validation (no record), or unfinished work.
    unfinished = outcome in ("IN_PROGRESS", "COMPENSATION_PENDING")
    return {
        "status": "FAILED",
        "execution_arn": arn,
        "error": execution.get("error"),
        "redrive_pending": unfinished,
        "next": (
            "a person redrives it (sagactl redrive); do not propose it again"
            if unfinished
            else "it was rejected before any effect; nothing was done"
        ),
    }


# The numbers of a REFUND_LIMIT_REACHED escalation (docs/design.md §3.12), as the case record
# keeps them: the tenant's daily ceiling, what the day had used, the refund asked, in minor units.
LIMIT_FIELDS = ("ceiling", "used", "asked", "currency", "day")


def escalated_status(record: Mapping[str, Any], arn: str) -> dict[str, Any]:
    escalation = record.get("escalation") or {}
    status = {
        "status": "ESCALATED",
        "execution_arn": arn,
        "reason": escalation.get("reason"),
        "decision_needed": escalation.get("decision_needed"),
        "next": "a person decides (sagactl escalations); do not propose it again",
    }
    limit = escalation.get("limit")
    if escalation.get("reason") == "REFUND_LIMIT_REACHED" and isinstance(limit, Mapping):
        # Nothing was refunded: the tenant's daily refund ceiling had no room for it.
        status["limit"] = {name: limit.get(name) for name in LIMIT_FIELDS}
    return status


def resolved_status(record: Mapping[str, Any], arn: str) -> dict[str, Any]:
    """A person decided the case (docs/design.md §5): the decision is the answer, whatever
    the automation recorded, and it is final."""
    resolution = record["resolution"]
    return {
        "status": "RESOLVED",
        "execution_arn": arn,
        "outcome": record.get("outcome"),
        "resolution": {name: resolution.get(name) for name in ("decision", "by", "at")},
        "next": "nothing: a person decided the case; do not propose it again",
    }


def recorded_status(record: Mapping[str, Any]) -> dict[str, Any]:
    """A case taken by the saga whose owning execution Step Functions no longer describes
    (90 days after it closed): what its case record says."""
    arn = str(record.get("execution_arn") or "")
    if isinstance(record.get("resolution"), Mapping):
        return resolved_status(record, arn)
    outcome = record.get("outcome")
    if outcome == "COMPLETED":
        return {"status": "COMPLETED", "execution_arn": arn, "next": "nothing: done"}
    if outcome == "ESCALATED":
        return escalated_status(record, arn)
    return {
        "status": "FAILED",
        "execution_arn": arn,
        "error": None,
        "redrive_pending": False,  # past the 14 days in which a redrive is possible
        "next": "a person decides (sagactl escalations); do not propose it again",
    }
