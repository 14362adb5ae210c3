"""What the stack's EventBridge rules do, in the local AWS.

- The failed-execution rule (stacks/constructs/escalation.py) is provisioned from the template;
  a FAILED, TIMED_OUT or ABORTED execution puts its message on the escalation queue, the
  message the rule's input transformer makes of Step Functions' status-change event.
- The sweeper's schedule (stacks/constructs/monitoring.py) fires on its period.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from local_aws.emulator import LOCAL_ACCOUNT_ID
from local_aws.environment import LocalAws
from local_aws.event_rules import publish
from local_aws.schedules import RuleScheduler
from sagactl.clock_client import advance_clock
from tests.cli.test_awscli import aws as aws_json
from tests.local_clock import local_clock
from tests.queues import drain as drain_queue

__all__ = ["local_clock"]

ROOT = Path(__file__).resolve().parents[2]
CASE = "case-compensation-stuck"
RELEASE_KEY = "acme#release#case-compensation-stuck.reserve"


def load_case(name: str) -> dict[str, Any]:
    case: dict[str, Any] = json.loads((ROOT / "examples" / f"{name}.json").read_text())
    return case


def drain(local: LocalAws, queue_output: str = "EscalationQueueUrl") -> list[dict[str, Any]]:
    """Every message on the queue (bodies parsed), deleted."""
    return drain_queue(local.client("sqs"), local.outputs[queue_output])


def template_rules(local: LocalAws) -> dict[str, dict[str, Any]]:
    resources = local.source.template["Resources"]
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Events::Rule"
    }


def expected_message(description: dict[str, Any]) -> dict[str, Any]:
    """The failed-execution rule's message for this execution, field by field."""
    stop: dt.datetime = description["stopDate"]
    return {
        "kind": "EXECUTION_NOT_SUCCEEDED",
        "status": description["status"],
        "case_id": description["name"],
        "execution": description["executionArn"],
        "error": description.get("error"),
        "cause": description.get("cause"),
        "time": stop.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def test_the_rules_are_provisioned_from_the_template(local_aws: LocalAws) -> None:
    listed = aws_json(local_aws, "events", "list-rules")["Rules"]
    by_pattern = {bool(rule.get("EventPattern")): rule for rule in listed}
    assert len(listed) == 2 == len(by_pattern)
    declared = {bool(p.get("EventPattern")): p for p in template_rules(local_aws).values()}

    failed_rule = by_pattern[True]
    pattern = declared[True]["EventPattern"]
    assert list(pattern["detail"]["stateMachineArn"][0]) == ["Ref"]  # resolved locally:
    pattern["detail"]["stateMachineArn"] = [local_aws.outputs["StateMachineArn"]]
    assert json.loads(failed_rule["EventPattern"]) == pattern
    [target] = aws_json(local_aws, "events", "list-targets-by-rule", "--rule", failed_rule["Name"])[
        "Targets"
    ]
    assert target["InputTransformer"] == declared[True]["Targets"][0]["InputTransformer"]
    assert target["Arn"].endswith(":" + local_aws.outputs["EscalationQueueUrl"].split("/")[-1])

    schedule = by_pattern[False]
    assert schedule["ScheduleExpression"] == declared[False]["ScheduleExpression"]
    [sweeper] = aws_json(local_aws, "events", "list-targets-by-rule", "--rule", schedule["Name"])[
        "Targets"
    ]
    assert sweeper["Arn"].endswith("ToolsSweepStuckActionsFunction")


def test_a_failed_execution_yields_exactly_the_rules_message_and_again_after_a_redrive(
    local_aws: LocalAws,
) -> None:
    case = load_case("compensation-stuck")
    case["sandbox"]["faults"]["release"] = ["timeout"] * 8  # fails now, and once redriven
    description, _ = local_aws.run_case(case)
    assert description["status"] == "FAILED"

    assert drain(local_aws) == [expected_message(description)]
    assert json.loads(expected_message(description)["cause"])["errorType"] == "OutcomeUnknown"

    sfn = local_aws.client("stepfunctions")
    sfn.redrive_execution(executionArn=description["executionArn"])
    again = local_aws.wait_for_execution(description["executionArn"])
    assert (again["status"], again["redriveCount"]) == ("FAILED", 1)

    assert drain(local_aws) == [expected_message(again)]


def test_an_execution_that_succeeds_puts_nothing_from_the_rule(local_aws: LocalAws) -> None:
    description, _ = local_aws.run_case(load_case("happy-path"))

    assert description["status"] == "SUCCEEDED"
    assert drain(local_aws) == []


def test_an_aborted_execution_is_escalated_with_no_error(local_aws: LocalAws) -> None:
    arn = local_aws.start_case(load_case("compensation-stuck"))
    local_aws.client("stepfunctions").stop_execution(executionArn=arn)
    description = local_aws.wait_for_execution(arn)
    assert description["status"] == "ABORTED"

    [message] = [m for m in drain(local_aws) if m["kind"] == "EXECUTION_NOT_SUCCEEDED"]

    assert message == expected_message(description)
    assert (message["status"], message["error"], message["cause"]) == ("ABORTED", None, None)


def test_a_refused_rerun_of_a_resolved_case_is_the_one_failure_the_rule_lets_pass(
    local_aws: LocalAws,
) -> None:
    """The provisioned pattern, matched as the local AWS matches it: any error, a null one or
    none at all is a message for a person; ActionSettled (a rerun of a case a person resolved,
    docs/design.md §3.10) is not, since the decision it would ask for was made."""
    arn = local_aws.outputs["StateMachineArn"].replace(":stateMachine:", ":execution:") + ":x"

    def status_change(**error: Any) -> dict[str, Any]:
        detail = {
            "executionArn": arn,
            "stateMachineArn": local_aws.outputs["StateMachineArn"],
            "name": "case-x",
            "status": "FAILED",
            **error,
        }
        return {
            "version": "0",
            "id": "e-1",
            "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states",
            "account": LOCAL_ACCOUNT_ID,
            "time": "2026-11-30T10:00:00Z",
            "region": "us-east-1",
            "resources": [arn],
            "detail": detail,
        }

    delivered = {
        "TransientError": publish(status_change(error="TransientError", cause="c")),
        "States.Timeout": publish(status_change(error="States.Timeout", cause=None)),
        "null": publish(status_change(error=None, cause=None)),
        "missing": publish(status_change()),
        "ActionSettled": publish(status_change(error="ActionSettled", cause="resolved")),
    }

    assert delivered == {
        "TransientError": 1,
        "States.Timeout": 1,
        "null": 1,
        "missing": 1,
        "ActionSettled": 0,
    }
    queue = local_aws.outputs["EscalationQueueUrl"]
    depth = local_aws.client("sqs").get_queue_attributes(
        QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]["ApproximateNumberOfMessages"]
    assert depth == "4"


def test_a_delivery_that_fails_goes_to_the_targets_dead_letter_queue(
    fixture_local_aws: LocalAws,
) -> None:
    local = fixture_local_aws
    sqs = local.client("sqs")
    dead_letters = sqs.get_queue_url(QueueName="fx-EscalationDlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dead_letters, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    events = local.client("events")
    events.put_rule(Name="to-nowhere", EventPattern=json.dumps({"source": ["saga.test"]}))
    events.put_targets(
        Rule="to-nowhere",
        Targets=[
            {
                "Id": "gone",
                "Arn": dlq_arn.replace("fx-EscalationDlq", "no-such-queue"),
                "DeadLetterConfig": {"Arn": dlq_arn},
            }
        ],
    )
    event = {
        "version": "0",
        "id": "e-1",
        "detail-type": "Test",
        "source": "saga.test",
        "account": LOCAL_ACCOUNT_ID,
        "time": "2026-01-01T00:00:00Z",
        "region": local.server.region,
        "resources": [],
        "detail": {"n": 1},
    }

    assert publish(event) == 0
    [message] = sqs.receive_message(QueueUrl=dead_letters, MessageAttributeNames=["All"])[
        "Messages"
    ]
    assert json.loads(message["Body"]) == event
    attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    assert attributes["RULE_ARN"].endswith(":rule/to-nowhere")
    assert attributes["ERROR_CODE"] == "QueueDoesNotExist"


def test_the_sweeper_runs_on_its_schedule(
    local_aws: LocalAws, local_clock: Callable[[float], None]
) -> None:
    description, _ = local_aws.run_case(load_case("compensation-stuck"))
    assert description["status"] == "FAILED"  # its release is left UNKNOWN
    drain(local_aws)
    local_clock(10 * 60)  # past the sweeper's grace (cdk.json monitoring.stuck_grace_seconds)
    now = [1_000_000.0]
    scheduler = RuleScheduler(LOCAL_ACCOUNT_ID, local_aws.server.region, clock=lambda: now[0])
    [schedule] = [
        r for r in aws_json(local_aws, "events", "list-rules")["Rules"] if "Schedule" in r["Name"]
    ]
    assert schedule["ScheduleExpression"] == "rate(5 minutes)"

    assert scheduler.tick() == []  # the first period starts now
    now[0] += 299
    assert scheduler.tick() == []
    assert drain(local_aws) == []
    now[0] += 1
    assert scheduler.tick() == [schedule["Arn"]]
    [first] = drain(local_aws)
    assert (first["kind"], first["action_key"], first["status"]) == (
        "STUCK_ACTION",
        RELEASE_KEY,
        "UNKNOWN",
    )
    assert scheduler.tick() == []  # once per period
    now[0] += 300
    assert scheduler.tick() == [schedule["Arn"]]
    [second] = drain(local_aws)
    assert second["escalation_id"] == first["escalation_id"]  # the same stuck action, again


def test_the_scheduler_thread_follows_the_local_clock(
    fixture_local_aws: LocalAws, local_clock: Callable[[float], None]
) -> None:
    local = fixture_local_aws
    events = local.client("events")
    events.put_rule(Name="every-minute", ScheduleExpression="rate(1 minute)")
    record = local.outputs["RecordFunctionArn"]
    events.put_targets(
        Rule="every-minute", Targets=[{"Id": "r", "Arn": record, "Input": '{"case_id": "tick"}'}]
    )
    table = local.outputs["LedgerTableName"]

    def ticks() -> int:
        items = local.client("dynamodb").scan(TableName=table)["Items"]
        return sum(1 for item in items if item["case_id"]["S"] == "tick")

    scheduler = RuleScheduler(LOCAL_ACCOUNT_ID, local.server.region, poll_seconds=0.02)
    scheduler.start()
    try:
        for _ in range(500):  # the first tick starts the rule's first period
            if scheduler.tick_count:
                break
            time.sleep(0.01)
        assert ticks() == 0
        local_clock(61)
        for _ in range(500):
            if ticks():
                break
            time.sleep(0.01)
    finally:
        scheduler.stop()
    assert ticks() == 1


def test_an_advance_fires_each_due_schedule_once_before_it_returns(local_aws: LocalAws) -> None:
    """`sagactl local advance` past the sweeper's period: the sweep has run, and its message is
    on the queue, when the advance returns (not at the scheduler thread's next poll), so a
    command right after it always sees the same queue."""
    description, _ = local_aws.run_case(load_case("compensation-stuck"))
    assert description["status"] == "FAILED"  # its release is left UNKNOWN
    drain(local_aws)
    # A thread that never polls within this test: only the advance can make the rule fire.
    scheduler = RuleScheduler(LOCAL_ACCOUNT_ID, local_aws.server.region, poll_seconds=3600)
    local_aws.server.start_schedules(scheduler)
    try:
        scheduler.tick()  # the scheduler has seen the rule: its first period starts now
        short = advance_clock(local_aws.endpoint, 60)
        assert short.effects["scheduled_rules"] == []
        assert drain(local_aws) == []
        reading = advance_clock(local_aws.endpoint, 10 * 60)  # two periods: it fires once
        [message] = drain(local_aws)
    finally:
        local_aws.server.stop_schedules()
    [rule] = reading.effects["scheduled_rules"]
    assert rule.startswith("ReplacementOrderSaga-dev-") and "Schedule" in rule
    assert (message["kind"], message["action_key"]) == ("STUCK_ACTION", RELEASE_KEY)
    assert "scheduled_rules" not in advance_clock(local_aws.endpoint, 600).effects  # stopped
