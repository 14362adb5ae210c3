"""The escalation worklist on a target: list the open cases, show one, record a resolution.

sagactl.views.escalations holds the rules (which case is open, what it needs). The worklist is a
paginated Scan of the cases table with a filter (it reads the whole table, one request per 1 MB
page): acceptable for an operator command at this scale. A sparse index would need an attribute
that marks open cases, and nothing can write one when an execution fails. Each IN_PROGRESS or
COMPENSATION_PENDING case costs one DescribeExecution, and each stopped one the redrive plan
(sagactl.operations.redrive.plan_redrive).

`resolve` records who decided what and when in the case record's `resolution` and, in the same
transaction, settles the case's open ledger actions and writes a SETTLED record for each action
that has none (saga.cases.CaseRecords.resolve, saga.ledger.ActionLedger.settle_case_writes): the
sweeper stops re-sending them, and no redrive or late delivery dispatches any action of the case
again, not even one that read the case record just before the decision. Then it removes the
case's messages from the queue, the one place where sagactl receives from it
(sagactl.operations.queue.remove_case_messages says what that costs).
"""

from __future__ import annotations

import getpass
import os
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from saga.cases import CaseRecords, ResolveConflict
from saga.errors import ActionPending, TransientError
from saga.identity import case_action_keys
from saga.ledger import LedgerPolicy, Resolution
from sagactl.errors import (
    ActionInFlight,
    AlreadyResolved,
    CaseNotOpen,
    NotFound,
    QueueCleanupFailed,
    RedriveRefused,
    SagactlError,
)
from sagactl.identifiers import check_case_id
from sagactl.operations.executions import (
    describe_execution,
    describe_execution_arn,
    execution_history,
    executions_escalated_since,
)
from sagactl.operations.queue import (
    escalation_queue_attributes,
    escalation_queue_depth,
    remove_case_messages,
)
from sagactl.operations.records import (
    case_actions,
    ledger_for,
    read_case_record,
    scan_case_records,
)
from sagactl.operations.redrive import plan_redrive
from sagactl.target import Target
from sagactl.views.case import execution_summary
from sagactl.views.escalations import (
    CANDIDATE_OUTCOMES,
    MAX_BY_CHARS,
    MAX_DECISION_CHARS,
    Closed,
    Escalation,
    EscalationView,
    QueueCleanup,
    QueueNote,
    ResolveReport,
    assess_record,
    checked_text,
    execution_gone,
    iso,
    notifications,
    rejected_by_validation,
    still_owned,
    stopped_escalation,
    stops,
    unowned_stops,
)
from sagactl.views.plain import execution_input
from sagactl.views.timeline import FailedStep, confirmed_steps, find_failed_step

_RESOLVE_ROUNDS = 3


# --- the worklist --------------------------------------------------------------------------------
def open_escalations(
    target: Target, *, budget: int, tenant: str | None = None, page_size: int | None = None
) -> list[Escalation]:
    """Every open escalation, oldest first."""
    condition = "attribute_not_exists(resolution) AND outcome IN (:o0, :o1, :o2)"
    values = {f":o{n}": {"S": outcome.value} for n, outcome in enumerate(CANDIDATE_OUTCOMES)}
    if tenant is not None:
        condition += " AND tenant_id = :tenant"
        values[":tenant"] = {"S": tenant}
    found = []
    for record in scan_case_records(
        target, condition=condition, values=values, page_size=page_size
    ):
        assessed = assess(target, record, budget=budget)
        if isinstance(assessed, Escalation):
            found.append(assessed)
    return sorted(found, key=lambda escalation: (escalation.since, escalation.case_id))


def assess(
    target: Target, record: dict[str, Any], *, budget: int, explain: bool = True
) -> Escalation | Closed:
    """Open (with the decision it needs) or closed (with why). `explain=False` skips the
    redrive plan of a stopped execution (resolve only needs to know that it is open)."""
    by_record = assess_record(record)
    if by_record is not None:
        return by_record
    arn = str(record.get("execution_arn") or target.execution_arn(str(record["case_id"])))
    description = describe_execution_arn(target, arn)
    if description is None:
        return execution_gone(record, arn)
    owned = still_owned(record, description)
    if owned is not None:
        return owned
    redrive: dict[str, Any] | None = None
    failed: FailedStep | None = None
    if explain:
        try:
            plan = plan_redrive(target, str(record["case_id"]), budget=budget)
        except (RedriveRefused, NotFound) as refused:  # NotFound: not named after the case
            redrive = {"can_help": False, "reason": str(refused)}
            failed = find_failed_step(execution_history(target, description["executionArn"]))
        else:
            failed = plan.failed_step
            redrive = {"can_help": True, "plan": plan.to_json()}
    return stopped_escalation(record, description, failed, redrive)


def queue_note(
    target: Target, found: list[Escalation], *, tenant: str | None = None
) -> QueueNote | None:
    """The escalation queue's depth and the messages on it that no open case in `found` answers
    (None without a queue). Nothing is received: the failed-execution rule's messages are
    counted from their source, the executions that stopped within the queue's retention (one
    DescribeExecution each that owns no open case, and the case record of each that was not a
    rejection); with nothing waiting, nothing more is read."""
    attributes = escalation_queue_attributes(target)
    if attributes is None:
        return None
    depth, retention = attributes
    note = QueueNote(depth=depth, retention_seconds=retention)
    if depth == 0:
        return note
    owned = {escalation.execution_arn for escalation in found}
    for item in executions_escalated_since(target, target.now() - retention):
        if item["executionArn"] in owned:
            continue
        description = describe_execution(target, str(item["executionArn"]))
        case = execution_input(description)
        if tenant is not None and case.get("tenant_id") != tenant:
            continue
        record = None
        case_id = case.get("case_id")
        if not rejected_by_validation(description) and isinstance(case_id, str) and case_id:
            record = read_case_record(target, case_id)
        stopped = unowned_stops(description, record)
        if stopped is not None:
            note.unowned.append(stopped)
    return note


# --- one case in full ----------------------------------------------------------------------------
def show(target: Target, case_id: str, *, budget: int) -> EscalationView:
    check_case_id(case_id)
    record = _case_record(target, case_id)
    assessed = assess(target, record, budget=budget)
    tenant = record.get("tenant_id")
    arn = str(record.get("execution_arn") or target.execution_arn(case_id))
    description = describe_execution_arn(target, arn)
    history = execution_history(target, arn) if description else []
    recorded = record.get("steps")
    view = EscalationView(
        case_id=case_id,
        tenant_id=tenant,
        outcome=record.get("outcome"),
        open=assessed if isinstance(assessed, Escalation) else None,
        closed_reason=assessed.reason if isinstance(assessed, Closed) else None,
        resolution=record.get("resolution"),
        escalation=record.get("escalation"),
        execution=execution_summary(description) if description else None,
        actions=case_actions(target, str(tenant), case_id, budget) if tenant else [],
        attempt_budget=budget,
        stops=stops(history),
        queue_depth=escalation_queue_depth(target),
        executed_steps={
            **confirmed_steps(history),
            **(recorded if isinstance(recorded, dict) else {}),
        },
    )
    view.notifications = notifications(view)
    return view


# --- a person's decision -------------------------------------------------------------------------
def resolve(target: Target, case_id: str, *, decision: str, by: str, budget: int) -> ResolveReport:
    """Record the decision and settle the case's open actions (one transaction, conditional on
    what was read; read again when something changed), then remove the case's messages."""
    check_case_id(case_id)
    decision = checked_text("--decision", decision, MAX_DECISION_CHARS)
    by = checked_text("--by", by, MAX_BY_CHARS)
    cases = CaseRecords(target.client("dynamodb"), target.output("CasesTableName"))
    ledger = ledger_for(target, LedgerPolicy(attempt_budget=budget))
    for _ in range(_RESOLVE_ROUNDS):
        record = _case_record(target, case_id)
        assessed = assess(target, record, budget=budget, explain=False)
        if isinstance(assessed, Closed):
            kind = AlreadyResolved if record.get("resolution") else CaseNotOpen
            raise kind(f"{assessed.reason}; not resolved")
        at = iso(datetime.fromtimestamp(target.now(), UTC))
        resolution = Resolution(by=by, decision=decision, at=at)
        keys = case_action_keys(str(record["tenant_id"]), case_id)
        try:
            writes = ledger.settle_case_writes(keys, resolution, case_id=case_id)
        except ActionPending as held:
            raise ActionInFlight(f"case {case_id}: {held.message}; nothing was resolved") from None
        settled = [key for key, _ in writes]
        recorded: dict[str, Any] = {**resolution.to_record(), "settled_actions": settled}
        try:
            cases.resolve(record, recorded, settle=[write for _, write in writes])
        except ResolveConflict:
            continue  # the case or an action changed since it was read: decide again
        except TransientError as exc:
            raise SagactlError(f"{exc.message}; nothing was resolved") from None
        queue = _remove_after_resolve(target, record, recorded)
        return ResolveReport(case_id, recorded, settled, queue)
    raise SagactlError(
        f"case {case_id} changed while it was being resolved ({_RESOLVE_ROUNDS} times); "
        "nothing was resolved: look at it again (`sagactl escalations show`) and retry"
    )


def _remove_after_resolve(
    target: Target, record: dict[str, Any], resolution: dict[str, Any]
) -> QueueCleanup | None:
    case_id = str(record["case_id"])
    try:
        return remove_case_messages(target, case_id, execution_arn=record.get("execution_arn"))
    except (ClientError, BotoCoreError, SagactlError) as exc:
        raise QueueCleanupFailed(
            f"case {case_id} is resolved (by {resolution['by']} at {resolution['at']}) and "
            f"{len(resolution['settled_actions'])} action(s) are settled, but removing its "
            f"messages from the escalation queue failed: {exc}. The case is closed (the worklist "
            "is the cases table); its messages stay on the queue"
        ) from None


def caller_identity(target: Target) -> str:
    """Who runs this: the STS caller ARN on AWS; the operating-system user locally (the local
    AWS accepts any credentials, so its caller identity would name nobody)."""
    if target.local:
        try:
            return getpass.getuser()
        except (OSError, KeyError):
            return f"uid {os.getuid()}"
    return str(target.client("sts").get_caller_identity()["Arn"])


def _case_record(target: Target, case_id: str) -> dict[str, Any]:
    record = read_case_record(target, case_id)
    if record is None:
        raise NotFound(
            f"no case record for {case_id}: a case rejected at ValidateCase has none (nothing "
            f"was done, nothing to decide; `sagactl status {case_id}` shows why)"
        )
    return record
