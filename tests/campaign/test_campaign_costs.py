"""What a campaign case costs the machine, counted (issue 24: 10,000 cases in an hour on two
cores): the requests and clients a case needs, none of them built or sent again for nothing."""

from __future__ import annotations

from typing import Any

from fault_campaign.observe import Observer
from fault_campaign.operator import Operator
from fault_campaign.runner import CaseRunner
from local_aws.environment import TERMINAL_STATUSES, LocalAws
from tests.campaign.test_campaign_findings import _case


def _count_calls(client: Any, operation: str) -> list[str]:
    """Every `operation` request the client sends, recorded as it is sent."""
    sent: list[str] = []
    client.meta.events.register(
        f"before-call.{client.meta.service_model.endpoint_prefix}.{operation}",
        lambda **_: sent.append(operation),
    )
    return sent


def test_waiting_for_an_execution_asks_describe_execution_once_it_has_closed(
    local_aws: LocalAws,
) -> None:
    """The observer sees the close in the server's process and asks the API once: the answer
    it returns is DescribeExecution's, with the execution closed."""
    observer = Observer(local_aws)
    describes = _count_calls(observer.sfn, "DescribeExecution")
    arn = observer.start(_case("case-costs-wait", {}), "case-costs-wait")["executionArn"]

    description = observer.wait(arn, timeout_seconds=120)

    assert description["status"] == "SUCCEEDED"
    assert describes == ["DescribeExecution"]
    assert local_aws.execution_status(arn) in TERMINAL_STATUSES


def test_an_execution_the_server_does_not_know_is_asked_of_the_api(local_aws: LocalAws) -> None:
    unknown = "arn:aws:states:us-east-1:123456789012:execution:nothing:here"
    assert local_aws.execution_status(unknown) is None
    assert local_aws.execution_status("not-an-arn") is None


def test_the_interpreter_reuses_one_lambda_client_per_endpoint(local_aws: LocalAws) -> None:
    """moto's Step Functions interpreter asks for a Lambda client for every task; the local AWS
    builds one per region, service and endpoint."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import (
        lambda_eval_utils,
    )

    tasks: Any = lambda_eval_utils  # the function the Lambda task calls, as it calls it
    first = tasks.boto_client_for(region="us-east-1", service="lambda")
    again = tasks.boto_client_for(region="us-east-1", service="lambda", state_credentials=object())
    other = tasks.boto_client_for(region="eu-west-1", service="lambda")

    assert again is first
    assert other is not first
    assert first.meta.endpoint_url == local_aws.endpoint.replace("127.0.0.1", "localhost")


def test_the_operator_builds_its_clients_once_per_account(local_aws: LocalAws) -> None:
    runner = CaseRunner(Observer(local_aws))

    first, second = Operator(runner, 8), Operator(runner, 8)

    assert first.target is second.target
    assert CaseRunner(Observer(local_aws)).operator_target is not first.target
