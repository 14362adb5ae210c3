"""Recorded calls against a role's policies: what AWS would deny, and what is allowed unused.

`denials` evaluates every request a role's recorded calls make (offline_iam.requests) with
offline_iam.evaluate; `unused_grants` lists each (action, resource) an Allow statement of the
role's identity policies names that no allowed request used: least privilege is "exactly the
calls its flows make", checked in both directions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from local_aws.aws_calls import AwsCall
from offline_iam.conditions import UnsupportedPolicy, conditions_match, wildcard_match
from offline_iam.evaluate import Grants, Request, evaluate, resource_match, statements
from offline_iam.requests import Account, authorization_requests
from offline_iam.stack_policies import RolePolicies


@dataclass(frozen=True)
class Evaluated:
    call: AwsCall
    request: Request
    allowed: bool
    reason: str

    def line(self) -> str:
        return (
            f"{self.call.caller}: {self.request.action} on {self.request.resource} "
            f"({self.call.service}:{self.call.operation}) -> {self.reason}"
        )


def evaluate_calls(
    calls: Iterable[AwsCall],
    account: Account,
    grants: Grants,
    session: Mapping[str, Any],
) -> list[Evaluated]:
    """Every request of `calls`, with the session's global condition keys, evaluated."""
    evaluated = []
    for call in calls:
        for bare in authorization_requests(call, account):
            request = Request(bare.action, bare.resource, {**session, **bare.context})
            verdict = evaluate(grants, request)
            evaluated.append(Evaluated(call, request, verdict.allowed, verdict.reason))
    return evaluated


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def unused_grants(role: RolePolicies, allowed: Iterable[Request]) -> list[tuple[str, str]]:
    """(action, resource) pairs the role's Allow statements name and no allowed request used
    (under the statement's conditions)."""
    requests = list(allowed)
    unused = []
    for policy in role.identity:
        for statement in statements(policy):
            if statement.get("Effect") != "Allow":
                continue
            if "Action" not in statement or "Resource" not in statement:
                raise UnsupportedPolicy(
                    f"{role.logical_id}: NotAction / NotResource in {statement}"
                )
            for action in _as_list(statement["Action"]):
                for resource in _as_list(statement["Resource"]):
                    if not any(
                        wildcard_match(action, r.action, ignore_case=True)
                        and resource_match(resource, r.resource)
                        and conditions_match(statement.get("Condition"), r.context)
                        for r in requests
                    ):
                        unused.append((action, resource))
    return unused
