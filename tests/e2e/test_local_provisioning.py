"""The local AWS provisioned from a hand-written template: resources, outputs, executions.

Runs the real Step Functions interpreter (moto) with in-process handlers from
tests/e2e/local_stack_fixture.py.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from local_aws import emulator, lambda_runtime
from local_aws.emulator import LocalServer
from local_aws.environment import LocalAws, StackSource, run_local
from local_aws.seed import DEFAULT_SANDBOX_STOCK
from tests.e2e.local_stack_fixture import TEMPLATE

ACCOUNT = "123456789012"


# -- provisioning into the local AWS ----------------------------------------------------------


def test_tables_have_key_schema_gsi_ttl_and_pitr(fixture_local_aws: LocalAws) -> None:
    dynamodb = fixture_local_aws.client("dynamodb")
    table = dynamodb.describe_table(TableName="fx-LedgerTable")["Table"]
    assert table["KeySchema"] == [{"AttributeName": "action_key", "KeyType": "HASH"}]
    (gsi,) = table["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == "open-actions"
    assert [key["AttributeName"] for key in gsi["KeySchema"]] == ["open_status", "lease_expires_at"]
    ttl = dynamodb.describe_time_to_live(TableName="fx-LedgerTable")["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expires_at")
    backups = dynamodb.describe_continuous_backups(TableName="fx-LedgerTable")
    pitr = backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
    assert pitr["PointInTimeRecoveryStatus"] == "ENABLED"


def test_inventory_is_seeded(fixture_local_aws: LocalAws) -> None:
    items = fixture_local_aws.client("dynamodb").scan(TableName="fx-InventoryTable")["Items"]
    stock = {item["sku"]["S"]: int(item["available"]["N"]) for item in items}
    assert stock == dict(DEFAULT_SANDBOX_STOCK)


def test_queue_redrive_policy_points_at_the_local_dead_letter_queue(
    fixture_local_aws: LocalAws,
) -> None:
    sqs = fixture_local_aws.client("sqs")
    url = fixture_local_aws.outputs["EscalationQueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:fx-EscalationDlq"
    assert int(redrive["maxReceiveCount"]) == 3
    assert attributes["VisibilityTimeout"] == "60"


def test_functions_get_their_environment_with_references_resolved(
    fixture_local_aws: LocalAws,
) -> None:
    config = fixture_local_aws.client("lambda").get_function_configuration(
        FunctionName="fx-RecordFunction"
    )
    assert config["Handler"] == "tests.e2e.local_stack_fixture.record"
    assert (config["Timeout"], config["MemorySize"]) == (30, 256)
    assert config["Environment"]["Variables"] == {
        "TABLE": "fx-LedgerTable",
        "QUEUE_URL": fixture_local_aws.outputs["EscalationQueueUrl"],
        "POWERTOOLS_SERVICE_NAME": "fixture",
    }


def test_state_machine_definition_has_every_substitution_resolved(
    fixture_local_aws: LocalAws,
) -> None:
    arn = fixture_local_aws.outputs["StateMachineArn"]
    assert arn == f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:fx-StateMachine"
    description = fixture_local_aws.client("stepfunctions").describe_state_machine(
        stateMachineArn=arn
    )
    definition = json.loads(description["definition"])
    assert "${" not in description["definition"]
    assert definition["States"]["Reject"]["Arguments"]["FunctionName"] == (
        f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:fx-RejectFunction"
    )
    assert description["type"] == "STANDARD"


def test_outputs_are_resolved_and_skipped_resources_are_listed(
    fixture_local_aws: LocalAws, tmp_path: Path
) -> None:
    outputs = fixture_local_aws.outputs
    assert outputs["LedgerTableName"] == "fx-LedgerTable"
    assert outputs["Described"] == "fx in us-east-1"
    assert outputs["Endpoint"] == fixture_local_aws.endpoint
    assert fixture_local_aws.provisioned is not None
    assert fixture_local_aws.provisioned.skipped == {
        "RecordFunctionServiceRoleAAAA1111": "AWS::IAM::Role",
        "LogGroupDDDD4444": "AWS::Logs::LogGroup",
    }
    path = tmp_path / ".local" / "outputs.json"
    fixture_local_aws.write_outputs(path)
    assert json.loads(path.read_text()) == outputs


# -- executions through the real interpreter and in-process handlers --------------------------


def test_handler_runs_in_process_with_a_lambda_context(fixture_local_aws: LocalAws) -> None:
    description, _ = fixture_local_aws.run_case({"case_id": "c-ok"}, name="c-ok")
    assert description["status"] == "SUCCEEDED"
    output = json.loads(description["output"])
    assert output["outcome"] == "COMPLETED"
    assert output["recorded"] == {
        "case_id": "c-ok",
        "table": "fx-LedgerTable",
        "queue_url": fixture_local_aws.outputs["EscalationQueueUrl"],
        "function_name": "fx-RecordFunction",
        "remaining_ms_positive": True,
        "memory": 256,
        "marker_seen": None,
    }
    # The handler's own boto3 call reached the same local AWS: exactly one item for this case.
    items = fixture_local_aws.client("dynamodb").scan(TableName="fx-LedgerTable")["Items"]
    recorded = [item for item in items if item.get("case_id", {}).get("S") == "c-ok"]
    assert len(recorded) == 1


def test_function_environment_does_not_leak_between_invokes(fixture_local_aws: LocalAws) -> None:
    fixture_local_aws.run_case({"case_id": "first"}, name="first")  # Reject sets ONLY_IN_REJECT
    description, _ = fixture_local_aws.run_case({"case_id": "second"}, name="second")
    assert json.loads(description["output"])["recorded"]["marker_seen"] is None
    assert "ONLY_IN_REJECT" not in os.environ
    assert "AWS_LAMBDA_FUNCTION_NAME" not in os.environ


def test_exception_class_name_is_the_error_the_asl_catches(fixture_local_aws: LocalAws) -> None:
    description, history = fixture_local_aws.run_case(
        {"case_id": "c-rej", "reject": 'no "stock"'}, name="c-rej"
    )
    assert description["status"] == "SUCCEEDED"
    assert json.loads(description["output"]) == {
        "outcome": "REJECTED",
        "case_id": "c-rej",
        "error": "CustomRejection",
        "message": 'case c-rej rejected: "no "stock""',
        "summary": "case c-rej failed 2 ways",
    }
    failures = [e["taskFailedEventDetails"] for e in history if e["type"] == "TaskFailed"]
    assert [failure["error"] for failure in failures] == ["CustomRejection"]
    assert json.loads(failures[0]["cause"])["errorType"] == "CustomRejection"


def test_retry_reinvokes_until_the_handler_succeeds(fixture_local_aws: LocalAws) -> None:
    description, history = fixture_local_aws.run_case(
        {"case_id": "c-flaky", "fail_times": 2}, name="c-flaky"
    )
    assert description["status"] == "SUCCEEDED"
    assert json.loads(description["output"])["result"] == {"accepted": True, "calls": 3}
    failed = [e["taskFailedEventDetails"]["error"] for e in history if e["type"] == "TaskFailed"]
    assert failed == ["Flaky", "Flaky"]


def test_retries_exhausted_fail_the_execution_with_the_error_name(
    fixture_local_aws: LocalAws,
) -> None:
    description, history = fixture_local_aws.run_case(
        {"case_id": "c-down", "fail_times": 99}, name="c-down"
    )
    assert description["status"] == "FAILED"
    assert description["error"] == "Flaky"
    assert json.loads(description["cause"])["errorMessage"] == "call 4 failed"  # 1 + 3 retries
    assert sum(1 for e in history if e["type"] == "TaskFailed") == 4


def test_reprovision_gives_a_fresh_account(fixture_local_aws: LocalAws) -> None:
    fixture_local_aws.run_case({"case_id": "c-old"}, name="c-old")
    fixture_local_aws.reprovision()
    sfn = fixture_local_aws.client("stepfunctions")
    executions = sfn.list_executions(stateMachineArn=fixture_local_aws.outputs["StateMachineArn"])
    assert executions["executions"] == []
    items = fixture_local_aws.client("dynamodb").scan(TableName="fx-LedgerTable")["Items"]
    assert items == []


def test_each_dynamodb_request_waits_for_the_request_lock(fixture_local_aws: LocalAws) -> None:
    dynamodb = fixture_local_aws.client("dynamodb")
    done = threading.Event()

    def put() -> None:
        dynamodb.put_item(TableName="fx-LedgerTable", Item={"action_key": {"S": "locked"}})
        done.set()

    with emulator._DYNAMODB_REQUEST_LOCK:
        writer = threading.Thread(target=put)
        writer.start()
        # The request is in flight but cannot be handled while another request holds the lock.
        blocked = not done.wait(timeout=0.5)
    writer.join(timeout=30)
    assert blocked
    assert done.is_set()
    item = dynamodb.get_item(TableName="fx-LedgerTable", Key={"action_key": {"S": "locked"}})
    assert item["Item"]["action_key"] == {"S": "locked"}


def test_concurrent_conditional_claims_have_exactly_one_winner(fixture_local_aws: LocalAws) -> None:
    dynamodb = fixture_local_aws.client("dynamodb")
    outcomes: list[str] = []
    start = threading.Barrier(8)

    def claim(worker: int) -> None:
        start.wait()
        try:
            dynamodb.put_item(
                TableName="fx-LedgerTable",
                Item={"action_key": {"S": "acme#refund#a1"}, "owner": {"S": f"w{worker}"}},
                ConditionExpression="attribute_not_exists(action_key)",
            )
            outcomes.append("claimed")
        except dynamodb.exceptions.ConditionalCheckFailedException:
            outcomes.append("lost")

    workers = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert sorted(outcomes) == ["claimed"] + ["lost"] * 7


def test_run_local_serves_a_stack_until_the_block_ends(local_server: LocalServer) -> None:
    # A second server in this process; it shares moto's state, so the session's fixtures
    # re-provision before their next use.
    source = StackSource(TEMPLATE, "solo", asl_path=None)
    with run_local(source, port=0, time_scale=0) as local:
        endpoint = local.endpoint
        assert local.outputs["LedgerTableName"] == "solo-LedgerTable"
        description, _ = local.run_case({"case_id": "solo-1"})
        assert description["name"] == "solo-1"  # the case id is the execution name
        assert json.loads(description["output"])["outcome"] == "COMPLETED"
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=5)
    # The session's server is reachable again for the executor and the handlers.
    assert os.environ["MOTO_PORT"] == str(local_server.port)
    assert lambda_runtime.current_runtime().endpoint_url == local_server.endpoint


def test_string_variables_with_quotes_pass_through_the_interpreter(
    fixture_local_aws: LocalAws,
) -> None:
    # `case_id` is Assign-ed as a string variable, which moto 5.2.5 would embed unescaped.
    description, _ = fixture_local_aws.run_case({"case_id": 'c"q\\x'}, name="c-quote")
    assert description["status"] == "SUCCEEDED"
    assert json.loads(description["output"])["case_id"] == 'c"q\\x'
