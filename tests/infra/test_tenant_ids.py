"""A tenant id in cdk.json is one the case model accepts, or the synth stops and names the
pattern (saga.models.TENANT_ID_PATTERN, the one definition both read): the agent roles' grants
`agt_<tenant>_*` (stacks/constructs/people.py) are one tenant's alone only because no tenant id
holds the `_` that ends it in an agent case id; with tenants `acme` and `acme_eu`, acme's
pattern would cover `agt_acme_eu_...`."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from saga.identity import agent_case_id
from saga.models import TENANT_ID_PATTERN, TenantId
from stacks.config import ConfigError, SagaConfig
from tests.project import run_in_project

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"
CANDIDATES = [
    "acme",
    "acme-eu",
    "a" * 63,
    "acme_eu",  # `_` would end the tenant early in agt_acme_eu_...
    "Acme",
    "a#b",
    "-acme",
    "a" * 64,
    "acme\n",
    "",
]


def _with_tenant(tenant: str) -> dict[str, Any]:
    context: dict[str, Any] = copy.deepcopy(
        json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]
    )
    context["tenants"] = {tenant: ["ops@example.com"]}
    context.pop("approval_thresholds", None)  # they name the default tenants
    context.pop("approver_keys", None)
    context.pop("agent_gateway", None)
    return context


def _model_accepts(tenant: str) -> bool:
    try:
        TypeAdapter(TenantId).validate_python(tenant)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("tenant", CANDIDATES)
def test_the_configuration_accepts_exactly_the_tenant_ids_the_case_model_does(tenant: str) -> None:
    if _model_accepts(tenant):
        assert SagaConfig.from_mapping(_with_tenant(tenant)).tenants == {
            tenant: ("ops@example.com",)
        }
        return
    with pytest.raises(ConfigError) as refused:
        SagaConfig.from_mapping(_with_tenant(tenant))
    assert f"context 'tenants' key {tenant!r} must match {TENANT_ID_PATTERN}" in str(refused.value)


def test_an_underscore_is_why_one_tenants_agent_grant_would_cover_anothers() -> None:
    """What the refusal prevents: the agent role's execution and case-record grants are the
    prefix `agt_<tenant>_`, and `acme_eu`'s ids would start with acme's."""
    assert agent_case_id("acme_eu", "T-1").startswith("agt_acme_")
    assert not agent_case_id("acme-eu", "T-1").startswith("agt_acme_")
    assert not _model_accepts("acme_eu")


def test_cdk_synth_refuses_such_a_tenant_with_the_pattern_and_no_traceback() -> None:
    """`python app.py`, as the CDK CLI runs it (cdk.json's `app`), with the tenants of
    `cdk synth -c tenants=...`."""
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"tenants": {"acme_eu": ["ops@acme"]}})}
    done = run_in_project([sys.executable, "app.py"], env, timeout=300)
    assert done.returncode == 1
    assert (
        f"cdk.json context: context 'tenants' key 'acme_eu' must match {TENANT_ID_PATTERN}"
        in done.stderr
    )
    assert "Traceback" not in done.stderr
