"""What AWS refuses, the local AWS refuses to the real AWS CLI too; and `make validate-aws`
(AWS's ValidateStateMachineDefinition + cfn-lint before `cdk deploy`) works end to end, here
against the local AWS: fake credentials and a loopback AWS_ENDPOINT_URL, never real AWS."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from local_aws.environment import LocalAws
from stacks.workflow_policy import PLACEHOLDER
from tests.cli.test_awscli import AWS_CLI, aws
from tests.infra.synth import Synthesized
from tests.old_escape import CATCH_ALL, FIXED_TEXT, OLD_ESCAPE, OLD_ESCAPE_REFUSAL
from tests.project import run_in_project

ROLE = "arn:aws:iam::123456789012:role/saga-local-execution-role"


def cli(local: LocalAws, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AWS_CLI), "--endpoint-url", local.endpoint, *args],
        env={**os.environ, **local.environment},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def broken_definition_file(local: LocalAws, tmp_path: Path) -> Path:
    sfn = local.client("stepfunctions")
    deployed = sfn.describe_state_machine(stateMachineArn=local.state_machine_arn)["definition"]
    assert deployed.count(FIXED_TEXT) == 1
    path = tmp_path / "broken.asl.json"
    path.write_text(deployed.replace(FIXED_TEXT, OLD_ESCAPE), encoding="utf-8")
    return path


def test_cli_create_and_update_are_refused_with_aws_error(
    local_aws: LocalAws, tmp_path: Path
) -> None:
    definition = f"file://{broken_definition_file(local_aws, tmp_path)}"
    expected = (
        "An error occurred (InvalidDefinition) when calling the {operation} operation: "
        + OLD_ESCAPE_REFUSAL
    )

    create = cli(
        local_aws, "stepfunctions", "create-state-machine", "--name", "broken",
        "--role-arn", ROLE, "--definition", definition,
    )  # fmt: skip
    update = cli(
        local_aws, "stepfunctions", "update-state-machine",
        "--state-machine-arn", local_aws.state_machine_arn, "--definition", definition,
    )  # fmt: skip

    assert create.returncode == 255
    assert create.stderr.strip() == expected.format(operation="CreateStateMachine")
    assert update.returncode == 255
    assert update.stderr.strip() == expected.format(operation="UpdateStateMachine")
    machines = aws(local_aws, "stepfunctions", "list-state-machines")["stateMachines"]
    assert [m["name"] for m in machines if m["name"] == "broken"] == []


def test_cli_validate_state_machine_definition(local_aws: LocalAws, tmp_path: Path) -> None:
    answer = aws(
        local_aws,
        "stepfunctions",
        "validate-state-machine-definition",
        "--definition",
        f"file://{broken_definition_file(local_aws, tmp_path)}",
    )
    assert answer == {
        "result": "FAIL",
        "diagnostics": [
            {
                "severity": "ERROR",
                "code": "INVALID_JSONATA_EXPRESSION",
                "message": 'Unsupported escape sequence: \\"\'"',
                "location": CATCH_ALL,
            }
        ],
        "truncated": False,
    }


def make_validate_aws(template: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return run_in_project(
        ["make", "--no-print-directory", "validate-aws", f"TEMPLATE={template}"], env, timeout=300
    )


def test_make_validate_aws_synthesizes_through_the_cdk_cli_and_accepts_the_stack(
    fixture_local_aws: LocalAws, synthesized: Synthesized, tmp_path: Path
) -> None:
    """Without TEMPLATE it synthesizes as `cdk deploy` does, through the CDK CLI, which gives
    the stack the caller's account and region (here the local AWS's, from its STS)."""
    outdir = tmp_path / "cdk.out"
    completed = run_in_project(
        ["make", "--no-print-directory", "validate-aws", f"OUTDIR={outdir}"],
        {**os.environ, **fixture_local_aws.environment, "HOME": str(tmp_path)},
        timeout=600,
    )
    template_path = outdir / "ReplacementOrderSaga-dev.template.json"

    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert f"npx cdk synth -o {outdir} ..." in completed.stderr
    manifest = json.loads((outdir / "manifest.json").read_text(encoding="utf-8"))
    stack = manifest["artifacts"]["ReplacementOrderSaga-dev"]
    assert stack["environment"] == "aws://123456789012/us-east-1"
    lines = completed.stdout.splitlines()
    (header,) = [line for line in lines if line.startswith("validating ")]
    assert header.endswith(f"with the endpoint {fixture_local_aws.endpoint}, account 123456789012")
    (validated,) = [line for line in lines if "validate-state-machine-definition" in line]
    assert validated.endswith(": OK (0 diagnostics)")
    definition_file = Path(validated.split("file://", 1)[1].split(":", 1)[0])
    substituted = definition_file.read_text(encoding="utf-8")
    # Every DefinitionSubstitution applied, as CloudFormation does.
    assert PLACEHOLDER.findall(substituted) == []
    assert (
        '"FunctionName": "arn:aws:lambda:us-east-1:123456789012:function:'
        'ReplacementOrderSaga-dev-ToolsValidateCaseFunction"'
    ) in substituted
    assert f"cfn-lint {template_path}: no errors" in lines
    assert lines[-1] == "validate-aws: OK"


def test_make_validate_aws_fails_on_what_aws_refuses(
    fixture_local_aws: LocalAws, synthesized: Synthesized, tmp_path: Path
) -> None:
    template = json.loads(synthesized.template_path.read_text(encoding="utf-8"))
    (machine,) = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"
    ]
    text = machine["Properties"]["DefinitionString"]
    machine["Properties"]["DefinitionString"] = text.replace(FIXED_TEXT, OLD_ESCAPE)
    broken = tmp_path / "ReplacementOrderSaga-dev.template.json"
    broken.write_text(json.dumps(template), encoding="utf-8")

    completed = make_validate_aws(broken, {**os.environ, **fixture_local_aws.environment})

    assert completed.returncode != 0
    assert ": FAIL (1 diagnostics)" in completed.stdout
    assert (
        f'  ERROR INVALID_JSONATA_EXPRESSION at {CATCH_ALL}: Unsupported escape sequence: \\"\'"'
    ) in completed.stdout.splitlines()
    assert completed.stdout.splitlines()[-1] == "validate-aws: FAILED"


def test_make_validate_aws_without_credentials_says_so(
    fixture_local_aws: LocalAws, synthesized: Synthesized
) -> None:
    env = {**os.environ, **fixture_local_aws.environment}
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        env.pop(name, None)
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    completed = make_validate_aws(synthesized.template_path, env)
    assert completed.returncode != 0
    assert "validate-aws: `aws sts get-caller-identity` failed: Unable to locate credentials" in (
        completed.stderr
    )
    assert "Traceback" not in completed.stderr
