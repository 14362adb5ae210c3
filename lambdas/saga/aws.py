"""boto3 clients with explicit retry and timeout settings (docs/design.md §4, the budget by layer).

- The ledger's DynamoDB calls retry in botocore's `standard` mode a few times: every ledger write
  is conditional, so repeating one whose response was lost is safe (the ledger recognises its
  own earlier write in the returned old item).
- Calls that cause a downstream side effect get 0 automatic retries and explicit connect/read
  timeouts that fit inside the Lambda timeout: a repeat there is a decision for the ledger and
  the workflow, never for the SDK.

Endpoints come from the environment as botocore reads them (`AWS_ENDPOINT_URL_<SERVICE>`, else
`AWS_ENDPOINT_URL`: how the local emulator and the AWS CLI are pointed at the same moto server),
resolved here by `endpoint_url` because the trimmed models' service names are not the originals'.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_stepfunctions.client import SFNClient

LEDGER_MAX_ATTEMPTS = 3
LEDGER_CONNECT_TIMEOUT_SECONDS = 2.0
LEDGER_READ_TIMEOUT_SECONDS = 5.0

LEDGER_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": LEDGER_MAX_ATTEMPTS},  # 1 + 2 retries
    connect_timeout=LEDGER_CONNECT_TIMEOUT_SECONDS,
    read_timeout=LEDGER_READ_TIMEOUT_SECONDS,
)


def dynamodb_client() -> DynamoDBClient:
    """A low-level DynamoDB client for the ledger and the tables written next to it."""
    return _client(None)


def downstream_dynamodb_client(timeout_seconds: float) -> DynamoDBClient:
    """A DynamoDB client for a side-effecting downstream call (the sandbox providers)."""
    return _client(timeout_seconds)


def _client(downstream_timeout: float | None) -> DynamoDBClient:
    # Keyed by the endpoint and region too: the local emulator runs every function in one
    # process, and a client must never keep another endpoint.
    return _cached_client(downstream_timeout, endpoint_url("dynamodb"), _region())


def endpoint_url(service: str) -> str | None:
    """The endpoint botocore would configure for `service` from the environment:
    AWS_ENDPOINT_URL_<SERVICE> (e.g. a VPC interface endpoint of DynamoDB), else
    AWS_ENDPOINT_URL. Given explicitly, because botocore looks the per-service variable up by
    the client's service name, and a trimmed model's (`saga-dynamodb`) is not the original's.
    The shared config file's `services` section is not read (a Lambda function has none)."""
    variable = f"AWS_ENDPOINT_URL_{service.upper().replace('-', '_')}"
    return os.environ.get(variable) or os.environ.get("AWS_ENDPOINT_URL") or None


def _region() -> str | None:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")


@lru_cache(maxsize=16)
def _cached_client(
    downstream_timeout: float | None, endpoint: str | None, region: str | None
) -> DynamoDBClient:
    """One client per configuration for the life of the process: a Lambda container makes it
    on its first invocation and reuses it (about 5 ms saved per client per invocation)."""
    config = LEDGER_CONFIG if downstream_timeout is None else downstream_config(downstream_timeout)
    service = _trimmed_or_full(DYNAMODB_SERVICE, "dynamodb")
    client: DynamoDBClient = boto3.client(
        service,  # type: ignore[call-overload]  # the trimmed model is not in the stubs
        config=config,
        endpoint_url=endpoint,
        region_name=region,
    )
    return client


KMS_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},  # GetPublicKey reads: safe to repeat
    connect_timeout=2.0,
    read_timeout=5.0,
)


# botocore's models reduced to the operations the tools call (sagactl/trim_models.py), each as a
# service of its own name with the original's metadata: it signs and resolves endpoints exactly
# as the original (its endpoint from the environment: endpoint_url). A client of botocore's full
# KMS model costs about 35 ms of CPU at a cold start, this one 5 ms; the first DynamoDB client
# about 6 ms less than with the full model (its JSON; a second configuration reuses the model).
TRIMMED_MODELS = Path(__file__).resolve().parent / "botocore_models"
KMS_SERVICE = "saga-kms"
DYNAMODB_SERVICE = "saga-dynamodb"


def kms_client() -> Any:
    """A KMS client for GetPublicKey (saga.approvals), made when first needed."""
    return _cached_kms(endpoint_url("kms"), _region())


@lru_cache(maxsize=4)
def _cached_kms(endpoint: str | None, region: str | None) -> Any:
    service = _trimmed_or_full(KMS_SERVICE, "kms")
    return boto3.client(
        service,  # type: ignore[call-overload]  # the trimmed model is not in the stubs
        config=KMS_CONFIG,
        endpoint_url=endpoint,
        region_name=region,
    )


def _trimmed_or_full(trimmed: str, full: str) -> str:
    """The trimmed model's service name when the default session can load it, else botocore's
    own service (slower, never wrong: tests/unit/test_aws_clients.py fails then).

    The trimmed models' directory joins the loader's search path once. The loader caches the
    services it listed when a first client was made; the trimmed ones are added to that list
    rather than listing every service directory again (about 15 ms)."""
    if not (TRIMMED_MODELS / trimmed).is_dir():
        return full
    try:
        loader = boto3._get_default_session()._session.get_component("data_loader")
        if str(TRIMMED_MODELS) not in loader.search_paths:
            loader.search_paths.append(str(TRIMMED_MODELS))
        for key, listed in list(loader._cache.items()):  # another thread may add to it
            if key[0] == "list_available_services" and trimmed not in listed:
                listed.append(trimmed)
        return trimmed if trimmed in loader.list_available_services("service-2") else full
    except (AttributeError, TypeError, KeyError, IndexError):
        return full


SFN_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2.0, read_timeout=5.0
)


def stepfunctions_client() -> SFNClient:
    """Step Functions for the agent tools: StartExecution is idempotent by name and input, and
    DescribeExecution a read, so the standard retries are safe."""
    return _cached_sfn(endpoint_url("sfn"), _region())


@lru_cache(maxsize=4)
def _cached_sfn(endpoint: str | None, region: str | None) -> SFNClient:
    return boto3.client(
        "stepfunctions", config=SFN_CONFIG, endpoint_url=endpoint, region_name=region
    )


def downstream_config(timeout_seconds: float) -> Config:
    """Config for a side-effecting downstream call: one attempt, bounded connect/read time."""
    if timeout_seconds <= 0:
        raise ValueError(f"downstream timeout must be positive, got {timeout_seconds}")
    return Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=timeout_seconds,
        read_timeout=timeout_seconds,
    )


__all__ = [
    "LEDGER_CONFIG",
    "downstream_config",
    "downstream_dynamodb_client",
    "dynamodb_client",
    "kms_client",
    "stepfunctions_client",
]
