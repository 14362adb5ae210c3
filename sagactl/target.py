"""How a command finds its AWS: the local emulator or an account, and the stack's outputs.

- Local: `--local`, or AWS_ENDPOINT_URL in the environment. The endpoint is AWS_ENDPOINT_URL (else
  the `Endpoint` in the outputs file), with fake credentials; the outputs come from
  `.local/outputs.json` (written by `sagactl local up`; `--outputs` or SAGA_LOCAL_OUTPUTS
  override the path).
- AWS: the default credential chain and region (`--region` overrides), the outputs from
  CloudFormation DescribeStacks of `--stack` (default ReplacementOrderSaga-dev).

Both give the same output keys (docs/design.md §8), and the same notion of now: `Target.now()` is
real
time on AWS and the local AWS's movable clock locally (`sagactl local advance`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from sagactl.clock_client import ClockUnavailable, read_clock
from sagactl.errors import NotFound, SagactlError, TargetError, with_local_hint
from sagactl.paths import PROJECT_ROOT

DEFAULT_STACK_NAME = "ReplacementOrderSaga-dev"
DEFAULT_LOCAL_OUTPUTS = PROJECT_ROOT / ".local" / "outputs.json"
OUTPUTS_ENV = "SAGA_LOCAL_OUTPUTS"
LOCAL_REGION = "us-east-1"
FAKE_KEY = "testing"  # the local AWS accepts any credentials; never real ones
_CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3})


@dataclass
class Target:
    """One AWS (an account or the local emulator) with the saga stack's outputs."""

    session: boto3.Session
    outputs: dict[str, str]
    local: bool
    stack_name: str
    endpoint_url: str | None = None
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def region(self) -> str:
        return str(self.session.region_name or LOCAL_REGION)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            session: Any = self.session  # the stubs type client() per literal service name
            self._clients[service] = session.client(
                service, endpoint_url=self.endpoint_url, config=_CLIENT_CONFIG
            )
        return self._clients[service]

    def now(self) -> float:
        """Epoch seconds in this target's time: every "how long ago / until" sagactl computes
        (lease ends, stuck actions, the redrive window) reads it. Locally it is the local AWS's
        clock, which `sagactl local advance` moves; on AWS, real time."""
        if not self.local or not self.endpoint_url:
            return time.time()
        try:
            return read_clock(self.endpoint_url).now
        except ClockUnavailable as exc:
            raise TargetError(
                f"cannot read the clock of the local AWS ({exc}); is `sagactl local up` running?"
            ) from None

    def now_utc(self) -> datetime:
        """`now()` as an aware UTC datetime (approvals are signed and checked at it)."""
        return datetime.fromtimestamp(self.now(), UTC)

    def output(self, key: str) -> str:
        value = self.outputs.get(key)
        if not value:
            where = "the local outputs" if self.local else f"stack {self.stack_name}"
            raise TargetError(f"{where} has no output {key!r} (outputs: {sorted(self.outputs)})")
        return value

    def optional_output(self, key: str) -> str | None:
        return self.outputs.get(key) or None

    def newer_output(self, key: str, feature: str, error: type[SagactlError]) -> str:
        """An output that a stack deployed before `feature` lacks: `error` says to redeploy."""
        value = self.optional_output(key)
        if value is None:
            where = "the local AWS" if self.local else f"stack {self.stack_name}"
            raise error(
                f"{where} has no {key} output: it predates {feature}; deploy the current stack "
                "(or restart `sagactl local up`)"
            )
        return value

    @property
    def state_machine_arn(self) -> str:
        return self.output("StateMachineArn")

    def execution_arn(self, case_id: str) -> str:
        """The execution named after the case (docs/design.md §2) on the saga's state machine."""
        machine = self.state_machine_arn
        prefix, marker, name = machine.partition(":stateMachine:")
        if not marker:
            raise TargetError(f"not a state machine ARN: {machine}")
        return f"{prefix}:execution:{name}:{case_id}"

    def console_url(self, execution_arn: str) -> str | None:
        """The Step Functions console page of an execution (None locally)."""
        if self.local:
            return None
        partition = execution_arn.split(":")[1] if execution_arn.count(":") > 2 else "aws"
        host = {
            "aws-cn": f"{self.region}.console.amazonaws.cn",
            "aws-us-gov": f"{self.region}.console.amazonaws-us-gov.com",
        }.get(partition, f"{self.region}.console.aws.amazon.com")
        return (
            f"https://{host}/states/home?region={self.region}"
            f"#/v2/executions/details/{quote(execution_arn, safe=':')}"
        )


# Where botocore found the credentials (Credentials.method), as a person configures them.
_CREDENTIAL_SOURCES = {
    "env": "the environment (AWS_ACCESS_KEY_ID)",
    "shared-credentials-file": "the shared credentials file, profile {profile}",
    "config-file": "the config file, profile {profile}",
    "assume-role": "an assumed role, profile {profile}",
    "sso": "IAM Identity Center (SSO), profile {profile}",
    "login": "`aws login`, profile {profile}",
    "custom-process": "a credential_process, profile {profile}",
    "assume-role-with-web-identity": "a web identity token (AWS_WEB_IDENTITY_TOKEN_FILE)",
    "container-role": "the container's role",
    "iam-role": "the instance's role (EC2 instance metadata)",
}


def unreachable_text(endpoint: str, *, local: bool, region: str | None) -> str:
    """Why a command could not connect, as the user chose its target: the local AWS (--local,
    AWS_ENDPOINT_URL), or an account through the default credential chain, with the region
    and the credentials source it used, and how to choose otherwise."""
    if local or os.environ.get("AWS_ENDPOINT_URL"):
        chosen = "AWS_ENDPOINT_URL" if os.environ.get("AWS_ENDPOINT_URL") else "--local"
        return (
            f"cannot reach {endpoint}, the local AWS ({chosen}): is `sagactl local up` running? "
            "(without --local and AWS_ENDPOINT_URL, sagactl uses your AWS account)"
        )
    session = boto3.Session(region_name=region) if region else boto3.Session()
    if region:
        region_source = "--region"
    elif os.environ.get("AWS_DEFAULT_REGION"):
        region_source = "AWS_DEFAULT_REGION"
    else:
        region_source = f"profile {session.profile_name} in the config file"
    try:
        credentials = session.get_credentials()
    except Exception:  # the chain itself failed: say so rather than raise again
        credentials = None
    method = getattr(credentials, "method", None)
    source = _CREDENTIAL_SOURCES.get(str(method), f"{method}").format(profile=session.profile_name)
    overrides = sorted(name for name in os.environ if name.startswith("AWS_ENDPOINT_URL_"))
    endpoint_set = f" (set by {', '.join(overrides)})" if overrides else ""
    text = (
        f"cannot reach {endpoint}{endpoint_set}: sagactl is using AWS (no --local, no "
        f"AWS_ENDPOINT_URL), region {session.region_name} ({region_source}), credentials from "
        f"{source}. Check the network (and HTTPS_PROXY); --region chooses another region, "
        "AWS_PROFILE other credentials"
    )
    hinted = with_local_hint(text)
    if hinted != text:
        return hinted  # a local AWS runs: how to use it
    return (
        f"{text}; for the local AWS instead, run `sagactl local up` and `source .local/env` "
        "(or pass --local)"
    )


def find_target(
    *,
    local: bool = False,
    outputs: Path | None = None,
    stack: str = DEFAULT_STACK_NAME,
    region: str | None = None,
    read_outputs: bool = True,
) -> Target:
    """The local AWS when asked for (or AWS_ENDPOINT_URL is set), else the stack's account;
    there without its outputs unless `read_outputs` (an agent's role may not read them)."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if local or endpoint:
        return local_target(local_outputs_path(outputs), endpoint_url=endpoint)
    return aws_target(stack, region=region, read_outputs=read_outputs)


def local_outputs_path(explicit: Path | None = None) -> Path:
    """The local outputs file: `explicit`, else $SAGA_LOCAL_OUTPUTS, else .local/outputs.json."""
    if explicit is not None:
        return explicit
    from_env = os.environ.get(OUTPUTS_ENV)
    return Path(from_env) if from_env else DEFAULT_LOCAL_OUTPUTS


def read_outputs_file(path: Path) -> dict[str, str]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TargetError(
            f"no local outputs at {path}: start the local AWS with `sagactl local up`"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise TargetError(f"unreadable local outputs {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise TargetError(f"malformed local outputs {path}: expected a JSON object")
    return {str(key): str(value) for key, value in raw.items()}


def _local_session() -> boto3.Session:
    return boto3.Session(
        aws_access_key_id=FAKE_KEY, aws_secret_access_key=FAKE_KEY, region_name=LOCAL_REGION
    )


def local_target(path: Path, *, endpoint_url: str | None = None) -> Target:
    outputs = read_outputs_file(path)
    endpoint = endpoint_url or outputs.get("Endpoint")
    if not endpoint:
        raise TargetError(f"{path} has no Endpoint and AWS_ENDPOINT_URL is not set")
    session = _local_session()
    return Target(
        session=session, outputs=outputs, local=True, stack_name="local", endpoint_url=endpoint
    )


def local_target_from_outputs(outputs: dict[str, str]) -> Target:
    """A local target for an emulator started in this process (the demo, tests)."""
    session = _local_session()
    return Target(
        session=session,
        outputs=dict(outputs),
        local=True,
        stack_name="local",
        endpoint_url=outputs["Endpoint"],
    )


def aws_target(stack_name: str, *, region: str | None = None, read_outputs: bool = True) -> Target:
    session = boto3.Session(region_name=region) if region else boto3.Session()
    target = Target(session=session, outputs={}, local=False, stack_name=stack_name)
    if not read_outputs:
        return target
    try:
        stacks = target.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message")):
            raise NotFound(
                with_local_hint(
                    f"stack {stack_name} does not exist in {target.region}: deploy it "
                    "(`cdk deploy`) or pass --stack / --region"
                )
            ) from None
        raise
    if not stacks:
        raise NotFound(f"stack {stack_name} not found in {target.region}")
    target.outputs = {
        str(output["OutputKey"]): str(output["OutputValue"])
        for output in stacks[0].get("Outputs", [])
    }
    return target
