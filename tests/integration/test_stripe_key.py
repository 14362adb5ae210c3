"""The Stripe API key as the functions read it (saga.tools.wiring.stripe_api_key): from Secrets
Manager through Powertools, once per container for its max age, never in a message."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from local_aws.aws_calls import acting_as, recording_aws_calls
from saga.errors import TransientError
from saga.settings import ConfigurationError
from saga.tools import wiring

REGION = "us-east-1"
KEY = "rk_test_51RecordedRestrictedKey"


@pytest.fixture
def secrets() -> Iterator[object]:
    with mock_aws():
        wiring._SECRETS.clear()
        client = boto3.client("secretsmanager", region_name=REGION)
        client.create_secret(Name="saga/stripe-api-key", SecretString=f"{KEY}\n")
        client.create_secret(Name="saga/not-a-key", SecretString="hunter2-not-a-key")
        yield client
        wiring._SECRETS.clear()


def test_the_key_is_read_once_per_container_with_an_explicit_max_age(
    secrets: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    asked: list[object] = []
    original = SecretsProvider.get

    def get(self: SecretsProvider, name: str, **kwargs: object) -> object:
        asked.append(kwargs.get("max_age"))
        return original(self, name, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(SecretsProvider, "get", get)
    with recording_aws_calls() as calls, acting_as("IssueRefundFunction"):
        first = wiring.stripe_api_key("saga/stripe-api-key")
        second = wiring.stripe_api_key("saga/stripe-api-key")
        wiring._SECRETS.clear()  # a new container
        third = wiring.stripe_api_key("saga/stripe-api-key")

    assert first == second == third == KEY
    assert [c.operation for c in calls] == ["GetSecretValue", "GetSecretValue"]
    assert asked == [300, 300, 300] and wiring.STRIPE_KEY_MAX_AGE_SECONDS == 300


def test_a_missing_secret_is_transient_and_names_it(secrets: object) -> None:
    with pytest.raises(TransientError, match="secret saga/missing could not be read"):
        wiring.stripe_api_key("saga/missing")


def test_a_secret_that_is_no_stripe_key_is_refused_without_its_value(secrets: object) -> None:
    with pytest.raises(ConfigurationError, match="does not hold a Stripe") as refused:
        wiring.stripe_api_key("saga/not-a-key")
    assert "hunter2" not in str(refused.value)
