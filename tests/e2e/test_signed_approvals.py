"""Signed approvals through the real state machine and the real tools in the local AWS.

Only a signature made with the key of one of the tenant's approvers, over exactly this case's
parameters, lets an execution cause an effect. Every refusal here is checked where effects land:
no case record, no ledger record, stock untouched, no refund, no shipment.
"""

from __future__ import annotations

import base64
import copy
import json
from collections import Counter
from typing import Any

import pytest

from local_aws.approval_keys import sign_locally
from local_aws.aws_calls import recording_aws_calls
from local_aws.environment import LocalAws
from local_aws.lambda_runtime import handlers_in_process
from saga.approval_keys import forget_public_keys
from saga.approvals import ApprovalVerifier, VerifiedKey
from saga.identity import Operation
from saga.models import approval_digest
from tests.e2e.test_saga_paths import Saga, load_example

SKU = "SKU-RED-MUG"
HINT = "sign it with `sagactl case approve FILE`"


def signed_case(case_id: str, **changes: Any) -> dict[str, Any]:
    case = load_example("happy-path")
    case["case_id"] = case_id
    case.update(changes)
    return sign_locally(case)


def stock(local: LocalAws) -> int:
    item = local.client("dynamodb").get_item(
        TableName=local.outputs["InventoryTableName"], Key={"sku": {"S": SKU}}, ConsistentRead=True
    )["Item"]
    return int(item["available"]["N"])


def rejected_at_validation(local: LocalAws, case: dict[str, Any]) -> tuple[str, str]:
    """Run `case`; assert it FAILED at ValidateCase with nothing written anywhere; the error
    and its cause."""
    before = stock(local)
    saga = Saga(local, case)
    assert saga.status == "FAILED", saga.description
    assert saga.path == ["ValidateCase", "RejectCase"], saga.path
    assert saga.case_outcome() is None  # no case record
    assert all(saga.ledger(operation) is None for operation in Operation)
    assert stock(local) == before
    assert saga.count_effects("PaymentsTableName") == 0
    assert saga.count_effects("ShipmentsTableName") == 0
    return str(saga.description["error"]), str(saga.description["cause"])


def test_a_forged_approval_with_the_right_digest_and_no_signature_is_rejected(
    local_aws: LocalAws,
) -> None:
    case = signed_case("case-unsigned")
    for name in ("signed_at", "key_id", "signature"):
        del case["approval"][name]
    assert case["approval"]["digest"] == approval_digest(case)  # anyone can compute it

    error, cause = rejected_at_validation(local_aws, case)

    assert error == "ApprovalInvalid"
    assert "the approval is not signed" in cause and HINT in cause


def test_a_made_up_signature_is_rejected(local_aws: LocalAws) -> None:
    case = signed_case("case-made-up")
    case["approval"]["signature"] = base64.b64encode(b"\x30\x06\x02\x01\x07\x02\x01\x07").decode()

    error, cause = rejected_at_validation(local_aws, case)

    assert error == "ApprovalInvalid"
    assert "does not verify over this case" in cause and HINT in cause


@pytest.mark.parametrize(
    ("change", "error"),
    [
        pytest.param(
            lambda c: c.update(case_id="case-moved-elsewhere"), "ApprovalInvalid", id="case"
        ),
        pytest.param(lambda c: c["approval"].update(revision=2), "ApprovalInvalid", id="revision"),
        pytest.param(
            lambda c: c["refund"].update(amount_minor=200000), "ApprovalInvalid", id="amount"
        ),
        pytest.param(lambda c: c.update(tenant_id="globex"), "AuthorizationDenied", id="tenant"),
    ],
)
def test_a_valid_signature_moved_to_other_parameters_is_rejected(
    local_aws: LocalAws, change: Any, error: str
) -> None:
    case = signed_case("case-moved")
    change(case)
    # The digest is recomputed, as a forger would: only the signature stays as it was.
    case["approval"]["digest"] = approval_digest(case)

    assert rejected_at_validation(local_aws, case)[0] == error


def test_a_case_signed_by_an_approver_of_another_tenant_is_denied(local_aws: LocalAws) -> None:
    """ops@globex signs an acme case with the globex key: as themselves, or naming acme's
    approver. Either way the key is not one of acme's approvers'."""
    as_themselves = sign_locally(
        {**load_example("happy-path"), "case_id": "case-by-globex"}, approved_by="ops@globex"
    )
    naming_acme = sign_locally(
        {**load_example("happy-path"), "case_id": "case-by-globex-2"},
        signer=("globex", "ops@globex"),
    )

    denied = rejected_at_validation(local_aws, as_themselves)
    impersonated = rejected_at_validation(local_aws, naming_acme)

    assert denied[0] == impersonated[0] == "AuthorizationDenied"
    assert "'ops@globex' may not approve cases for tenant 'acme'" in denied[1]
    assert (
        "is a key of 'ops@globex' of tenant 'globex', not a key of 'supervisor@acme'"
        in (impersonated[1])
    )


def test_a_tool_invoked_directly_with_a_forged_case_changes_nothing(local_aws: LocalAws) -> None:
    """The state machine is not the only caller: anyone allowed to invoke a tool's function
    gets the same refusal before the ledger is touched, even for a case ValidateCase recorded
    (its digest is on record; only finishing tools accept that)."""
    recorded = Saga(local_aws, signed_case("case-direct-recorded"))
    assert recorded.output["outcome"] == "COMPLETED"
    before = stock(local_aws)
    functions = local_aws.provisioned.functions if local_aws.provisioned else {}
    forged_cases = {
        "unsigned": signed_case("case-direct"),
        "unsigned, recorded digest": copy.deepcopy(recorded.case),
        "signed by another tenant": sign_locally(
            {**load_example("happy-path"), "case_id": "case-direct-2"},
            signer=("globex", "ops@globex"),
        ),
    }
    for name in ("signed_at", "key_id", "signature"):
        forged_cases["unsigned"]["approval"].pop(name)
        forged_cases["unsigned, recorded digest"]["approval"].pop(name)
    errors: Counter[str] = Counter()
    for tool in ("ReserveStock", "IssueRefund", "CreateShipment"):
        (function,) = [n for lid, n in functions.items() if lid.startswith(f"Tools{tool}")]
        for forged in forged_cases.values():
            payload = {
                "case": forged,
                "attempt": {"execution": "arn:forged", "state": tool, "retry": 0},
            }
            response = local_aws.client("lambda").invoke(
                FunctionName=function, Payload=json.dumps(payload).encode()
            )
            body = json.loads(response["Payload"].read())
            assert response.get("FunctionError"), (tool, body)
            errors[body["errorType"]] += 1

    assert errors == {"ApprovalInvalid": 6, "AuthorizationDenied": 3}
    assert stock(local_aws) == before
    for case_id in ("case-direct", "case-direct-2"):
        saga_view = Saga.__new__(Saga)
        saga_view.local, saga_view.case_id, saga_view.tenant = local_aws, case_id, "acme"
        saga_view.ddb = local_aws.client("dynamodb")
        assert all(saga_view.ledger(operation) is None for operation in Operation)
        assert saga_view.count_effects("PaymentsTableName") == 0
        assert saga_view.count_effects("ShipmentsTableName") == 0
    assert recorded.count_effects("PaymentsTableName") == 1
    assert recorded.count_effects("ShipmentsTableName") == 1


def test_kms_is_asked_once_per_function_and_key_and_never_when_warm(local_aws: LocalAws) -> None:
    forget_public_keys()  # every function's container is cold (in this process and in workers)
    local_aws.server.retire_lambda_environments()
    with recording_aws_calls() as cold_calls:
        first = Saga(local_aws, signed_case("case-kms-cold"))
    with recording_aws_calls() as warm_calls:
        second = Saga(local_aws, signed_case("case-kms-warm"))

    assert (first.output["outcome"], second.output["outcome"]) == ("COMPLETED", "COMPLETED")
    cold = Counter(
        (call.function_name.split("-")[-1][:20], call.operation)
        for call in cold_calls
        if call.service == "kms"
    )
    # ValidateCase, ReserveStock, IssueRefund, CreateShipment: one each.
    assert sum(cold.values()) == 4, cold
    assert {operation for _, operation in cold} == {"GetPublicKey"}
    assert len({function for function, _ in cold}) == 4
    assert [call for call in warm_calls if call.service == "kms"] == []


def test_an_approval_deadline_stops_a_late_start_but_never_a_redrive(local_aws: LocalAws) -> None:
    now = local_aws.clock.now()
    late = sign_locally(
        {**load_example("happy-path"), "case_id": "case-too-late"},
        start_by=_iso(now - 60),
    )
    error, cause = rejected_at_validation(local_aws, late)
    assert error == "ApprovalInvalid" and "allowed starting until" in cause

    in_time = sign_locally(load_example("compensation-stuck"), start_by=_iso(now + 3600))
    saga = Saga(local_aws, in_time)
    assert (saga.status, saga.path[-1]) == ("FAILED", "ReleaseReservation")

    local_aws.clock.advance(2 * 86400)  # two days after the deadline, a person redrives
    saga.redrive()

    assert saga.status == "SUCCEEDED", saga.description
    assert saga.ledger_status(Operation.RELEASE) == "COMPLETED"
    assert saga.case_outcome() in {"COMPLETED", "ESCALATED"}


def _iso(epoch_seconds: float) -> str:
    from datetime import UTC, datetime

    from saga.approvals import format_instant

    return format_instant(datetime.fromtimestamp(epoch_seconds, UTC))


def test_a_case_under_way_before_signing_still_compensates_after_the_upgrade(
    local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the upgrade nothing verified signatures: an unsigned case started, reserved, was
    refunded, its shipment was rejected and its release could not finish (FAILED). After the
    upgrade its redrive must still release and record the outcome: the case record holds the
    digest ValidateCase accepted, which is what the finishing tools accept then."""
    legacy = load_example("compensation-stuck")
    for name in ("signed_at", "key_id", "signature"):
        del legacy["approval"][name]
    with monkeypatch.context() as before_the_upgrade, handlers_in_process():
        unverified = VerifiedKey(arn="not verified", public_key=b"not verified")
        before_the_upgrade.setattr(ApprovalVerifier, "verify", lambda *a, **k: unverified)
        saga = Saga(local_aws, legacy)
    assert (saga.status, saga.path[-1]) == ("FAILED", "ReleaseReservation")
    reserved = stock(local_aws)

    saga.redrive()  # after the upgrade

    assert saga.status == "SUCCEEDED", saga.description
    assert saga.ledger_status(Operation.RELEASE) == "COMPLETED"
    assert stock(local_aws) == reserved + 1
    assert saga.case_outcome() in {"COMPLETED", "ESCALATED"}
    # A new unsigned case is refused all the same.
    new = {**legacy, "case_id": "case-legacy-new", "approval": dict(legacy["approval"])}
    new["approval"]["digest"] = approval_digest(new)
    error, _ = rejected_at_validation(local_aws, new)
    assert error == "ApprovalInvalid"
