"""What AWS refuses, the local AWS refuses to the real AWS CLI too."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sagactl.local.environment import LocalAws
from tests.cli.test_awscli import AWS_CLI, aws

FIXED_TEXT = '\\" downstream by the action\'s business reference.\\"'
OLD_ESCAPE = "' downstream by the action\\\\'s business reference.'"
CATCH_ALL = "/States/ReconcileStep/Catch[4]/Assign/escalation"
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
        "Invalid State Machine Definition: 'INVALID_JSONATA_EXPRESSION: "
        f"Unsupported escape sequence: \\\"'\" at {CATCH_ALL}'"
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
