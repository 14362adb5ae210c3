"""The local AWS refuses, at CreateStateMachine and UpdateStateMachine, a definition whose JSONata
the reference parser rejects, with AWS's InvalidDefinition; it answers ValidateStateMachine-
Definition as AWS does. boto3 here; the real AWS CLI in tests/cli/test_awscli_validation.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws import jsonata_reference
from local_aws.definition_validation import jsonata_expressions
from local_aws.environment import LocalAws
from local_aws.jsonata_reference import ParseError
from tests.old_escape import CATCH_ALL, FIXED_TEXT, OLD_ESCAPE, OLD_ESCAPE_REFUSAL

ROLE = "arn:aws:iam::123456789012:role/saga-local-execution-role"


def deployed_definition(local: LocalAws) -> str:
    sfn = local.client("stepfunctions")
    text: str = sfn.describe_state_machine(stateMachineArn=local.state_machine_arn)["definition"]
    return text


def with_old_escape(definition: str) -> str:
    assert definition.count(FIXED_TEXT) == 1
    return definition.replace(FIXED_TEXT, OLD_ESCAPE)


def refusal(call: Callable[[], Any]) -> dict[str, Any]:
    with pytest.raises(ClientError) as caught:
        call()
    error: dict[str, Any] = dict(caught.value.response["Error"])
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    return error


def test_create_refuses_the_old_catch_all_and_creates_nothing(local_aws: LocalAws) -> None:
    sfn = local_aws.client("stepfunctions")
    broken = with_old_escape(deployed_definition(local_aws))
    before = sfn.list_state_machines()["stateMachines"]

    error = refusal(
        lambda: sfn.create_state_machine(name="broken", definition=broken, roleArn=ROLE)
    )

    assert error == {"Code": "InvalidDefinition", "Message": OLD_ESCAPE_REFUSAL}
    assert sfn.list_state_machines()["stateMachines"] == before


def test_update_refuses_and_keeps_the_running_definition(local_aws: LocalAws) -> None:
    sfn = local_aws.client("stepfunctions")
    deployed = deployed_definition(local_aws)
    arn = local_aws.state_machine_arn

    error = refusal(
        lambda: sfn.update_state_machine(stateMachineArn=arn, definition=with_old_escape(deployed))
    )

    assert error == {"Code": "InvalidDefinition", "Message": OLD_ESCAPE_REFUSAL}
    assert deployed_definition(local_aws) == deployed
    sfn.update_state_machine(stateMachineArn=arn, definition=deployed)  # the valid one is taken


def test_a_grammar_error_is_an_invalid_definition_too(local_aws: LocalAws) -> None:
    sfn = local_aws.client("stepfunctions")
    teleport = {"StartAt": "E", "States": {"E": {"Type": "Teleport", "End": True}}}
    error = refusal(
        lambda: sfn.create_state_machine(name="t", definition=json.dumps(teleport), roleArn=ROLE)
    )
    assert error["Code"] == "InvalidDefinition"
    assert error["Message"].startswith(
        "Invalid State Machine Definition: 'SCHEMA_VALIDATION_FAILED"
    )
    assert "Teleport" in error["Message"]


def test_validate_state_machine_definition_answers_in_aws_shape(local_aws: LocalAws) -> None:
    sfn = local_aws.client("stepfunctions")
    deployed = deployed_definition(local_aws)
    two_errors = {
        "QueryLanguage": "JSONata",
        "StartAt": "E",
        "States": {
            "E": {"Type": "Pass", "Output": {"v": "{% a[1,2) %}", "w": "{% 1 + %}"}, "End": True}
        },
    }

    ok = sfn.validate_state_machine_definition(definition=deployed, type="STANDARD")
    failed = sfn.validate_state_machine_definition(definition=with_old_escape(deployed))
    capped = sfn.validate_state_machine_definition(definition=json.dumps(two_errors), maxResults=1)
    not_json = sfn.validate_state_machine_definition(definition="{not json")

    assert (ok["result"], ok["diagnostics"], ok["truncated"]) == ("OK", [], False)
    assert failed["result"] == "FAIL"
    assert failed["diagnostics"] == [
        {
            "severity": "ERROR",
            "code": "INVALID_JSONATA_EXPRESSION",
            "message": 'Unsupported escape sequence: \\"\'"',
            "location": CATCH_ALL,
        }
    ]
    assert capped["result"] == "FAIL" and capped["truncated"] is True
    assert [d["location"] for d in capped["diagnostics"]] == ["/States/E/Output/v"]
    assert not_json["result"] == "FAIL"
    assert [d["code"] for d in not_json["diagnostics"]] == ["INVALID_JSON_DESCRIPTION"]


def test_reprovisioning_reuses_the_verdict_per_definition_hash(
    local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test re-provisions the same definition: no second reference parse (no Node run)."""
    batches: list[int] = []
    parse = jsonata_reference.parse_errors

    def counting(expressions: Sequence[str]) -> list[ParseError | None]:
        batches.append(len(expressions))
        return parse(expressions)

    monkeypatch.setattr("local_aws.definition_validation.parse_errors", counting)
    local_aws.reprovision()
    local_aws.reprovision()
    assert batches == []

    sfn = local_aws.client("stepfunctions")
    changed = deployed_definition(local_aws).replace('"Comment": "', '"Comment": "changed: ', 1)
    sfn.update_state_machine(stateMachineArn=local_aws.state_machine_arn, definition=changed)
    sfn.update_state_machine(stateMachineArn=local_aws.state_machine_arn, definition=changed)
    # One Node run for the new text, with every expression in it.
    assert batches == [len(list(jsonata_expressions(json.loads(changed))))]
