"""A request the local AWS answers with a 500 leaves its traceback (local_aws.server_errors):
a client sees only "Internal Server Error", and the local modes silence moto's logger."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from local_aws.environment import LocalAws
from local_aws.server_errors import recent_server_errors


def test_the_traceback_of_a_request_answered_with_a_500_is_kept_once(
    fixture_local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    def broken(self: object, execution_arn: str) -> None:
        raise RuntimeError("history unreadable")

    monkeypatch.setattr(StepFunctionsParserBackend, "get_execution_history", broken)
    recent_server_errors()  # forget earlier ones
    arn = "arn:aws:states:us-east-1:123456789012:execution:m:e"
    with pytest.raises(ClientError) as caught:
        fixture_local_aws.client("stepfunctions").get_execution_history(executionArn=arn)

    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    errors = recent_server_errors()
    assert errors  # one per attempt of the client's (botocore retries a 500)
    for error in errors:
        assert error.startswith("POST / AWSStepFunctions.GetExecutionHistory\n")
        assert error.rstrip().endswith("RuntimeError: history unreadable")
    assert recent_server_errors() == []  # each reported once
