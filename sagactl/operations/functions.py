"""The stack's Lambda functions on a target: find one, read its configuration, invoke the sweeper.

A function is named by the stack's outputs (ValidateCaseFunctionName, SweeperFunctionName) and
read with GetFunctionConfiguration: the operator's role may read those two functions, not every
function of the account (docs/design.md §11). A stack deployed before those outputs is searched
with ListFunctions by what the function runs and which of the stack's resources it names.
Either way the function must run the expected handler with that resource.
"""

from __future__ import annotations

import json
from typing import Any

from saga.approval_keys import KmsPublicKeys, parse_trusted_keys
from saga.approvals import ApprovalVerifier
from saga.settings import (
    ConfigurationError,
    parse_approval_keys,
    parse_approval_thresholds,
    parse_tenants,
)
from sagactl.config import Tenants
from sagactl.errors import NotFound, SagactlError, SweepFailed
from sagactl.target import Target

# The Handlers of ValidateCaseFunction and SweepStuckActionsFunction (stacks/constructs/tools.py
# TOOL_SPECS).
VALIDATE_CASE_HANDLER = "saga.handlers.validate_case.handler"
SWEEPER_HANDLER = "saga.handlers.sweep_stuck_actions.handler"


VALIDATE_CASE_OUTPUT = "ValidateCaseFunctionName"
SWEEPER_OUTPUT = "SweeperFunctionName"


def stack_function(
    target: Target, what: str, handler: str, variable: str, output: str, *, named_by: str
) -> dict[str, Any]:
    """The configuration of the stack's `what` function (named by the output `named_by`), the
    one that runs `handler` with the stack's `output` resource in its environment `variable`."""
    resource = target.output(output)
    name = target.optional_output(named_by)
    if name is not None:
        function = target.client("lambda").get_function_configuration(FunctionName=name)
        variables = (function.get("Environment") or {}).get("Variables") or {}
        if function.get("Handler") != handler or variables.get(variable) != resource:
            raise NotFound(
                f"no {what} function ({handler}) has {variable}={resource}: {named_by} {name} "
                "is another stack's (are the outputs this stack's?)"
            )
        return dict(function)
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
        target,
        "ValidateCase",
        VALIDATE_CASE_HANDLER,
        "CASES_TABLE",
        "CasesTableName",
        named_by=VALIDATE_CASE_OUTPUT,
    )
    variables = (function.get("Environment") or {}).get("Variables") or {}
    return str(function["FunctionName"]), dict(variables)


def deployed_tenants(target: Target) -> Tenants:
    """Who may approve for which tenant, as the deployed ValidateCase function reads it: the
    approvers of its APPROVAL_KEYS (a stack deployed before that: its TENANTS), with its
    APPROVAL_THRESHOLDS (none before four eyes)."""
    name, variables = validate_case_environment(target)
    try:
        thresholds = deployed_thresholds(variables)
        if variables.get("TENANTS"):
            approvers = parse_tenants(str(variables["TENANTS"]))
            return Tenants(approvers, f"TENANTS of {name}", thresholds)
        keys = parse_approval_keys(str(variables.get("APPROVAL_KEYS") or ""))
        approvers = {tenant: frozenset(names) for tenant, names in keys.items()}
        return Tenants(approvers, f"APPROVAL_KEYS of {name}", thresholds)
    except ConfigurationError as exc:
        raise SagactlError(f"cannot read who may approve from {name}: {exc}") from None


def deployed_thresholds(variables: dict[str, str]) -> dict[str, dict[str, int]]:
    """The four-eyes thresholds of a function's environment: none for a stack deployed before
    four eyes (its functions have no APPROVAL_THRESHOLDS)."""
    raw = variables.get("APPROVAL_THRESHOLDS")
    return parse_approval_thresholds(raw) if raw else {}


def deployed_verifier(target: Target) -> tuple[str, ApprovalVerifier]:
    """A verifier with what the deployed ValidateCase function trusts: its APPROVAL_KEYS (the
    keys the stack created named by alias, under its APPROVAL_KEY_ALIASES) and its
    APPROVAL_THRESHOLDS; public keys read with the target's credentials."""
    name, variables = validate_case_environment(target)
    try:
        keys = parse_approval_keys(str(variables.get("APPROVAL_KEYS") or ""))
        trusted = parse_trusted_keys(keys, variables.get("APPROVAL_KEY_ALIASES") or None)
        thresholds = deployed_thresholds(variables)
    except (ConfigurationError, ValueError) as exc:
        raise SagactlError(f"cannot read the approval keys of {name}: {exc}") from None
    public_keys = KmsPublicKeys(lambda: target.client("kms"))
    return name, ApprovalVerifier(trusted, public_keys, thresholds=thresholds)


def find_sweeper(target: Target) -> str:
    """The name of this stack's sweeper function."""
    function = stack_function(
        target,
        "sweeper",
        SWEEPER_HANDLER,
        "LEDGER_TABLE",
        "LedgerTableName",
        named_by=SWEEPER_OUTPUT,
    )
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
