"""The agent tools (docs/design.md §10): propose, follow and start a replacement.

Identity is the application's, never the model's:

- the case id is derived from the tenant and the agent's `request_id` (its durable step
  identity, e.g. ticket + step), `agt_<tenant>_<code>` (saga.identity.agent_case_id): the same
  request after a lost answer, a new tool-call id, a restarted agent or an upgrade (a draft
  proposed under the id it had before, `agt-...`, is found first) gets the same draft; other
  parameters under it are a CONFLICT; a new `request_id` is a new case, even with identical
  parameters (two approved 20 USD refunds are two actions, §2);
- the tenant comes from the server (`sagactl mcp --tenant`, or the Gateway target the call
  came through), never from an argument;
- a case starts only when its signed approval verifies with the trusted keys, as ValidateCase
  verifies it (saga.approvals.accept_new_case: the same verifier, not a second one), and it
  starts as the execution the product names it (saga.identity.execution_name) with its input in
  canonical JSON: a repeat returns the same execution, never a second one (§2, §5.4).

Every status comes from records of this tenant and this draft: the execution named after the
draft must have been started with exactly the draft's case, a case record (and the execution it
names) must hold the draft's tenant and digest. Anything else under the draft's id is another
case: a CONFLICT that says what to do, never its state (§10).

Every refusal is a ToolError with a code an agent can branch on and a sentence a person can
read; nothing is written before a refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from saga import clock as saga_clock
from saga.acceptance import accept_new_case
from saga.agent.drafts import DraftStore, draft_case
from saga.agent.errors import ErrorCode, ToolError
from saga.agent.owned import DraftRecords, draft_execution_name, started_input
from saga.agent.schemas import GET, INPUTS, PROPOSE, START, CaseIdInput, ProposeInput
from saga.agent.status import (
    APPROVE_HINT,
    RUNNING_STATUSES,
    approved_status,
    closed_status,
    pending_status,
    recorded_status,
    running_status,
)
from saga.approval_keys import ApprovalKeyUnavailable
from saga.approvals import ApprovalVerifier
from saga.cases import CaseRecords
from saga.errors import (
    ApprovalInvalid,
    ApprovalMismatch,
    AuthorizationDenied,
    InvalidRequest,
    TransientError,
)
from saga.four_eyes import ONE_APPROVER, approvals_required, progress_text, signers
from saga.identity import (
    agent_case_id,
    agent_namespace,
    canonical_json,
    is_legacy_agent_case_id,
    legacy_agent_case_id,
)
from saga.models import approval_digest, describe_errors, parse_case, verify_approval

__all__ = ["AgentTools", "ErrorCode", "ToolError", "error_result", "success_result"]


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

    @property
    def records(self) -> DraftRecords:
        """This tenant's drafts' records in the saga: the only ones an answer comes from."""
        return DraftRecords(
            tenant_id=self.tenant_id,
            cases=self.cases,
            stepfunctions=self.stepfunctions,
            state_machine_arn=self.state_machine_arn,
        )

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
        parameters = _parameters(request)
        case_id = agent_case_id(self.tenant_id, request.request_id)
        digest = self._digest(case_id, parameters)  # the case's own rules, before any read
        # Looked up first: the draft this request got before ids carried the tenant. A retry
        # after the upgrade must find it, never make a second draft (a second approved refund).
        draft = self._legacy_draft(request.request_id)
        created = False
        if draft is not None:
            digest = self._digest(str(draft["case_id"]), parameters)
        else:
            draft, created = self.drafts.create(
                case_id=case_id,
                tenant_id=self.tenant_id,
                request_id=request.request_id,
                digest=digest,
                parameters=parameters,
            )
        if draft.get("request_id") != request.request_id:  # two requests, one code (§10)
            raise ToolError(
                ErrorCode.CONFLICT,
                f"case {draft['case_id']} was proposed for another request_id; use another "
                "request_id for this replacement",
            )
        if draft.get("tenant_id") != self.tenant_id or draft.get("digest") != digest:
            raise ToolError(
                ErrorCode.CONFLICT,
                f"request_id {request.request_id!r} was already used for case "
                f"{draft['case_id']} with other parameters; one request_id is one request: use a "
                "new request_id only for a genuinely new replacement, or repeat the original "
                "parameters",
            )
        return {**self._status(draft), "created": created}

    # --- get -----------------------------------------------------------------------------
    def get_replacement(self, request: CaseIdInput) -> dict[str, Any]:
        return self._status(self._draft(request.case_id))

    # --- start ---------------------------------------------------------------------------
    def start_replacement(self, request: CaseIdInput) -> dict[str, Any]:
        draft = self._draft(request.case_id)
        _require_approval(draft)
        self._refuse_superseded(draft)
        records = self.records
        # Looked up before anything is verified: a case that started (or ran, its execution
        # forgotten 90 days after it closed) is answered as it is. Verifying again could only
        # mislead: its start deadline may have passed or its approver's key rotated since,
        # and "nothing was started" would then be false. Step Functions also answers a repeat
        # of an open execution's start with that execution: only the lookup tells "started now"
        # from "started before".
        started = records.execution(draft) is None and records.record(draft) is None
        if started:
            self._verify_approval(draft)
            try:
                self.stepfunctions.start_execution(
                    stateMachineArn=self.state_machine_arn,
                    name=draft_execution_name(draft),
                    input=started_input(draft),
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                    raise
                started = False  # another start won the race: its execution is answered
        return {**self._status(draft), "started": started}

    # --- the draft -----------------------------------------------------------------------
    def _draft(self, case_id: str) -> dict[str, Any]:
        # Another tenant's draft is as absent as a missing one: nothing about it is told, and
        # another tenant's agent case id is not even read (its key is that tenant's).
        owner = agent_namespace(case_id)
        theirs = owner is not None and owner != self.tenant_id
        draft = None if theirs else self.drafts.get(case_id)
        if draft is None or draft.get("tenant_id") != self.tenant_id:
            raise ToolError(
                ErrorCode.NOT_FOUND,
                f"there is no replacement case {case_id} for this tenant; propose one with "
                "propose_replacement",
            )
        return draft

    def _legacy_draft(self, request_id: str) -> dict[str, Any] | None:
        """The draft `request_id` got before ids carried the tenant (an `agt-` id), if any."""
        draft = self.drafts.get(legacy_agent_case_id(self.tenant_id, request_id))
        if draft is None or draft.get("tenant_id") != self.tenant_id:
            return None
        return draft if draft.get("request_id") == request_id else None

    def _refuse_superseded(self, draft: Mapping[str, Any]) -> None:
        """A request with a draft under each id (proposed while the old code still served,
        during the upgrade) starts as the older one alone: one request, one case."""
        if is_legacy_agent_case_id(str(draft["case_id"])):
            return
        older = self._legacy_draft(str(draft.get("request_id")))
        if older is not None:
            raise ToolError(
                ErrorCode.CONFLICT,
                f"request_id {draft.get('request_id')!r} is case {older['case_id']}, proposed "
                f"before an upgrade; case {draft['case_id']} was not started: follow and start "
                f"case {older['case_id']} instead",
            )

    def _digest(self, case_id: str, parameters: Mapping[str, Any]) -> str:
        case = {"case_id": case_id, "tenant_id": self.tenant_id, **parameters}
        try:
            return approval_digest({**case, "approval": {"revision": 1}})
        except InvalidRequest as exc:
            raise ToolError(ErrorCode.INVALID_REQUEST, str(exc)) from None

    def _verify_approval(self, draft: Mapping[str, Any]) -> None:
        """The draft's signed approval verifies as ValidateCase verifies it; NOT_APPROVED
        otherwise (nothing started)."""
        case_id = str(draft["case_id"])
        try:
            case = parse_case(draft_case(draft))
            verify_approval(case)
            if case.approval.digest != draft["digest"]:
                raise ApprovalMismatch(f"case {case_id}: the approval is for other parameters")
            accept_new_case(self.approvals, case.signed_approvals(), started=self._now())
        except (InvalidRequest, ApprovalMismatch, ApprovalInvalid, AuthorizationDenied) as exc:
            raise ToolError(
                ErrorCode.NOT_APPROVED,
                f"case {case_id}: the approval does not verify ({type(exc).__name__}: "
                f"{exc}); nothing was started: {APPROVE_HINT.format(case_id=case_id)}",
            ) from None

    # --- status --------------------------------------------------------------------------
    def _status(self, draft: Mapping[str, Any]) -> dict[str, Any]:
        """What an agent can act on, compactly, from this draft's own records only."""
        case_id = str(draft["case_id"])
        summary: dict[str, Any] = {
            "case_id": case_id,
            "request_id": draft.get("request_id"),
            "digest": draft["digest"],
        }
        approval = draft.get("approval")
        given, required = self._approvals(draft)
        if required > ONE_APPROVER:
            summary["approvals"] = progress_text(given, required)
        if not approval:
            return {**summary, **pending_status(case_id)}
        summary["approved_by"] = approval.get("approved_by")
        records = self.records
        execution = records.execution(draft)
        if execution is None:
            record = records.record(draft)
            if record is None and given < required:
                return {**summary, **pending_status(case_id, given=given, required=required)}
            if record is None:
                return {**summary, **approved_status()}
            # Ran, and Step Functions has forgotten the execution (90 days after it closed).
            execution = records.owner(draft, record)
            if execution is None:
                return {**summary, **recorded_status(record)}
        return {**summary, **self._execution_status(draft, execution)}

    def _approvals(self, draft: Mapping[str, Any]) -> tuple[int, int]:
        """(distinct approvers who signed the draft, how many its refund needs now): what
        `get_replacement` says ("1 of 2 approvals"). Names as stored, unverified: the start
        verifies every signature (accept_new_case) before anything starts."""
        refund = draft["parameters"]["refund"]
        required = approvals_required(
            self.approvals.thresholds,
            self.tenant_id,
            str(refund["currency"]),
            int(refund["amount_minor"]),
        )
        return len(signers(draft.get("approval"))), required

    def _execution_status(
        self, draft: Mapping[str, Any], execution: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The case's state from one of its own executions (DraftRecords found it)."""
        records = self.records
        arn = str(execution["executionArn"])
        if execution["status"] in RUNNING_STATUSES:
            return running_status(arn, records.current_step(arn))
        record = records.record(draft)
        if (
            record is not None
            and execution["status"] == "SUCCEEDED"
            and record.get("execution_arn") != arn
        ):
            # DUPLICATE: another execution owns the case; what it did is the case's state.
            owner = records.owner(draft, record)
            return (
                recorded_status(record) if owner is None else self._execution_status(draft, owner)
            )
        return closed_status(execution, record)

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)


def _parameters(request: ProposeInput) -> dict[str, Any]:
    """The case's parameters (§8) from propose_replacement's arguments."""
    return {
        "order": {"order_id": request.order_id, "customer_id": request.customer_id},
        "reserve": {"sku": request.sku, "quantity": request.quantity},
        "refund": {
            "payment_reference": request.payment_reference,
            "amount_minor": request.amount_minor,
            "currency": request.currency,
        },
        "shipment": {"address": request.address.model_dump()},
    }


def _require_approval(draft: Mapping[str, Any]) -> None:
    if not draft.get("approval"):
        case_id = str(draft["case_id"])
        raise ToolError(
            ErrorCode.NOT_APPROVED,
            f"case {case_id} is not approved yet: {APPROVE_HINT.format(case_id=case_id)}; "
            "then call start_replacement again",
        )


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
