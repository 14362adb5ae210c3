"""The real AWS CLI (the `awscli` package of the venv) against the local AWS.

The server runs inside the test process on a free loopback port; the CLI is a subprocess that
reaches it like any other client: `--endpoint-url`, fake credentials, no profile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from local_aws.environment import TERMINAL_STATUSES, LocalAws
from sagactl.paths import PROJECT_ROOT

AWS_CLI = Path(sys.executable).parent / "aws"
MAX_DESCRIBE_POLLS = 120


def aws_run(local: LocalAws, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `aws --endpoint-url <local> ... --output json`, whatever its exit code."""
    return subprocess.run(
        [str(AWS_CLI), "--endpoint-url", local.endpoint, "--output", "json", *args],
        env={**os.environ, **local.environment},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def aws(local: LocalAws, *args: str) -> Any:
    """`aws ...` that must succeed, its output parsed."""
    completed = aws_run(local, *args)
    assert completed.returncode == 0, f"aws {' '.join(args)} failed:\n{completed.stderr}"
    return json.loads(completed.stdout) if completed.stdout.strip() else None


def start_execution(local: LocalAws, name: str, case_input: str) -> str:
    """`start-execution` of the stack's state machine; `case_input` is what --input takes (JSON,
    or file://...). Returns the execution's ARN."""
    started = aws(
        local,
        "stepfunctions",
        "start-execution",
        "--state-machine-arn",
        local.outputs["StateMachineArn"],
        "--name",
        name,
        "--input",
        case_input,
    )
    return str(started["executionArn"])


def run_with_cli(
    local: LocalAws, case_file: Path, name: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """start-execution with the case file, describe-execution until terminal, get history."""
    execution_arn = start_execution(local, name, f"file://{case_file}")
    assert execution_arn.endswith(f":{name}")
    for _ in range(MAX_DESCRIBE_POLLS):
        description = aws(
            local, "stepfunctions", "describe-execution", "--execution-arn", execution_arn
        )
        if description["status"] in TERMINAL_STATUSES:
            break
    else:
        pytest.fail(f"{execution_arn} did not finish after {MAX_DESCRIBE_POLLS} polls")
    history = aws(
        local, "stepfunctions", "get-execution-history", "--execution-arn", execution_arn
    )["events"]
    return description, history


def scan(local: LocalAws, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = aws(local, "dynamodb", "scan", "--table-name", table)["Items"]
    return items


def test_cli_runs_an_execution_whose_handlers_write_to_dynamodb(
    fixture_local_aws: LocalAws, tmp_path: Path
) -> None:
    case_file = tmp_path / "case.json"
    case_file.write_text(json.dumps({"case_id": "cli-1", "reject": "no stock"}))

    description, history = run_with_cli(fixture_local_aws, case_file, "cli-1")

    assert description["status"] == "SUCCEEDED"
    assert json.loads(description["output"])["error"] == "CustomRejection"
    types = [event["type"] for event in history]
    assert types[0] == "ExecutionStarted"
    assert types[-1] == "ExecutionSucceeded"
    assert types.count("TaskSucceeded") == 1 and types.count("TaskFailed") == 1
    items = scan(fixture_local_aws, fixture_local_aws.outputs["LedgerTableName"])
    by_key = {item["action_key"]["S"]: item for item in items}
    recorded = [key for key in by_key if key.startswith("cli-1#") and key != "cli-1#reject-calls"]
    assert len(recorded) == 1
    assert by_key["cli-1#reject-calls"]["calls"] == {"N": "1"}


def test_cli_second_start_of_a_finished_case_is_rejected(
    fixture_local_aws: LocalAws, tmp_path: Path
) -> None:
    case_file = tmp_path / "case.json"
    case_file.write_text(json.dumps({"case_id": "cli-2"}))
    run_with_cli(fixture_local_aws, case_file, "cli-2")
    completed = subprocess.run(
        [
            str(AWS_CLI),
            "--endpoint-url",
            fixture_local_aws.endpoint,
            "stepfunctions",
            "start-execution",
            "--state-machine-arn",
            fixture_local_aws.outputs["StateMachineArn"],
            "--name",
            "cli-2",
            "--input",
            '{"case_id": "other"}',
        ],
        env={**os.environ, **fixture_local_aws.environment},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode != 0
    assert "ExecutionAlreadyExists" in completed.stderr


def test_cli_happy_path_example_completes_the_saga(local_aws: LocalAws) -> None:
    """examples/happy-path.json through the real stack: the docs/design.md §8 outcome."""
    case_file = PROJECT_ROOT / "examples" / "happy-path.json"
    case = json.loads(case_file.read_text())

    description, history = run_with_cli(local_aws, case_file, case["case_id"])

    failures = [e for e in history if e["type"] in ("TaskFailed", "ExecutionFailed")]
    assert description["status"] == "SUCCEEDED", failures
    output = json.loads(description["output"])
    assert (output["case_id"], output["outcome"]) == (case["case_id"], "COMPLETED")
    assert output["compensations"] == []
    outputs = local_aws.outputs
    cases = scan(local_aws, outputs["CasesTableName"])
    assert [(c["case_id"]["S"], c["outcome"]["S"]) for c in cases] == [
        (case["case_id"], "COMPLETED")
    ]
    for table in ("PaymentsTableName", "ShipmentsTableName"):
        effects = scan(local_aws, outputs[table])
        assert [item["case_id"]["S"] for item in effects] == [case["case_id"]], table
    stock = {
        item["sku"]["S"]: int(item["available"]["N"])
        for item in scan(local_aws, outputs["InventoryTableName"])
    }
    assert stock[case["reserve"]["sku"]] == 100 - case["reserve"]["quantity"]


def test_cli_put_item_with_an_unused_expression_value_is_refused_as_dynamodb_refuses_it(
    local_aws: LocalAws,
) -> None:
    """The local AWS's server validates requests as DynamoDB does (moto alone writes the item)."""
    table = local_aws.outputs["InventoryTableName"]
    item = json.dumps({"sku": {"S": "SKU-CLI-VALIDATION"}, "available": {"N": "1"}})
    put = (
        "dynamodb",
        "put-item",
        "--table-name",
        table,
        "--item",
        item,
        "--condition-expression",
        "attribute_not_exists(sku)",
    )
    refused = aws_run(
        local_aws, *put, "--expression-attribute-values", json.dumps({":unused": {"N": "1"}})
    )
    assert refused.returncode != 0
    assert (
        "An error occurred (ValidationException) when calling the PutItem operation: Value "
        "provided in ExpressionAttributeValues unused in expressions: keys: {:unused}"
    ) in refused.stderr
    assert [i for i in scan(local_aws, table) if i["sku"]["S"] == "SKU-CLI-VALIDATION"] == []
    aws(local_aws, *put)
    assert [i for i in scan(local_aws, table) if i["sku"]["S"] == "SKU-CLI-VALIDATION"] != []
