"""offline_iam: three rules of IAM's evaluation the AWS review found the offline evaluator read
too loosely, each with the sentence it follows; where the docs leave a case open the evaluator
takes the reading that denies (narrow for an Allow's Resource, broad for a Deny's)."""

from __future__ import annotations

from typing import Any

import pytest

from offline_iam.conditions import UnsupportedPolicy, conditions_match
from offline_iam.evaluate import Decision, Grants, Principal, Request, evaluate, resource_match

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/operator"
EXECUTIONS = f"arn:aws:states:us-east-1:{ACCOUNT}:execution"
FUNCTION = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function"


def _decide(*statements: dict[str, Any], action: str, resource: str) -> Decision:
    grants = Grants(
        Principal(ROLE, ACCOUNT), [{"Version": "2012-10-17", "Statement": list(statements)}]
    )
    return evaluate(grants, Request(action, resource)).decision


# --- a `*` crosses a colon only where it ends a segment ---------------------------------------
def test_a_wildcard_ending_a_segment_expands_beyond_the_colon_and_no_other_does() -> None:
    """IAM User Guide, "IAM JSON policy elements: Resource"
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html):
    "You can use wildcard characters (* and ?) within the individual segments of an ARN (the
    parts separated by colons)" and "If the * wildcard is the last character of a resource ARN
    segment, it can expand to match beyond the colon boundaries"."""
    # Ending a segment (the last one, or before a colon): across colons.
    assert resource_match(f"{FUNCTION}:saga-*", f"{FUNCTION}:saga-validate:live")
    assert resource_match(f"arn:aws:lambda:*:{ACCOUNT}:function:saga", f"{FUNCTION}:saga")
    assert resource_match("*", f"{EXECUTIONS}:Machine:case-1")
    # Inside a segment: within it only.
    assert resource_match(f"{EXECUTIONS}:*Machine:case-1", f"{EXECUTIONS}:SagaMachine:case-1")
    assert not resource_match(
        f"{EXECUTIONS}:*Machine:case-1", f"{EXECUTIONS}:Other:xMachine:case-1"
    )
    assert not resource_match(f"{EXECUTIONS}:Machine:agt_?", f"{EXECUTIONS}:Machine:agt_:")
    # Resources stay case-sensitive.
    assert not resource_match(f"{FUNCTION}:saga-*", f"{FUNCTION}:Saga-validate")


def test_where_the_docs_leave_a_match_open_an_allow_reads_narrowly_a_deny_broadly() -> None:
    """Whether a mid-segment `*` (or a `?`) ever meets a colon the page does not say: an Allow's
    Resource and a Deny's NotResource do not let it (they then cover less), a Deny's Resource
    and an Allow's NotResource do (they then deny more)."""
    odd = f"{EXECUTIONS}:Other:xMachine:case-1"  # the mid-segment `*` would have to cross
    pattern = f"{EXECUTIONS}:*Machine:case-1"
    action = "states:DescribeExecution"
    allow = {"Effect": "Allow", "Action": action, "Resource": pattern}
    assert _decide(allow, action=action, resource=odd) is Decision.IMPLICIT_DENY
    everything = {"Effect": "Allow", "Action": action, "Resource": "*"}
    deny = {"Effect": "Deny", "Action": action, "Resource": pattern}
    assert _decide(everything, deny, action=action, resource=odd) is Decision.EXPLICIT_DENY
    allow_but = {"Effect": "Allow", "Action": action, "NotResource": pattern}
    assert _decide(allow_but, action=action, resource=odd) is Decision.IMPLICIT_DENY
    deny_but = {"Effect": "Deny", "Action": action, "NotResource": pattern}
    assert _decide(everything, deny_but, action=action, resource=odd) is Decision.EXPLICIT_DENY
    # Where the reading is settled, both agree.
    ordinary = f"{EXECUTIONS}:SagaMachine:case-1"
    assert _decide(allow, action=action, resource=ordinary) is Decision.ALLOW
    assert _decide(everything, deny_but, action=action, resource=ordinary) is Decision.ALLOW


# --- Resource or NotResource, except in a trust policy ----------------------------------------
def test_a_statement_without_resource_or_not_resource_is_refused_outside_a_trust_policy() -> None:
    """IAM Access Analyzer's policy checks, "Error - Missing resource"
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/access-analyzer-reference-policy-checks.html#access-analyzer-reference-policy-checks-error-missing-resource):
    "All policies except role trust policies must include a Resource or NotResource
    element"; a role's trust policy names none, its resource being the role."""
    no_resource = {"Effect": "Allow", "Action": "dynamodb:GetItem"}
    table = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/cases"
    with pytest.raises(UnsupportedPolicy, match="without Resource or NotResource"):
        _decide(no_resource, action="dynamodb:GetItem", resource=table)
    # A key policy is a resource-based policy too, and not a trust policy.
    key = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    key_policy = {
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": ROLE}, "Action": "kms:Sign"}]
    }
    grants = Grants(Principal(ROLE, ACCOUNT), [], {key: key_policy}, frozenset({key}))
    with pytest.raises(UnsupportedPolicy, match="without Resource or NotResource"):
        evaluate(grants, Request("kms:Sign", key))
    # A role's trust policy, the same statement shape: its resource is the role.
    role = f"arn:aws:iam::{ACCOUNT}:role/approver"
    trust = {
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": ROLE}, "Action": "sts:AssumeRole"}]
    }
    grants = Grants(Principal(ROLE, ACCOUNT), [], {role: trust}, frozenset({role}))
    assert evaluate(grants, Request("sts:AssumeRole", role)).decision is Decision.ALLOW


# --- ForAllValues on a null data set ----------------------------------------------------------
def test_for_all_values_is_true_and_for_any_value_false_on_a_null_data_set() -> None:
    """IAM User Guide, "Creating a condition with multiple context keys or values"
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_multi-value-conditions.html):
    ForAllValues "also returns true if there are no keys in the request, or if the key values
    resolve to a null data set, such as an empty string"; ForAnyValue: "For no matching key or
    a null dataset, the condition returns false"."""
    for_all = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["acme"]}}
    for_any = {"ForAnyValue:StringEquals": {"dynamodb:LeadingKeys": ["acme"]}}
    for empty in ([""], ["", ""], []):
        context = {"dynamodb:LeadingKeys": empty}
        assert conditions_match(for_all, context), empty
        assert not conditions_match(for_any, context), empty
    assert conditions_match(for_all, {})
    assert not conditions_match(for_all, {"dynamodb:LeadingKeys": ["globex"]})
    # An empty value among others is a case the page does not describe: refused, not read.
    with pytest.raises(UnsupportedPolicy, match="empty value among others"):
        conditions_match(for_all, {"dynamodb:LeadingKeys": ["", "acme"]})
    # A Deny guarded by ForAllValues applies to the null data set as the page says.
    action, table = "dynamodb:GetItem", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/drafts"
    grants = Grants(
        Principal(ROLE, ACCOUNT),
        [
            {
                "Statement": [
                    {"Effect": "Allow", "Action": action, "Resource": table},
                    {
                        "Effect": "Deny",
                        "Action": action,
                        "Resource": table,
                        "Condition": {"ForAllValues:StringEquals": {"dynamodb:Attributes": ["x"]}},
                    },
                ]
            }
        ],
    )
    request = Request(action, table, {"dynamodb:Attributes": [""]})
    assert evaluate(grants, request).decision is Decision.EXPLICIT_DENY
