"""The saga's executions on a target: find a case's execution, read its history, start one.

A case's execution is found as every command takes CASE: the execution the case record names
(the one that passed ValidateCase first), else the execution named after the case, or after its
newest re-approved revision (docs/design.md §2).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from saga.identity import execution_name
from sagactl.errors import NotFound
from sagactl.identifiers import check_case_id
from sagactl.operations.records import read_case_record
from sagactl.target import Target
from sagactl.views.plain import execution_input
from sagactl.views.start import (
    canonical_input,
    case_revision,
    duplicate_report,
    execution_report,
)

MAX_REVISIONS_SEARCHED = 100  # re-approved revisions looked for by name, without a case record


def describe_execution_arn(target: Target, execution_arn: str) -> dict[str, Any] | None:
    """DescribeExecution; None when there is no such execution."""
    try:
        description: dict[str, Any] = target.client("stepfunctions").describe_execution(
            executionArn=execution_arn
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
            return None
        raise
    return description


def describe_execution(target: Target, execution_arn: str) -> dict[str, Any]:
    """DescribeExecution of an execution known to exist."""
    description: dict[str, Any] = target.client("stepfunctions").describe_execution(
        executionArn=execution_arn
    )
    return description


def executions_escalated_since(target: Target, since: float) -> list[dict[str, Any]]:
    """ListExecutions items of the saga whose stops the failed-execution rule may have reported
    since `since` (epoch seconds): every FAILED, TIMED_OUT or ABORTED execution that stopped
    since then, and every redriven one that SUCCEEDED after a redrive since then (its earlier
    stops were reported too). Newest first per status; one request per 1,000 executions."""
    paginator = target.client("stepfunctions").get_paginator("list_executions")
    machine = target.state_machine_arn
    queries: list[tuple[dict[str, str], str]] = [
        ({"statusFilter": status}, "stopDate") for status in ("FAILED", "TIMED_OUT", "ABORTED")
    ]
    queries.append(({"statusFilter": "SUCCEEDED", "redriveFilter": "REDRIVEN"}, "redriveDate"))
    found: list[dict[str, Any]] = []
    for filters, moment in queries:
        for page in paginator.paginate(stateMachineArn=machine, **filters):
            for item in page["executions"]:
                when = item.get(moment)
                if isinstance(when, datetime) and when.timestamp() >= since:
                    found.append(item)
    return found


def execution_history(target: Target, execution_arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    paginator = target.client("stepfunctions").get_paginator("get_execution_history")
    for page in paginator.paginate(executionArn=execution_arn, includeExecutionData=True):
        events.extend(page["events"])
    return events


@dataclass(frozen=True)
class CaseExecution:
    """A case and the execution that is its run (None: its record outlived the execution)."""

    case_id: str
    record: dict[str, Any] | None
    description: dict[str, Any] | None

    def require(self) -> dict[str, Any]:
        """The execution's description; NotFound when only the record is left."""
        if self.description is None:
            outcome = self.record.get("outcome") if self.record else None
            raise NotFound(
                f"case {self.case_id} has a record (outcome {outcome}) but its execution is "
                "gone (Step Functions keeps closed executions for 90 days)"
            )
        return self.description


def find_case_execution(target: Target, case: str) -> CaseExecution:
    """The execution of a case as the commands take CASE: the execution the case record names
    (the one that passed ValidateCase first: a re-approved revision runs under another name
    than the case id, a console start under any name), else the execution named `case`. That
    name may also be an execution's own (`case-7--r2`): the case id is then its input's."""
    check_case_id(case)
    record = read_case_record(target, case)
    owner = record.get("execution_arn") if record else None
    if isinstance(owner, str):
        description = describe_execution_arn(target, owner)
        if description is not None:
            return CaseExecution(case, record, description)
    by_name = target.execution_arn(case)
    description = _newest_revision(target, case, describe_execution_arn(target, by_name))
    if description is None:
        if record is None:
            raise NotFound(f"no execution for case {case} ({by_name})")
        return CaseExecution(case, record, None)
    case_id = execution_input(description).get("case_id")
    if isinstance(case_id, str) and case_id and case_id != case:
        return CaseExecution(case_id, read_case_record(target, case_id), description)
    return CaseExecution(case, record, description)


def execution_of(target: Target, case: str, execution_arn: str) -> CaseExecution:
    """One given execution of a case (the case id is its input's when it names one)."""
    chosen = describe_execution_arn(target, execution_arn)
    if chosen is None:
        raise NotFound(f"no execution {execution_arn}")
    named = execution_input(chosen).get("case_id")
    case = named if isinstance(named, str) and named else case
    return CaseExecution(case, read_case_record(target, case), chosen)


def _newest_revision(
    target: Target, case: str, first: dict[str, Any] | None
) -> dict[str, Any] | None:
    """With no case record yet (a re-approved revision's ValidateCase has not run, or rejected
    it), the execution of the case's newest approved revision (`case--r2`, ...), else `first`."""
    newest = first
    for revision in range(2, MAX_REVISIONS_SEARCHED):
        found = describe_execution_arn(target, target.execution_arn(execution_name(case, revision)))
        if found is None:
            break
        newest = found
    return newest


def start_case(target: Target, raw: Any, case_id: str) -> dict[str, Any]:
    """Start (or find) the execution of this case file: {"created", "execution_arn", "status",
    "same_input", ...}, or {"duplicate": True, ...} for a case that already ran elsewhere.

    A case that already has a case record is never started again under a new name: its
    execution would only end DUPLICATE. That is reported, nothing is started.
    """
    revision = case_revision(raw)
    name = execution_name(case_id, revision)
    payload = canonical_input(raw)

    def report(description: dict[str, Any], *, created: bool) -> dict[str, Any]:
        return execution_report(
            description,
            created=created,
            payload=payload,
            revision=revision,
            console_url=target.console_url(str(description["executionArn"])),
        )

    existing = describe_execution_arn(target, target.execution_arn(name))
    if existing is None:
        record = read_case_record(target, case_id)
        if record is not None:
            original = record.get("execution_arn")
            console_url = target.console_url(original) if isinstance(original, str) else None
            return duplicate_report(raw, case_id, record, console_url)
        sfn = target.client("stepfunctions")
        try:
            response = sfn.start_execution(
                stateMachineArn=target.state_machine_arn, name=name, input=payload
            )
            return report(describe_execution(target, response["executionArn"]), created=True)
        except ClientError as exc:
            # Another start won the race between our describe and our start.
            if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
        existing = describe_execution(target, target.execution_arn(name))
    return report(existing, created=False)
