"""One order of case checks in every entry point: `sagactl case check`, `sagactl start` and
ValidateCase refuse a case with several faults for the same first one (the fields, the tenant
and its approver, the digest, the signature: saga.tools.validate.checked_case), so the advice a
refusal gives (re-approve, or fix the tenant) is right wherever the case was checked."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from local_aws.environment import LocalAws
from tests.cli.sagactl_helpers import Sagactl, example, saga, sagactl

__all__ = ["saga", "sagactl"]

Edit = Callable[[dict[str, Any]], None]


def _foreign_tenant(case: dict[str, Any]) -> None:
    case["tenant_id"] = "initech"  # not configured; the digest is stale too
    case["case_id"] = "case-order-tenant"


def _foreign_approver(case: dict[str, Any]) -> None:
    case["approval"]["approved_by"] = "ops@globex"  # another tenant's approver
    case["reserve"]["quantity"] = 2  # and the digest is stale
    case["case_id"] = "case-order-approver"


def _stale_digest_unsigned(case: dict[str, Any]) -> None:
    case["reserve"]["quantity"] = 2  # edited, not re-approved
    for name in ("signed_at", "key_id", "signature"):
        del case["approval"][name]
    case["case_id"] = "case-order-digest"


def _bad_field_foreign_tenant(case: dict[str, Any]) -> None:
    case["reserve"]["quantity"] = 0
    case["tenant_id"] = "initech"
    case["case_id"] = "case-order-field"


ORDER = [
    (_bad_field_foreign_tenant, "InvalidRequest", "reserve.quantity: Input should be greater"),
    (_foreign_tenant, "AuthorizationDenied", "tenant 'initech' is not configured for this saga"),
    (
        _foreign_approver,
        "AuthorizationDenied",
        "'ops@globex' may not approve cases for tenant 'acme'",
    ),
    (_stale_digest_unsigned, "ApprovalMismatch", "approval.digest does not match"),
]


@pytest.mark.parametrize("refusal", ORDER, ids=[edit.__name__.strip("_") for edit, _, _ in ORDER])
def test_case_check_start_and_validate_case_give_the_same_first_reason(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path, refusal: tuple[Edit, str, str]
) -> None:
    edit, error, reason = refusal
    case = json.loads(example("happy-path").read_text(encoding="utf-8"))
    edit(case)
    case_file = tmp_path / "case.json"
    case_file.write_text(json.dumps(case), encoding="utf-8")

    checked = sagactl("case", "check", str(case_file))
    started = sagactl("start", str(case_file))
    sent = sagactl("start", str(case_file), "--skip-checks", "--json")

    assert checked.code == 2 and reason in checked.err, checked.err
    assert started.code == 2 and reason in started.err, started.err
    assert sent.code == 0, sent.err
    closed = saga.wait_for_execution(sent.json()["execution_arn"], timeout_seconds=60)
    assert (closed["status"], closed.get("error")) == ("FAILED", error)
    assert reason in closed["cause"]
