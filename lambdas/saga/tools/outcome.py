"""RecordOutcome: the terminal case record and the execution output (docs/design.md §8); at the
Escalate state, the CASE_ESCALATED message too, sent only after the record took ESCALATED."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from saga.cases import CaseRecords
from saga.errors import TransientError
from saga.models import OutcomePayload, OutcomeResult, approval_digest

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class Escalations(Protocol):
    def send(self, message: Mapping[str, Any]) -> None: ...


class EscalationQueue:
    """The escalation queue (SQS): a message that was not queued is a TransientError."""

    def __init__(self, sqs: SQSClient, queue_url: str) -> None:
        self._sqs, self._queue_url = sqs, queue_url

    def send(self, message: Mapping[str, Any]) -> None:
        try:
            self._sqs.send_message(
                QueueUrl=self._queue_url, MessageBody=json.dumps(message, sort_keys=True)
            )
        except (BotoCoreError, ClientError) as failure:
            # The record is written; a repeat rewrites it and sends again (at least once).
            raise TransientError(
                f"case {message['case_id']}: the escalation message was not queued "
                f"({type(failure).__name__}); retried, the case record already says ESCALATED"
            ) from failure


def record_outcome(
    payload: OutcomePayload, *, cases: CaseRecords, execution_arn: str, escalations: Escalations
) -> OutcomeResult:
    """The record first: its write is conditional on no `resolution` (ActionSettled otherwise,
    §3.10), so a rerun after a person's decision (a redrive of an execution that stopped at
    Escalate) queues nothing. A message lost after the record was written is sent again by the
    retry or redrive, which rewrites the same record."""
    case = payload.case
    cases.record_outcome(
        case,
        approval_digest(case),
        execution_arn=execution_arn,
        outcome=payload.outcome,
        steps=payload.steps,
        compensations=payload.compensations,
        escalation=payload.escalation,
    )
    if payload.outcome == "ESCALATED":
        escalations.send(escalation_message(payload, execution_arn))
    return OutcomeResult(
        case_id=case.case_id,
        outcome=payload.outcome,
        steps=payload.steps,
        compensations=payload.compensations,
        escalation=payload.escalation,
    )


def escalation_message(payload: OutcomePayload, execution_arn: str) -> dict[str, Any]:
    """CASE_ESCALATED: what happened, what was compensated, what is left (§5, item 6)."""
    escalation: Mapping[str, Any] = payload.escalation or {}
    message: dict[str, Any] = {
        "kind": "CASE_ESCALATED",
        "case_id": payload.case.case_id,
        "tenant_id": payload.case.tenant_id,
        "execution": execution_arn,
        "reason": escalation.get("reason"),
        "step": escalation.get("step"),
        "detail": escalation.get("detail"),
        "decision_needed": escalation.get("decision_needed"),
        "confirmed_effects": [
            {"action_key": step.get("action_key"), "downstream_ref": step.get("downstream_ref")}
            for step in payload.steps.values()
            if isinstance(step, Mapping)
        ],
        "compensated": [c["action_key"] for c in payload.compensations if isinstance(c, Mapping)],
    }
    if escalation.get("compensation_blocked") is not None:
        message["compensation_blocked"] = escalation["compensation_blocked"]
    return message
