"""`sagactl case new|approve|check`: files ValidateCase accepts; refusals name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local_aws.environment import LocalAws
from saga.models import approval_digest, parse_case
from tests.cli.sagactl_helpers import Sagactl, example, saga, sagactl

__all__ = ["saga", "sagactl"]

NEW_CASE = [
    "case", "new",
    "--case-id", "case-cli-1", "--tenant", "acme",
    "--order-id", "ord-9", "--customer-id", "cus-9",
    "--sku", "SKU-RED-MUG", "--quantity", "2",
    "--payment-reference", "pay-9", "--amount-minor", "1500", "--currency", "USD",
    "--address-name", "Ada Li", "--address-line1", "1 Main St", "--address-city", "Springfield",
    "--address-postal-code", "12345", "--address-country", "US",
    "--approved-by", "supervisor@acme",
]  # fmt: skip


def test_new_writes_an_approved_case_with_faults_in_order(sagactl: Sagactl, tmp_path: Path) -> None:
    target = tmp_path / "case.json"
    result = sagactl(
        *NEW_CASE, "--fault", "refund=lose_response", "--fault", "release=timeout",
        "--fault", "release=reject", "-o", str(target), "--json",
    )  # fmt: skip

    assert result.code == 0, result.err
    written = json.loads(target.read_text())
    case = parse_case(written)
    assert written["approval"]["digest"] == approval_digest(case)
    assert case.sandbox.faults_for("release") == ["timeout", "reject"]
    assert case.sandbox.faults_for("refund") == ["lose_response"]
    assert (case.reserve.quantity, case.refund.amount_minor) == (2, 1500)
    assert result.json() == {
        "file": str(target),
        "case_id": "case-cli-1",
        "tenant_id": "acme",
        "revision": 1,
        "approved_by": "supervisor@acme",
        "digest": written["approval"]["digest"],
        "signed": False,
    }
    # A draft: its digest is right, and only an approver's signature lets it run.
    unsigned = sagactl("case", "check", str(target))
    assert unsigned.code == 2
    assert "the approval is not signed (no signed_at, key_id, signature); sign it with " in (
        unsigned.err
    )


def test_new_refuses_an_invalid_case_naming_the_field_and_writes_nothing(
    sagactl: Sagactl, tmp_path: Path
) -> None:
    target = tmp_path / "case.json"
    args = [*NEW_CASE, "-o", str(target)]
    args[args.index("USD")] = "usd"

    result = sagactl(*args)

    assert result.code == 2
    assert "refund.currency" in result.err
    assert "Traceback" not in result.err
    assert not target.exists()


def test_new_refuses_an_unknown_fault(sagactl: Sagactl, tmp_path: Path) -> None:
    result = sagactl(*NEW_CASE, "--fault", "refund=explode", "-o", str(tmp_path / "c.json"))

    assert result.code == 2
    assert "sandbox.faults" in result.err and "explode" in result.err


def test_new_json_error_shape(sagactl: Sagactl, tmp_path: Path) -> None:
    args = [*NEW_CASE, "-o", str(tmp_path / "c.json"), "--json"]
    args[args.index("1500")] = "0"

    result = sagactl(*args)

    assert result.code == 2
    error = result.json()["error"]
    assert error["type"] == "InvalidCaseFile"
    assert "refund.amount_minor" in error["message"]


def test_approve_refreshes_the_digest_after_an_edit(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    case_file = tmp_path / "case.json"
    case = json.loads(example("happy-path").read_text())
    case["refund"]["amount_minor"] = 2500
    case_file.write_text(json.dumps(case))

    stale = sagactl("case", "check", str(case_file))
    assert stale.code == 2 and "approval.digest does not match" in stale.err

    approved = sagactl("case", "approve", str(case_file), "--revision", "2", "--json")

    assert approved.code == 0, approved.err
    written = json.loads(case_file.read_text())
    assert written["approval"]["revision"] == 2
    assert written["approval"]["digest"] == approval_digest(parse_case(written))
    assert approved.json()["digest"] == written["approval"]["digest"]
    assert sagactl("case", "check", str(case_file)).code == 0
    verified = sagactl("case", "check", str(case_file), "--deployed", "--json")
    assert verified.code == 0, verified.err
    assert verified.json()["signature_verified"] is True


def test_approve_refuses_unreadable_files(sagactl: Sagactl, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"case_id": ')
    missing = tmp_path / "missing.json"

    assert "not valid JSON (line 1" in sagactl("case", "approve", str(broken)).err
    result = sagactl("case", "approve", str(missing))
    assert result.code == 2 and "no such file" in result.err


def test_approve_refuses_an_invalid_case_without_touching_the_file(
    sagactl: Sagactl, tmp_path: Path
) -> None:
    case_file = tmp_path / "case.json"
    case = json.loads(example("happy-path").read_text())
    case["reserve"]["quantity"] = -1
    original = json.dumps(case)
    case_file.write_text(original)

    result = sagactl("case", "approve", str(case_file))

    assert result.code == 2 and "reserve.quantity" in result.err
    assert case_file.read_text() == original


def test_new_writes_under_local_by_default_not_the_working_directory(
    sagactl: Sagactl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "clone" / ".local"
    monkeypatch.setattr("sagactl.commands.case.LOCAL_STATE_DIR", state)
    state.parent.mkdir()
    monkeypatch.chdir(state.parent)

    written = sagactl(*NEW_CASE)
    to_stdout = sagactl(*NEW_CASE, "-o", "-")

    assert written.code == 0, written.err
    assert written.out.splitlines() == [
        f"wrote case case-cli-1 to .local/case-cli-1.json (digest "
        f"{json.loads((state / 'case-cli-1.json').read_text())['approval']['digest']}); an "
        "approver signs it with: sagactl case approve .local/case-cli-1.json"
    ]
    assert sorted(path.name for path in (tmp_path / "clone").iterdir()) == [".local"]
    assert json.loads(to_stdout.out)["case_id"] == "case-cli-1"
    again = sagactl(*NEW_CASE)
    assert (again.code, again.err.strip()) == (
        2,
        "sagactl: .local/case-cli-1.json exists: pass --force to overwrite it",
    )
