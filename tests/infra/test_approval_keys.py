"""The approval keys in the template: one ECC signing key per approver, whose key policy lets
exactly that approver sign, and no principal of the saga itself able to sign or to become an
approver (docs/design.md §9).

Who may sign is also evaluated, not only read: offline_iam (IAM's documented evaluation logic)
answers for the approver's role, every other role of the stack, an account administrator with
`kms:*` on everything, and a role re-created under the approver role's name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from offline_iam.evaluate import Decision, Grants, Principal, Request, evaluate
from offline_iam.stack_policies import offline_resolver, stack_policies
from saga.approval_keys import approval_key_alias
from saga_bench.deploy_cost import approver_trust_lines
from stacks.config import ConfigError, SagaConfig
from stacks.constructs.approvals import KEY_ADMINISTRATION_ACTIONS
from stacks.saga_stack import PROJECT_ROOT
from tests.infra.synth import Synthesized, synthesize

BROUGHT = "arn:aws:kms:us-east-1:123456789012:key/1111aaaa-2222-3333-4444-555566667777"
RETIRED = "arn:aws:kms:us-east-1:123456789012:key/0000aaaa-2222-3333-4444-555566667777"
MANAGER_PRINCIPAL = "arn:aws:iam::123456789012:role/AcmeManager"
OPS_PERSON = "arn:aws:iam::123456789012:role/GlobexOpsPerson"
# Actions that sign, or that could hand signing to someone (a grant, a new key policy), or let a
# principal become another one.
DANGEROUS = re.compile(r"^(\*|kms:\*|kms:Sign|kms:S\*|kms:CreateGrant|kms:PutKeyPolicy|sts:.*)$")


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """Rotation, a named principal and a brought key, in one synth."""
    context = {
        "tenants": {
            "acme": ["supervisor@acme", "manager@acme", "auditor@acme"],
            "globex": ["ops@globex"],
        },
        "approval_thresholds": {},
        "approval_keys": {
            "acme/supervisor@acme": {"key_generation": 2, "retired_key_arns": [RETIRED]},
            "acme/manager@acme": {"principal": MANAGER_PRINCIPAL},
            "acme/auditor@acme": {"key_arn": BROUGHT},
            "globex/ops@globex": {"role_assumed_by": [OPS_PERSON]},
        },
    }
    return synthesize(tmp_path_factory.mktemp("approval-variants.out"), context)


def keys(synth: Synthesized) -> dict[str, dict[str, Any]]:
    return synth.resources("AWS::KMS::Key")


def tags(key: dict[str, Any]) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in key["Properties"]["Tags"]}


def key_of(synth: Synthesized, approver: str, generation: int = 1) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (logical_id, key)
        for logical_id, key in keys(synth).items()
        if tags(key)["saga:approver"] == approver
        and tags(key)["saga:key-generation"] == str(generation)
    ]
    return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def signers(key: dict[str, Any]) -> list[dict[str, Any]]:
    """The key policy statements that allow kms:Sign."""
    return [
        statement
        for statement in key["Properties"]["KeyPolicy"]["Statement"]
        if "kms:Sign" in as_list(statement["Action"])
    ]


ACCOUNT_ROOT = {
    "Fn::Join": [
        "",
        ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"],
    ]
}
SIGNING = {"kms:SigningAlgorithm": "ECDSA_SHA_256", "kms:MessageType": "RAW"}


def approver_role_ids(synth: Synthesized) -> set[str]:
    return {lid for lid in synth.resources("AWS::IAM::Role") if "ApproverRole" in lid}


def statements(synth: Synthesized) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every IAM statement the template attaches to a role (managed by CDK or inline)."""
    for logical_id, policy in synth.resources("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            yield logical_id, statement
    for logical_id, role in synth.resources("AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                yield logical_id, statement


def approval_keys_variable(synth: Synthesized) -> str:
    """ValidateCase's APPROVAL_KEYS with each reference written as `<logical id>`."""
    (function,) = [
        f
        for lid, f in synth.resources("AWS::Lambda::Function").items()
        if lid.startswith("ToolsValidateCase")
    ]
    value = function["Properties"]["Environment"]["Variables"]["APPROVAL_KEYS"]
    if isinstance(value, str):
        return value
    separator, parts = value["Fn::Join"]
    return str(separator).join(
        p if isinstance(p, str) else f"<{p['Fn::GetAtt'][0]}>" for p in parts
    )


def test_every_approver_has_an_ecc_signing_key_that_only_its_approver_role_may_sign(
    synthesized: Synthesized,
) -> None:
    roles = synthesized.resources("AWS::IAM::Role")
    config = synthesized.saga.config
    approvers = {(t, a) for t, names in config.tenants.items() for a in names}
    assert {
        (tags(k)["saga:tenant"], tags(k)["saga:approver"]) for k in keys(synthesized).values()
    } == (approvers)
    for key_id, key in keys(synthesized).items():
        props = key["Properties"]
        assert (props["KeySpec"], props["KeyUsage"]) == ("ECC_NIST_P256", "SIGN_VERIFY")
        (signer,) = signers(key)
        # The principal is the account, which exists before anything is deployed: nothing KMS
        # must resolve (a role created in the same deployment may not be visible to it yet).
        assert signer["Principal"] == {"AWS": ACCOUNT_ROOT}
        assert signer["Action"] == "kms:Sign"
        condition = signer["Condition"]
        role_id = condition["ArnEquals"]["aws:PrincipalArn"]["Fn::GetAtt"][0]
        assert condition["ArnEquals"] == {"aws:PrincipalArn": {"Fn::GetAtt": [role_id, "Arn"]}}
        assert condition["StringLike"] == {
            "aws:userid": {"Fn::Join": ["", [{"Fn::GetAtt": [role_id, "RoleId"]}, ":*"]]}
        }
        assert condition["StringEquals"] == SIGNING
        (trust,) = roles[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Condition"] == {"Bool": {"aws:MultiFactorAuthPresent": "true"}}
        assert ":root" in json.dumps(trust["Principal"])
        # Through the account principal the role's own policy counts: Sign on this key only.
        kms = [(o, st) for o, st in statements(synthesized) if "kms:Sign" in as_list(st["Action"])]
        mine = [st for _, st in kms if st["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}]
        assert [st["Condition"] for st in mine] == [{"StringEquals": SIGNING}]
        (account,) = [
            s for s in props["KeyPolicy"]["Statement"] if "kms:Sign" not in as_list(s["Action"])
        ]
        # The account administers the key and reads its public key: nothing that signs, and no
        # wildcard that would (CDK's default key policy gives the root kms:*).
        assert sorted(account["Action"]) == sorted(KEY_ADMINISTRATION_ACTIONS)
        assert not [a for a in account["Action"] if "*" in a or a in ("kms:Sign", "kms:Verify")]
        assert "kms:CreateGrant" not in account["Action"]


def test_only_the_approvers_own_role_session_may_sign_evaluated(synthesized: Synthesized) -> None:
    template = synthesized.template_json
    resolver = offline_resolver(template, synthesized.saga.stack.stack_name)
    policies = stack_policies(template, resolver)
    request_context = {"kms:SigningAlgorithm": "ECDSA_SHA_256", "kms:MessageType": "RAW"}
    approver_roles = approver_role_ids(synthesized)
    assert approver_roles
    for key_id in keys(synthesized):
        key_arn = resolver.get_att(key_id, "Arn")
        (signer,) = signers(template["Resources"][key_id])
        owner = signer["Condition"]["ArnEquals"]["aws:PrincipalArn"]["Fn::GetAtt"][0]

        def sign(grants: Grants, context: dict[str, Any], key_arn: str = key_arn) -> Decision:
            request = Request("kms:Sign", key_arn, {**request_context, **context})
            return evaluate(grants, request).decision

        for logical_id, role in policies.roles.items():
            decision = sign(policies.grants(logical_id), role.session_context(mfa=True))
            expected = Decision.ALLOW if logical_id == owner else Decision.IMPLICIT_DENY
            assert decision is expected, (key_id, logical_id, decision)
        owner_role = policies.roles[owner]
        session = owner_role.session_context(mfa=True)
        # Another signing algorithm or a digest instead of the message: refused.
        assert sign(policies.grants(owner), {**session, "kms:MessageType": "DIGEST"}) is (
            Decision.IMPLICIT_DENY
        )
        # An administrator allowed kms:* on everything by IAM still cannot sign.
        admin = Grants(
            Principal("arn:aws:iam::123456789012:role/Admin", "123456789012"),
            [{"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}],
            resource_policies=policies.key_policies,
            policy_required=frozenset(policies.key_policies),
        )
        admin_session = {"aws:PrincipalArn": "arn:aws:iam::123456789012:role/Admin"}
        assert sign(admin, {**admin_session, "aws:userid": "AROAADMIN:x"}) is Decision.IMPLICIT_DENY
        # The approver role deleted and re-created under its name (same ARN, a new unique id),
        # even with kms:* from IAM: not the role the key policy names.
        recreated = Grants(
            Principal(owner_role.arn, "123456789012"),
            admin.identity,
            resource_policies=policies.key_policies,
            policy_required=frozenset(policies.key_policies),
        )
        assert sign(recreated, {**session, "aws:userid": "AROANEWROLE:x"}) is (
            Decision.IMPLICIT_DENY
        )


def test_no_principal_of_the_saga_can_sign_or_become_an_approver(
    synthesized: Synthesized,
) -> None:
    key_ids = set(keys(synthesized))
    approvers = approver_role_ids(synthesized)
    policies = synthesized.resources("AWS::IAM::Policy")
    approver_policies = {
        lid
        for lid, p in policies.items()
        if {r["Ref"] for r in p["Properties"]["Roles"]} & approvers
    }
    for owner, statement in statements(synthesized):
        actions = as_list(statement["Action"])
        if owner in approver_policies and actions == ["kms:Sign"]:
            continue  # the approver itself (its key is checked above)
        assert not [a for a in actions if DANGEROUS.match(a)], (owner, actions)
        kms = [a for a in actions if a.startswith("kms:")]
        if kms:
            # Tools and the operator read public keys: GetPublicKey on approval keys only.
            assert kms == ["kms:GetPublicKey"], (owner, kms)
            resources = {r["Fn::GetAtt"][0] for r in as_list(statement["Resource"])}
            assert resources <= key_ids
    function_roles = {
        f["Properties"]["Role"]["Fn::GetAtt"][0]
        for f in synthesized.resources("AWS::Lambda::Function").values()
    }
    verifying = {
        lid
        for lid, p in policies.items()
        if {r["Ref"] for r in p["Properties"]["Roles"]} & function_roles
        and any(
            "kms:GetPublicKey" in as_list(s["Action"])
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        )
    }
    assert len(verifying) == 7  # every tool but the sweeper


def test_each_created_key_has_its_alias_and_the_functions_find_keys_by_it(
    synthesized: Synthesized,
) -> None:
    prefix = f"alias/{synthesized.saga.stack.stack_name}/approval"
    aliases = {
        a["Properties"]["TargetKeyId"]["Fn::GetAtt"][0]: a["Properties"]["AliasName"]
        for a in synthesized.resources("AWS::KMS::Alias").values()
    }
    for key_id, key in keys(synthesized).items():
        tenant, approver = tags(key)["saga:tenant"], tags(key)["saga:approver"]
        generation = int(tags(key)["saga:key-generation"])
        assert aliases[key_id] == approval_key_alias(prefix, tenant, approver, generation)
    assert aliases[next(iter(keys(synthesized)))].startswith(f"{prefix}/")
    assert approval_key_alias(prefix, "acme", "supervisor@acme", 1) == (
        f"{prefix}/acme/supervisor_40acme/1"
    )
    for function in synthesized.resources("AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        if "APPROVAL_KEYS" in variables:
            assert variables["APPROVAL_KEY_ALIASES"] == prefix
            # Generation numbers, not deploy-time ARNs.
            assert json.loads(variables["APPROVAL_KEYS"]) == {
                "acme": {"supervisor@acme": 1},
                "globex": {"ops@globex": 1},
                "hooli": {"cfo@hooli": 1, "controller@hooli": 1},
            }


def test_outputs_name_each_approvers_key_and_role(synthesized: Synthesized) -> None:
    outputs = synthesized.template_json["Outputs"]
    keys_output = json.dumps(outputs["ApprovalKeys"]["Value"])
    roles_output = json.dumps(outputs["ApproverRoles"]["Value"])
    for logical_id in keys(synthesized):
        assert logical_id in keys_output
    for logical_id in synthesized.resources("AWS::IAM::Role"):
        if "ApproverRole" in logical_id:
            assert logical_id in roles_output
    assert '\\"supervisor@acme\\":\\"' in keys_output


def test_rotation_keeps_earlier_keys_verifying_with_nobody_allowed_to_sign(
    variants: Synthesized,
) -> None:
    _, current = key_of(variants, "supervisor@acme", 2)
    _, retired = key_of(variants, "supervisor@acme", 1)
    assert len(signers(current)) == 1
    assert signers(retired) == []
    variable = json.loads(approval_keys_variable(variants))
    # Generation 2 current, generation 1 and the brought retired key retired.
    assert variable["acme"]["supervisor@acme"] == {"current": 2, "retired": [1, RETIRED]}


def test_a_named_principal_signs_instead_of_an_approver_role(variants: Synthesized) -> None:
    _, key = key_of(variants, "manager@acme")
    (signer,) = signers(key)
    # A principal that exists before the deploy is named as it is (KMS can resolve it).
    assert signer["Principal"] == {"AWS": MANAGER_PRINCIPAL}
    assert signer["Condition"] == {"StringEquals": SIGNING}
    roles = [lid for lid in variants.resources("AWS::IAM::Role") if "Manager" in lid]
    assert roles == []


def test_a_brought_key_is_trusted_as_it_is(variants: Synthesized) -> None:
    assert [k for k in keys(variants).values() if tags(k)["saga:approver"] == "auditor@acme"] == []
    variable = json.loads(approval_keys_variable(variants))
    assert variable["acme"]["auditor@acme"] == {"current": BROUGHT, "retired": []}
    granted = {
        r
        for _, s in statements(variants)
        if "kms:GetPublicKey" in as_list(s["Action"])
        for r in as_list(s["Resource"])
        if isinstance(r, str)
    }
    assert granted == {BROUGHT, RETIRED}


@pytest.mark.parametrize(
    ("approval_keys", "message"),
    [
        (
            {"acme/nobody@acme": {}},
            "context 'approval_keys.acme/nobody@acme' names no approver of 'tenants'",
        ),
        (
            {"acme/supervisor@acme": {"key_arn": BROUGHT, "principal": MANAGER_PRINCIPAL}},
            "with 'key_arn' (a key you bring) neither 'principal' nor 'key_generation' applies",
        ),
        (
            {"acme/supervisor@acme": {"key_arn": "alias/mine"}},
            "must be a KMS key ARN",
        ),
        (
            {"acme/supervisor@acme": {"key_generation": 0}},
            "must be a positive integer, got 0",
        ),
    ],
)
def test_approval_key_configuration_errors_name_the_key(
    approval_keys: dict[str, Any], message: str
) -> None:
    context = json.loads((PROJECT_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    with pytest.raises(ConfigError, match=re.escape(message)):
        SagaConfig.from_mapping({**context, "approval_keys": approval_keys})


def test_who_may_assume_an_approver_role_is_configurable_evaluated(variants: Synthesized) -> None:
    """`role_assumed_by` confines the trust to the principals it names (aws:PrincipalArn);
    without it, any principal of the account allowed sts:AssumeRole may (docs/deploy.md)."""
    template = variants.template_json
    policies = stack_policies(template, offline_resolver(template, variants.saga.stack.stack_name))
    [confined] = [lid for lid in policies.roles if "GlobexOpsAtGlobexApproverRole" in lid]
    [default] = [lid for lid in policies.roles if "AcmeSupervisorAtAcmeApproverRole" in lid]

    def assume(role_id: str, caller: str, *, mfa: bool = True) -> Decision:
        role = policies.roles[role_id]
        grants = Grants(
            Principal(caller, "123456789012"),
            [{"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}],
            {role.arn: role.trust},
            frozenset({role.arn}),
        )
        context: dict[str, Any] = {"aws:PrincipalArn": caller, "aws:MultiFactorAuthPresent": mfa}
        return evaluate(grants, Request("sts:AssumeRole", role.arn, context)).decision

    anyone = "arn:aws:iam::123456789012:role/AnyDeveloper"
    assert assume(confined, OPS_PERSON) is Decision.ALLOW
    assert assume(confined, OPS_PERSON, mfa=False) is Decision.IMPLICIT_DENY
    assert assume(confined, anyone) is Decision.IMPLICIT_DENY
    assert assume(default, anyone) is Decision.ALLOW  # the default: the account decides
    # docs/deploy.md says how many approver roles trust the whole account.
    stated = "\n".join(approver_trust_lines(template))
    assert "2 approver role(s), each able to sign approvals with its approver's key; " in stated
    assert "; 1 trust(s) the whole account (the default)" in stated


def test_role_assumed_by_needs_a_created_role() -> None:
    context = json.loads((PROJECT_ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]
    keys = {
        "acme/supervisor@acme": {"principal": MANAGER_PRINCIPAL, "role_assumed_by": [OPS_PERSON]}
    }
    with pytest.raises(ConfigError, match="'role_assumed_by' applies to the approver role"):
        SagaConfig.from_mapping({**context, "approval_keys": keys})
