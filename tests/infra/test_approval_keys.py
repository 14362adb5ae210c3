"""The approval keys in the template: one ECC signing key per approver, whose key policy lets
exactly that approver sign, and no principal of the saga itself able to sign or to become an
approver (docs/design.md §9)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from stacks.config import ConfigError, SagaConfig
from stacks.constructs.approvals import KEY_ADMINISTRATION_ACTIONS
from stacks.saga_stack import PROJECT_ROOT
from tests.infra.synth import Synthesized, synthesize

BROUGHT = "arn:aws:kms:us-east-1:123456789012:key/1111aaaa-2222-3333-4444-555566667777"
RETIRED = "arn:aws:kms:us-east-1:123456789012:key/0000aaaa-2222-3333-4444-555566667777"
MANAGER_PRINCIPAL = "arn:aws:iam::123456789012:role/AcmeManager"
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
        "approval_keys": {
            "acme/supervisor@acme": {"key_generation": 2, "retired_key_arns": [RETIRED]},
            "acme/manager@acme": {"principal": MANAGER_PRINCIPAL},
            "acme/auditor@acme": {"key_arn": BROUGHT},
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


def signers(key: dict[str, Any]) -> list[Any]:
    """The principals of the key policy statements that allow kms:Sign."""
    return [
        statement["Principal"]["AWS"]
        for statement in key["Properties"]["KeyPolicy"]["Statement"]
        if "kms:Sign" in as_list(statement["Action"])
    ]


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
    for key in keys(synthesized).values():
        props = key["Properties"]
        assert (props["KeySpec"], props["KeyUsage"]) == ("ECC_NIST_P256", "SIGN_VERIFY")
        (signer,) = signers(key)
        role = roles[signer["Fn::GetAtt"][0]]
        (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Condition"] == {"Bool": {"aws:MultiFactorAuthPresent": "true"}}
        assert ":root" in json.dumps(trust["Principal"])
        (account,) = [
            s for s in props["KeyPolicy"]["Statement"] if "kms:Sign" not in as_list(s["Action"])
        ]
        # The account administers the key and reads its public key: nothing that signs, and no
        # wildcard that would (CDK's default key policy gives the root kms:*).
        assert sorted(account["Action"]) == sorted(KEY_ADMINISTRATION_ACTIONS)
        assert not [a for a in account["Action"] if "*" in a or a in ("kms:Sign", "kms:Verify")]
        assert "kms:CreateGrant" not in account["Action"]


def test_no_principal_of_the_saga_can_sign_or_become_an_approver(
    synthesized: Synthesized,
) -> None:
    key_ids = set(keys(synthesized))
    for owner, statement in statements(synthesized):
        actions = as_list(statement["Action"])
        assert not [a for a in actions if DANGEROUS.match(a)], (owner, actions)
        kms = [a for a in actions if a.startswith("kms:")]
        if kms:
            # The tools read public keys: GetPublicKey on the approval keys, nothing else.
            assert kms == ["kms:GetPublicKey"], (owner, kms)
            resources = {r["Fn::GetAtt"][0] for r in as_list(statement["Resource"])}
            assert resources == key_ids
    verifying = {
        lid for lid, s in statements(synthesized) if "kms:GetPublicKey" in as_list(s["Action"])
    }
    assert len(verifying) == 7  # every tool but the sweeper


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
    current_id, current = key_of(variants, "supervisor@acme", 2)
    retired_id, retired = key_of(variants, "supervisor@acme", 1)
    assert len(signers(current)) == 1
    assert signers(retired) == []
    variable = json.loads(approval_keys_variable(variants).replace("<", "").replace(">", ""))
    assert variable["acme"]["supervisor@acme"] == {
        "current": current_id,
        "retired": [retired_id, RETIRED],
    }


def test_a_named_principal_signs_instead_of_an_approver_role(variants: Synthesized) -> None:
    _, key = key_of(variants, "manager@acme")
    assert signers(key) == [MANAGER_PRINCIPAL]
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
