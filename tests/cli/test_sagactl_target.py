"""How sagactl finds its AWS: stack outputs by DescribeStacks (moto), console URLs by region."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from sagactl.errors import NotFound
from sagactl.target import Target, aws_target

SAGACTL = Path(sys.executable).parent / "sagactl"
MACHINE = "arn:aws:states:eu-west-1:123456789012:stateMachine:ReplacementOrderSaga-dev-Sm"
TEMPLATE = {
    "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
    "Outputs": {
        "StateMachineArn": {"Value": MACHINE},
        "EscalationQueueUrl": {"Value": {"Ref": "Queue"}},
    },
}


@mock_aws
def test_aws_target_reads_the_stack_outputs_by_name() -> None:
    boto3.client("cloudformation", region_name="eu-west-1").create_stack(
        StackName="ReplacementOrderSaga-dev", TemplateBody=json.dumps(TEMPLATE)
    )

    target = aws_target("ReplacementOrderSaga-dev", region="eu-west-1")

    assert not target.local and target.region == "eu-west-1"
    arn = target.execution_arn("case-7")
    assert arn == (
        "arn:aws:states:eu-west-1:123456789012:execution:ReplacementOrderSaga-dev-Sm:case-7"
    )
    assert target.console_url(arn) == (
        "https://eu-west-1.console.aws.amazon.com/states/home?region=eu-west-1"
        f"#/v2/executions/details/{arn}"
    )
    assert target.optional_output("EscalationQueueUrl")


@mock_aws
def test_aws_target_of_a_missing_stack_is_not_found() -> None:
    with pytest.raises(NotFound, match="stack ReplacementOrderSaga-qa does not exist in us-east-1"):
        aws_target("ReplacementOrderSaga-qa", region="us-east-1")


def test_local_targets_have_no_console_url() -> None:
    target = Target(
        session=boto3.Session(region_name="us-east-1"),
        outputs={"StateMachineArn": "arn:aws:states:us-east-1:1:stateMachine:M"},
        local=True,
        stack_name="local",
        endpoint_url="http://127.0.0.1:1",
    )
    assert target.console_url(target.execution_arn("c")) is None


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens once it is closed


def _sagactl_without_local_env(
    tmp_path: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`sagactl ARGS` as a user runs it in a shell with no local AWS environment: only `env`
    (fake credentials always; the endpoint a closed loopback port, so nothing reaches AWS)."""
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_ENDPOINT_URL_CLOUDFORMATION": f"http://127.0.0.1:{_closed_port()}",
        "AWS_MAX_ATTEMPTS": "1",
    }
    return subprocess.run(
        [str(SAGACTL), *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _says_how_to_choose_the_local_aws(rest: str) -> bool:
    generic = (
        "; for the local AWS instead, run `sagactl local up` and `source .local/env` "
        "(or pass --local)"
    )
    return rest == generic or rest.startswith("; a local AWS is running (pid ")


def test_an_unreachable_aws_names_the_endpoint_region_and_credentials_it_used(
    tmp_path: Path,
) -> None:
    endpoint_env = "(set by AWS_ENDPOINT_URL_CLOUDFORMATION)"
    from_env = _sagactl_without_local_env(
        tmp_path,
        "escalations",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="eu-west-1",
    )
    assert from_env.returncode == 1
    said = from_env.stderr.strip()
    told = (
        f"{endpoint_env}: sagactl is using AWS (no --local, no AWS_ENDPOINT_URL), region "
        "eu-west-1 (AWS_DEFAULT_REGION), credentials from the environment (AWS_ACCESS_KEY_ID). "
        "Check the network (and HTTPS_PROXY); --region chooses another region, AWS_PROFILE "
        "other credentials"
    )
    assert said.startswith("sagactl: cannot reach http://127.0.0.1:") and told in said, said
    assert _says_how_to_choose_the_local_aws(said.partition(told)[2]), said
    assert "is `sagactl local up` running?" not in said

    (tmp_path / "credentials").write_text(
        "[ops]\naws_access_key_id = testing\naws_secret_access_key = testing\n", encoding="utf-8"
    )
    (tmp_path / "config").write_text("[profile ops]\nregion = eu-central-1\n", encoding="utf-8")
    by_profile = _sagactl_without_local_env(tmp_path, "status", "case-7", AWS_PROFILE="ops")
    assert (
        "region eu-central-1 (profile ops in the config file), credentials from the shared "
        "credentials file, profile ops."
    ) in by_profile.stderr
    by_flag = _sagactl_without_local_env(
        tmp_path, "status", "case-7", "--region", "us-west-2", AWS_PROFILE="ops"
    )
    assert "region us-west-2 (--region), credentials from the shared" in by_flag.stderr


def test_an_unreachable_local_aws_asks_whether_it_runs(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    outputs = tmp_path / "outputs.json"
    outputs.write_text(
        json.dumps({"Endpoint": endpoint, "CasesTableName": "cases"}), encoding="utf-8"
    )

    result = _sagactl_without_local_env(
        tmp_path,
        "escalations",
        "--local",
        "--outputs",
        str(outputs),
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )

    assert result.returncode == 1
    assert (
        result.stderr.startswith(f"sagactl: cannot reach {endpoint}")
        and (
            ", the local AWS (--local): is `sagactl local up` running? (without --local and "
            "AWS_ENDPOINT_URL, sagactl uses your AWS account)"
        )
        in result.stderr
    ), result.stderr
