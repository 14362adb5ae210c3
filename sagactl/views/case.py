"""One case as `status`, `watch` and the demo show it: execution, timeline, actions, effects.

Pure: built from what sagactl.operations read (the execution's description and history, the
ledger records, the case record, effect counts); never calls AWS.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from saga.ledger import LedgerRecord
from sagactl.views.plain import execution_input, parse_json, plain
from sagactl.views.timeline import (
    REJECT_STATE,
    FailedStep,
    TimelineEntry,
    build_entries,
    error_message,
    find_failed_step,
)

STEP_OPERATIONS: tuple[str, ...] = ("reserve", "refund", "ship", "release")
STOPPED_STATUSES = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})


def case_tenant(record: dict[str, Any] | None, description: dict[str, Any] | None) -> str | None:
    """The case's tenant: from its case record, else from its execution's input."""
    tenant = (record or {}).get("tenant_id") or (
        execution_input(description).get("tenant_id") if description else None
    )
    return str(tenant) if tenant else None


def rejected_at_validation(failed: FailedStep | None) -> bool:
    """Whether the execution stopped in the Fail state of a case ValidateCase rejected."""
    return failed is not None and failed.state == REJECT_STATE


def rejection_text(case_id: str, description: dict[str, Any]) -> str:
    """Why ValidateCase rejected the case and what to do instead of rerunning it: the same input
    is rejected again, so only a corrected case, approved anew, can run (docs/design.md §8)."""
    error = description.get("error") or "rejected"
    cause = error_message(description.get("cause"))
    why = f"{error}: {cause}" if cause else str(error)
    if error == "KeyConflict":
        then = (
            "the case id belongs to another approved case (`sagactl status "
            f"{case_id}` shows it): give the corrected case a new case id, approve it and "
            "start it"
        )
    else:
        revision = (execution_input(description).get("approval") or {}).get("revision")
        following = (
            f"--revision {int(revision) + 1}" if isinstance(revision, int) else "--revision N"
        )
        then = (
            f"correct the case file, approve it as the next revision (`sagactl case approve "
            f"FILE {following}`) and start it (`sagactl start FILE`)"
        )
    return f"ValidateCase rejected case {case_id} ({why}): nothing was done; {then}"


def record_summary(record: LedgerRecord, budget: int) -> dict[str, Any]:
    return {
        "action_key": record.action_key,
        "status": record.status.value,
        "attempts": record.attempts,
        "budget": budget,
        "remaining_budget": max(0, budget - record.attempts),
        "downstream_ref": record.downstream_ref,
        "business_ref": record.business_ref,
        "owner": record.owner,
        "lease_expires_at": record.lease_expires_at,
        "error": record.error,
        "result": plain(record.result),
        "case_id": record.case_id,
        "execution_arn": record.execution_arn,
        "compensates": record.compensates,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "expires_at": record.expires_at,
        "resolution": record.resolution,
    }


def execution_summary(description: dict[str, Any]) -> dict[str, Any]:
    keys = ("executionArn", "name", "status", "startDate", "stopDate", "error", "redriveCount")
    summary = {key: plain(description[key]) for key in keys if key in description}
    summary["cause"] = error_message(description.get("cause"))
    for key in ("redriveStatus", "redriveStatusReason", "redriveDate"):
        if key in description:
            summary[key] = plain(description[key])
    output = parse_json(description.get("output"))
    if output is not None:
        summary["output"] = output
    return summary


@dataclass
class ActionView:
    step: str
    action_key: str
    record: dict[str, Any] | None

    @property
    def attempts(self) -> int:
        return int(self.record["attempts"]) if self.record else 0


def actions_json(actions: list[ActionView]) -> dict[str, Any]:
    """`{step: {"action_key", "record"}}`: the actions as `status --json` and `ledger --json`
    show them."""
    return {view.step: {"action_key": view.action_key, "record": view.record} for view in actions}


@dataclass
class CaseView:
    case_id: str
    tenant_id: str | None
    execution: dict[str, Any] | None
    console_url: str | None
    timeline: list[TimelineEntry]
    actions: list[ActionView]
    effects: dict[str, Any]
    compensations: list[Any]
    escalation: dict[str, Any] | None
    escalation_queue_depth: int | None
    case_record: dict[str, Any] | None
    attempt_budget: int
    now: float  # the target's now when this view was gathered (lease ends are relative to it)
    failed_step: FailedStep | None = None
    history: list[dict[str, Any]] = field(default_factory=list, repr=False)
    # A stopped execution: can a redrive help (sagactl.views.redrive.redrive_verdict)?
    redrive: dict[str, Any] | None = None
    # A case ValidateCase rejected (no case record): why, and what to do (rejection_text)
    rejection: str | None = None

    @property
    def resolution(self) -> dict[str, Any] | None:
        resolution = (self.case_record or {}).get("resolution")
        return resolution if isinstance(resolution, dict) else None

    @property
    def status(self) -> str | None:
        return self.execution["status"] if self.execution else None

    @property
    def outcome(self) -> str | None:
        return self.case_record.get("outcome") if self.case_record else None

    def to_json(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "tenant_id": self.tenant_id,
            "status": self.status,
            "outcome": self.outcome,
            "execution": self.execution,
            "console_url": self.console_url,
            "timeline": [asdict(entry) for entry in self.timeline],
            "actions": actions_json(self.actions),
            "attempt_budget": self.attempt_budget,
            "effects": self.effects,
            "compensations": self.compensations,
            "escalation": self.escalation,
            "escalation_queue_depth": self.escalation_queue_depth,
            "case_record": self.case_record,
            "failed_step": asdict(self.failed_step) if self.failed_step else None,
            "redrive": self.redrive,
            "rejection": self.rejection,
        }


def case_view(
    case_id: str,
    record: dict[str, Any] | None,
    description: dict[str, Any] | None,
    history: list[dict[str, Any]],
    *,
    actions: list[ActionView],
    effects: dict[str, Any],
    queue_depth: int | None,
    budget: int,
    now: float,
    console_url: str | None,
    redrive: dict[str, Any] | None = None,
) -> CaseView:
    """The view of a case from what was read about it (the execution may be gone: None)."""
    execution = execution_summary(description) if description else None
    output = execution.get("output") if execution else None
    output = output if isinstance(output, dict) else {}
    compensations = output.get("compensations") or (record or {}).get("compensations") or []
    status = execution["status"] if execution else None
    failed = find_failed_step(history) if status in STOPPED_STATUSES else None
    rejected = record is None and description is not None and rejected_at_validation(failed)
    return CaseView(
        case_id=case_id,
        tenant_id=case_tenant(record, description),
        execution=execution,
        console_url=console_url,
        timeline=build_entries(history),
        actions=actions,
        effects=effects,
        compensations=list(compensations),
        escalation=output.get("escalation") or (record or {}).get("escalation"),
        escalation_queue_depth=queue_depth,
        case_record=record,
        attempt_budget=budget,
        now=now,
        failed_step=failed,
        history=history,
        redrive=redrive,
        rejection=rejection_text(case_id, description) if rejected and description else None,
    )
