"""The real CDK app, synthesized once per session (with the real, cached layer bundling)."""

from __future__ import annotations

import pytest

from tests.infra.synth import Synthesized, synthesize


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(tmp_path_factory.mktemp("infra-cdk.out"))


@pytest.fixture(scope="session")
def synthesized_without_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(
        tmp_path_factory.mktemp("infra-nosandbox-cdk.out"), {"sandbox": False, "stage": "prod"}
    )
