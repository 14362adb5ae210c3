"""What the sandbox adapters' `from_env` constructors share: settings and the downstream client."""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3

from saga.aws import downstream_config
from saga.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def settings_and_client(client: DynamoDBClient | None) -> tuple[Settings, DynamoDBClient]:
    """Settings from the environment, and `client` or else a DynamoDB client made for
    side-effecting calls (no retries, DOWNSTREAM_TIMEOUT_SECONDS connect/read timeouts)."""
    settings = Settings.from_env()
    if client is None:
        client = boto3.client(
            "dynamodb", config=downstream_config(settings.downstream_timeout_seconds)
        )
    return settings, client
