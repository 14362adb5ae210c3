"""The stack's Lambda functions on a target: find one, read its configuration, invoke the sweeper.

A function is found by what it runs and which of the stack's resources it names (ListFunctions),
so the same lookup works on AWS, where CloudFormation generated the name, and in the local AWS.
"""

from __future__ import annotations

import json
from typing import Any

from saga.approval_keys import TrustedKeys
from saga.settings import ConfigurationError, parse_approval_keys, parse_tenants
from sagactl.config import Tenants
from sagactl.errors import NotFound, SagactlError, SweepFailed
from sagactl.target import Target

# The Handlers of ValidateCaseFunction and SweepStuckActionsFunction (stacks/constructs/tools.py
# TOOL_SPECS).
VALIDATE_CASE_HANDLER = "saga.handlers.validate_case.handler"
SWEEPER_HANDLER = "saga.handlers.sweep_stuck_actions.handler"


def stack_function(
    target: Target, what: str, handler: str, variable: str, output: str
) -> dict[str, Any]:
    """The configuration of the stack's `what` function, the one that runs `handler` with the
    stack's `output` resource in its environment `variable`."""
    resource = target.output(output)
    found = []
    for page in target.client("lambda").get_paginator("list_functions").paginate():
        for function in page["Functions"]:
            variables = (function.get("Environment") or {}).get("Variables") or {}
            if function.get("Handler") == handler and variables.get(variable) == resource:
                found.append(function)
    if not found:
        raise NotFound(f"no {what} function ({handler}) has {variable}={resource}")
    if len(found) > 1:
        names = sorted(str(function["FunctionName"]) for function in found)
        raise SagactlError(f"several {what} functions have {variable}={resource}: {names}")
    return dict(found[0])


def validate_case_environment(target: Target) -> tuple[str, dict[str, str]]:
    """The deployed ValidateCase function's name and environment variables."""
    function = stack_function(
        target, "ValidateCase", VALIDATE_CASE_HANDLER, "CASES_TABLE", "CasesTableName"
    )
    variables = (function.get("Environment") or {}).get("Variables") or {}
    return str(function["FunctionName"]), dict(variables)


def deployed_tenants(target: Target) -> Tenants:
    """Who may approve for which tenant, as the deployed ValidateCase function reads it."""
    name, variables = validate_case_environment(target)
    try:
        return Tenants(parse_tenants(str(variables.get("TENANTS") or "")), f"TENANTS of {name}")
    except ConfigurationError as exc:
        raise SagactlError(f"cannot read who may approve from {name}: {exc}") from None


def deployed_approval_keys(target: Target) -> tuple[str, TrustedKeys]:
    """The approval keys the deployed ValidateCase function trusts (its APPROVAL_KEYS)."""
    name, variables = validate_case_environment(target)
    try:
        return name, parse_approval_keys(str(variables.get("APPROVAL_KEYS") or ""))
    except ConfigurationError as exc:
        raise SagactlError(f"cannot read the approval keys of {name}: {exc}") from None


def find_sweeper(target: Target) -> str:
    """The name of this stack's sweeper function."""
    function = stack_function(target, "sweeper", SWEEPER_HANDLER, "LEDGER_TABLE", "LedgerTableName")
    return str(function["FunctionName"])


def sweep(target: Target) -> dict[str, Any]:
    """Invoke the sweeper once; its report ({stuck, escalated, by_status, action_keys})."""
    function = find_sweeper(target)
    response = target.client("lambda").invoke(
        FunctionName=function, InvocationType="RequestResponse", Payload=b"{}"
    )
    body = response["Payload"].read()
    try:
        answer: Any = json.loads(body) if body else None
    except ValueError:
        answer = body.decode(errors="replace")
    if response.get("FunctionError"):
        error = answer if isinstance(answer, dict) else {}
        raise SweepFailed(
            f"the sweeper {function} failed: {error.get('errorType', response['FunctionError'])}: "
            f"{error.get('errorMessage', answer)}"
        )
    if not isinstance(answer, dict):
        raise SweepFailed(f"the sweeper {function} answered {answer!r}, not a report")
    return {"function": function, "report": answer}
