"""boto3 clients with explicit retry and timeout settings (docs/design.md §4, the budget by layer).

- The ledger's DynamoDB calls retry in botocore's `standard` mode a few times: every ledger write
  is conditional, so repeating one whose response was lost is safe (the ledger recognises its
  own earlier write in the returned old item).
- Calls that cause a downstream side effect get 0 automatic retries and explicit connect/read
  timeouts that fit inside the Lambda timeout: a repeat there is a decision for the ledger and
  the workflow, never for the SDK.

Every client of the Lambda code is made here, from a session that reads botocore's data reduced
to what the code calls (`TRIMMED_MODELS`, below): a cold start's first client costs about 13 ms
of CPU instead of about 55 ms. Endpoints come from the environment as botocore reads them
(`AWS_ENDPOINT_URL_<SERVICE>`, else `AWS_ENDPOINT_URL`: how the local emulator and the AWS CLI
are pointed at the same moto server); `endpoint_url` reads them for the clients' cache keys.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import boto3
import botocore.session
from botocore.config import Config
from botocore.loaders import Loader

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_stepfunctions.client import SFNClient

LEDGER_MAX_ATTEMPTS = 3
LEDGER_CONNECT_TIMEOUT_SECONDS = 2.0
LEDGER_READ_TIMEOUT_SECONDS = 5.0

LEDGER_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": LEDGER_MAX_ATTEMPTS},  # 1 + 2 retries
    connect_timeout=LEDGER_CONNECT_TIMEOUT_SECONDS,
    read_timeout=LEDGER_READ_TIMEOUT_SECONDS,
)


KMS_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},  # GetPublicKey reads: safe to repeat
    connect_timeout=2.0,
    read_timeout=5.0,
)


SFN_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2.0, read_timeout=5.0
)


# Sending an escalation twice is harmless (messages carry a stable escalation_id).
SQS_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3}, connect_timeout=2.0, read_timeout=5.0
)


@lru_cache(maxsize=8)
def downstream_config(timeout_seconds: float) -> Config:
    """Config for a side-effecting downstream call: one attempt, bounded connect/read time (one
    object per timeout: a client is cached per configuration)."""
    if timeout_seconds <= 0:
        raise ValueError(f"downstream timeout must be positive, got {timeout_seconds}")
    return Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=timeout_seconds,
        read_timeout=timeout_seconds,
    )


def dynamodb_client() -> DynamoDBClient:
    """A low-level DynamoDB client for the ledger and the tables written next to it."""
    return cast("DynamoDBClient", _client("dynamodb", LEDGER_CONFIG))


def downstream_dynamodb_client(timeout_seconds: float) -> DynamoDBClient:
    """A DynamoDB client for a side-effecting downstream call (the sandbox providers)."""
    config = downstream_config(float(timeout_seconds))  # 1 and 1.0: one cached Config, one client
    return cast("DynamoDBClient", _client("dynamodb", config))


def kms_client() -> Any:
    """A KMS client for GetPublicKey (saga.approvals), made when first needed."""
    return _client("kms", KMS_CONFIG)


def stepfunctions_client() -> SFNClient:
    """Step Functions for the agent tools: StartExecution is idempotent by name and input, and
    DescribeExecution a read, so the standard retries are safe."""
    return cast("SFNClient", _client("stepfunctions", SFN_CONFIG))


def sqs_client() -> SQSClient:
    """SQS for escalations: the sweeper's and RecordOutcome's (at the Escalate state)."""
    return cast("SQSClient", _client("sqs", SQS_CONFIG))


# The Stripe API key's secret (Powertools' parameters utility caches it; a read is safe to repeat).
SECRETS_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2.0, read_timeout=5.0
)


def secretsmanager_client() -> Any:
    """Secrets Manager for GetSecretValue (the Stripe API key, saga.tools.wiring)."""
    return _client("secretsmanager", SECRETS_CONFIG)


def _client(service: str, config: Config) -> Any:
    # Keyed by the endpoint and region too: the local emulator runs every function in one
    # process, and a client must never keep another endpoint.
    endpoint = endpoint_url(_ENDPOINT_VARIABLE_NAMES.get(service, service))
    return _cached_client(service, config, endpoint, _region())


@lru_cache(maxsize=16)
def _cached_client(service: str, config: Config, endpoint: str | None, region: str | None) -> Any:
    """One client per service, configuration, endpoint and region for the life of the process:
    a Lambda container makes it on its first invocation and reuses it (about 5 ms saved per
    client per invocation)."""
    return _session_for(service).client(
        service,  # type: ignore[call-overload]  # one of those the package carries
        config=config,
        endpoint_url=endpoint,
        region_name=region,
    )


# The per-service endpoint variable is named by the service id (AWS_ENDPOINT_URL_SFN).
_ENDPOINT_VARIABLE_NAMES = {"stepfunctions": "sfn"}


def endpoint_url(service: str) -> str | None:
    """The endpoint botocore configures for `service` from the environment:
    AWS_ENDPOINT_URL_<SERVICE> (e.g. a VPC interface endpoint of DynamoDB), else
    AWS_ENDPOINT_URL, none with AWS_IGNORE_CONFIGURED_ENDPOINT_URLS. Given explicitly, so that
    a client is cached per endpoint. The shared config file's `services` section is not read (a
    Lambda function has none)."""
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None
    variable = f"AWS_ENDPOINT_URL_{service.upper().replace('-', '_')}"
    return os.environ.get(variable) or os.environ.get("AWS_ENDPOINT_URL") or None


def _region() -> str | None:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")


# botocore's data reduced to what the Lambda code calls (saga_build/trim_models.py writes it): each
# service's model with only the operations called, and the root data botocore reads for a
# client, endpoints.json reduced to these services. The Lambda code's clients come from a
# session whose loader reads this directory alone: a first client of botocore's own loader lists
# every service directory it has and parses the 1.2 MB endpoints.json (about 25 ms of CPU at a
# cold start), and the full KMS model costs about 30 ms more. Service names, metadata and
# endpoint rules are botocore's: the clients sign, resolve endpoints, retry and name their
# events (`before-call.dynamodb.PutItem`) as botocore's own.
TRIMMED_MODELS = Path(__file__).resolve().parent / "botocore_models"


def _session_for(service: str) -> boto3.session.Session:
    """The Lambda code's session, or, in a package without the trimmed data of `service`,
    boto3's default session (slower, never wrong)."""
    session = _trimmed_session()
    if session is None or not (TRIMMED_MODELS / service).is_dir():
        return boto3._get_default_session()
    return session


@lru_cache(maxsize=1)
def _trimmed_session() -> boto3.session.Session | None:
    """A boto3 session like the default one (the same environment and config files) whose
    data loader reads the trimmed directory only: its own session, so that no other client in
    the process (sagactl's, a test's, moto's) ever sees the reduced data."""
    if not (TRIMMED_MODELS / "endpoints.json").is_file():
        return None
    core = botocore.session.get_session()
    core.register_component(
        "data_loader",
        _TrimmedDataLoader(
            extra_search_paths=[str(TRIMMED_MODELS)], include_default_search_paths=False
        ),
    )
    if not (os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY")):
        # Credentials from elsewhere than the environment (an assumed role, web identity, SSO)
        # may need a client of a service not kept here (STS, SSO): resolved by the default
        # session. A Lambda function's come from the environment, which botocore reads first.
        default = boto3._get_default_session()._session
        core.register_component("credential_provider", default.get_component("credential_provider"))
    return boto3.session.Session(botocore_session=core)


class _TrimmedDataLoader(Loader):
    """botocore's loader over the trimmed directory, taken for botocore's own data (which it is,
    reduced): with endpoint data of another origin, botocore would pass the legacy endpoint to
    the endpoint rules as a custom one, and FIPS, dual-stack and global endpoints would differ
    from botocore's (tests/unit/test_aws_clients.py compares them in every partition)."""

    BUILTIN_DATA_PATH = str(TRIMMED_MODELS)


__all__ = [
    "LEDGER_CONFIG",
    "downstream_config",
    "downstream_dynamodb_client",
    "dynamodb_client",
    "kms_client",
    "secretsmanager_client",
    "sqs_client",
    "stepfunctions_client",
]
