"""The CDK app without the sandbox (the default one, `synthesized`, is in tests/conftest.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga_bench.deploy_cost import own_principals_example
from stacks.app_factory import CDK_JSON
from tests.infra.synth import Synthesized, synthesize


def four_eyes_own_principals() -> dict[str, Any]:
    """`approval_keys` naming each four-eyes approver of cdk.json its own principal, as
    docs/deploy.md shows (without it, synth refuses four eyes outside the sandbox)."""
    context = json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]
    tenants = context["tenants"]
    return own_principals_example(
        {tenant: sorted(tenants[tenant]) for tenant in context["approval_thresholds"]}
    )


@pytest.fixture(scope="session")
def synthesized_without_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(
        tmp_path_factory.mktemp("infra-nosandbox-cdk.out"),
        {"sandbox": False, "stage": "prod", "approval_keys": four_eyes_own_principals()},
    )
