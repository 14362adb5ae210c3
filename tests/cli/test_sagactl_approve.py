"""`sagactl case approve FILE`: the digest and a KMS signature by the approver's key, made with
the caller's credentials; against the local AWS with nothing but the environment set."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws.environment import LocalAws
from saga.acceptance import accept_new_case
from saga.approval_keys import KmsPublicKeys, parse_trusted_keys
from saga.approvals import ApprovalVerifier
from saga.models import parse_case
from sagactl.commands.case_approve import NO_TERMINAL_RULE
from sagactl.errors import EXIT_USAGE, SigningRefused
from sagactl.operations.agent_tools import agent_tools
from sagactl.operations.signing import sign_case
from sagactl.paths import PROJECT_ROOT
from sagactl.target import Target, local_target_from_outputs
from tests.cli.sagactl_helpers import Sagactl, example, saga, sagactl
from tests.tools_harness import agent_proposal

__all__ = ["saga", "sagactl"]


def unsigned_copy(tmp_path: Path, name: str = "happy-path", **changes: Any) -> Path:
    case = json.loads(example(name).read_text(encoding="utf-8"))
    for field in ("signed_at", "key_id", "signature"):
        case["approval"].pop(field)
    case.update(changes)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(case), encoding="utf-8")
    return path


def test_approve_signs_with_the_approvers_key_and_the_case_then_runs(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    case_file = unsigned_copy(tmp_path, case_id="case-approved-here")

    approved = sagactl("case", "approve", str(case_file), "--json")

    assert approved.code == 0, approved.err
    written = json.loads(case_file.read_text(encoding="utf-8"))
    approval = written["approval"]
    key = json.loads(saga.outputs["ApprovalKeys"])["acme"]["supervisor@acme"]
    assert approval["key_id"] == key
    # signed_at is the local AWS's clock, to the second.
    signed_at = datetime.fromisoformat(approval["signed_at"].replace("Z", "+00:00"))
    assert abs(signed_at.timestamp() - saga.clock.now()) < 5
    assert approved.json() == {
        "file": str(case_file),
        "case_id": "case-approved-here",
        "tenant_id": "acme",
        "revision": 1,
        "approved_by": "supervisor@acme",
        "digest": approval["digest"],
        "signed": True,
        "signed_at": approval["signed_at"],
        "key_id": key,
    }
    # What ValidateCase will do with it, with the deployed keys (KMS GetPublicKey).
    trusted = parse_trusted_keys(json.dumps({"acme": {"supervisor@acme": {"current": key}}}))
    verifier = ApprovalVerifier(
        trusted, KmsPublicKeys(lambda: saga.client("kms")), "cli-test", thresholds={}
    )
    accept_new_case(verifier, parse_case(written).signed_approvals(), started=datetime.now(UTC))

    started = sagactl("start", str(case_file), "--watch", "--timeout", "60")
    assert started.code == 0, started.out + started.err
    assert "outcome: COMPLETED" in started.out


def test_a_start_deadline_is_signed_and_a_malformed_one_refused(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    case_file = unsigned_copy(tmp_path)
    original = case_file.read_text(encoding="utf-8")

    for bad, reason in (("tomorrow", "expected an ISO 8601 time"), ("2026-12-01T18:00", "zone")):
        refused = sagactl("case", "approve", str(case_file), "--start-by", bad)
        assert refused.code == EXIT_USAGE and reason in refused.err
        assert case_file.read_text(encoding="utf-8") == original

    approved = sagactl("case", "approve", str(case_file), "--start-by", "2999-12-01T19:00+01:00")
    assert approved.code == 0, approved.err
    approval = json.loads(case_file.read_text(encoding="utf-8"))["approval"]
    assert approval["start_by"] == "2999-12-01T18:00:00Z"
    assert approved.out.splitlines()[-1] == (  # the deadline as signed: UTC, whole seconds
        "signed start deadline: 2999-12-01T18:00:00Z (it must start by then; compensations and "
        "redrives later are not refused for it)"
    )
    assert sagactl("case", "check", str(case_file), "--deployed").code == 0


def test_a_tampered_signed_file_fails_the_deployed_check(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    case = json.loads(example("happy-path").read_text(encoding="utf-8"))
    case["approval"]["signed_at"] = "2026-11-30T00:00:01Z"  # the signature no longer covers it
    case_file = tmp_path / "tampered.json"
    case_file.write_text(json.dumps(case), encoding="utf-8")

    offline = sagactl("case", "check", str(case_file))
    deployed = sagactl("case", "check", str(case_file), "--deployed")

    assert offline.code == 0  # signed; only the deployed keys can tell
    assert deployed.code == EXIT_USAGE
    assert "the signature of 'supervisor@acme' does not verify over this case" in deployed.err


class RefusingKms:
    def sign(self, **_: Any) -> dict[str, Any]:
        raise ClientError(
            {"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}, "Sign"
        )


def test_signing_with_credentials_that_are_not_the_approvers_says_which_role_to_assume() -> None:
    role = "arn:aws:iam::123456789012:role/ReplacementOrderSaga-dev-ApproverRole"
    key = "arn:aws:kms:us-east-1:123456789012:key/k"
    target = Target(
        session=None,  # type: ignore[arg-type]
        outputs={
            "ApprovalKeys": json.dumps({"acme": {"supervisor@acme": key}}),
            "ApproverRoles": json.dumps({"acme": {"supervisor@acme": role}}),
        },
        local=False,
        stack_name="ReplacementOrderSaga-dev",
    )
    target._clients["kms"] = RefusingKms()
    case = json.loads(example("happy-path").read_text(encoding="utf-8"))

    with pytest.raises(SigningRefused) as refused:
        sign_case(target, case, now=datetime(2026, 11, 30, tzinfo=UTC))

    assert str(refused.value) == (
        "KMS refused to sign as supervisor@acme for tenant acme with these credentials: assume "
        f"the approver role {role} (for example a profile with role_arn and mfa_serial) and run "
        "this again"
    )


class Terminal(io.StringIO):
    """A person at a terminal, answering the question with what the string holds."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("currency", "amount", "shown"),
    [
        ("JPY", 2000, "2000 minor units of JPY = 2000 JPY (0 decimals)"),
        ("USD", 2000, "2000 minor units of USD = 20.00 USD (2 decimals)"),
        ("KWD", 2000, "2000 minor units of KWD = 2.000 KWD (3 decimals)"),
        ("BHD", 2000, "2000 minor units of BHD = 2.000 BHD (3 decimals)"),
    ],
)
def test_a_file_shows_every_parameter_it_signs_before_signing(  # noqa: PLR0917
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path, currency: str, amount: int, shown: str
) -> None:
    """From a script (stdin not a terminal, as here) it signs without asking, after showing
    what it signs; with --json the parameters go to stderr and stdout stays the JSON."""
    refund = {"payment_reference": "pay-42", "amount_minor": amount, "currency": currency}
    case_file = unsigned_copy(tmp_path, case_id=f"case-{currency.lower()}", refund=refund)

    approved = sagactl("case", "approve", str(case_file))

    assert approved.code == 0, approved.err
    digest = json.loads(case_file.read_text(encoding="utf-8"))["approval"]["digest"]
    shown_lines = approved.out.splitlines()
    for line in (
        f"case case-{currency.lower()} (tenant acme)",
        "  order     ord-1001 of customer cus-42",
        "  reserve   1 x SKU-RED-MUG",
        f"  refund    {shown} on payment pay-42",
        "  revision  1",
        f"  digest    {digest}",
        "  approver  supervisor@acme",
    ):
        assert line in shown_lines, (line, approved.out)
    assert shown_lines.index(f"  digest    {digest}") < len(shown_lines) - 1  # before "approved"
    assert (
        approved.out.rstrip().splitlines()[-1].startswith(f"approved case case-{currency.lower()}")
    )

    again = sagactl("case", "approve", str(case_file), "--json")
    assert again.code == 0 and f"  refund    {shown} on payment pay-42" in again.err
    assert again.json()["case_id"] == f"case-{currency.lower()}"


def test_a_person_at_a_terminal_is_asked_and_no_signs_nothing(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_file = unsigned_copy(tmp_path, case_id="case-asked")
    original = case_file.read_text(encoding="utf-8")

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    refused = sagactl("case", "approve", str(case_file))
    assert refused.code == 3
    assert "  refund    2000 minor units of USD = 20.00 USD (2 decimals)" in refused.out
    assert "approve and sign this case? [y/N]" in refused.err
    assert case_file.read_text(encoding="utf-8") == original  # nothing signed or written

    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert sagactl("case", "approve", str(case_file)).code == 0
    assert json.loads(case_file.read_text(encoding="utf-8"))["approval"]["signature"]

    monkeypatch.setattr("sys.stdin", Terminal(""))  # --yes: not asked at all
    assert sagactl("case", "approve", str(case_file), "--yes").code == 0


def test_without_a_terminal_a_file_is_signed_and_a_draft_needs_yes_said_the_same_everywhere(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    """Scripts drive `case approve FILE` without a terminal (as here: pytest's stdin is none);
    `--case` asks even then. `--help`, the README and the refusal say both rules in the same
    words."""
    said = " ".join(sagactl("case", "approve", "--help").out.split())
    assert NO_TERMINAL_RULE in said
    readme = " ".join((PROJECT_ROOT / "README.md").read_text(encoding="utf-8").split())
    assert readme.count("W" + NO_TERMINAL_RULE[1:]) == 2  # approving a file, and a draft

    case_file = unsigned_copy(tmp_path, case_id="case-scripted")
    signed = sagactl("case", "approve", str(case_file))
    assert signed.code == 0, signed.err
    assert json.loads(case_file.read_text(encoding="utf-8"))["approval"]["signature"]

    tools = agent_tools(local_target_from_outputs(saga.outputs), "acme")
    case_id = tools.call("propose_replacement", agent_proposal("3801"))["case_id"]
    refused = sagactl("case", "approve", "--case", case_id)
    assert refused.code == EXIT_USAGE
    assert refused.err == f"sagactl: not approved, nothing signed: {NO_TERMINAL_RULE}\n"
    assert tools.call("get_replacement", {"case_id": case_id})["status"] == "APPROVAL_PENDING"
    approved = sagactl("case", "approve", "--case", case_id, "--yes")
    assert approved.code == 0, approved.err
    assert tools.call("get_replacement", {"case_id": case_id})["status"] == "APPROVED"
