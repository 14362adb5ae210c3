"""saga.approvals: which signatures the tools accept, which they refuse and with what error.

Signatures are made here with the local keys (local_aws.approval_keys, what moto's KMS signs
with in the local AWS); public keys come from an in-memory source that counts its reads."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from local_aws.approval_keys import local_key_arn, local_public_key_der, sign_locally
from saga.acceptance import accept_finishing, accept_forward, accept_new_case
from saga.approval_keys import (
    ApproverKeys,
    PublicKey,
    approval_key_alias,
    forget_public_keys,
    parse_trusted_keys,
)
from saga.approvals import ApprovalVerifier, CaseApprovals, signed_message
from saga.errors import ActionSettled, ApprovalInvalid, AuthorizationDenied
from saga.models import parse_case
from tests.tools_harness import BASE_CASE

SUPERVISOR, MANAGER, OPS = "supervisor@acme", "manager@acme", "ops@globex"
TRUSTED = {
    "acme": {
        SUPERVISOR: ApproverKeys(
            local_key_arn("acme", SUPERVISOR, 2), (local_key_arn("acme", SUPERVISOR, 1),)
        ),
        MANAGER: ApproverKeys(local_key_arn("acme", MANAGER)),
    },
    "globex": {OPS: ApproverKeys(local_key_arn("globex", OPS))},
}
# Which local key each ARN above is: (tenant, approver, generation).
KEYS = {
    local_key_arn("acme", SUPERVISOR, 2): ("acme", SUPERVISOR, 2),
    local_key_arn("acme", SUPERVISOR, 1): ("acme", SUPERVISOR, 1),
    local_key_arn("acme", MANAGER): ("acme", MANAGER, 1),
    local_key_arn("globex", OPS): ("globex", OPS, 1),
}
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PREFIX = "alias/ReplacementOrderSaga-dev/approval"
# The same keys as the stack configures them: created keys by generation, found by alias.
BY_ALIAS = parse_trusted_keys(
    {"acme": {SUPERVISOR: 2, MANAGER: 1}, "globex": {OPS: 1}}, alias_prefix=PREFIX
)


ALIASES = {
    approval_key_alias(PREFIX, tenant, approver, generation): arn
    for arn, (tenant, approver, generation) in KEYS.items()
}


class CountingKeys:
    """KMS's GetPublicKey in memory: a key by ARN or by alias (answered with the key's ARN)."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def public_key(self, key: str) -> PublicKey:
        self.reads.append(key)
        arn = ALIASES.get(key, key)
        return PublicKey(arn, local_public_key_der(*KEYS[arn]))


class Records:
    def __init__(self, record: dict[str, Any] | None) -> None:
        self.record = record
        self.reads = 0

    def get(self, case_id: str) -> dict[str, Any] | None:
        self.reads += 1
        return self.record


@pytest.fixture(autouse=True)
def cold_container() -> Iterator[None]:
    forget_public_keys()
    yield
    forget_public_keys()


def verifier(keys: CountingKeys | None = None, function: str = "validate") -> ApprovalVerifier:
    return ApprovalVerifier(TRUSTED, keys or CountingKeys(), function=function, thresholds={})


def signed(
    *, approver: str = SUPERVISOR, generation: int = 2, tenant: str = "acme", **kwargs: Any
) -> dict[str, Any]:
    case = {**BASE_CASE, "tenant_id": tenant}
    case["approval"] = {**case["approval"], "approved_by": approver}
    return sign_locally(case, generation=generation, signed_at="2026-11-30T10:00:00Z", **kwargs)


def forward(verifier: ApprovalVerifier, approval: CaseApprovals) -> tuple[str, ...]:
    """accept_forward for a case whose record says it is under way (its signature is the test):
    the keys it was accepted on."""
    return accept_forward(verifier, approval, Records(under_way(approval))).keys


def under_way(approval: CaseApprovals) -> dict[str, Any]:
    return {
        "case_id": approval.case_id,
        "tenant_id": approval.tenant_id,
        "digest": approval.digest,
        "outcome": "IN_PROGRESS",
    }


def approval_of(case: Mapping[str, Any]) -> CaseApprovals:
    return parse_case(dict(case)).signed_approvals()


def moved(approvals: CaseApprovals, **changes: Any) -> CaseApprovals:
    """The (one) signature with `changes`, as a forger would present it."""
    return dataclasses.replace(
        approvals, signatures=(dataclasses.replace(approvals.first, **changes),)
    )


def test_the_signed_message_is_the_canonical_json_of_the_signed_fields() -> None:
    message = signed_message(
        case_id="c-1",
        tenant_id="acme",
        digest="sha256:ab",
        revision=2,
        approved_by="supervisor@acme",
        signed_at="2026-11-30T10:00:00Z",
    )
    assert message == (
        b'{"approved_by":"supervisor@acme","case_id":"c-1","digest":"sha256:ab","revision":2,'
        b'"signed_at":"2026-11-30T10:00:00Z","tenant_id":"acme"}'
    )
    with_deadline = signed_message(
        case_id="c-1",
        tenant_id="acme",
        digest="sha256:ab",
        revision=2,
        approved_by="supervisor@acme",
        signed_at="2026-11-30T10:00:00Z",
        start_by="2026-12-01T00:00:00Z",
    )
    assert b'"signed_at":"2026-11-30T10:00:00Z","start_by":"2026-12-01T00:00:00Z"' in with_deadline


def test_a_valid_signature_is_accepted_and_names_the_key() -> None:
    approval = approval_of(signed())
    assert accept_new_case(verifier(), approval, started=NOW).keys == (
        local_key_arn("acme", SUPERVISOR, 2),
    )
    assert forward(verifier(), approval) == (local_key_arn("acme", SUPERVISOR, 2),)


@pytest.mark.parametrize(
    "missing", [("signature",), ("key_id",), ("signed_at",), ("signature", "key_id", "signed_at")]
)
def test_an_unsigned_approval_is_invalid_and_says_how_to_approve(missing: tuple[str, ...]) -> None:
    case = signed()
    for name in missing:
        del case["approval"][name]
    with pytest.raises(ApprovalInvalid) as refused:
        forward(verifier(), approval_of(case))
    named = [name for name in ("signed_at", "key_id", "signature") if name in missing]
    assert refused.value.message == (
        f"case case-0001: the approval is not signed (no {', '.join(named)}); sign it with "
        "`sagactl case approve FILE`"
    )


@pytest.mark.parametrize(
    "signature",
    [
        "bm90IGEgc2lnbmF0dXJl",  # base64 of "not a signature"
        base64.b64encode(b"\x30\x06\x02\x01\x01\x02\x01\x01").decode(),  # r = s = 1
        "!!!not base64!!!",
    ],
)
def test_a_made_up_signature_is_invalid(signature: str) -> None:
    case = signed()
    case["approval"]["signature"] = signature
    with pytest.raises(ApprovalInvalid, match="sagactl case approve FILE"):
        accept_new_case(verifier(), approval_of(case), started=NOW)


@pytest.mark.parametrize(
    "move",
    [
        pytest.param(lambda a: moved(a, case_id="case-0002"), id="another case"),
        pytest.param(lambda a: moved(a, revision=2), id="another revision"),
        pytest.param(lambda a: moved(a, digest="sha256:" + "0" * 64), id="other parameters"),
        pytest.param(lambda a: moved(a, signed_at="2026-11-30T10:00:01Z"), id="another time"),
    ],
)
def test_a_valid_signature_moved_elsewhere_does_not_verify(move: Any) -> None:
    approval = move(approval_of(signed()))
    with pytest.raises(ApprovalInvalid, match="does not verify over this case"):
        forward(verifier(), approval)


def test_a_signature_moved_to_another_tenant_is_denied() -> None:
    elsewhere = moved(approval_of(signed()), tenant_id="globex")
    with pytest.raises(AuthorizationDenied, match="'supervisor@acme' may not approve cases for"):
        forward(verifier(), elsewhere)


def test_one_approvers_signature_presented_as_anothers_is_denied() -> None:
    """The manager signs an approval that names the supervisor, with the manager's own key."""
    by_manager = approval_of(signed(approver=SUPERVISOR, signer=("acme", MANAGER), generation=1))
    # With the manager's key id: the key is not the supervisor's.
    with pytest.raises(AuthorizationDenied) as by_key:
        forward(verifier(), by_manager)
    assert "is a key of 'manager@acme' of tenant 'acme', not a key of 'supervisor@acme'" in (
        by_key.value.message
    )
    # With the supervisor's key id: the signature is the manager's.
    presented = moved(by_manager, key_id=local_key_arn("acme", SUPERVISOR, 2))
    with pytest.raises(AuthorizationDenied, match="signed by 'manager@acme' of tenant 'acme'"):
        forward(verifier(), presented)


def test_a_signer_of_another_tenant_is_denied() -> None:
    by_globex = approval_of(signed(signer=("globex", OPS), generation=1))
    with pytest.raises(AuthorizationDenied, match="of tenant 'globex', not a key of"):
        accept_new_case(verifier(), by_globex, started=NOW)
    other_approver = approval_of(signed(approver=OPS, tenant="globex", generation=1))
    with pytest.raises(AuthorizationDenied, match="'ops@globex' may not approve cases for"):
        forward(verifier(), moved(other_approver, tenant_id="acme"))


def test_a_key_nobody_configured_is_denied_whatever_its_signature() -> None:
    case = signed()
    case["approval"]["key_id"] = "arn:aws:kms:us-east-1:999999999999:key/forged"
    with pytest.raises(AuthorizationDenied, match="is not a trusted key"):
        forward(verifier(), approval_of(case))
    # The signature does not cover key_id: the refusal quotes it with repr, so what it carries
    # reaches an operator's terminal written out (sagactl.views.untrusted).
    case["approval"]["key_id"] = "\x1b]52;c;eA==\x07\u202e"
    with pytest.raises(AuthorizationDenied) as refused:
        forward(verifier(), approval_of(case))
    assert "key '\\x1b]52;c;eA==\\x07\\u202e' is not a trusted key" in str(refused.value)


def test_a_retired_key_verifies_cases_under_way_but_approves_no_new_case() -> None:
    old = approval_of(signed(generation=1))
    assert forward(verifier(), old) == (local_key_arn("acme", SUPERVISOR, 1),)
    with pytest.raises(ApprovalInvalid, match="signed with 'supervisor@acme''s retired key"):
        accept_new_case(verifier(), old, started=NOW)


def test_the_start_deadline_is_checked_when_the_case_starts_only() -> None:
    approval = approval_of(signed(start_by="2026-11-30T11:00:00Z"))
    assert accept_new_case(verifier(), approval, started=datetime(2026, 11, 30, 10, 59, tzinfo=UTC))
    with pytest.raises(ApprovalInvalid, match="allowed starting until 2026-11-30T11:00:00Z"):
        accept_new_case(verifier(), approval, started=NOW)
    # Days later, a forward step or a compensation of a case that started in time.
    assert forward(verifier(), approval)
    # Extending the deadline by hand breaks the signature.
    extended = moved(approval, start_by="2027-01-01T00:00:00Z")
    with pytest.raises(ApprovalInvalid, match="does not verify"):
        accept_new_case(verifier(), extended, started=NOW)


def test_each_public_key_is_read_once_per_function_and_never_when_warm() -> None:
    keys = CountingKeys()
    validate, refund = verifier(keys, "validate-case"), verifier(keys, "issue-refund")
    for _ in range(3):
        accept_new_case(validate, approval_of(signed()), started=NOW)
        forward(refund, approval_of(signed()))
    assert keys.reads == [local_key_arn("acme", SUPERVISOR, 2)] * 2
    forward(refund, approval_of(signed(approver=MANAGER, generation=1)))
    assert keys.reads[2:] == [local_key_arn("acme", MANAGER)]


def test_keys_named_by_alias_are_resolved_by_the_read_of_their_public_key_once() -> None:
    keys = CountingKeys()
    validate = ApprovalVerifier(BY_ALIAS, keys, function="validate-case", thresholds={})
    refund = ApprovalVerifier(BY_ALIAS, keys, function="issue-refund", thresholds={})
    for _ in range(3):
        # The approval names the key's ARN (what KMS Sign answered); the alias resolves to it.
        assert accept_new_case(validate, approval_of(signed()), started=NOW).keys == (
            local_key_arn("acme", SUPERVISOR, 2),
        )
        forward(refund, approval_of(signed()))
    current = approval_key_alias(PREFIX, "acme", SUPERVISOR, 2)
    assert keys.reads == [current, current]  # one GetPublicKey per function and key
    # A retired key: resolved (once) only when an approval names a key that is not current.
    assert forward(refund, approval_of(signed(generation=1))) == (
        local_key_arn("acme", SUPERVISOR, 1),
    )
    with pytest.raises(ApprovalInvalid, match="retired key"):
        accept_new_case(validate, approval_of(signed(generation=1)), started=NOW)
    assert keys.reads[2:] == [approval_key_alias(PREFIX, "acme", SUPERVISOR, 1)] * 2
    # Another approver's key presented as this approver's: refused, naming whose it is.
    forged = moved(approval_of(signed()), key_id=local_key_arn("globex", OPS))
    with pytest.raises(AuthorizationDenied, match="a key of 'ops@globex' of tenant 'globex'"):
        accept_new_case(validate, forged, started=NOW)


def test_finishing_tools_accept_a_case_record_of_exactly_this_digest() -> None:
    case = signed()
    unsigned = moved(approval_of(case), signature=None, key_id=None, signed_at=None)
    recorded = Records({"case_id": "case-0001", "tenant_id": "acme", "digest": unsigned.digest})
    assert accept_finishing(verifier(), unsigned, recorded).on_record
    # A signed approval never needs the record.
    signed_records = Records(None)
    assert not accept_finishing(verifier(), approval_of(case), signed_records).on_record
    assert signed_records.reads == 0
    # Another digest, another tenant, or no record: the refusal stands.
    for record in (
        {"case_id": "case-0001", "tenant_id": "acme", "digest": "sha256:" + "1" * 64},
        {"case_id": "case-0001", "tenant_id": "globex", "digest": unsigned.digest},
        None,
    ):
        with pytest.raises(ApprovalInvalid, match="not signed"):
            accept_finishing(verifier(), unsigned, Records(record))


def test_forward_tools_need_the_case_record_of_this_case_under_way() -> None:
    """A genuine signature is not enough: the case must be one ValidateCase accepted and that
    has not ended (a direct invoke of a finished or never started case changes nothing)."""
    approval = approval_of(signed())
    assert forward(verifier(), approval) == (local_key_arn("acme", SUPERVISOR, 2),)
    for record, state in (
        (None, "no case record"),
        ({**under_way(approval), "outcome": "COMPLETED"}, "case record COMPLETED"),
        ({**under_way(approval), "outcome": "ESCALATED"}, "case record ESCALATED"),
        ({**under_way(approval), "outcome": "COMPENSATION_PENDING"}, "COMPENSATION_PENDING"),
        ({**under_way(approval), "digest": "sha256:" + "1" * 64}, "IN_PROGRESS"),
        ({**under_way(approval), "tenant_id": "globex"}, "IN_PROGRESS"),
    ):
        with pytest.raises(AuthorizationDenied, match=f"not a case under way \\(.*{state}"):
            accept_forward(verifier(), approval, Records(record))
    # A forged approval of a case under way is refused on its signature.
    forged = moved(approval, signature=None)
    with pytest.raises(ApprovalInvalid, match="not signed"):
        accept_forward(verifier(), forged, Records(under_way(approval)))


def test_a_resolved_case_is_refused_as_resolved_whoever_approved_it() -> None:
    """The resolution is read before the signatures are verified: a case resolved after its
    approver left the configuration is ActionSettled (neither retried nor caught), never
    AuthorizationDenied, which ReserveStock's Catch routes to Escalate (asking again, §3.10)."""
    approval = approval_of(signed(approver=MANAGER, generation=1))
    resolved = {
        **under_way(approval),
        "resolution": {"by": "ops@acme", "decision": "done by hand", "at": "2026-11-30T11:00:00Z"},
    }
    without_manager = {"acme": {SUPERVISOR: TRUSTED["acme"][SUPERVISOR]}}
    keys = CountingKeys()
    gate = ApprovalVerifier(without_manager, keys, function="reserve", thresholds={})
    with pytest.raises(ActionSettled, match="resolved by ops@acme"):
        accept_forward(gate, approval, Records(resolved))
    # So is an unsigned approval (a case under way when signing was introduced), and neither
    # asks KMS for a key.
    unsigned = moved(approval, signature=None)
    with pytest.raises(ActionSettled):
        accept_forward(verifier(keys), unsigned, Records(resolved))
    assert keys.reads == []
    # A resolution recorded for another digest is another case: the signatures decide.
    other = {**resolved, "digest": "sha256:" + "1" * 64}
    with pytest.raises(AuthorizationDenied, match="may not approve"):
        accept_forward(gate, approval, Records(other))
