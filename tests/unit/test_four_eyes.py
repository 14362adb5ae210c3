"""Four eyes (saga.four_eyes, saga.acceptance): above its tenant's threshold a refund needs the
signatures of two distinct approvers over the same digest; every tool counts them the same way.

Signatures are the local keys' (local_aws.approval_keys); public keys come from an in-memory
KMS that counts its reads."""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local_aws.approval_keys import (
    co_sign_locally,
    local_key_arn,
    local_public_key_der,
    sign_locally,
)
from saga.acceptance import accept_finishing, accept_forward, accept_new_case
from saga.approval_keys import ApproverKeys, KmsPublicKeys, PublicKey, forget_public_keys
from saga.approvals import ApprovalVerifier, CaseApprovals, signed_message
from saga.errors import ApprovalInvalid, AuthorizationDenied, InvalidRequest
from saga.four_eyes import (
    FOUR_EYES,
    ONE_APPROVER,
    approval_with,
    approvals_required,
    parse_thresholds,
    recorded_approvals_required,
    signatures_of,
    with_signature,
)
from saga.models import parse_case
from tests.tools_harness import BASE_CASE

CONTROLLER, CFO, OPS = "controller@hooli", "cfo@hooli", "ops@globex"
THRESHOLDS = {"hooli": {"USD": 100_000, "JPY": 150_000}}
TRUSTED = {
    "hooli": {
        CONTROLLER: ApproverKeys(
            local_key_arn("hooli", CONTROLLER, 2), (local_key_arn("hooli", CONTROLLER, 1),)
        ),
        CFO: ApproverKeys(local_key_arn("hooli", CFO)),
    },
    "globex": {OPS: ApproverKeys(local_key_arn("globex", OPS))},
}
KEYS = {
    local_key_arn("hooli", CONTROLLER, 2): ("hooli", CONTROLLER, 2),
    local_key_arn("hooli", CONTROLLER, 1): ("hooli", CONTROLLER, 1),
    local_key_arn("hooli", CFO): ("hooli", CFO, 1),
    local_key_arn("globex", OPS): ("globex", OPS, 1),
}
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SIGNED_AT = "2026-11-30T10:00:00Z"


class CountingKeys:
    def __init__(self) -> None:
        self.reads: list[str] = []

    def public_key(self, key: str) -> PublicKey:
        self.reads.append(key)
        return PublicKey(key, local_public_key_der(*KEYS[key]))


class Records:
    def __init__(self, record: dict[str, Any] | None) -> None:
        self.record = record

    def get(self, case_id: str) -> dict[str, Any] | None:
        return self.record


@pytest.fixture(autouse=True)
def cold_container() -> Iterator[None]:
    forget_public_keys()
    yield
    forget_public_keys()


def verifier(keys: CountingKeys | None = None, *, function: str = "validate") -> ApprovalVerifier:
    return ApprovalVerifier(TRUSTED, keys or CountingKeys(), function, thresholds=THRESHOLDS)


def hooli_case(amount_minor: int = 250_000, currency: str = "USD") -> dict[str, Any]:
    """A hooli case signed by the controller (current key): one signature."""
    case = copy.deepcopy(BASE_CASE)
    case.update(case_id="case-4eyes", tenant_id="hooli")
    case["refund"] = {**case["refund"], "amount_minor": amount_minor, "currency": currency}
    case["approval"]["approved_by"] = CONTROLLER
    return sign_locally(case, signed_at=SIGNED_AT, generation=2)


def approvals(case: dict[str, Any]) -> CaseApprovals:
    return parse_case(case).signed_approvals()


def under_way(case: dict[str, Any], required: int | None) -> dict[str, Any]:
    record = {
        "case_id": case["case_id"],
        "tenant_id": case["tenant_id"],
        "digest": case["approval"]["digest"],
        "outcome": "IN_PROGRESS",
    }
    if required is not None:
        record["approvals_required"] = required
    return record


# --- the rule -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tenant", "currency", "amount", "required"),
    [
        ("hooli", "USD", 100_000, ONE_APPROVER),  # at the threshold: not above it
        ("hooli", "USD", 100_001, FOUR_EYES),
        ("hooli", "USD", 1, ONE_APPROVER),
        ("hooli", "JPY", 150_001, FOUR_EYES),
        ("hooli", "EUR", 1, FOUR_EYES),  # no EUR threshold: fails closed
        ("hooli", "KWD", 5, FOUR_EYES),
        ("acme", "USD", 100_000_000, ONE_APPROVER),  # no thresholds: as ever
        ("globex", "EUR", 99_000_000, ONE_APPROVER),
    ],
)
def test_a_refund_above_its_currencys_threshold_or_in_another_currency_needs_two(
    tenant: str, currency: str, amount: int, required: int
) -> None:
    assert approvals_required(THRESHOLDS, tenant, currency, amount) == required


def test_a_case_record_from_before_four_eyes_needs_one() -> None:
    assert recorded_approvals_required(None) == 1
    assert recorded_approvals_required({"case_id": "c"}) == 1
    assert recorded_approvals_required({"approvals_required": 2}) == 2
    assert recorded_approvals_required({"approvals_required": True}) == 1


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"hooli": {"USD": 0}}', "must be a positive integer of minor units, got 0"),
        ('{"hooli": {"USD": 1.5}}', "got 1.5"),
        ('{"hooli": {"XXX": 10}}', "ISO 4217 code of a circulating currency"),
        ('{"hooli": {}}', "must map currencies"),
        ("[]", "must be a JSON object"),
    ],
)
def test_the_thresholds_variable_is_refused_naming_what_is_wrong(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_thresholds(raw)


# --- the approval's shape ---------------------------------------------------------------------
def test_a_signature_replaces_its_signers_earlier_one_and_is_added_after_the_others() -> None:
    first = {"approved_by": CONTROLLER, "signed_at": "t1", "key_id": "k1", "signature": "s1"}
    again = {**first, "signed_at": "t2", "signature": "s2"}
    second = {"approved_by": CFO, "signed_at": "t3", "key_id": "k3", "signature": "s3"}

    assert with_signature([first], second) == [first, second]
    assert with_signature([first, second], again) == [again, second]
    assert with_signature([first, first], second) == [first, second]  # one per approver
    approval = approval_with(1, "sha256:ab", [first, second])
    assert approval == {"revision": 1, "digest": "sha256:ab", **first, "co_signatures": [second]}
    assert signatures_of(approval) == [first, second]
    # One signer: the approval of §8 as ever, no co_signatures.
    assert list(approval_with(1, "sha256:ab", [first])) == [
        "revision",
        "approved_by",
        "digest",
        "signed_at",
        "key_id",
        "signature",
    ]


def test_a_co_signature_must_carry_its_signature() -> None:
    case = co_sign_locally(hooli_case(), approved_by=CFO, signed_at=SIGNED_AT)
    del case["approval"]["co_signatures"][0]["signature"]
    with pytest.raises(InvalidRequest, match=r"approval\.co_signatures\.0\.signature"):
        parse_case(case)


# --- what ValidateCase accepts ------------------------------------------------------------------
def test_above_the_threshold_one_signature_is_refused_saying_one_of_two() -> None:
    with pytest.raises(ApprovalInvalid) as refused:
        accept_new_case(verifier(), approvals(hooli_case()), started=NOW)
    assert refused.value.message == (
        "case case-4eyes: 1 of 2 approvals from distinct approvers of tenant hooli (signed by "
        "controller@hooli): the refund needs 2; another approver of the tenant signs it too: "
        "`sagactl case approve FILE --as APPROVER` (a proposed case: `--case CASE_ID`)"
    )


def test_two_distinct_approvers_are_accepted_with_both_keys() -> None:
    case = co_sign_locally(hooli_case(), approved_by=CFO, signed_at=SIGNED_AT)
    accepted = accept_new_case(verifier(), approvals(case), started=NOW)
    assert accepted.keys == (local_key_arn("hooli", CONTROLLER, 2), local_key_arn("hooli", CFO))
    assert accepted.required == FOUR_EYES


def test_at_the_threshold_one_signature_is_enough() -> None:
    accepted = accept_new_case(verifier(), approvals(hooli_case(100_000)), started=NOW)
    assert accepted.required == ONE_APPROVER
    assert accepted.keys == (local_key_arn("hooli", CONTROLLER, 2),)


def test_a_currency_without_a_threshold_needs_two_whatever_the_amount() -> None:
    with pytest.raises(ApprovalInvalid, match="1 of 2 approvals"):
        accept_new_case(verifier(), approvals(hooli_case(1, "EUR")), started=NOW)


def test_the_same_approver_twice_counts_once() -> None:
    """The controller signs again as a co-signer, with the same key and with the retired one:
    every signature verifies, and they are still one approver."""
    twice = co_sign_locally(
        hooli_case(), approved_by=CONTROLLER, signed_at="2026-11-30T10:05:00Z", generation=2
    )
    with pytest.raises(ApprovalInvalid, match="1 of 2 approvals"):
        accept_new_case(verifier(), approvals(twice), started=NOW)
    old_key = co_sign_locally(hooli_case(), approved_by=CONTROLLER, generation=1)
    with pytest.raises(ApprovalInvalid, match="1 of 2 approvals"):
        accept_forward(verifier(), approvals(old_key), Records(under_way(old_key, FOUR_EYES)))


def test_a_forged_co_signature_refuses_the_case_even_where_one_would_do() -> None:
    forged = co_sign_locally(hooli_case(), approved_by=CFO, signed_at=SIGNED_AT)
    forged["approval"]["co_signatures"][0]["signed_at"] = "2026-11-30T10:00:01Z"
    with pytest.raises(ApprovalInvalid, match="the signature of 'cfo@hooli' does not verify"):
        accept_new_case(verifier(), approvals(forged), started=NOW)
    small = co_sign_locally(hooli_case(5_000), approved_by=CFO, signed_at=SIGNED_AT)
    small["approval"]["co_signatures"][0]["signature"] = forged["approval"]["co_signatures"][0][
        "signature"
    ]
    with pytest.raises(ApprovalInvalid, match="does not verify"):
        accept_new_case(verifier(), approvals(small), started=NOW)


def test_a_co_signer_who_is_not_the_tenants_approver_is_denied() -> None:
    """The controller's co-signature made with globex's key, and a co-signer of globex."""
    impostor = co_sign_locally(hooli_case(), approved_by=CFO, signer=("globex", OPS))
    with pytest.raises(AuthorizationDenied, match="is a key of 'ops@globex' of tenant 'globex'"):
        accept_new_case(verifier(), approvals(impostor), started=NOW)
    outsider = co_sign_locally(hooli_case(), approved_by=OPS, signer=("globex", OPS))
    with pytest.raises(AuthorizationDenied, match="'ops@globex' may not approve cases for"):
        accept_new_case(verifier(), approvals(outsider), started=NOW)


def test_several_start_deadlines_combine_to_the_earliest() -> None:
    case = sign_locally(
        {**hooli_case(), "approval": {**hooli_case()["approval"]}},
        signed_at=SIGNED_AT,
        generation=2,
        start_by="2026-12-02T00:00:00Z",
    )
    case = co_sign_locally(case, approved_by=CFO, start_by="2026-12-01T00:00:00Z")
    assert approvals(case).start_by() == "2026-12-01T00:00:00Z"
    between = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert accept_new_case(verifier(), approvals(case), started=NOW).required == FOUR_EYES
    with pytest.raises(ApprovalInvalid, match="allowed starting until 2026-12-01T00:00:00Z"):
        accept_new_case(verifier(), approvals(case), started=between)


def test_each_approvers_public_key_is_read_once_per_function() -> None:
    keys = CountingKeys()
    validate, refund = verifier(keys, function="validate"), verifier(keys, function="refund")
    case = co_sign_locally(hooli_case(), approved_by=CFO, signed_at=SIGNED_AT)
    for _ in range(3):
        accept_new_case(validate, approvals(case), started=NOW)
        accept_forward(refund, approvals(case), Records(under_way(case, FOUR_EYES)))
    assert sorted(keys.reads) == sorted(
        [local_key_arn("hooli", CONTROLLER, 2), local_key_arn("hooli", CFO)] * 2
    )


# --- what the tools after it accept ---------------------------------------------------------
def test_forward_tools_count_what_the_case_record_says_not_todays_thresholds() -> None:
    one = hooli_case()
    relaxed = ApprovalVerifier(TRUSTED, CountingKeys(), thresholds={})
    # Accepted with two required: a threshold lowered since changes nothing.
    with pytest.raises(ApprovalInvalid, match="1 of 2 approvals"):
        accept_forward(relaxed, approvals(one), Records(under_way(one, FOUR_EYES)))
    # Accepted with one (before four eyes, or below the threshold then): never stranded.
    accepted = accept_forward(verifier(), approvals(one), Records(under_way(one, None)))
    assert accepted.required == ONE_APPROVER


def test_finishing_tools_count_todays_thresholds_without_a_record_else_accept_on_it() -> None:
    one = hooli_case()
    with pytest.raises(ApprovalInvalid, match="1 of 2 approvals"):
        accept_finishing(verifier(), approvals(one), Records(None))
    on_record = accept_finishing(verifier(), approvals(one), Records(under_way(one, FOUR_EYES)))
    assert on_record.on_record and on_record.required == FOUR_EYES


# --- one key under two names is one approver (issue 39) ----------------------------------------
def _kms_signature(client: Any, case: dict[str, Any], approver: str, key: str) -> dict[str, Any]:
    """`approver`'s signature fields over the case's digest, made by KMS Sign with `key`."""
    approval = case["approval"]
    message = signed_message(
        case_id=case["case_id"],
        tenant_id=case["tenant_id"],
        digest=approval["digest"],
        revision=approval["revision"],
        approved_by=approver,
        signed_at=SIGNED_AT,
    )
    signed = client.sign(
        KeyId=key, Message=message, MessageType="RAW", SigningAlgorithm="ECDSA_SHA_256"
    )
    signature = base64.b64encode(signed["Signature"]).decode("ascii")
    return {"approved_by": approver, "signed_at": SIGNED_AT, "key_id": key, "signature": signature}


def test_a_multi_region_key_and_its_replica_are_one_approver() -> None:
    """Two approvers configured with a multi-Region key and its replica (two ARNs, one key
    material, as the local AWS models ReplicateKey): both signatures verify, one person made
    them, and they count once."""
    with mock_aws():
        east = boto3.client("kms", region_name="us-east-1")
        west = boto3.client("kms", region_name="eu-west-1")
        created = east.create_key(
            KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY", MultiRegion=True
        )["KeyMetadata"]
        primary = created["Arn"]
        replicated = east.replicate_key(KeyId=created["KeyId"], ReplicaRegion="eu-west-1")
        replica = replicated["ReplicaKeyMetadata"]["Arn"]
        assert replica != primary and replica.endswith(created["KeyId"])
        trusted = {"hooli": {CONTROLLER: ApproverKeys(primary), CFO: ApproverKeys(replica)}}
        validate = ApprovalVerifier(
            trusted, KmsPublicKeys(lambda: east), "validate", thresholds=THRESHOLDS
        )
        case = hooli_case()
        signatures = [
            _kms_signature(east, case, CONTROLLER, primary),
            _kms_signature(west, case, CFO, replica),
        ]
        case["approval"] = approval_with(1, case["approval"]["digest"], signatures)
        with pytest.raises(ApprovalInvalid) as refused:
            accept_new_case(validate, approvals(case), started=NOW)
    assert refused.value.message.startswith(
        "case case-4eyes: 1 of 2 approvals from distinct approvers of tenant hooli (signed by "
        "controller@hooli, cfo@hooli)"
    )


IMPORTED = "arn:aws:kms:us-east-1:123456789012:key/0badc0de-0000-4000-8000-000000000001"


class SharedMaterialKeys(CountingKeys):
    """cfo's configured key, another key id holding the controller's key material (imported
    twice: nothing at synth can see it)."""

    def public_key(self, key: str) -> PublicKey:
        if key == IMPORTED:
            return PublicKey(key, local_public_key_der("hooli", CONTROLLER, 2))
        return super().public_key(key)


def test_two_key_ids_of_one_key_material_are_one_approver_whoever_signs_first() -> None:
    trusted = {**TRUSTED, "hooli": {**TRUSTED["hooli"], CFO: ApproverKeys(IMPORTED)}}
    validate = ApprovalVerifier(trusted, SharedMaterialKeys(), "validate", thresholds=THRESHOLDS)
    controller_first = co_sign_locally(
        hooli_case(),
        approved_by=CFO,
        signed_at=SIGNED_AT,
        generation=2,
        signer=("hooli", CONTROLLER),
    )
    controller_first["approval"]["co_signatures"][0]["key_id"] = IMPORTED
    with pytest.raises(ApprovalInvalid, match="1 of 2 approvals"):
        accept_new_case(validate, approvals(controller_first), started=NOW)


def test_one_approvers_key_generations_still_count_once_and_two_people_twice() -> None:
    """Counting public keys does not split one approver (two generations) nor join two."""
    old_and_new = co_sign_locally(hooli_case(), approved_by=CONTROLLER, generation=1)
    with pytest.raises(ApprovalInvalid, match="1 of 2 approvals"):
        accept_forward(
            verifier(), approvals(old_and_new), Records(under_way(old_and_new, FOUR_EYES))
        )
    both = co_sign_locally(old_and_new, approved_by=CFO, signed_at=SIGNED_AT)
    accepted = accept_forward(verifier(), approvals(both), Records(under_way(both, FOUR_EYES)))
    assert accepted.keys == (local_key_arn("hooli", CONTROLLER, 2), local_key_arn("hooli", CFO))
