"""Provision the local AWS from the synthesized CloudFormation template and the ASL file.

`cdk deploy` into moto's CloudFormation is not reliable (docs/design.md §7), so the emulated
resources
are created directly with boto3: DynamoDB tables, SQS queues, Lambda functions (their code runs
in-process, moto only holds a dummy zip), Step Functions state machines and EventBridge rules
with their targets (moto stores them; local_aws.event_rules and local_aws.schedules make
them fire), KMS keys (an approver's signing key gets its local, deterministic identity:
local_aws.approval_keys) and their aliases, SSM String parameters (each tenant's agent
configuration, read by `sagactl mcp`). Every other resource type is skipped (logged at
debug level); references to it resolve to placeholder ARNs (a role's carry a RoleId too).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from local_aws.approval_keys import create_local_key
from local_aws.tables import TABLE_TYPES, create_table
from local_aws.template import (
    PhysicalResource,
    ResolutionContext,
    TemplateError,
    readable_logical_id,
)
from saga.approvals import APPROVER_TAG, GENERATION_TAG, TENANT_TAG

logger = logging.getLogger(__name__)

QUEUE_TYPE = "AWS::SQS::Queue"
FUNCTION_TYPE = "AWS::Lambda::Function"
STATE_MACHINE_TYPE = "AWS::StepFunctions::StateMachine"
RULE_TYPE = "AWS::Events::Rule"
KMS_KEY_TYPE = "AWS::KMS::Key"
KMS_ALIAS_TYPE = "AWS::KMS::Alias"
PARAMETER_TYPE = "AWS::SSM::Parameter"
EMULATED_TYPES = (
    *TABLE_TYPES,
    QUEUE_TYPE,
    FUNCTION_TYPE,
    STATE_MACHINE_TYPE,
    RULE_TYPE,
    KMS_KEY_TYPE,
    KMS_ALIAS_TYPE,
    PARAMETER_TYPE,
)
# The parts of a rule target that EventBridge's PutTargets takes as they are.
_TARGET_KEYS = (
    "Id",
    "Arn",
    "RoleArn",
    "Input",
    "InputPath",
    "InputTransformer",
    "RetryPolicy",
    "DeadLetterConfig",
    "SqsParameters",
)

LOCAL_ROLE_NAME = "saga-local-execution-role"
_TRUST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
            "Action": "sts:AssumeRole",
        }
    ],
}
# Which service prefix a skipped resource type's placeholder ARN gets.
_PLACEHOLDER_SERVICES = {"AWS::IAM::Role": "iam", "AWS::Logs::LogGroup": "logs"}


@dataclass
class ProvisionResult:
    """What was created locally, by logical id, and the resolved stack outputs."""

    stack_name: str
    outputs: dict[str, str]
    tables: dict[str, str] = field(default_factory=dict)
    queues: dict[str, str] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)
    state_machines: dict[str, str] = field(default_factory=dict)
    rules: dict[str, str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # alias name -> key ARN
    parameters: dict[str, str] = field(default_factory=dict)  # logical id -> parameter name
    skipped: dict[str, str] = field(default_factory=dict)
    # Resolves any template value in this account's terms (the IAM checks read the policies).
    resolver: ResolutionContext | None = None


def dummy_lambda_zip() -> bytes:
    """moto stores a code package; the code actually run is the in-process handler."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "served in-process by sagactl local\n")
    return buffer.getvalue()


class _Provisioner:
    def __init__(
        self,
        *,
        template: Mapping[str, Any],
        session: boto3.Session,
        endpoint: str | None,
        stack_name: str,
        asl_path: Path | None,
        account_id: str,
    ) -> None:
        self.template = template
        self.resources: dict[str, Any] = dict(template.get("Resources", {}))
        self.region = session.region_name or "us-east-1"
        self.stack_name = stack_name
        self.asl_path = asl_path
        self.ctx = ResolutionContext(
            stack_name=stack_name,
            region=self.region,
            account_id=account_id,
            template=template,
            fallback=self._placeholder,
        )
        self.dynamodb = session.client("dynamodb", endpoint_url=endpoint)
        self.sqs = session.client("sqs", endpoint_url=endpoint)
        self.lambda_ = session.client("lambda", endpoint_url=endpoint)
        self.sfn = session.client("stepfunctions", endpoint_url=endpoint)
        self.events = session.client("events", endpoint_url=endpoint)
        self.iam = session.client("iam", endpoint_url=endpoint)
        self.kms = session.client("kms", endpoint_url=endpoint)
        self.ssm = session.client("ssm", endpoint_url=endpoint)
        self.result = ProvisionResult(stack_name=stack_name, outputs={})

    # -- naming ---------------------------------------------------------------------------

    def _arn(self, service: str, resource: str, *, regional: bool = True) -> str:
        region = self.region if regional else ""
        return f"arn:aws:{service}:{region}:{self.ctx.account_id}:{resource}"

    def _name(self, logical_id: str, explicit: Any = None) -> str:
        if explicit is not None:
            return str(self.ctx.resolve(explicit))
        return f"{self.stack_name}-{readable_logical_id(logical_id)}"

    def _placeholder(self, logical_id: str) -> PhysicalResource:
        kind = self.resources[logical_id].get("Type", "")
        name = self._name(logical_id)
        service = _PLACEHOLDER_SERVICES.get(
            kind, kind.split("::")[1].lower() if "::" in kind else "x"
        )
        if service == "iam":
            arn = self._arn("iam", f"role/{name}", regional=False)
            # A role's unique id (aws:userid names it): AROA and 17 characters, stable per name.
            digest = hashlib.sha256(arn.encode()).hexdigest().upper()
            return PhysicalResource(
                ref=name, attributes={"Arn": arn, "RoleId": f"AROA{digest[:17]}"}
            )
        return PhysicalResource(ref=name, attributes={"Arn": self._arn(service, name)})

    def _of_type(self, *types: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            (logical_id, resource.get("Properties", {}))
            for logical_id, resource in self.resources.items()
            if resource.get("Type") in types
        ]

    def plan(self) -> None:
        """Local names and ARNs of everything emulated, known before anything is created."""
        for logical_id, props in self._of_type(*TABLE_TYPES):
            name = self._name(logical_id, props.get("TableName"))
            arn = self._arn("dynamodb", f"table/{name}")
            self.ctx.resources[logical_id] = PhysicalResource(
                ref=name, attributes={"Arn": arn, "StreamArn": f"{arn}/stream/local"}
            )
        for logical_id, props in self._of_type(FUNCTION_TYPE):
            name = self._name(logical_id, props.get("FunctionName"))
            self.ctx.resources[logical_id] = PhysicalResource(
                ref=name, attributes={"Arn": self._arn("lambda", f"function:{name}")}
            )
        for logical_id, props in self._of_type(STATE_MACHINE_TYPE):
            name = self._name(logical_id, props.get("StateMachineName"))
            arn = self._arn("states", f"stateMachine:{name}")
            self.ctx.resources[logical_id] = PhysicalResource(
                ref=arn, attributes={"Arn": arn, "Name": name}
            )
        for logical_id, props in self._of_type(RULE_TYPE):
            name = self._name(logical_id, props.get("Name"))
            self.ctx.resources[logical_id] = PhysicalResource(
                ref=name, attributes={"Arn": self._arn("events", f"rule/{name}")}
            )
        for logical_id, props in self._of_type(PARAMETER_TYPE):
            name = str(self.ctx.resolve(props["Name"]))  # the stack names each one
            self.ctx.resources[logical_id] = PhysicalResource(
                ref=name, attributes={"Type": str(props.get("Type", "String"))}
            )
        for logical_id, resource in self.resources.items():
            if resource.get("Type") not in EMULATED_TYPES:
                self.result.skipped[logical_id] = str(resource.get("Type"))
                logger.debug("not emulated locally: %s (%s)", logical_id, resource.get("Type"))

    # -- creation -------------------------------------------------------------------------

    def create_tables(self) -> None:
        for logical_id, raw_props in self._of_type(*TABLE_TYPES):
            name = self.ctx.resources[logical_id].ref
            create_table(self.dynamodb, name, self.ctx.resolve(raw_props))
            self.result.tables[logical_id] = name

    def create_keys(self) -> None:
        """KMS keys, before anything that names them (a function's APPROVAL_KEYS)."""
        for logical_id, raw_props in self._of_type(KMS_KEY_TYPE):
            props = self.ctx.resolve(raw_props)
            tags = {str(tag["Key"]): str(tag["Value"]) for tag in props.get("Tags", [])}
            if TENANT_TAG in tags and APPROVER_TAG in tags:
                arn = create_local_key(
                    self.kms,
                    tenant=tags[TENANT_TAG],
                    approver=tags[APPROVER_TAG],
                    generation=int(tags.get(GENERATION_TAG, "1")),
                    account_id=self.ctx.account_id,
                    region=self.region,
                    description=str(props.get("Description", "")),
                )
            else:
                arn = str(
                    self.kms.create_key(
                        KeySpec=props.get("KeySpec", "SYMMETRIC_DEFAULT"),
                        KeyUsage=props.get("KeyUsage", "ENCRYPT_DECRYPT"),
                        Description=str(props.get("Description", "")),
                    )["KeyMetadata"]["Arn"]
                )
            key_id = arn.rsplit("/", 1)[-1]
            self.ctx.resources[logical_id] = PhysicalResource(
                ref=key_id, attributes={"Arn": arn, "KeyId": key_id}
            )
            self.result.keys[logical_id] = arn

    def create_aliases(self) -> None:
        """KMS aliases (the approval keys' names the functions resolve, docs/design.md §9)."""
        for logical_id, raw_props in self._of_type(KMS_ALIAS_TYPE):
            props = self.ctx.resolve(raw_props)
            name, target = str(props["AliasName"]), str(props["TargetKeyId"])
            self.kms.create_alias(AliasName=name, TargetKeyId=target)
            key_arn = str(self.kms.describe_key(KeyId=name)["KeyMetadata"]["Arn"])
            self.ctx.resources[logical_id] = PhysicalResource(ref=name)
            self.result.aliases[name] = key_arn

    def create_queues(self) -> None:
        queues = self._of_type(QUEUE_TYPE)
        # Dead-letter queues first: a redrive policy names its target's ARN.
        queues.sort(key=lambda item: "RedrivePolicy" in item[1])
        for logical_id, raw_props in queues:
            name = self._name(logical_id, raw_props.get("QueueName"))
            if raw_props.get("FifoQueue") and not name.endswith(".fifo"):
                name += ".fifo"
            props = self.ctx.resolve(raw_props)
            attributes: dict[Any, str] = {}
            for key in (
                "VisibilityTimeout",
                "MessageRetentionPeriod",
                "DelaySeconds",
                "ReceiveMessageWaitTimeSeconds",
                "FifoQueue",
                "ContentBasedDeduplication",
            ):
                if key in props:
                    value = props[key]
                    attributes[key] = str(value).lower() if isinstance(value, bool) else str(value)
            if "RedrivePolicy" in props:
                attributes["RedrivePolicy"] = json.dumps(props["RedrivePolicy"])
            url = self.sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
            arn = self._arn("sqs", name)
            self.ctx.resources[logical_id] = PhysicalResource(
                ref=url, attributes={"Arn": arn, "QueueUrl": url, "QueueName": name}
            )
            self.result.queues[logical_id] = url

    def _execution_role(self) -> str:
        try:
            role = self.iam.create_role(
                RoleName=LOCAL_ROLE_NAME, AssumeRolePolicyDocument=json.dumps(_TRUST_POLICY)
            )
        except self.iam.exceptions.EntityAlreadyExistsException:
            role = self.iam.get_role(RoleName=LOCAL_ROLE_NAME)
        return str(role["Role"]["Arn"])

    def create_functions(self, role_arn: str) -> None:
        code = dummy_lambda_zip()
        for logical_id, raw_props in self._of_type(FUNCTION_TYPE):
            name = self.ctx.resources[logical_id].ref
            handler = raw_props.get("Handler")
            if not handler:
                raise TemplateError(f"function {logical_id} has no Handler (container images?)")
            variables = self.ctx.resolve(raw_props.get("Environment", {}).get("Variables", {}))
            request: dict[str, Any] = {
                "FunctionName": name,
                "Runtime": raw_props.get("Runtime", "python3.12"),
                "Role": role_arn,
                "Handler": self.ctx.resolve(handler),
                "Code": {"ZipFile": code},
                "Timeout": int(self.ctx.resolve(raw_props.get("Timeout", 3))),
                "MemorySize": int(self.ctx.resolve(raw_props.get("MemorySize", 128))),
                "Environment": {"Variables": {k: str(v) for k, v in variables.items()}},
            }
            if raw_props.get("Architectures"):
                request["Architectures"] = raw_props["Architectures"]
            self.lambda_.create_function(**request)
            self.result.functions[logical_id] = name

    def _definition(self, logical_id: str, props: Mapping[str, Any]) -> str:
        if "DefinitionString" in props:
            definition = self.ctx.resolve(props["DefinitionString"])
        elif "Definition" in props:
            definition = json.dumps(self.ctx.resolve(props["Definition"]))
        elif self.asl_path is not None:
            definition = self.asl_path.read_text(encoding="utf-8")
        else:
            raise TemplateError(f"state machine {logical_id} has no inline definition")
        if not isinstance(definition, str) or not definition.strip():
            raise TemplateError(f"state machine {logical_id} has an empty definition")
        substitutions = self.ctx.resolve(props.get("DefinitionSubstitutions", {}))
        for key, value in substitutions.items():
            definition = definition.replace(f"${{{key}}}", str(value))
        return definition

    def create_state_machines(self, role_arn: str) -> None:
        for logical_id, props in self._of_type(STATE_MACHINE_TYPE):
            physical = self.ctx.resources[logical_id]
            definition = self._definition(logical_id, props)
            machine_type: Any = str(props.get("StateMachineType", "STANDARD"))
            try:
                arn = self.sfn.create_state_machine(
                    name=physical.attributes["Name"],
                    definition=definition,
                    roleArn=role_arn,
                    type=machine_type,
                )["stateMachineArn"]
            except self.sfn.exceptions.InvalidDefinition as exc:
                # Refused as AWS would refuse it (local_aws/definition_validation.py).
                message = exc.response["Error"]["Message"]
                raise TemplateError(f"state machine {logical_id}: {message}") from exc
            if arn != physical.ref:
                raise TemplateError(f"state machine ARN {arn} differs from planned {physical.ref}")
            self.result.state_machines[logical_id] = arn

    def create_rules(self) -> None:
        for logical_id, raw_props in self._of_type(RULE_TYPE):
            name = self.ctx.resources[logical_id].ref
            props = self.ctx.resolve(raw_props)
            bus = str(props.get("EventBusName", "default"))
            if bus != "default":
                raise TemplateError(f"rule {logical_id}: only the default event bus is emulated")
            request: dict[str, Any] = {"Name": name, "State": props.get("State", "ENABLED")}
            if "EventPattern" in props:
                request["EventPattern"] = json.dumps(props["EventPattern"])
            if "ScheduleExpression" in props:
                request["ScheduleExpression"] = props["ScheduleExpression"]
            if "Description" in props:
                request["Description"] = props["Description"]
            self.events.put_rule(**request)
            targets = [
                {key: target[key] for key in _TARGET_KEYS if key in target}
                for target in props.get("Targets", [])
            ]
            if targets:
                self.events.put_targets(Rule=name, Targets=targets)
            self.result.rules[logical_id] = name

    def create_parameters(self) -> None:
        """SSM String parameters, once what their values name exists."""
        for logical_id, raw_props in self._of_type(PARAMETER_TYPE):
            props = self.ctx.resolve(raw_props)
            if props.get("Type", "String") != "String":
                raise TemplateError(f"parameter {logical_id}: only String parameters are emulated")
            request: dict[str, Any] = {
                "Name": str(props["Name"]),
                "Value": str(props["Value"]),
                "Type": "String",
                "Tier": str(props.get("Tier", "Standard")),
            }
            if props.get("Description"):
                request["Description"] = str(props["Description"])
            self.ssm.put_parameter(**request)
            self.result.parameters[logical_id] = request["Name"]

    def resolve_outputs(self) -> None:
        for key, output in self.template.get("Outputs", {}).items():
            try:
                self.result.outputs[key] = str(self.ctx.resolve(output["Value"]))
            except TemplateError as exc:
                logger.debug("output %s not available locally: %s", key, exc)

    def run(self) -> ProvisionResult:
        self.plan()
        self.create_keys()
        self.create_aliases()
        self.create_tables()
        self.create_queues()
        role_arn = self._execution_role()
        self.create_functions(role_arn)
        self.create_state_machines(role_arn)
        self.create_rules()
        self.create_parameters()
        self.resolve_outputs()
        self.result.resolver = self.ctx
        return self.result


def provision(
    template: Mapping[str, Any],
    session: boto3.Session,
    *,
    endpoint: str | None,
    stack_name: str,
    asl_path: Path | None = None,
    account_id: str = "123456789012",
) -> ProvisionResult:
    """Create the template's emulated resources in the local AWS at `endpoint`.

    `asl_path` is used only when a state machine has no inline definition in the template.
    """
    return _Provisioner(
        template=template,
        session=session,
        endpoint=endpoint,
        stack_name=stack_name,
        asl_path=asl_path,
        account_id=account_id,
    ).run()
