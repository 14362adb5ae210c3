"""`approval_thresholds` (stacks/four_eyes_config.py): what synth refuses, with the key's name,
and what the functions and the stack's outputs carry."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from offline_iam.evaluate import Decision, Grants, Principal, Request, evaluate
from offline_iam.stack_policies import offline_resolver, stack_policies
from saga.settings import ConfigurationError, ValidateCaseEnvironment
from stacks.config import ConfigError, SagaConfig
from tests.infra.conftest import four_eyes_own_principals
from tests.infra.synth import Synthesized

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
DEPLOY_MD = CDK_JSON.parent / "docs" / "deploy.md"
BROUGHT = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555566667777"
PRINCIPAL = "arn:aws:iam::123456789012:role/finance-signer"
ACME_USD_1, ACME_USD_0 = '{"acme":{"USD":1}}', '{"acme":{"USD":0}}'


def _context(**changes: Any) -> dict[str, Any]:
    context = copy.deepcopy(dict(json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]))
    context.update(changes)
    return context


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        (
            {"hooli": {"USD": 0}},
            "context 'approval_thresholds.hooli.USD' must be a positive integer of minor units, "
            "got 0",
        ),
        ({"hooli": {"USD": "1000"}}, "got '1000'"),
        ({"hooli": {"USD": 99.5}}, "got 99.5"),
        ({"hooli": {"USD": True}}, "got True"),
        (
            {"hooli": {"usd": 100}},
            "context 'approval_thresholds.hooli': 'usd' must be the ISO 4217 code of a "
            "circulating currency",
        ),
        ({"hooli": {"XTS": 100}}, "'XTS' must be the ISO 4217 code"),
        ({"hooli": {}}, "context 'approval_thresholds.hooli' must be a non-empty object"),
        (
            {"initech": {"USD": 100}},
            "context 'approval_thresholds.initech' names no tenant of 'tenants'",
        ),
        (
            {"acme": {"USD": 100}},
            "context 'approval_thresholds.acme': four eyes needs at least 2 approvers of the "
            "tenant, 'tenants.acme' has 1",
        ),
        ([], "context 'approval_thresholds' must be an object"),
    ],
)
def test_synth_refuses_thresholds_four_eyes_cannot_honour(thresholds: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        SagaConfig.from_mapping(_context(approval_thresholds=thresholds))


def test_a_tenant_listing_one_approver_twice_has_one() -> None:
    tenants = {**_context()["tenants"], "hooli": ["cfo@hooli", "cfo@hooli"]}
    with pytest.raises(ConfigError, match=re.escape("'tenants.hooli' has 1")):
        SagaConfig.from_mapping(_context(tenants=tenants))


@pytest.mark.parametrize(
    ("approval_keys", "shared"),
    [
        (
            {
                "hooli/cfo@hooli": {"key_arn": BROUGHT},
                "hooli/controller@hooli": {"key_arn": BROUGHT},
            },
            f"the key {BROUGHT}",
        ),
        (
            {
                "hooli/cfo@hooli": {"key_arn": BROUGHT},
                "hooli/controller@hooli": {"retired_key_arns": [BROUGHT]},
            },
            f"the key {BROUGHT}",
        ),
        (
            {
                "hooli/cfo@hooli": {"principal": PRINCIPAL},
                "hooli/controller@hooli": {"principal": PRINCIPAL},
            },
            f"the signing principal {PRINCIPAL}",
        ),
    ],
)
def test_two_approvers_of_one_tenant_may_not_share_a_key_or_a_signer(
    approval_keys: dict[str, Any], shared: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        SagaConfig.from_mapping(_context(approval_keys=approval_keys))
    assert str(refused.value) == (
        f"context 'approval_keys': 'controller@hooli' and 'cfo@hooli' of tenant 'hooli' share "
        f"{shared}: approvals are counted by key, so one person could count as two approvers; "
        "give each approver their own key and principal"
    )


def test_approvers_of_different_tenants_may_share_a_principal() -> None:
    """One person may approve for two tenants: each tenant still counts them once."""
    config = SagaConfig.from_mapping(
        _context(
            approval_keys={
                "acme/supervisor@acme": {"principal": PRINCIPAL},
                "hooli/cfo@hooli": {"principal": PRINCIPAL},
            }
        )
    )
    assert config.approver_keys("hooli", "cfo@hooli").principal == PRINCIPAL


def test_a_function_refuses_thresholds_for_a_tenant_with_fewer_than_two_approvers() -> None:
    """The same rule where the environment is read (a function deployed by hand)."""
    environment = {
        "POWERTOOLS_SERVICE_NAME": "validate-case",
        "POWERTOOLS_METRICS_NAMESPACE": "ns",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "CASES_TABLE": "cases",
        "DRAFTS_TABLE": "drafts",
        "LEGACY_DRAFTS_TABLE": "legacy-drafts",
        "APPROVAL_KEYS": '{"acme":{"a@acme":{"current":"arn:k1"}}}',
        "REFUND_CEILINGS": "{}",
    }
    with pytest.raises(ConfigurationError, match=r"APPROVAL_THRESHOLDS\['acme'\]: four eyes"):
        ValidateCaseEnvironment.from_env(
            {**environment, "APPROVAL_THRESHOLDS": '{"acme":{"USD":1}}'}
        )
    with pytest.raises(ConfigurationError, match="APPROVAL_THRESHOLDS is required"):
        ValidateCaseEnvironment.from_env(environment)
    with pytest.raises(ConfigurationError, match="positive integer of minor units"):
        ValidateCaseEnvironment.from_env(
            {**environment, "APPROVAL_THRESHOLDS": '{"acme":{"USD":0}}'}
        )


def test_every_verifying_function_and_the_outputs_carry_the_thresholds(
    synthesized: Synthesized,
) -> None:
    expected = {"hooli": {"EUR": 100_000, "GBP": 80_000, "JPY": 150_000, "USD": 100_000}}
    verifying = [
        function["Properties"]["Environment"]["Variables"]
        for function in synthesized.resources("AWS::Lambda::Function").values()
        if "APPROVAL_KEYS" in function["Properties"]["Environment"]["Variables"]
    ]
    assert len(verifying) == 7  # the tools but the sweeper
    for variables in verifying:
        assert json.loads(variables["APPROVAL_THRESHOLDS"]) == expected
    output = synthesized.template_json["Outputs"]["ApprovalThresholds"]["Value"]
    assert json.loads(output) == expected


# --- one person must never hold both signatures (issue 39) ------------------------------------
ACCOUNT = "123456789012"
CONTROLLER_PERSON = f"arn:aws:iam::{ACCOUNT}:user/hooli-controller"
CFO_PERSON = f"arn:aws:iam::{ACCOUNT}:user/hooli-cfo"


def _hooli_keys(controller: dict[str, Any], cfo: dict[str, Any]) -> dict[str, Any]:
    return {"hooli/controller@hooli": controller, "hooli/cfo@hooli": cfo}


def _prod(**changes: Any) -> dict[str, Any]:
    return _context(sandbox=False, stage="prod", **changes)


def test_each_four_eyes_approver_naming_their_own_principal_synthesizes_in_prod() -> None:
    config = SagaConfig.from_mapping(
        _prod(
            approval_keys=_hooli_keys(
                {"role_assumed_by": [CONTROLLER_PERSON]}, {"role_assumed_by": [CFO_PERSON]}
            )
        )
    )
    assert config.account_wide_four_eyes_approvers() == []


@pytest.mark.parametrize(
    ("controller", "cfo", "shared"),
    [
        # the same person in both lists
        (
            {"role_assumed_by": [CONTROLLER_PERSON, CFO_PERSON]},
            {"role_assumed_by": [CFO_PERSON]},
            CFO_PERSON,
        ),
        # the same user, spelt in another case and with a path
        (
            {"role_assumed_by": [CONTROLLER_PERSON]},
            {"role_assumed_by": [f"arn:aws:iam::{ACCOUNT}:user/people/Hooli-Controller"]},
            CONTROLLER_PERSON,
        ),
        # one approver's principal may assume the other's role
        (
            {"principal": CFO_PERSON},
            {"role_assumed_by": [CFO_PERSON]},
            CFO_PERSON,
        ),
        # the account's root stands for every principal of the account
        (
            {"role_assumed_by": [CONTROLLER_PERSON]},
            {"role_assumed_by": [f"arn:aws:iam::{ACCOUNT}:root"]},
            CONTROLLER_PERSON,
        ),
        (
            {"principal": f"arn:aws:iam::{ACCOUNT}:root"},
            {"role_assumed_by": [CFO_PERSON]},
            f"arn:aws:iam::{ACCOUNT}:root",
        ),
    ],
)
@pytest.mark.parametrize("sandbox", [True, False])
def test_synth_refuses_a_principal_who_could_sign_for_two_approvers_of_a_four_eyes_tenant(
    controller: dict[str, Any], cfo: dict[str, Any], shared: str, sandbox: bool
) -> None:
    context = _context(sandbox=sandbox, approval_keys=_hooli_keys(controller, cfo))
    with pytest.raises(ConfigError) as refused:
        SagaConfig.from_mapping(context)
    message = str(refused.value)
    assert message.startswith(
        "context 'approval_keys': 'cfo@hooli' and 'controller@hooli' of tenant 'hooli' (four "
        "eyes above 'approval_thresholds.hooli') may both be signed for by "
    ), message
    assert shared in message or shared.lower() in message.lower()
    assert "one person would count as two approvers" in message


def test_a_user_and_a_role_of_one_name_are_two_principals() -> None:
    SagaConfig.from_mapping(
        _prod(
            approval_keys=_hooli_keys(
                {"role_assumed_by": [f"arn:aws:iam::{ACCOUNT}:user/finance"]},
                {"role_assumed_by": [f"arn:aws:iam::{ACCOUNT}:role/finance"]},
            )
        )
    )


def test_one_approver_listing_a_principal_twice_is_not_two_people() -> None:
    SagaConfig.from_mapping(
        _prod(
            approval_keys=_hooli_keys(
                {
                    "role_assumed_by": [
                        CONTROLLER_PERSON,
                        CONTROLLER_PERSON.replace("hooli-", "Hooli-"),
                    ]
                },
                {"principal": CFO_PERSON},
            )
        )
    )


@pytest.mark.parametrize(
    "approval_keys",
    [
        {},  # the shipped default: both roles trust the whole account
        _hooli_keys({"role_assumed_by": [CONTROLLER_PERSON]}, {}),
        _hooli_keys({}, {"principal": CFO_PERSON}),
    ],
)
def test_the_account_wide_default_is_refused_for_four_eyes_without_the_sandbox(
    approval_keys: dict[str, Any],
) -> None:
    with pytest.raises(ConfigError) as refused:
        SagaConfig.from_mapping(_prod(approval_keys=approval_keys))
    message = str(refused.value)
    assert message.startswith("context 'approval_keys.\"hooli/"), message
    assert (
        "names nobody in 'role_assumed_by': tenant 'hooli' has four-eyes thresholds, and any "
        "principal of the account allowed sts:AssumeRole could assume this approver's role "
        "and another's, and count as two approvers"
    ) in message
    assert "only with 'sandbox' on and the sandbox payments provider" in message


def test_the_account_wide_default_is_allowed_in_the_sandbox_and_named() -> None:
    config = SagaConfig.from_mapping(_context())
    assert config.sandbox and config.payments == "sandbox"
    assert config.account_wide_four_eyes_approvers() == [
        ("hooli", "cfo@hooli"),
        ("hooli", "controller@hooli"),
    ]


def test_the_account_wide_default_is_refused_for_four_eyes_with_stripe_even_in_the_sandbox() -> (
    None
):
    """Real refunds: the sandbox tables deployed beside them do not make the default safe."""
    stripe = {"payments": "stripe", "stripe_secret": "saga/stripe-api-key"}
    assert SagaConfig.from_mapping(_context(payments="sandbox")).payments == "sandbox"
    with pytest.raises(ConfigError) as refused:
        SagaConfig.from_mapping(_context(**stripe))
    assert "only with 'sandbox' on and the sandbox payments provider" in str(refused.value)
    named = SagaConfig.from_mapping(_context(**stripe, approval_keys=four_eyes_own_principals()))
    assert named.payments == "stripe" and named.account_wide_four_eyes_approvers() == []


def test_tenants_without_thresholds_keep_the_account_wide_default_in_prod() -> None:
    keys = _hooli_keys({"role_assumed_by": [CONTROLLER_PERSON]}, {"role_assumed_by": [CFO_PERSON]})
    config = SagaConfig.from_mapping(_prod(approval_keys=keys))
    assert config.approver_keys("acme", "supervisor@acme").role_assumed_by == ()


@pytest.mark.parametrize("field", ["principal", "role_assumed_by"])
def test_a_session_arn_is_refused_it_never_equals_the_principal_arn(field: str) -> None:
    session = f"arn:aws:sts::{ACCOUNT}:assumed-role/finance/alice"
    value: Any = session if field == "principal" else [session]
    with pytest.raises(ConfigError, match=re.escape("got the session ARN")):
        SagaConfig.from_mapping(_context(approval_keys={"acme/supervisor@acme": {field: value}}))


REPLICA = BROUGHT.replace("us-east-1", "eu-west-1")
MRK = "arn:aws:kms:us-east-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab"


@pytest.mark.parametrize(
    ("controller", "cfo", "key_id"),
    [
        ({"key_arn": MRK}, {"key_arn": MRK.replace("us-east-1", "eu-west-1")}, MRK[-36:]),
        ({"key_arn": BROUGHT}, {"retired_key_arns": [REPLICA]}, BROUGHT[-36:]),
        (
            {"retired_key_arns": [MRK]},
            {"key_arn": MRK.replace("us-east-1", "ap-south-1")},
            MRK[-36:],
        ),
    ],
)
def test_synth_refuses_two_approvers_whose_keys_share_a_key_id(
    controller: dict[str, Any], cfo: dict[str, Any], key_id: str
) -> None:
    """A multi-Region key and its replica: two ARNs, one key id, one key material."""
    with pytest.raises(ConfigError) as refused:
        SagaConfig.from_mapping(_context(approval_keys=_hooli_keys(controller, cfo)))
    message = str(refused.value)
    assert message.startswith(
        "context 'approval_keys': 'controller@hooli' and 'cfo@hooli' of tenant 'hooli' share "
        f"the key id {key_id} ("
    ), message
    assert "one key under two names (a multi-Region key and its replica)" in message


# --- proven over the synthesized trust policies --------------------------------------------------
EVERYONE_ASSUMES = {"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}


def _who_assumes(synth: Synthesized, account: str, candidates: list[str]) -> dict[str, set[str]]:
    """Per candidate principal (allowed sts:AssumeRole on everything by its own policies, with
    MFA): the four-eyes approvers whose approver role IAM lets it assume, evaluated over the
    synthesized trust policies (offline_iam) deployed in `account`."""
    template = synth.template_json
    resolver = offline_resolver(template, synth.saga.stack.stack_name, account_id=account)
    policies = stack_policies(template, resolver)
    roles = synth.saga.stack.approval_keys.approvers
    four_eyes = synth.saga.config.approval_thresholds
    assumed: dict[str, set[str]] = {caller: set() for caller in candidates}
    for tenant in four_eyes:
        for approver, refs in roles[tenant].items():
            assert refs.role is not None
            [role] = [r for lid, r in policies.roles.items() if lid == synth.logical_id(refs.role)]
            for caller in candidates:
                grants = Grants(
                    Principal(caller, caller.split(":")[4]),
                    [EVERYONE_ASSUMES],
                    {role.arn: role.trust},
                    frozenset({role.arn}),
                )
                context: dict[str, Any] = {
                    "aws:PrincipalArn": caller,
                    "aws:MultiFactorAuthPresent": True,
                }
                verdict = evaluate(grants, Request("sts:AssumeRole", role.arn, context))
                if verdict.decision is Decision.ALLOW:
                    assumed[caller].add(f"{tenant}/{approver}")
    return assumed


def test_no_principal_may_assume_two_approver_roles_of_a_four_eyes_tenant_evaluated(
    synthesized_without_sandbox: Synthesized,
) -> None:
    """The prod-like stack, each approver naming their own principal as docs/deploy.md shows:
    each person assumes their own role and no other; an administrator none."""
    keys = four_eyes_own_principals()
    people = {arn: name for name, spec in keys.items() for arn in spec["role_assumed_by"]}
    account = next(iter(people)).split(":")[4]
    admin = f"arn:aws:iam::{account}:role/Administrator"
    outsider = "arn:aws:iam::444455556666:user/controller@hooli"  # another account's namesake
    assumed = _who_assumes(synthesized_without_sandbox, account, [*people, admin, outsider])
    assert assumed == {
        **{arn: {name} for arn, name in people.items()},
        admin: set(),
        outsider: set(),
    }
    # docs/deploy.md and the README show exactly this configuration.
    assert json.dumps({"approval_keys": keys}, indent=2) in DEPLOY_MD.read_text(encoding="utf-8")
    readme = (CDK_JSON.parent / "README.md").read_text(encoding="utf-8")
    shown = readme.split("**Four eyes means two people.**", 1)[1].split("```json\n", 1)[1]
    assert json.loads("{" + shown.split("```", 1)[0] + "}") == {"approval_keys": keys}


def test_the_sandbox_default_lets_one_principal_assume_both_and_synth_says_so(
    synthesized: Synthesized,
) -> None:
    """What the warning is about, evaluated: any principal of the account assumes both."""
    admin = "arn:aws:iam::123456789012:role/Administrator"
    assert _who_assumes(synthesized, "123456789012", [admin]) == {
        admin: {"hooli/cfo@hooli", "hooli/controller@hooli"}
    }
    warnings = Annotations.from_stack(synthesized.saga.stack).find_warning("*", Match.any_value())
    texts = [str(w.entry.data) for w in warnings]
    assert texts == [
        "Four eyes of tenant hooli is not two people: the approver role of cfo@hooli and of "
        "controller@hooli trusts the whole account, so one principal allowed sts:AssumeRole (an "
        "administrator) may assume two approver roles and sign a refund above the threshold "
        "alone. Accepted only because 'sandbox' is on with the sandbox payments provider; before "
        "real money moves, name each approver's own principal "
        '(approval_keys."hooli/<approver>".role_assumed_by, docs/deploy.md). '
        "[ack: saga:four-eyes-account-trust:hooli]"
    ]


def test_a_prod_stack_gives_no_four_eyes_warning(synthesized_without_sandbox: Synthesized) -> None:
    warnings = Annotations.from_stack(synthesized_without_sandbox.saga.stack).find_warning(
        "*", Match.any_value()
    )
    assert not [w for w in warnings if "Four eyes" in str(w.entry.data)]
