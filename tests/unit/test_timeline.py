"""The timeline of an execution history, without AWS: how a failed task attempt is told (retried,
caught, where the execution failed, or not known yet), and which state a redrive reruns."""

from __future__ import annotations

import json
from typing import Any

from sagactl.views.timeline import build_entries, find_failed_step, summarize_result

LOST = json.dumps({"errorType": "OutcomeUnknown", "errorMessage": "the response was lost"})


def events(*kinds: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"id": n, "type": kind, **details} for n, (kind, details) in enumerate(kinds, 1)]


def entered(name: str) -> tuple[str, dict[str, Any]]:
    return ("TaskStateEntered", {"stateEnteredEventDetails": {"name": name}})


def scheduled(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    parameters = {"FunctionName": "arn:fn", "Payload": payload}
    return ("TaskScheduled", {"taskScheduledEventDetails": {"parameters": json.dumps(parameters)}})


FAILED = ("TaskFailed", {"taskFailedEventDetails": {"error": "OutcomeUnknown", "cause": LOST}})


def test_a_failed_attempt_is_told_by_what_came_next() -> None:
    history = events(
        ("ExecutionStarted", {}),
        entered("IssueRefund"),
        scheduled({}),
        FAILED,
        scheduled({}),
        FAILED,
        entered("ReconcileStep"),
        scheduled({"step": "refund"}),
        FAILED,
        ("ExecutionFailed", {"executionFailedEventDetails": FAILED[1]["taskFailedEventDetails"]}),
    )
    failures = [e for e in build_entries(history) if e.error]
    assert [(e.kind, e.state, e.text) for e in failures] == [
        ("retry", "IssueRefund", "   OutcomeUnknown: the response was lost -> retry 1"),
        (
            "caught",
            "IssueRefund",
            "   OutcomeUnknown: the response was lost -> caught, next ReconcileStep",
        ),
        (
            "failed",
            "ReconcileStep",
            "   OutcomeUnknown: the response was lost -> execution failed here",
        ),
        (
            "execution_failed",
            "ReconcileStep",
            "execution FAILED: OutcomeUnknown: the response was lost",
        ),
    ]


def test_a_failure_with_nothing_after_it_yet_is_not_final() -> None:
    """`watch` prints an entry only once it is final: the next event decides retry or catch."""
    [*_, last] = build_entries(events(entered("IssueRefund"), scheduled({}), FAILED))
    assert (last.kind, last.final) == ("pending", False)


def test_the_failed_step_is_the_state_never_exited_and_reconcile_names_its_step() -> None:
    history = events(
        entered("IssueRefund"),
        ("TaskStateExited", {}),
        entered("ReconcileStep"),
        scheduled({"step": "refund", "case": {}}),
        FAILED,
        ("ExecutionFailed", {}),
    )
    step = find_failed_step(history)
    assert step is not None
    assert (step.state, step.operation, step.error, step.cause) == (
        "ReconcileStep",
        "refund",
        "OutcomeUnknown",
        "the response was lost",
    )
    assert step.payload == {"step": "refund", "case": {}}
    assert find_failed_step(events(entered("IssueRefund"), ("TaskStateExited", {}))) is None


def test_a_validated_case_names_every_approver_who_signed() -> None:
    first = {"approved_by": "controller@hooli", "signed_at": "2026-11-30T10:00:00Z"}
    co = {"approved_by": "cfo@hooli", "signed_at": "2026-11-30T10:05:00Z"}
    signed = {"signature": "c2ln", **first}

    def validated(approval: dict[str, Any]) -> str:
        return summarize_result({"actions": {}, "case": {"approval": approval}})

    assert validated({**signed, "co_signatures": [co]}) == (
        "case valid, approved by controller@hooli (signed 2026-11-30T10:00:00Z) and "
        "cfo@hooli (signed 2026-11-30T10:05:00Z)"
    )
    assert validated(signed) == (
        "case valid, approved by controller@hooli (signed 2026-11-30T10:00:00Z)"
    )
    assert validated({"approved_by": "supervisor@acme"}) == "case valid and approved"
