"""Every function's environment stays under Lambda's 4 KB with 50 approvers, checked at synth
(stacks/environment_budget.py): APPROVAL_KEYS names the stack's keys by generation (found by
alias), not by their deploy-time ARNs (~130 bytes each, which refused the deploy past ~25)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from stacks.environment_budget import LAMBDA_ENVIRONMENT_LIMIT, EnvironmentTooLarge
from tests.infra.synth import Synthesized, synthesize

# 10 tenants of 5 approvers, named as a company would name them.
FIFTY = {
    f"tenant-{t:02d}": [f"approver-{a}@tenant-{t:02d}.example.com" for a in range(1, 6)]
    for t in range(1, 11)
}
KEY_ARN_PREFIX = "arn:aws:kms:us-east-1:123456789012:key/"
GATEWAY = {
    "enabled": True,
    "tenants": {
        tenant: {
            "discovery_url": f"https://idp.example.com/{tenant}/.well-known/openid-configuration",
            "allowed_clients": [f"{tenant}-agent"],
        }
        for tenant in FIFTY
    },
}


@pytest.fixture(scope="module")
def fifty(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """50 approvers, a second key generation for one, the agent gateway on (its function
    carries the keys and the gateway targets too)."""
    context: dict[str, Any] = {
        "tenants": FIFTY,
        # Four eyes everywhere, in a few currencies: thresholds take room in the environment too.
        "approval_thresholds": {
            tenant: {"EUR": 100_000, "GBP": 80_000, "JPY": 15_000_000, "USD": 100_000}
            for tenant in FIFTY
        },
        "agent_gateway": GATEWAY,
        "approval_keys": {"tenant-01/approver-1@tenant-01.example.com": {"key_generation": 2}},
    }
    return synthesize(tmp_path_factory.mktemp("fifty.out"), context)


def test_fifty_approvers_fit_every_functions_environment(fifty: Synthesized) -> None:
    sizes = fifty.saga.stack.environment_sizes
    assert len(sizes) == 9  # the 8 tools and the agent tools
    assert max(sizes.values()) < LAMBDA_ENVIRONMENT_LIMIT, sizes
    validate = next(
        f["Properties"]["Environment"]["Variables"]
        for lid, f in fifty.resources("AWS::Lambda::Function").items()
        if lid.startswith("ToolsValidateCase")
    )
    keys = json.loads(validate["APPROVAL_KEYS"])
    assert sum(len(approvers) for approvers in keys.values()) == 50
    assert keys["tenant-01"]["approver-1@tenant-01.example.com"] == 2
    assert len(validate["APPROVAL_KEYS"]) < 2000, sizes
    assert "TENANTS" not in validate  # the approvers are listed once: APPROVAL_KEYS


def test_an_environment_over_4_kb_is_refused_at_synth_naming_the_function(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # 50 approvers whose keys are brought: each is a full ARN in APPROVAL_KEYS.
    tenants = {t: names[:5] for t, names in FIFTY.items()}
    brought = {
        f"{tenant}/{approver}": {
            "key_arn": f"{KEY_ARN_PREFIX}{index:08d}-2222-3333-4444-555566667777"
        }
        for index, (tenant, approver) in enumerate(
            (t, a) for t, names in tenants.items() for a in names
        )
    }
    with pytest.raises(
        EnvironmentTooLarge,
        match=re.escape("ValidateCaseFunction: its environment would take up to ")
        + r"\d+ bytes, Lambda allows 4096 \(largest: APPROVAL_KEYS",
    ):
        synthesize(
            tmp_path_factory.mktemp("too-large.out"),
            {"tenants": tenants, "approval_thresholds": {}, "approval_keys": brought},
        )
