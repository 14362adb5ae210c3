"""What belongs to a draft in the saga (docs/design.md §10): the only records an agent tool may
answer from.

Case ids name executions and case records for every tenant alike, so a record under a draft's
id proves nothing by its name. It is the draft's only when:

- the execution named after the draft (as every start names it, §2) was started with exactly
  the draft's case (its approval included), as start_replacement starts it;
- the case record under the draft's id holds the draft's tenant and digest (§5.4);
- the execution such a record names as its owner was started with a case of the draft's tenant
  and id whose parameters have the draft's digest (recomputed, never taken from the input).

Anything else under the id is another case: a CONFLICT that tells the agent what to do and
nothing about that case. Every answer of the tools is built from what these lookups return.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from saga.agent.drafts import draft_case
from saga.agent.errors import ErrorCode, ToolError
from saga.cases import CaseRecords
from saga.errors import InvalidRequest
from saga.identity import canonical_json, execution_name
from saga.models import Case, approval_digest, parse_case

# What an agent does when its case id is taken by another case.
PROPOSE_AGAIN = (
    "propose the replacement again with a new request_id (a person approves the new case)"
)


class DraftRecords:
    """The saga's records of one tenant's drafts. `stepfunctions` is a boto3 client."""

    def __init__(
        self, *, tenant_id: str, cases: CaseRecords, stepfunctions: Any, state_machine_arn: str
    ) -> None:
        self.tenant_id = tenant_id
        self.cases = cases
        self.stepfunctions = stepfunctions
        self.state_machine_arn = state_machine_arn

    def execution(self, draft: Mapping[str, Any]) -> dict[str, Any] | None:
        """The execution named after the draft; None if Step Functions does not know it."""
        execution = self.describe(self.execution_arn(draft))
        if execution is None:
            return None
        if not _same_json(str(execution.get("input") or ""), started_input(draft)):
            raise taken(draft)
        return execution

    def record(self, draft: Mapping[str, Any]) -> dict[str, Any] | None:
        """The case record of this draft (this tenant, these parameters) if the saga took it."""
        record = self.cases.get(str(draft["case_id"]))
        if record is None:
            return None
        if record.get("tenant_id") != self.tenant_id or record.get("digest") != draft["digest"]:
            raise taken(draft)
        return record

    def owner(self, draft: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any] | None:
        """The execution the draft's own case record names as its owner; None if forgotten."""
        execution = self.describe(str(record.get("execution_arn") or ""))
        if execution is None or _carries(execution, draft):
            return execution
        raise taken(draft)

    def current_step(self, arn: str) -> str | None:
        """The state an execution (one of the above) last entered."""
        history = self.stepfunctions.get_execution_history(
            executionArn=arn, reverseOrder=True, maxResults=20
        )
        for event in history.get("events", []):
            entered = event.get("stateEnteredEventDetails")
            if entered:
                return str(entered["name"])
        return None

    def execution_arn(self, draft: Mapping[str, Any]) -> str:
        """The ARN of the execution named as every start names the draft's case (§2)."""
        prefix, marker, machine = self.state_machine_arn.partition(":stateMachine:")
        if not marker:
            raise ToolError(ErrorCode.UNAVAILABLE, "the server's state machine ARN is malformed")
        return f"{prefix}:execution:{machine}:{draft_execution_name(draft)}"

    def describe(self, arn: str) -> dict[str, Any] | None:
        if not arn:
            return None
        try:
            return dict(self.stepfunctions.describe_execution(executionArn=arn))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ExecutionDoesNotExist":
                raise
            return None


def draft_execution_name(draft: Mapping[str, Any]) -> str:
    return execution_name(str(draft["case_id"]), int(draft["revision"]))


def draft_as_case(draft: Mapping[str, Any]) -> Case:
    """The approved draft as the case its execution is started with (not verified here)."""
    try:
        return parse_case(draft_case(draft))
    except InvalidRequest as exc:
        raise ToolError(ErrorCode.CONFLICT, f"case {draft['case_id']}: {exc}") from None


def started_input(draft: Mapping[str, Any]) -> str:
    """The input start_replacement starts the draft's case with: its canonical JSON."""
    return canonical_json(draft_as_case(draft).to_json())


def taken(draft: Mapping[str, Any]) -> ToolError:
    return ToolError(
        ErrorCode.CONFLICT,
        f"case {draft['case_id']}: another case (not this draft) holds this case id in the "
        f"saga; it is not reported and nothing was started for this draft: {PROPOSE_AGAIN}",
    )


def _carries(execution: Mapping[str, Any], draft: Mapping[str, Any]) -> bool:
    """The execution's input is a case of the draft's tenant and id whose parameters have the
    draft's digest (recomputed: a digest the input merely claims proves nothing)."""
    try:
        case = json.loads(str(execution.get("input") or ""))
        if not isinstance(case, dict):
            return False
        return bool(
            case.get("tenant_id") == draft["tenant_id"]
            and case.get("case_id") == draft["case_id"]
            and approval_digest(case) == draft["digest"]
        )
    except (ValueError, InvalidRequest):
        return False


def _same_json(left: str, right: str) -> bool:
    try:
        return bool(json.loads(left) == json.loads(right))
    except ValueError:
        return False
