"""The local AWS as one object: server + provisioned stack + clients + `run_case`.

Used by `sagactl local up`, by `make demo` and by the test fixtures (in-process, one server per
test session; `reprovision()` gives each test a fresh account cheaply, its clock back at real
time). `clock.advance(seconds)` moves the local AWS's one clock (local_aws/clock.py).
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from local_aws.clock import LocalClock
from local_aws.emulator import (
    DEFAULT_HOST,
    DEFAULT_REGION,
    LOCAL_ACCOUNT_ID,
    LocalServer,
    client_environment,
)
from local_aws.lambda_runtime import FAKE_CREDENTIALS
from local_aws.provision import ProvisionResult, provision
from local_aws.seed import DEFAULT_SANDBOX_STOCK, seed_inventory
from local_aws.synth import ASL_PATH, find_stack, stack_name_of_template, synthesize
from local_aws.template import load_template

logger = logging.getLogger(__name__)

TERMINAL_STATUSES = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})
DEFAULT_STACK_NAME = "saga-local"


class ExecutionDidNotFinish(TimeoutError):
    """An execution was still running when the bounded wait ran out."""


@dataclass
class StackSource:
    """A synthesized template and the stack name its local resources are named after."""

    template: dict[str, Any]
    stack_name: str
    asl_path: Path | None = ASL_PATH

    @classmethod
    def from_file(
        cls, template_path: Path, stack_name: str | None = None, asl_path: Path | None = ASL_PATH
    ) -> StackSource:
        """A template file; its resources are named after `stack_name`, else after the stack
        the template was synthesized for (as `cdk deploy` would name them), else "saga-local"."""
        name = stack_name or stack_name_of_template(template_path) or DEFAULT_STACK_NAME
        return cls(load_template(template_path), name, asl_path)

    @classmethod
    def from_cloud_assembly(
        cls, cloud_assembly: Path, stack_name: str | None = None
    ) -> StackSource:
        stack = find_stack(cloud_assembly, stack_name)
        return cls(load_template(stack.template_path), stack.stack_name)

    @classmethod
    def synthesized(
        cls,
        outdir: Path | None = None,
        stack_name: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> StackSource:
        """Synthesize the CDK app now (python app.py) into `outdir` (default: a temp dir), with
        `context` over cdk.json's (as `-c` gives it)."""
        directory = outdir or Path(tempfile.mkdtemp(prefix="saga-synth-"))
        stack = synthesize(directory, stack_name=stack_name, context=context)
        return cls(load_template(stack.template_path), stack.stack_name)


@dataclass
class LocalAws:
    """A running local AWS with the stack provisioned into it."""

    server: LocalServer
    source: StackSource
    seed: bool = True
    stock: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_SANDBOX_STOCK))
    provisioned: ProvisionResult | None = None
    # Outputs of what runs beside the stack (the local Stripe server's `StripeApiBase`).
    extra_outputs: dict[str, str] = field(default_factory=dict)
    session: boto3.Session = field(init=False)

    def __post_init__(self) -> None:
        self.session = boto3.Session(
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=self.server.region,
        )

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    @property
    def clock(self) -> LocalClock:
        """The local AWS's clock: `clock.advance(seconds)` moves it (and deletes what TTL
        expires), `clock.now()` reads it."""
        return self.server.clock

    @property
    def outputs(self) -> dict[str, str]:
        """The stack outputs (docs/design.md §8 keys) plus `Endpoint`."""
        if self.provisioned is None:
            raise RuntimeError("the stack is not provisioned")
        return {**self.provisioned.outputs, **self.extra_outputs, "Endpoint": self.endpoint}

    @property
    def environment(self) -> dict[str, str]:
        return client_environment(self.endpoint, self.server.region)

    def client(self, service: str) -> Any:
        config = Config(retries={"mode": "standard", "max_attempts": 3})
        session: Any = self.session  # the stubs type client() per literal service name
        return session.client(service, endpoint_url=self.endpoint, config=config)

    def provision(self) -> ProvisionResult:
        started = time.perf_counter()
        self.provisioned = provision(
            self.source.template,
            self.session,
            endpoint=self.endpoint,
            stack_name=self.source.stack_name,
            asl_path=self.source.asl_path,
            account_id=LOCAL_ACCOUNT_ID,
        )
        inventory = self.provisioned.outputs.get("InventoryTableName")
        if self.seed and inventory:
            seed_inventory(self.client("dynamodb"), inventory, self.stock)
        logger.info(
            "provisioned %s in %.2fs", self.source.stack_name, time.perf_counter() - started
        )
        return self.provisioned

    def reprovision(self) -> ProvisionResult:
        """A fresh account at real time: drop everything (also running executions' state), reset
        the clock, provision again."""
        self.server.reset()
        return self.provision()

    def write_outputs(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.outputs, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    # -- executions -----------------------------------------------------------------------

    @property
    def state_machine_arn(self) -> str:
        arn = self.outputs.get("StateMachineArn")
        if arn:
            return arn
        machines = list(self.provisioned.state_machines.values()) if self.provisioned else []
        if len(machines) != 1:
            raise RuntimeError("no StateMachineArn output and not exactly one state machine")
        return machines[0]

    def start_case(
        self,
        case: Mapping[str, Any],
        *,
        name: str | None = None,
        state_machine_arn: str | None = None,
    ) -> str:
        """StartExecution with a name (always: moto builds a broken ARN without one)."""
        execution_name = name or str(case.get("case_id") or f"run-{uuid.uuid4().hex[:12]}")
        response = self.client("stepfunctions").start_execution(
            stateMachineArn=state_machine_arn or self.state_machine_arn,
            name=execution_name,
            input=json.dumps(case),
        )
        return str(response["executionArn"])

    def execution_status(self, execution_arn: str) -> str | None:
        """The execution's status read in this process (the server's own): no request, so a
        waiter can look often and ask DescribeExecution once it has closed. None for an
        execution this process's server does not know."""
        from moto.stepfunctions.responses import get_backend

        parts = execution_arn.split(":")
        if len(parts) < 8:
            return None
        try:
            execution = get_backend(parts[4], parts[3]).describe_execution(execution_arn)
        except Exception:  # not known here: the caller asks the API
            return None
        return str(execution.status)

    def wait_for_execution(
        self, execution_arn: str, *, timeout_seconds: float = 120.0, poll_seconds: float = 0.05
    ) -> dict[str, Any]:
        """describe_execution until the execution is terminal (bounded number of polls)."""
        sfn = self.client("stepfunctions")
        polls = max(1, int(timeout_seconds / poll_seconds))
        for _ in range(polls):
            description: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
            if description["status"] in TERMINAL_STATUSES:
                return description
            time.sleep(poll_seconds)
        raise ExecutionDidNotFinish(f"{execution_arn} still running after {timeout_seconds}s")

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        sfn = self.client("stepfunctions")
        events: list[dict[str, Any]] = []
        for page in sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn):
            events.extend(page["events"])
        return events

    def run_case(
        self,
        case: Mapping[str, Any],
        *,
        name: str | None = None,
        timeout_seconds: float = 120.0,
        state_machine_arn: str | None = None,
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Start an execution of `case`, wait for it to end: (describe_execution, history)."""
        arn = self.start_case(case, name=name, state_machine_arn=state_machine_arn)
        description = self.wait_for_execution(arn, timeout_seconds=timeout_seconds)
        return description, self.history(arn)


@contextmanager
def run_local(
    source: StackSource,
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    region: str = DEFAULT_REGION,
    seed: bool = True,
    time_scale: float | None = None,
) -> Iterator[LocalAws]:
    """Start the local AWS (port 0 = a free port), provision `source`, stop it afterwards.

    The account starts empty: moto's state is per process, so anything a previous server or
    `mock_aws` left in this process is dropped first.
    """
    server = LocalServer(host, port, region=region, time_scale=time_scale)
    server.start()
    try:
        local = LocalAws(server=server, source=source, seed=seed)
        local.reprovision()
        yield local
    finally:
        server.stop()
