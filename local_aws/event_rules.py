"""EventBridge rules in the local AWS: Step Functions status-change events reach their targets.

On AWS, Step Functions puts an "Step Functions Execution Status Change" event on the default bus
whenever an execution starts (RUNNING) and when it ends (SUCCEEDED, FAILED, TIMED_OUT, ABORTED);
the rules of the stack (provisioned from the template into moto's EventBridge, see
local_aws.provision) match it and deliver it to their targets. moto does neither: it emits
no such event, and its input transformer pastes values into the template unescaped. Here:

- `install_execution_events()` makes moto's interpreter publish those events;
- `publish(event)` matches an event against the rules of its bus (moto's event-pattern matcher)
  and delivers it to each target: SQS queues and Lambda functions, with `Input`, `InputPath` or
  `InputTransformer` applied as EventBridge applies them (`render_target_input`);
- a delivery that fails goes to the target's dead-letter queue, as EventBridge does after its
  retries.

Delivery is synchronous, at the moment the execution ends: on AWS it is near-real-time, at least
once, and can be late; nothing here should rely on the order of a rule's message and other ones.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
import uuid
from collections.abc import Mapping
from typing import Any

from local_aws.patching import wrap_once
from local_aws.redrive_state import execution_description

logger = logging.getLogger(__name__)

STATUS_CHANGE = "Step Functions Execution Status Change"
STATES_SOURCE = "aws.states"
DEFAULT_BUS = "default"
_MARK = "_saga_event_rules_hook"
# `<name>` placeholders of an input template (the characters < and > cannot be escaped).
_PLACEHOLDER = re.compile(r"<([A-Za-z0-9_.\-]+)>")
_PATH_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


class _Missing:
    """A JSON path that matches nothing in the event."""


MISSING = _Missing()


def _epoch_millis(value: datetime.datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


def _iso_seconds(value: datetime.datetime) -> str:
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_change_event(execution: Any) -> dict[str, Any]:
    """The EventBridge event of an execution's current status (the DescribeExecution fields)."""
    description = execution_description(execution)
    detail: dict[str, Any] = {
        "executionArn": description["executionArn"],
        "stateMachineArn": description["stateMachineArn"],
        "name": description["name"],
        "status": description["status"],
        "startDate": _epoch_millis(description["startDate"]),
        "stopDate": _epoch_millis(description.get("stopDate")),
        "input": description["input"],
        "output": description.get("output"),
        "inputDetails": description["inputDetails"],
        "outputDetails": description.get("outputDetails"),
        "error": description.get("error"),
        "cause": description.get("cause"),
        "redriveCount": description["redriveCount"],
        "redriveDate": _epoch_millis(description.get("redriveDate")),
        "redriveStatus": description["redriveStatus"],
        "redriveStatusReason": description.get("redriveStatusReason"),
    }
    when = description.get("stopDate") or description.get("redriveDate") or description["startDate"]
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": STATUS_CHANGE,
        "source": STATES_SOURCE,
        "account": execution.account_id,
        "time": _iso_seconds(when),
        "region": execution.region_name,
        "resources": [description["executionArn"]],
        "detail": detail,
    }


# --- input transformation ------------------------------------------------------------------------


def json_path_value(event: Any, path: str) -> Any:
    """The value at an EventBridge JSON path (dot notation and array indices), or MISSING."""
    if not path.startswith("$"):
        return MISSING
    value = event
    position = 1
    while position < len(path):
        step = _PATH_STEP.match(path, position)
        if step is None:
            return MISSING
        key, index = step.groups()
        if key is not None and isinstance(value, Mapping) and key in value:
            value = value[key]
        elif index is not None and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return MISSING
        position = step.end()
    return value


def _inside_string(template: str, position: int) -> bool:
    """Whether `position` of a JSON template lies inside a string literal."""
    inside = False
    escaped = False
    for char in template[:position]:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = inside
        elif char == '"':
            inside = not inside
    return inside


def _as_text(value: Any, *, in_string: bool) -> str:
    if in_string:
        # Values are not escaped inside a string; objects and arrays lose their quotes.
        if isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":")).replace('"', "")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def render_input_transformer(
    transformer: Mapping[str, Any], event: Mapping[str, Any], rule_arn: str, rule_name: str
) -> str:
    """The text EventBridge sends for an InputTransformer."""
    template = str(transformer.get("InputTemplate", ""))
    values: dict[str, Any] = {
        name: json_path_value(event, str(path))
        for name, path in (transformer.get("InputPathsMap") or {}).items()
    }
    values.update(
        {
            "aws.events.rule-arn": rule_arn,
            "aws.events.rule-name": rule_name,
            "aws.events.event.ingestion-time": event["time"],
            "aws.events.event": {k: v for k, v in event.items() if k != "detail"},
            "aws.events.event.json": event,
        }
    )
    is_json = template.lstrip()[:1] in ("{", "[")

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            return match.group(0)
        value = values[name]
        if value is MISSING:
            return ""  # a path that matches nothing creates no variable
        in_string = not is_json or _inside_string(template, match.start())
        return _as_text(value, in_string=in_string)

    return _PLACEHOLDER.sub(replace, template)


def render_target_input(
    target: Mapping[str, Any], event: Mapping[str, Any], rule_arn: str, rule_name: str
) -> str:
    """What a target receives: Input, InputPath, InputTransformer, or the whole event."""
    if target.get("Input") is not None:
        return str(target["Input"])
    if target.get("InputPath"):
        value = json_path_value(event, str(target["InputPath"]))
        return "" if value is MISSING else json.dumps(value, separators=(",", ":"))
    if target.get("InputTransformer"):
        return render_input_transformer(target["InputTransformer"], event, rule_arn, rule_name)
    return json.dumps(event, separators=(",", ":"))


# --- delivery ------------------------------------------------------------------------------------


def _arn_parts(arn: str) -> tuple[str, str, str, str]:
    """(service, region, account, resource) of an ARN."""
    parts = arn.split(":", 5)
    if len(parts) < 6:
        raise ValueError(f"not an ARN: {arn!r}")
    return parts[2], parts[3], parts[4], parts[5]


def send_to_queue(queue_arn: str, body: str, attributes: Mapping[str, str] | None = None) -> None:
    from moto.sqs.models import sqs_backends

    _, region, account, name = _arn_parts(queue_arn)
    message_attributes = {
        key: {"DataType": "String", "StringValue": value}
        for key, value in (attributes or {}).items()
    }
    sqs_backends[account][region].send_message(
        queue_name=name, message_body=body, message_attributes=message_attributes or None
    )


def invoke_function(function_arn: str, payload: str) -> tuple[str, bool]:
    """Invoke a Lambda function of the local AWS in this process: (payload, errored)."""
    from moto.awslambda.models import lambda_backends

    _, region, account, resource = _arn_parts(function_arn)
    name = resource.split(":")[1] if resource.startswith("function:") else resource
    function = lambda_backends[account][region].get_function(name)
    response_headers: dict[str, Any] = {}
    body = function.invoke(payload, {"x-amz-invocation-type": "Event"}, response_headers)
    text = body.decode() if isinstance(body, bytes) else str(body)
    return text, "x-amz-function-error" in response_headers


def deliver(target: Mapping[str, Any], text: str) -> None:
    """Send `text` to one rule target (SQS queue or Lambda function)."""
    arn = str(target["Arn"])
    service = _arn_parts(arn)[0]
    if service == "sqs":
        group = (target.get("SqsParameters") or {}).get("MessageGroupId")
        if group:
            raise NotImplementedError("FIFO queue targets are not emulated locally")
        send_to_queue(arn, text)
    elif service == "lambda":
        payload, errored = invoke_function(arn, text)
        if errored:
            # An asynchronous invoke's error is the function's, not a failed delivery.
            logger.warning("rule target %s raised: %s", arn, payload[:500])
    else:
        raise NotImplementedError(f"rule targets of service {service!r} are not emulated locally")


def _dead_letter(
    target: Mapping[str, Any], event: Mapping[str, Any], rule_arn: str, exc: Exception
) -> None:
    queue = (target.get("DeadLetterConfig") or {}).get("Arn")
    if not queue:
        logger.error("rule %s could not deliver to %s: %s", rule_arn, target.get("Arn"), exc)
        return
    send_to_queue(
        str(queue),
        json.dumps(event, separators=(",", ":")),
        {
            "RULE_ARN": rule_arn,
            "TARGET_ARN": str(target.get("Arn")),
            "ERROR_CODE": type(exc).__name__,
            "ERROR_MESSAGE": str(exc)[:256],
        },
    )


def publish(event: Mapping[str, Any], bus: str = DEFAULT_BUS) -> int:
    """Deliver an event to the targets of every enabled rule it matches; returns deliveries."""
    from moto.events.models import events_backends

    backend = events_backends[str(event["account"])][str(event["region"])]
    event_bus = backend.event_buses.get(bus)
    if event_bus is None:
        return 0
    delivered = 0
    for rule in list(event_bus.rules.values()):
        if rule.state != "ENABLED" or not rule.event_pattern.get_pattern():
            continue  # disabled, or a schedule (local_aws.schedules)
        if not rule.event_pattern.matches_event(dict(event)):  # type: ignore[arg-type]
            continue
        for target in list(rule.targets):
            try:
                deliver(target, render_target_input(target, event, rule.arn, rule.name))
                delivered += 1
            except Exception as exc:
                _dead_letter(target, event, rule.arn, exc)
    return delivered


def install_execution_events() -> None:
    """Every execution start and end publishes its status-change event (idempotent)."""
    from moto.stepfunctions.parser.backend.execution import (
        BaseExecutionWorkerCommunication,
        Execution,
    )

    def announce(execution: Any) -> None:
        try:
            publish(status_change_event(execution))
        except Exception:  # never break the execution over its notification
            logger.exception("status-change event of %s not published", execution.exec_arn)

    def wrap_start(original: Any) -> Any:
        def start(self: Any) -> None:
            original(self)
            announce(self)

        return start

    def wrap_terminated(original: Any) -> Any:
        def terminated(self: Any) -> None:
            original(self)
            announce(self.execution)

        return terminated

    wrap_once(Execution, "start", _MARK, wrap_start)
    wrap_once(BaseExecutionWorkerCommunication, "terminated", _MARK, wrap_terminated)
