"""The CDK app without the sandbox (the default one, `synthesized`, is in tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.infra.synth import Synthesized, synthesize


@pytest.fixture(scope="session")
def synthesized_without_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(
        tmp_path_factory.mktemp("infra-nosandbox-cdk.out"), {"sandbox": False, "stage": "prod"}
    )
