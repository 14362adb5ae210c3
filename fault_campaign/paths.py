"""The state machine's state names, in the one place the campaign knows them.

The invariants speak of the promise (ledger, case record, effects, stock, queue messages,
execution output); where they must name a state (where an execution stopped, which step a
delivery belonged to, whether an execution ran forward), they ask this module. A change of the
workflow's shape (statemachines/replacement_order.asl.json) changes this file, not the checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fault_campaign.runner import REJECTIONS

VALIDATE_STATE = "ValidateCase"
# forward step (the ledger operation, docs/design.md §2) -> its task state
FORWARD_STATES: Mapping[str, str] = {
    "reserve": "ReserveStock",
    "refund": "IssueRefund",
    "ship": "CreateShipment",
}
RELEASE_STATE = "ReleaseReservation"
RECORD_STATE = "RecordOutcome"
RECONCILE_STATE = "ReconcileStep"
ESCALATE_STATE = "Escalate"
# The states that invoke RecordOutcome: a reconciled shipment's record, and the escalation (its
# record written before the message is queued, docs/design.md §3.10).
OUTCOME_RECORD_STATES = (RECORD_STATE, ESCALATE_STATE)
# The step whose transaction writes the case record's COMPLETED with its effect (§3.11).
COMPLETING_STATE = FORWARD_STATES["ship"]
# task state -> the Lambda function the campaign's invoke nemesis names (its name contains it)
TOOL_OF_STATE: Mapping[str, str] = {
    VALIDATE_STATE: "ValidateCase",
    **{state: state for state in FORWARD_STATES.values()},
    RECONCILE_STATE: "ReconcileAction",
    RELEASE_STATE: "ReleaseReservation",
    RECORD_STATE: "RecordOutcome",
    ESCALATE_STATE: "RecordOutcome",
}
# task state -> the ledger operation a delivery to it works on
OPERATION_OF_STATE: Mapping[str, str] = {
    **{state: operation for operation, state in FORWARD_STATES.items()},
    RELEASE_STATE: "release",
}
# The error an execution ends with when a person's decision refused it (docs/design.md §3.10).
SETTLED_ERROR = "ActionSettled"
# A tool's answer to parameters other than the approved ones (docs/design.md §8, §9).
APPROVAL_ERROR = "ApprovalMismatch"

# Terminal classes of one execution. REFUSED: FAILED with ActionSettled (a rerun or a late
# delivery after a person resolved the case: nothing done). A case whose record carries a
# resolution is RESOLVED, whatever its execution ended as.
OUTCOME_CLASSES = (
    "COMPLETED",
    "ESCALATED",
    "DUPLICATE",
    "REJECTED",
    "FAILED_RESUMABLE",
    "COMPENSATION_PENDING",
    "REFUSED",
)
CASE_OUTCOMES = (*OUTCOME_CLASSES, "RESOLVED")


def released_in(execution: Mapping[str, Any]) -> bool:
    """Whether the execution entered the compensation (the release) at some point."""
    return RELEASE_STATE in execution.get("path", ())


def escalated_in(execution: Mapping[str, Any]) -> bool:
    """Whether the execution handed the case to a person (sent its escalation) at some point."""
    return ESCALATE_STATE in execution.get("path", ())


def ran_forward(execution: Mapping[str, Any]) -> bool:
    """Whether the execution entered a forward step (a duplicate or a rejection never does)."""
    return any(state in execution.get("path", ()) for state in FORWARD_STATES.values())


def tasks_beyond_validation(execution: Mapping[str, Any]) -> list[str]:
    """The task states other than the validation that were delivered to (a duplicate: none)."""
    return [s for s in execution.get("scheduled_states", ()) if s != VALIDATE_STATE]


def failed_operation(execution: Mapping[str, Any]) -> str | None:
    """The ledger operation of the task an execution stopped at (None: no ledger action)."""
    return OPERATION_OF_STATE.get(str(execution.get("last_state")))


def stopped_at_validation(execution: Mapping[str, Any]) -> bool:
    """Whether the execution stopped in the validation (failed there, or rejected by it)."""
    return not tasks_beyond_validation(execution) and VALIDATE_STATE in execution.get("path", ())


def stopped_at_outcome_record(execution: Mapping[str, Any]) -> bool:
    return execution.get("last_state") in OUTCOME_RECORD_STATES


def stopped_at_completion(execution: Mapping[str, Any]) -> bool:
    """Whether the execution stopped at the step that completes the case with its effect."""
    return execution.get("last_state") == COMPLETING_STATE


def classify(execution: Mapping[str, Any]) -> str:
    """The terminal class of one execution (an unknown one is reported as is)."""
    status = execution["status"]
    output = execution.get("output") or {}
    error = execution.get("error")
    state = execution.get("last_state")
    if status == "SUCCEEDED":
        return str(output.get("outcome", "SUCCEEDED?"))
    if status == "FAILED" and error in REJECTIONS and not tasks_beyond_validation(execution):
        return "REJECTED"
    if status == "FAILED" and error == SETTLED_ERROR:
        return "REFUSED"
    if status == "FAILED" and state == RELEASE_STATE:
        return "COMPENSATION_PENDING"
    # The release marked the case COMPENSATION_PENDING; only the outcome's record failed since.
    if status == "FAILED" and state in OUTCOME_RECORD_STATES and released_in(execution):
        return "COMPENSATION_PENDING"
    if status == "FAILED" and state in (
        VALIDATE_STATE,
        *FORWARD_STATES.values(),
        *OUTCOME_RECORD_STATES,
    ):
        return "FAILED_RESUMABLE"
    return f"{status}@{state}"


def case_outcome(owner: Mapping[str, Any] | None, record: Mapping[str, Any] | None) -> str:
    """A case's outcome for the report: RESOLVED once a person decided it, else its owner's."""
    if record is not None and record.get("resolution"):
        return "RESOLVED"
    return classify(owner) if owner else "NONE"
