"""offline_iam: IAM's documented evaluation logic, one rule per test (sources in its modules).

Each case is the behaviour the IAM User Guide or the KMS Developer Guide states, so that the
offline checks of the stack's roles (tests/e2e/test_people_allowed.py,
tests/e2e/test_grants_match_calls.py) answer as AWS would.
"""

from __future__ import annotations

from typing import Any

import pytest

from offline_iam.conditions import UnsupportedPolicy, arn_match, conditions_match
from offline_iam.evaluate import Decision, Grants, Principal, Request, evaluate

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/approver"
OTHER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/someone-else"
TABLE = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/drafts"
KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ROOT = f"arn:aws:iam::{ACCOUNT}:root"


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(action: Any, resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def deny(action: Any, resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": action, "Resource": resource, **extra}


def decide(
    identity: list[dict[str, Any]],
    action: str,
    resource: str,
    context: dict[str, Any] | None = None,
    *,
    key_policy: dict[str, Any] | None = None,
    principal: str = ROLE,
) -> Decision:
    resource_policies = {KEY: key_policy} if key_policy is not None else {}
    grants = Grants(
        Principal(principal, ACCOUNT),
        identity,
        resource_policies=resource_policies,
        policy_required=frozenset({KEY}),
    )
    return evaluate(grants, Request(action, resource, context or {})).decision


# --- deny, allow, implicit deny ----------------------------------------------------------------
def test_without_an_allow_a_request_is_implicitly_denied() -> None:
    assert decide([], "dynamodb:GetItem", TABLE) is Decision.IMPLICIT_DENY
    assert decide([policy(allow("dynamodb:PutItem", TABLE))], "dynamodb:GetItem", TABLE) is (
        Decision.IMPLICIT_DENY
    )


def test_an_explicit_deny_in_any_policy_overrides_every_allow() -> None:
    identity = [policy(allow("dynamodb:*", "*")), policy(deny("dynamodb:GetItem", TABLE))]
    assert decide(identity, "dynamodb:GetItem", TABLE) is Decision.EXPLICIT_DENY
    assert decide(identity, "dynamodb:PutItem", TABLE) is Decision.ALLOW


def test_actions_match_case_insensitively_with_wildcards_resources_case_sensitively() -> None:
    identity = [policy(allow("DynamoDB:Get*", TABLE), allow("kms:Get?ublicKey", KEY))]
    assert decide(identity, "dynamodb:GetItem", TABLE) is Decision.ALLOW
    assert decide(identity, "dynamodb:UpdateItem", TABLE) is Decision.IMPLICIT_DENY
    # The table's ARN does not cover its indexes.
    assert decide(identity, "dynamodb:GetItem", TABLE + "/index/by-case") is (
        Decision.IMPLICIT_DENY
    )
    assert decide(identity, "dynamodb:GetItem", TABLE.upper()) is Decision.IMPLICIT_DENY


def test_not_action_and_not_resource_match_everything_they_do_not_name() -> None:
    identity = [policy({"Effect": "Allow", "NotAction": "kms:*", "NotResource": KEY})]
    assert decide(identity, "dynamodb:GetItem", TABLE) is Decision.ALLOW
    assert decide(identity, "kms:Sign", TABLE) is Decision.IMPLICIT_DENY
    assert decide(identity, "dynamodb:GetItem", KEY) is Decision.IMPLICIT_DENY


def test_get_caller_identity_needs_no_permission_and_cannot_be_denied() -> None:
    identity = [policy(deny("sts:GetCallerIdentity"))]
    assert decide(identity, "sts:GetCallerIdentity", "*") is Decision.ALLOW


# --- KMS: the key policy decides whether IAM policies count --------------------------------------
def test_a_kms_key_without_a_key_policy_allowing_the_account_ignores_iam_allows() -> None:
    identity = [policy(allow("kms:Sign", KEY))]
    only_admin = policy(
        {"Effect": "Allow", "Principal": {"AWS": OTHER_ROLE}, "Action": "kms:*", "Resource": "*"}
    )
    assert decide(identity, "kms:Sign", KEY, key_policy=only_admin) is Decision.IMPLICIT_DENY


def test_the_account_principal_in_a_key_policy_delegates_to_iam_policies() -> None:
    delegating = policy(
        {"Effect": "Allow", "Principal": {"AWS": ROOT}, "Action": "kms:Sign", "Resource": "*"}
    )
    assert decide([], "kms:Sign", KEY, key_policy=delegating) is Decision.IMPLICIT_DENY
    identity = [policy(allow("kms:Sign", KEY))]
    assert decide(identity, "kms:Sign", KEY, key_policy=delegating) is Decision.ALLOW
    # The account written as its id means the same.
    by_id = policy(
        {"Effect": "Allow", "Principal": {"AWS": ACCOUNT}, "Action": "kms:Sign", "Resource": "*"}
    )
    assert decide(identity, "kms:Sign", KEY, key_policy=by_id) is Decision.ALLOW


def test_a_key_policy_naming_the_principal_allows_without_an_iam_policy() -> None:
    direct = policy(
        {"Effect": "Allow", "Principal": {"AWS": ROLE}, "Action": "kms:Sign", "Resource": "*"}
    )
    assert decide([], "kms:Sign", KEY, key_policy=direct) is Decision.ALLOW
    assert decide([], "kms:Sign", KEY, key_policy=direct, principal=OTHER_ROLE) is (
        Decision.IMPLICIT_DENY
    )


def test_a_condition_on_the_principal_arn_limits_the_delegation_to_that_role() -> None:
    only_the_approver = policy(
        {
            "Effect": "Allow",
            "Principal": {"AWS": ROOT},
            "Action": "kms:Sign",
            "Resource": "*",
            "Condition": {"ArnEquals": {"aws:PrincipalArn": ROLE}},
        }
    )
    identity = [policy(allow("kms:Sign", "*"))]
    assert (
        decide(identity, "kms:Sign", KEY, {"aws:PrincipalArn": ROLE}, key_policy=only_the_approver)
        is Decision.ALLOW
    )
    assert (
        decide(
            identity,
            "kms:Sign",
            KEY,
            {"aws:PrincipalArn": OTHER_ROLE},
            key_policy=only_the_approver,
            principal=OTHER_ROLE,
        )
        is Decision.IMPLICIT_DENY
    )


def test_a_deny_in_the_key_policy_overrides_the_iam_allow() -> None:
    key_policy = policy(
        {"Effect": "Allow", "Principal": {"AWS": ROOT}, "Action": "kms:*", "Resource": "*"},
        {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "kms:Sign", "Resource": "*"},
    )
    identity = [policy(allow("kms:*", KEY))]
    assert decide(identity, "kms:Sign", KEY, key_policy=key_policy) is Decision.EXPLICIT_DENY
    assert decide(identity, "kms:GetPublicKey", KEY, key_policy=key_policy) is Decision.ALLOW


# --- conditions -------------------------------------------------------------------------------
def test_several_values_of_one_key_are_or_several_keys_and_operators_are_and() -> None:
    block: dict[str, dict[str, object]] = {
        "StringEquals": {"kms:SigningAlgorithm": ["ECDSA_SHA_256", "ECDSA_SHA_384"]},
        "Bool": {"aws:MultiFactorAuthPresent": "true"},
    }
    both: dict[str, Any] = {
        "kms:SigningAlgorithm": "ECDSA_SHA_384",
        "aws:MultiFactorAuthPresent": True,
    }
    assert conditions_match(block, both)
    assert not conditions_match(block, {**both, "kms:SigningAlgorithm": "RSASSA_PSS_SHA_256"})
    assert not conditions_match(block, {**both, "aws:MultiFactorAuthPresent": False})


def test_an_absent_key_does_not_match_except_for_negated_ifexists_and_null_operators() -> None:
    assert not conditions_match({"Bool": {"aws:MultiFactorAuthPresent": "true"}}, {})
    assert conditions_match({"StringNotEquals": {"aws:SourceAccount": ACCOUNT}}, {})
    assert conditions_match({"StringEqualsIfExists": {"aws:SourceAccount": ACCOUNT}}, {})
    assert not conditions_match(
        {"StringEqualsIfExists": {"aws:SourceAccount": ACCOUNT}}, {"aws:SourceAccount": "1" * 12}
    )
    assert conditions_match({"Null": {"aws:MultiFactorAuthPresent": "true"}}, {})
    assert not conditions_match(
        {"Null": {"aws:MultiFactorAuthPresent": "true"}}, {"aws:MultiFactorAuthPresent": True}
    )


def test_condition_key_names_are_case_insensitive_values_are_not() -> None:
    assert conditions_match(
        {"StringEquals": {"AWS:SourceAccount": ACCOUNT}}, {"aws:sourceaccount": ACCOUNT}
    )
    assert not conditions_match(
        {"StringEquals": {"kms:MessageType": "raw"}}, {"kms:MessageType": "RAW"}
    )
    assert conditions_match(
        {"StringEqualsIgnoreCase": {"kms:MessageType": "raw"}}, {"kms:MessageType": "RAW"}
    )


def test_for_all_values_leading_keys_confines_every_key_and_is_true_without_keys() -> None:
    block = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["acme"]}}
    assert conditions_match(block, {"dynamodb:LeadingKeys": ["acme"]})
    assert not conditions_match(block, {"dynamodb:LeadingKeys": ["acme", "globex"]})
    assert not conditions_match(block, {"dynamodb:LeadingKeys": ["globex"]})
    # Documented: ForAllValues is true when the request has no such key (a Scan has no
    # leading keys), which is why the roles pair it with actions that always carry one.
    assert conditions_match(block, {})
    assert conditions_match(block, {"dynamodb:LeadingKeys": []})


def test_for_any_value_needs_one_match_and_is_false_without_keys() -> None:
    block = {"ForAnyValue:StringLike": {"aws:TagKeys": ["saga:*"]}}
    assert conditions_match(block, {"aws:TagKeys": ["other", "saga:tenant"]})
    assert not conditions_match(block, {"aws:TagKeys": ["other"]})
    assert not conditions_match(block, {})


def test_arn_operators_compare_each_part_with_wildcards() -> None:
    assert arn_match("arn:aws:iam::*:role/approver", ROLE)
    assert arn_match(
        "arn:aws:states:us-east-1:123456789012:execution:Machine:*",
        "arn:aws:states:us-east-1:123456789012:execution:Machine:case-1",
    )
    assert not arn_match("arn:aws:iam::*:role/approver", OTHER_ROLE)
    # Wildcards do not cross a part: the account part cannot swallow the region's colon.
    assert not arn_match("arn:aws:iam:*:role/approver", ROLE)
    assert conditions_match(
        {"ArnLike": {"aws:SourceArn": "arn:aws:bedrock-agentcore:*:123456789012:gateway/*"}},
        {"aws:SourceArn": "arn:aws:bedrock-agentcore:us-east-1:123456789012:gateway/gw-1"},
    )
    assert conditions_match({"ArnNotLike": {"aws:SourceArn": "arn:aws:*:*:*:x"}}, {})


def test_a_multivalued_request_key_needs_a_set_operator() -> None:
    with pytest.raises(UnsupportedPolicy, match="ForAllValues or ForAnyValue"):
        conditions_match(
            {"StringEquals": {"dynamodb:LeadingKeys": "acme"}},
            {"dynamodb:LeadingKeys": ["acme", "globex"]},
        )


@pytest.mark.parametrize(
    "block",
    [
        {"DateGreaterThan": {"aws:CurrentTime": "2026-01-01T00:00:00Z"}},
        {"StringEquals": {"aws:PrincipalArn": "arn:aws:iam::${aws:PrincipalAccount}:role/x"}},
        {"ForEveryValue:StringEquals": {"aws:TagKeys": "x"}},
    ],
)
def test_what_the_evaluator_does_not_implement_is_refused_not_guessed(block: Any) -> None:
    with pytest.raises(UnsupportedPolicy):
        conditions_match(
            block,
            {
                "aws:CurrentTime": "2026-06-01T00:00:00Z",
                "aws:PrincipalArn": ROLE,
                "aws:TagKeys": ["x"],
            },
        )


# --- trust policies -----------------------------------------------------------------------------
def test_a_trust_policy_for_the_account_with_mfa_needs_mfa_and_the_callers_own_allow() -> None:
    role = f"arn:aws:iam::{ACCOUNT}:role/approver"
    trust = policy(
        {
            "Effect": "Allow",
            "Principal": {"AWS": ROOT},
            "Action": "sts:AssumeRole",
            "Condition": {"Bool": {"aws:MultiFactorAuthPresent": "true"}},
        }
    )
    person = Principal(f"arn:aws:iam::{ACCOUNT}:user/alice", ACCOUNT)

    def assume(identity: list[dict[str, Any]], mfa: bool) -> Decision:
        # A role's trust policy is required, like a key policy.
        grants = Grants(
            person, identity, resource_policies={role: trust}, policy_required=frozenset({role})
        )
        request = Request("sts:AssumeRole", role, {"aws:MultiFactorAuthPresent": mfa})
        return evaluate(grants, request).decision

    may_assume = [policy(allow("sts:AssumeRole", role))]
    assert assume(may_assume, mfa=True) is Decision.ALLOW
    assert assume(may_assume, mfa=False) is Decision.IMPLICIT_DENY
    assert assume([], mfa=True) is Decision.IMPLICIT_DENY


def test_a_service_principal_is_matched_by_its_service_name() -> None:
    trust = policy(
        {
            "Effect": "Allow",
            "Principal": {"Service": "bedrock-agentcore.amazonaws.com"},
            "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"aws:SourceAccount": ACCOUNT}},
        }
    )
    role = f"arn:aws:iam::{ACCOUNT}:role/gateway"
    service = Principal(
        "bedrock-agentcore.amazonaws.com", ACCOUNT, service="bedrock-agentcore.amazonaws.com"
    )
    grants = Grants(service, [], resource_policies={role: trust})
    ok = Request("sts:AssumeRole", role, {"aws:SourceAccount": ACCOUNT})
    confused = Request("sts:AssumeRole", role, {"aws:SourceAccount": "999999999999"})
    assert evaluate(grants, ok).decision is Decision.ALLOW
    assert evaluate(grants, confused).decision is Decision.IMPLICIT_DENY
    other = Principal("lambda.amazonaws.com", ACCOUNT, service="lambda.amazonaws.com")
    assert evaluate(Grants(other, [], resource_policies={role: trust}), ok).decision is (
        Decision.IMPLICIT_DENY
    )
