"""Would AWS allow this request? IAM's policy evaluation for one account, as AWS documents it.

Sources:
- policy evaluation logic (explicit deny, then allow from any applicable policy, else the
  implicit deny; a same-account resource-based policy that names the principal allows on its
  own): https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html
- Principal (an account named as `arn:...:root` or its id stands for the account, which must
  then delegate through identity policies):
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html
- Action / NotAction (case-insensitive, wildcards), Resource / NotResource:
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_action.html
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_notresource.html
- wildcards in a resource ARN: "You can use wildcard characters (* and ?) within the individual
  segments of an ARN (the parts separated by colons)" and "If the * wildcard is the last
  character of a resource ARN segment, it can expand to match beyond the colon boundaries"
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html):
  a `*` that ends a segment matches across colons, any other `*` or `?` within its segment.
  Where the page leaves a match open (whether a mid-segment `*` or a `?` ever meets a colon),
  the statement takes the reading that denies: an Allow's Resource and a Deny's NotResource
  match narrowly (as above), a Deny's Resource and an Allow's NotResource broadly (any wildcard
  across colons);
- a statement names Resource or NotResource: "All policies except role trust policies must
  include a Resource or NotResource element" (IAM Access Analyzer's check MISSING_RESOURCE,
  https://docs.aws.amazon.com/IAM/latest/UserGuide/access-analyzer-reference-policy-checks.html#access-analyzer-reference-policy-checks-error-missing-resource):
  one without either is refused (UnsupportedPolicy), except in a role's trust policy, whose
  resource is the role;
- "role trust policies and KMS key policies are exceptions [...] because they must explicitly
  allow access for principals" (same page);
- KMS: a key policy is required; "unless the key policy explicitly allows it, you cannot use
  IAM policies to allow access to a KMS key", the account principal in it enables IAM policies:
  https://docs.aws.amazon.com/kms/latest/developerguide/key-policies.html and
  https://docs.aws.amazon.com/kms/latest/developerguide/determining-access.html
- `sts:GetCallerIdentity` needs no permission and cannot be denied:
  https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html

Not modelled (none is used by this stack): permissions boundaries, session policies, SCPs /
RCPs, grants, cross-account access, policy variables (refused by offline_iam.conditions).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from typing import Any

from offline_iam.conditions import (
    Context,
    UnsupportedPolicy,
    conditions_match,
    wildcard_match,
)

NO_AUTHORIZATION = frozenset({"sts:getcalleridentity"})

Statement = Mapping[str, Any]
PolicyDocument = Mapping[str, Any]


class Decision(Enum):
    ALLOW = "allow"
    EXPLICIT_DENY = "explicit deny"
    IMPLICIT_DENY = "implicit deny"


@dataclass(frozen=True)
class Principal:
    """Who makes the request: an IAM role's session (`arn` the role's ARN) or a service."""

    arn: str  # arn:aws:iam::<account>:role/<name>, or the service principal's name
    account: str
    service: str | None = None  # "lambda.amazonaws.com" for a service principal


@dataclass(frozen=True)
class Request:
    """One authorization: an action on a resource, with its request context."""

    action: str  # "dynamodb:GetItem"
    resource: str  # the resource ARN ("*" for actions without resource-level permissions)
    context: Context = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW


def statements(policy: PolicyDocument) -> list[Statement]:
    found = policy.get("Statement", [])
    return list(found) if isinstance(found, list) else [found]


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def action_matches(statement: Statement, action: str) -> bool:
    if "Action" in statement:
        return any(
            wildcard_match(p, action, ignore_case=True) for p in _as_list(statement["Action"])
        )
    if "NotAction" in statement:
        return not any(
            wildcard_match(p, action, ignore_case=True) for p in _as_list(statement["NotAction"])
        )
    raise UnsupportedPolicy(f"statement without Action or NotAction: {statement}")


@lru_cache(maxsize=4096)
def _resource_pattern(pattern: str, broad: bool) -> re.Pattern[str]:
    if "${" in pattern:
        raise UnsupportedPolicy(f"policy variables are not supported: {pattern!r}")
    parts = []
    for index, c in enumerate(pattern):
        ends_segment = index + 1 == len(pattern) or pattern[index + 1] == ":"
        if c == "*":
            parts.append(".*" if broad or ends_segment else "[^:]*")
        elif c == "?":
            parts.append("." if broad else "[^:]")
        else:
            parts.append(re.escape(c))
    return re.compile("".join(parts), re.DOTALL)


def resource_match(pattern: str, resource: str, *, broad: bool = False) -> bool:
    """A Resource / NotResource pattern against an ARN, case-sensitively: `broad` lets every
    wildcard cross a colon, else only a `*` that ends a segment does (module docstring)."""
    return _resource_pattern(pattern, broad).fullmatch(resource) is not None


def is_role(arn: str) -> bool:
    """An IAM role's ARN: its resource-based policy is its trust policy."""
    parts = arn.split(":", 5)
    return len(parts) == 6 and parts[2] == "iam" and parts[5].startswith("role/")


def resource_matches(statement: Statement, resource: str, *, trust: bool = False) -> bool:
    """Whether the statement covers `resource`, in the reading that denies where the docs
    leave it open; `trust`: the statement is in a role's trust policy."""
    deny = statement.get("Effect") == "Deny"
    if "Resource" in statement:
        patterns = _as_list(statement["Resource"])
        return any(resource_match(p, resource, broad=deny) for p in patterns)
    if "NotResource" in statement:
        patterns = _as_list(statement["NotResource"])
        return not any(resource_match(p, resource, broad=not deny) for p in patterns)
    if trust:
        return True  # a trust policy names no resource: the role itself is the resource
    raise UnsupportedPolicy(f"statement without Resource or NotResource: {statement}")


def _account_of(entry: str) -> str | None:
    """The account an `AWS` principal entry stands for as a whole, if it does."""
    if entry.isdigit() and len(entry) == 12:
        return entry
    parts = entry.split(":")
    if len(parts) == 6 and parts[2] == "iam" and parts[5] == "root":
        return parts[4]
    return None


class PrincipalMatch(Enum):
    NONE = "none"
    DIRECT = "direct"  # the principal itself (or everyone, "*")
    ACCOUNT = "account"  # its account: allows only through the account's identity policies


def principal_matches(statement: Statement, principal: Principal) -> PrincipalMatch:
    """How a resource-based statement's Principal covers `principal`."""
    if "NotPrincipal" in statement:
        raise UnsupportedPolicy("NotPrincipal is not supported")
    given = statement.get("Principal")
    if given == "*":
        return PrincipalMatch.DIRECT
    if not isinstance(given, Mapping):
        raise UnsupportedPolicy(f"malformed Principal: {given!r}")
    if principal.service is not None:
        services = _as_list(given.get("Service", []))
        return PrincipalMatch.DIRECT if principal.service in services else PrincipalMatch.NONE
    best = PrincipalMatch.NONE
    for entry in _as_list(given.get("AWS", [])):
        if entry in ("*", principal.arn):
            return PrincipalMatch.DIRECT
        if _account_of(str(entry)) == principal.account:
            best = PrincipalMatch.ACCOUNT
    return best


@dataclass(frozen=True)
class Grants:
    """Everything that decides for one principal: its identity policies (inline and managed,
    resolved) and, per resource ARN, that resource's policy (a KMS key's key policy)."""

    principal: Principal
    identity: Sequence[PolicyDocument]
    resource_policies: Mapping[str, PolicyDocument] = field(default_factory=dict)
    # Resources whose own policy must allow (KMS keys, roles to assume): IAM policies alone
    # allow nothing on them.
    policy_required: frozenset[str] = frozenset()


def _applies(statement: Statement, request: Request, *, trust: bool = False) -> bool:
    return (
        action_matches(statement, request.action)
        and resource_matches(statement, request.resource, trust=trust)
        and conditions_match(statement.get("Condition"), request.context)
    )


def _effects(statements_: Iterable[Statement], request: Request) -> tuple[bool, bool]:
    """(some Deny applies, some Allow applies)."""
    deny = allow = False
    for statement in statements_:
        if _applies(statement, request):
            if statement.get("Effect") == "Deny":
                deny = True
            elif statement.get("Effect") == "Allow":
                allow = True
            else:
                raise UnsupportedPolicy(f"statement without a valid Effect: {statement}")
    return deny, allow


def _resource_effects(
    policy: PolicyDocument, principal: Principal, request: Request
) -> tuple[bool, PrincipalMatch]:
    """(a Deny applies to this principal, the best way an Allow covers it)."""
    deny, allow = False, PrincipalMatch.NONE
    trust = is_role(request.resource)  # a role's resource-based policy is its trust policy
    for statement in statements(policy):
        how = principal_matches(statement, principal)
        if how is PrincipalMatch.NONE or not _applies(statement, request, trust=trust):
            continue
        if statement.get("Effect") == "Deny":
            deny = True
        elif how is PrincipalMatch.DIRECT or allow is PrincipalMatch.NONE:
            allow = how
    return deny, allow


def evaluate(grants: Grants, request: Request) -> Verdict:
    """AWS's decision for `request` made by `grants.principal`, with the reason."""
    if request.action.lower() in NO_AUTHORIZATION:
        return Verdict(Decision.ALLOW, f"{request.action} needs no permission")
    identity_deny, identity_allow = _effects(
        (s for policy in grants.identity for s in statements(policy)), request
    )
    resource_policy = grants.resource_policies.get(request.resource)
    resource_deny, resource_allow = (
        _resource_effects(resource_policy, grants.principal, request)
        if resource_policy is not None
        else (False, PrincipalMatch.NONE)
    )
    if identity_deny or resource_deny:
        where = "an identity policy" if identity_deny else "the resource policy"
        return Verdict(Decision.EXPLICIT_DENY, f"{where} denies it")
    if resource_allow is PrincipalMatch.DIRECT:
        return Verdict(Decision.ALLOW, "the resource policy allows this principal")
    required = request.resource in grants.policy_required
    if required and resource_policy is None:
        return Verdict(Decision.IMPLICIT_DENY, "the resource's policy is unknown")
    if required and resource_allow is PrincipalMatch.NONE:
        return Verdict(
            Decision.IMPLICIT_DENY,
            "the resource's own policy (a key policy, a trust policy) neither allows this "
            "principal nor delegates to the account's IAM policies (which alone allow nothing "
            "on it)",
        )
    if identity_allow:
        return Verdict(Decision.ALLOW, "an identity policy allows it")
    return Verdict(Decision.IMPLICIT_DENY, "no policy allows it")
