"""The agent tools (docs/design.md §10): propose, follow and start a replacement.

Identity is the application's, never the model's:

- the case id is derived from the tenant and the agent's `request_id` (its durable step
  identity, e.g. ticket + step): the same request after a lost answer, a new tool-call id or a
  restarted agent finds the same draft; other parameters under it are a CONFLICT; a new
  `request_id` is a new case, even with identical parameters (two approved 20 USD refunds are
  two actions, §2);
- the tenant comes from the server (`sagactl mcp --tenant`, or the Gateway target the call
  came through), never from an argument;
- a case starts only when its signed approval verifies with the trusted keys, as ValidateCase
  verifies it (saga.approvals.accept_new_case: the same verifier, not a second one), and it
  starts as the execution the product names it (saga.identity.execution_name) with its input in
  canonical JSON: a repeat returns the same execution, never a second one (§2, §5.4).

Every refusal is a ToolError with a code an agent can branch on and a sentence a person can
read; nothing is written before a refusal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from saga import clock as saga_clock
from saga.agent.drafts import DraftStore, draft_case
from saga.agent.schemas import GET, INPUTS, PROPOSE, START, CaseIdInput, ProposeInput
from saga.approval_keys import ApprovalKeyUnavailable
from saga.approvals import ApprovalVerifier, accept_new_case
from saga.cases import CaseRecords
from saga.errors import (
    ApprovalInvalid,
    ApprovalMismatch,
    AuthorizationDenied,
    InvalidRequest,
    TransientError,
)
from saga.identity import canonical_json, execution_name
from saga.models import approval_digest, describe_errors, parse_case, verify_approval

CASE_ID_PREFIX = "agt-"
APPROVE_HINT = "a person approves it with `sagactl case approve --case {case_id}`"


class ErrorCode(StrEnum):
    INVALID_REQUEST = "INVALID_REQUEST"
    CONFLICT = "CONFLICT"
    NOT_APPROVED = "NOT_APPROVED"
    NOT_FOUND = "NOT_FOUND"
    UNAVAILABLE = "UNAVAILABLE"


class ToolError(Exception):
    """A refusal an agent can branch on (`code`) with a sentence for a person (`message`)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_json(self) -> dict[str, str]:
        return {"code": self.code.value, "message": self.message}


def agent_case_id(tenant_id: str, request_id: str) -> str:
    """The application-assigned case id of (tenant, request): stable across retries, and
    distinct per request and tenant (case ids are global: they name executions)."""
    digest = hashlib.sha256(f"{tenant_id}\n{request_id}".encode()).hexdigest()
    return f"{CASE_ID_PREFIX}{digest[:32]}"


class AgentTools:
    """The three tools for one tenant, over the drafts and cases tables and the saga's state
    machine. `stepfunctions` is a boto3 Step Functions client."""

    def __init__(
        self,
        *,
        tenant_id: str,
        drafts: DraftStore,
        cases: CaseRecords,
        stepfunctions: Any,
        state_machine_arn: str,
        approvals: ApprovalVerifier,
        clock: Callable[[], float] = saga_clock.now,
    ) -> None:
        self.tenant_id = tenant_id
        self.drafts = drafts
        self.cases = cases
        self.stepfunctions = stepfunctions
        self.state_machine_arn = state_machine_arn
        self.approvals = approvals
        self.clock = clock

    def call(self, tool: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Run one tool by name: its result, or a ToolError (never another exception for a
        refusal or an AWS service that did not answer)."""
        handlers: dict[str, Callable[[Any], dict[str, Any]]] = {
            PROPOSE: self.propose_replacement,
            GET: self.get_replacement,
            START: self.start_replacement,
        }
        if tool not in handlers:
            raise ToolError(
                ErrorCode.INVALID_REQUEST,
                f"there is no tool {tool!r}; the tools are {', '.join(handlers)}",
            )
        try:
            parsed = INPUTS[tool].model_validate(dict(arguments or {}))
        except ValidationError as exc:
            raise ToolError(
                ErrorCode.INVALID_REQUEST, f"invalid arguments: {describe_errors(exc)}"
            ) from None
        try:
            return handlers[tool](parsed)
        except (TransientError, ClientError, BotoCoreError, ApprovalKeyUnavailable) as exc:
            raise ToolError(
                ErrorCode.UNAVAILABLE,
                f"{tool}: a service did not answer ({type(exc).__name__}); nothing was "
                "decided: call it again with the same arguments",
            ) from exc

    # --- propose -------------------------------------------------------------------------
    def propose_replacement(self, request: ProposeInput) -> dict[str, Any]:
        case_id = agent_case_id(self.tenant_id, request.request_id)
        parameters = {
            "order": {"order_id": request.order_id, "customer_id": request.customer_id},
            "reserve": {"sku": request.sku, "quantity": request.quantity},
            "refund": {
                "payment_reference": request.payment_reference,
                "amount_minor": request.amount_minor,
                "currency": request.currency,
            },
            "shipment": {"address": request.address.model_dump()},
        }
        try:
            # The case's own rules (formats, bounds): what ValidateCase will check.
            digest = approval_digest(
                {
                    "case_id": case_id,
                    "tenant_id": self.tenant_id,
                    **parameters,
                    "approval": {"revision": 1},
                }
            )
        except InvalidRequest as exc:
            raise ToolError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        draft, created = self.drafts.create(
            case_id=case_id,
            tenant_id=self.tenant_id,
            request_id=request.request_id,
            digest=digest,
            parameters=parameters,
        )
        if draft.get("tenant_id") != self.tenant_id or draft.get("digest") != digest:
            raise ToolError(
                ErrorCode.CONFLICT,
                f"request_id {request.request_id!r} was already used for case {case_id} with "
                "other parameters; one request_id is one request: use a new request_id only "
                "for a genuinely new replacement, or repeat the original parameters",
            )
        return {**self._status(draft), "created": created}

    # --- get -----------------------------------------------------------------------------
    def get_replacement(self, request: CaseIdInput) -> dict[str, Any]:
        return self._status(self._draft(request.case_id))

    # --- start ---------------------------------------------------------------------------
    def start_replacement(self, request: CaseIdInput) -> dict[str, Any]:
        draft = self._draft(request.case_id)
        case_id = str(draft["case_id"])
        _require_approval(draft)
        name = execution_name(case_id, int(draft["revision"]))
        arn = self._execution_arn(name)
        # Looked up before anything is verified: a case that started (or ran, its execution
        # forgotten 90 days after it closed) is answered as it is. Verifying again could only
        # mislead: its start deadline may have passed or its approver's key rotated since,
        # and "nothing was started" would then be false. Step Functions also answers a repeat
        # of an open execution's start with that execution: only the lookup tells "started now"
        # from "started before".
        existing = self._describe(arn)
        if existing is None and self._recorded(draft) is not None:
            return {**self._status(draft), "started": False}
        case = self._approved_case(draft) if existing is None else _draft_as_case(draft)
        payload = canonical_json(case.to_json())
        started = existing is None
        if started:
            try:
                self.stepfunctions.start_execution(
                    stateMachineArn=self.state_machine_arn, name=name, input=payload
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                    raise
                started, existing = False, self._describe(arn)  # another start won the race
        if existing is not None and not _same_json(str(existing.get("input") or ""), payload):
            raise ToolError(
                ErrorCode.CONFLICT,
                f"case {case.case_id}: execution {existing['name']} already ran another input; "
                "nothing was started",
            )
        return {**self._status(draft), "started": started}

    # --- helpers -------------------------------------------------------------------------
    def _draft(self, case_id: str) -> dict[str, Any]:
        draft = self.drafts.get(case_id)
        # Another tenant's draft is as absent as a missing one: nothing about it is told.
        if draft is None or draft.get("tenant_id") != self.tenant_id:
            raise ToolError(
                ErrorCode.NOT_FOUND,
                f"there is no replacement case {case_id} for this tenant; propose one with "
                "propose_replacement",
            )
        return draft

    def _recorded(self, draft: Mapping[str, Any]) -> dict[str, Any] | None:
        """The case record of this draft (this tenant, these parameters), if the saga took it."""
        record = self.cases.get(str(draft["case_id"]))
        if record is None or record.get("tenant_id") != self.tenant_id:
            return None
        return record if record.get("digest") == draft["digest"] else None

    def _approved_case(self, draft: Mapping[str, Any]) -> Any:
        """The draft as a case whose signed approval verifies as ValidateCase verifies it;
        NOT_APPROVED otherwise (nothing started)."""
        case_id = str(draft["case_id"])
        try:
            case = parse_case(draft_case(draft))
            verify_approval(case)
            if case.approval.digest != draft["digest"]:
                raise ApprovalMismatch(f"case {case_id}: the approval is for other parameters")
            accept_new_case(self.approvals, case.signed_approval(), started=self._now())
        except (InvalidRequest, ApprovalMismatch, ApprovalInvalid, AuthorizationDenied) as exc:
            raise ToolError(
                ErrorCode.NOT_APPROVED,
                f"case {case_id}: the approval does not verify ({type(exc).__name__}: "
                f"{exc}); nothing was started: {APPROVE_HINT.format(case_id=case_id)}",
            ) from None
        return case

    def _status(self, draft: Mapping[str, Any]) -> dict[str, Any]:
        """What an agent can act on, compactly."""
        case_id = str(draft["case_id"])
        summary: dict[str, Any] = {
            "case_id": case_id,
            "request_id": draft.get("request_id"),
            "digest": draft["digest"],
        }
        approval = draft.get("approval")
        if not approval:
            return {
                **summary,
                "status": "APPROVAL_PENDING",
                "next": f"wait: {APPROVE_HINT.format(case_id=case_id)}; then start_replacement",
            }
        summary["approved_by"] = approval.get("approved_by")
        name = execution_name(case_id, int(draft["revision"]))
        execution = self._describe(self._execution_arn(name))
        if execution is not None:
            return {**summary, **self._execution_status(case_id, execution)}
        record = self._recorded(draft)
        if record is None:
            return {**summary, "status": "APPROVED", "next": "call start_replacement"}
        # Ran, and Step Functions has forgotten the execution (90 days after it closed).
        owner_arn = str(record.get("execution_arn") or "")
        owner = self._describe(owner_arn) if owner_arn else None
        if owner is not None:
            return {**summary, **self._execution_status(case_id, owner)}
        return {**summary, **_recorded_status(record)}

    def _describe(self, arn: str) -> dict[str, Any] | None:
        try:
            return dict(self.stepfunctions.describe_execution(executionArn=arn))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ExecutionDoesNotExist":
                raise
            return None

    def _execution_status(self, case_id: str, execution: Mapping[str, Any]) -> dict[str, Any]:
        status = str(execution["status"])
        arn = str(execution["executionArn"])
        if status in ("RUNNING", "PENDING_REDRIVE"):
            return {
                "status": "RUNNING",
                "execution_arn": arn,
                "current_step": self._current_step(arn),
                "next": "poll get_replacement",
            }
        record = self.cases.get(case_id)
        outcome = record.get("outcome") if record else None
        if record is not None and isinstance(record.get("resolution"), Mapping):
            return _resolved_status(record, arn)
        if status == "SUCCEEDED" and outcome == "COMPLETED":
            return {"status": "COMPLETED", "execution_arn": arn, "next": "nothing: done"}
        if status == "SUCCEEDED" and outcome == "ESCALATED":
            return _escalated_status(record or {}, arn)
        owner_arn = str((record or {}).get("execution_arn") or "")
        if status == "SUCCEEDED" and owner_arn and owner_arn != arn:
            # DUPLICATE: another execution owns the case; what it did is the case's state.
            owner = self._describe(owner_arn)
            if owner is not None:
                return self._execution_status(case_id, owner)
            return _recorded_status(record or {})
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

    def _current_step(self, arn: str) -> str | None:
        history = self.stepfunctions.get_execution_history(
            executionArn=arn, reverseOrder=True, maxResults=20
        )
        for event in history.get("events", []):
            entered = event.get("stateEnteredEventDetails")
            if entered:
                return str(entered["name"])
        return None

    def _execution_arn(self, name: str) -> str:
        prefix, marker, machine = self.state_machine_arn.partition(":stateMachine:")
        if not marker:
            raise ToolError(ErrorCode.UNAVAILABLE, "the server's state machine ARN is malformed")
        return f"{prefix}:execution:{machine}:{name}"

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)


def _require_approval(draft: Mapping[str, Any]) -> None:
    if not draft.get("approval"):
        case_id = str(draft["case_id"])
        raise ToolError(
            ErrorCode.NOT_APPROVED,
            f"case {case_id} is not approved yet: {APPROVE_HINT.format(case_id=case_id)}; "
            "then call start_replacement again",
        )


def _draft_as_case(draft: Mapping[str, Any]) -> Any:
    """The approved draft as the case its execution was started with (not verified again)."""
    try:
        return parse_case(draft_case(draft))
    except InvalidRequest as exc:
        raise ToolError(ErrorCode.CONFLICT, f"case {draft['case_id']}: {exc}") from None


def _escalated_status(record: Mapping[str, Any], arn: str) -> dict[str, Any]:
    escalation = record.get("escalation") or {}
    return {
        "status": "ESCALATED",
        "execution_arn": arn,
        "reason": escalation.get("reason"),
        "decision_needed": escalation.get("decision_needed"),
        "next": "a person decides (sagactl escalations); do not propose it again",
    }


def _resolved_status(record: Mapping[str, Any], arn: str) -> dict[str, Any]:
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


def _recorded_status(record: Mapping[str, Any]) -> dict[str, Any]:
    """A case taken by the saga whose owning execution Step Functions no longer describes
    (90 days after it closed): what its case record says."""
    arn = str(record.get("execution_arn") or "")
    outcome = record.get("outcome")
    if isinstance(record.get("resolution"), Mapping):
        return _resolved_status(record, arn)
    if outcome == "COMPLETED":
        return {"status": "COMPLETED", "execution_arn": arn, "next": "nothing: done"}
    if outcome == "ESCALATED":
        return _escalated_status(record, arn)
    return {
        "status": "FAILED",
        "execution_arn": arn,
        "error": None,
        "redrive_pending": False,  # past the 14 days in which a redrive is possible
        "next": "a person decides (sagactl escalations); do not propose it again",
    }


def _same_json(left: str, right: str) -> bool:
    import json

    try:
        return bool(json.loads(left) == json.loads(right))
    except ValueError:
        return False


def error_result(error: ToolError) -> dict[str, Any]:
    """An MCP tool error (CallToolResult with isError): the code and the sentence as text, and
    the same as structured content."""
    return {
        "isError": True,
        "content": [{"type": "text", "text": f"{error.code.value}: {error.message}"}],
        "structuredContent": {"error": error.to_json()},
    }


def success_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """An MCP tool result: the JSON as text (what every client shows a model) and as
    structured content."""
    return {
        "isError": False,
        "content": [{"type": "text", "text": canonical_json(dict(result))}],
        "structuredContent": dict(result),
    }
