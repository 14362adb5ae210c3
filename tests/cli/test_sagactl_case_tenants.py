"""`sagactl case new|approve|check` refuse what ValidateCase refuses for the tenant: an unknown
tenant, an approver not allowed for it, with the same rule (saga.tools.validate.authorize) and
the same configuration (cdk.json's `tenants`, or with --deployed the deployed function's)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from local_aws.approval_keys import create_local_key, sign_locally
from local_aws.environment import LocalAws
from sagactl.operations.functions import VALIDATE_CASE_HANDLER
from tests.cli.sagactl_helpers import Sagactl, example, executions, saga, sagactl
from tests.cli.test_sagactl_case import NEW_CASE

__all__ = ["saga", "sagactl"]


def _with(args: list[str], flag: str, value: str) -> list[str]:
    changed = list(args)
    changed[changed.index(flag) + 1] = value
    return changed


def test_new_refuses_an_unknown_tenant_and_writes_nothing(sagactl: Sagactl, tmp_path: Path) -> None:
    target = tmp_path / "case.json"

    result = sagactl(*_with(NEW_CASE, "--tenant", "initech"), "-o", str(target))

    assert result.code == 2
    assert result.err.splitlines() == [
        "sagactl: case: tenant 'initech' is not configured for this saga (tenants from "
        "cdk.json: acme, globex, hooli)"
    ]
    assert not target.exists()


def test_new_and_approve_refuse_an_approver_not_allowed_for_the_tenant(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    target = tmp_path / "case.json"
    refused = sagactl(*_with(NEW_CASE, "--approved-by", "ops@globex"), "-o", str(target))
    assert refused.code == 2 and not target.exists()
    assert refused.err.splitlines() == [
        "sagactl: case: 'ops@globex' may not approve cases for tenant 'acme' (approvers of acme "
        "in cdk.json: supervisor@acme)"
    ]

    case_file = tmp_path / "happy.json"
    original = example("happy-path").read_text(encoding="utf-8")
    case_file.write_text(original, encoding="utf-8")
    approve = sagactl("case", "approve", str(case_file), "--as", "ops@globex")
    assert approve.code == 2
    assert approve.err.splitlines() == [
        "sagactl: 'ops@globex' is not an approver of tenant 'acme' in this stack (its "
        "approvers: supervisor@acme): pass --as APPROVER"
    ]
    assert case_file.read_text(encoding="utf-8") == original


def test_check_refuses_what_validate_case_refuses(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    case = json.loads(example("happy-path").read_text(encoding="utf-8"))
    case["approval"]["approved_by"] = "ops@globex"  # a real approver, of another tenant
    case_file = tmp_path / "case.json"
    case_file.write_text(json.dumps(sign_locally(case)), encoding="utf-8")

    checked = sagactl("case", "check", str(case_file), "--json")
    started = sagactl("start", str(case_file), "--skip-checks", "--watch", "--timeout", "60")

    assert checked.code == 2
    assert checked.json()["error"] == {
        "type": "InvalidCaseFile",
        "message": f"{case_file}: 'ops@globex' may not approve cases for tenant 'acme' "
        "(approvers of acme in cdk.json: supervisor@acme)",
    }
    assert started.code == 6, started.out + started.err  # rejected at ValidateCase
    assert "AuthorizationDenied: 'ops@globex' may not approve cases for tenant 'acme'" in (
        started.out
    )


def test_deployed_checks_against_the_deployed_functions_tenants(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path
) -> None:
    """A stack deployed with other tenants: --deployed asks its ValidateCase function, and a
    case it accepts runs through ValidateCase."""
    key = create_local_key(saga.client("kms"), tenant="initech", approver="ops@initech")
    lambdas = saga.client("lambda")
    function = next(
        f for f in lambdas.list_functions()["Functions"] if f["Handler"] == VALIDATE_CASE_HANDLER
    )
    for deployed_function in lambdas.list_functions()["Functions"]:
        variables = deployed_function["Environment"]["Variables"]
        if "APPROVAL_KEYS" not in variables:
            continue
        keys = {
            **json.loads(variables["APPROVAL_KEYS"]),
            "initech": {"ops@initech": {"current": key}},
        }
        variables = {**variables, "APPROVAL_KEYS": json.dumps(keys)}
        if "TENANTS" in variables:
            tenants = {**json.loads(variables["TENANTS"]), "initech": ["ops@initech"]}
            variables["TENANTS"] = json.dumps(tenants)
        lambdas.update_function_configuration(
            FunctionName=deployed_function["FunctionName"], Environment={"Variables": variables}
        )
    outputs = {**saga.outputs}
    outputs["ApprovalKeys"] = json.dumps(
        {**json.loads(outputs["ApprovalKeys"]), "initech": {"ops@initech": key}}
    )
    Path(os.environ["SAGA_LOCAL_OUTPUTS"]).write_text(json.dumps(outputs), encoding="utf-8")
    case_file = tmp_path / "initech.json"
    args = _with(_with(NEW_CASE, "--tenant", "initech"), "--approved-by", "ops@initech")

    written = sagactl(*args, "-o", str(case_file), "--deployed", "--local")
    approved = sagactl("case", "approve", str(case_file))
    from_cdk_json = sagactl("case", "check", str(case_file))
    deployed = sagactl("case", "check", str(case_file), "--deployed", "--json")
    started = sagactl("start", str(case_file), "--watch", "--timeout", "60")

    assert written.code == 0, written.err
    assert approved.code == 0, approved.err
    assert from_cdk_json.code == 2 and "tenant 'initech' is not configured" in from_cdk_json.err
    assert "(tenants from cdk.json: acme, globex, hooli)" in from_cdk_json.err
    assert deployed.code == 0, deployed.err
    # Who may approve: the approvers of the deployed APPROVAL_KEYS (listed once).
    assert deployed.json()["tenants_from"] == f"APPROVAL_KEYS of {function['FunctionName']}"
    assert started.code == 0, started.out + started.err
    assert "outcome: COMPLETED" in started.out
    assert [e["name"] for e in executions(saga)] == ["case-cli-1"]
