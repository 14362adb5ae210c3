"""The sections of the cdk context (stacks/config.py composes them into SagaConfig): the ledger,
each approver's keys, the agent gateway, the functions, the workflow, monitoring. Each validates
its own values; what involves two sections is SagaConfig's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, get_args

from pydantic import AfterValidator, BeforeValidator, model_validator

from saga.settings import LogLevel
from stacks.context import (
    ContextSection,
    boolean,
    from_json,
    invalid,
    positive_int,
    refused,
    string_list,
)

_LOG_RETENTION_DAYS = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557}
    | {2922, 3288, 3653}
)


def _log_retention(value: int) -> int:
    if value not in _LOG_RETENTION_DAYS:
        raise invalid(
            f"must be one of CloudWatch's values {sorted(_LOG_RETENTION_DAYS)}, got {value}"
        )
    return value


def _log_level(value: Any) -> str:
    if value not in get_args(LogLevel):
        raise invalid(f"must be DEBUG, INFO, WARNING or ERROR, got {value!r}")
    return str(value)


Count = Annotated[int, positive_int()]


class LedgerConfig(ContextSection):
    attempt_budget: Count
    retention_days: Count
    lease_margin_seconds: Count

    @property
    def retention_seconds(self) -> int:
        return self.retention_days * 86_400


_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$")
# An IAM user or role (any path), or an account's root: what `aws:PrincipalArn` can equal. An
# `sts:` ARN names a session, never equal to aws:PrincipalArn (a role's session has its role's).
_PRINCIPAL_ARN = re.compile(
    r"^arn:aws[a-z-]*:iam::(?P<account>\d{12}):"
    r"(?:(?P<root>root)|(?P<kind>user|role)/(?:[A-Za-z0-9+=,.@_-]+/)*(?P<name>[A-Za-z0-9+=,.@_-]+))$"
)


def _kms_key_arn(value: Any) -> str:
    if not isinstance(value, str) or not _KMS_KEY_ARN.match(value):
        raise invalid(
            f"must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>), got {value!r}"
        )
    return value


def _principal_arn(value: Any) -> str:
    if isinstance(value, str) and value.split(":")[2:3] == ["sts"]:
        raise invalid(
            f"must be an IAM role or user ARN, got the session ARN {value!r}: a session never "
            "equals aws:PrincipalArn (its role's ARN); name the role "
            "(arn:aws:iam::<account>:role/<name>)"
        )
    if not isinstance(value, str) or not _PRINCIPAL_ARN.match(value):
        raise invalid(f"must be an IAM role or user ARN, got {value!r}")
    return value


@dataclass(frozen=True)
class PrincipalName:
    """Who an IAM principal ARN names, as IAM tells principals apart: the account, the kind
    (user, role, or the account's `root`, which stands for the whole account) and the name,
    case-insensitively (IAM refuses two users or two roles whose names differ only in case) and
    without the path (a name is unique in its account whatever the path)."""

    arn: str
    account: str
    kind: str  # "user", "role" or "root"
    name: str  # lower case; "" for root

    @classmethod
    def of(cls, arn: str) -> PrincipalName:
        """The name of a principal ARN `_principal_arn` accepted."""
        found = _PRINCIPAL_ARN.match(arn)
        if found is None:
            raise ValueError(f"not an IAM role or user ARN: {arn!r}")
        if found["root"]:
            return cls(arn, found["account"], "root", "")
        return cls(arn, found["account"], found["kind"], found["name"].lower())

    def overlaps(self, other: PrincipalName) -> bool:
        """Whether one principal could be both: the same one, or either is its whole account."""
        if self.account != other.account:
            return False
        if "root" in (self.kind, other.kind):
            return True
        return (self.kind, self.name) == (other.kind, other.name)


KmsKeyArn = Annotated[str, BeforeValidator(_kms_key_arn)]
_SECRET_ARN = re.compile(
    r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$"
)
_SECRET_NAME = re.compile(r"^[A-Za-z0-9/_+=.@-]{1,512}$")


def secret_reference(value: Any) -> str:
    """A Secrets Manager secret's whole ARN, or its name (characters Secrets Manager allows)."""
    if isinstance(value, str) and (_SECRET_ARN if value.startswith("arn:") else _SECRET_NAME).match(
        value
    ):
        return value
    raise invalid(
        "must be a Secrets Manager secret's name (letters, digits and /_+=.@-) or its ARN "
        f"(arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>), got {value!r}"
    )


class ApproverKeyConfig(ContextSection):
    """How one approver of one tenant signs (`approval_keys."<tenant>/<approver>"`). Every
    approver has its own asymmetric key: the stack creates it (and an approver role that may
    sign with it) unless `key_arn` names one you bring; `principal` names who may sign with a
    created key instead of the approver role; `retired_key_arns` are rotated-out keys whose
    signatures still verify for cases already under way (never for a new case)."""

    principal: Annotated[str, BeforeValidator(_principal_arn)] | None = None
    key_arn: KmsKeyArn | None = None
    retired_key_arns: tuple[KmsKeyArn, ...] = ()
    # Rotating a created key: raise the generation. The stack then creates a new key for the
    # approver and keeps the earlier generations as retired keys (nobody may sign with them;
    # they still verify approvals of cases under way).
    key_generation: Annotated[int, positive_int(100)] = 1
    # The created approver role may be assumed only with MFA: approving is a person's act.
    role_requires_mfa: Annotated[bool, BeforeValidator(boolean)] = True
    # Who may assume the created approver role (IAM role or user ARNs, `aws:PrincipalArn`).
    # Empty: any principal of the account whose own policies allow sts:AssumeRole on it.
    role_assumed_by: tuple[Annotated[str, BeforeValidator(_principal_arn)], ...] = ()

    @model_validator(mode="after")
    def _one_way_to_sign(self) -> ApproverKeyConfig:
        if self.key_arn is not None and (self.principal is not None or self.key_generation > 1):
            raise refused(
                "context 'approval_keys': with 'key_arn' (a key you bring) neither 'principal' "
                "nor 'key_generation' applies: who may sign is that key's own policy"
            )
        if self.role_assumed_by and (self.key_arn is not None or self.principal is not None):
            raise refused(
                "context 'approval_keys': 'role_assumed_by' applies to the approver role the "
                "stack creates, and with 'key_arn' or 'principal' it creates none"
            )
        return self


_DISCOVERY_URL = re.compile(r"^https://[^\s]+/\.well-known/openid-configuration$")


def _discovery_url(value: Any) -> str:
    if not isinstance(value, str) or not _DISCOVERY_URL.match(value):
        raise invalid(
            "must be an OpenID Connect discovery URL "
            f"(https://.../.well-known/openid-configuration), got {value!r}"
        )
    return value


class AgentGatewayTenantConfig(ContextSection):
    """Inbound authentication of one tenant's gateway (CUSTOM_JWT): whose tokens it accepts."""

    discovery_url: Annotated[str, BeforeValidator(_discovery_url)]
    allowed_clients: Annotated[tuple[str, ...], BeforeValidator(string_list)] = ()
    allowed_audience: Annotated[tuple[str, ...], BeforeValidator(string_list)] = ()

    @model_validator(mode="after")
    def _restricted(self) -> AgentGatewayTenantConfig:
        if not self.allowed_clients and not self.allowed_audience:
            raise refused(
                "context 'agent_gateway.tenants': each tenant's gateway must restrict "
                "'allowed_clients' or 'allowed_audience' (else any token of the issuer passes)"
            )
        return self


def admit_a_common_token(a: AgentGatewayTenantConfig, b: AgentGatewayTenantConfig) -> bool:
    """Whether one token can pass both authorizers: the same issuer, and for the client and the
    audience each, either side unrestricted or a value both allow."""
    if a.discovery_url != b.discovery_url:
        return False

    def overlap(x: tuple[str, ...], y: tuple[str, ...]) -> bool:
        return not x or not y or bool(set(x) & set(y))

    return overlap(a.allowed_clients, b.allowed_clients) and overlap(
        a.allowed_audience, b.allowed_audience
    )


class AgentGatewayConfig(ContextSection):
    """The agent tools on Amazon Bedrock AgentCore Gateway (docs/design.md §10): off unless
    `enabled` (regions without AgentCore). One gateway, authorizer and target per tenant."""

    enabled: Annotated[bool, BeforeValidator(boolean)] = False
    tenants: Annotated[dict[str, AgentGatewayTenantConfig], BeforeValidator(from_json)] = {}


class FunctionsConfig(ContextSection):
    timeout_seconds: Annotated[int, positive_int(900)]
    memory_mb: Annotated[int, positive_int(10_240)]
    log_retention_days: Annotated[int, positive_int(), AfterValidator(_log_retention)]
    log_level: Annotated[LogLevel, BeforeValidator(_log_level)] = "INFO"


class WorkflowConfig(ContextSection):
    execution_timeout_minutes: Annotated[int, positive_int(525_600)]
    # Shorter than the function timeout on purpose: a hung tool surfaces as States.Timeout
    # (caught -> reconciliation) rather than as Lambda's own Sandbox.Timedout error.
    lambda_task_timeout_seconds: Count
    service_task_timeout_seconds: Count


class MonitoringConfig(ContextSection):
    # The sweeper alarms look at two intervals; an alarm's window is at most a day.
    sweep_every_minutes: Annotated[int, positive_int(720)]
    escalation_age_alarm_minutes: Count
    # An open action whose lease ended longer ago than this is stuck (the workflow's own
    # retries and reconciliation have had their chance).
    stuck_grace_seconds: Count
