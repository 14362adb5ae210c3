"""`refund_ceilings` (stacks/ceilings_config.py, docs/design.md §3.12): what synth refuses, with
the key's name, and where the ceilings and their counters are deployed."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from stacks.config import ConfigError, SagaConfig
from tests.infra.synth import Synthesized

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"


def _context(**changes: Any) -> dict[str, Any]:
    context = copy.deepcopy(dict(json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]))
    context.update(changes)
    return context


@pytest.mark.parametrize(
    ("ceilings", "message"),
    [
        (
            {"acme": {"USD": 0}},
            "context 'refund_ceilings.acme.USD' must be a positive integer of minor units, got 0",
        ),
        ({"acme": {"USD": "1000"}}, "got '1000'"),
        ({"acme": {"USD": 99.5}}, "got 99.5"),
        ({"acme": {"USD": True}}, "got True"),
        (
            {"acme": {"usd": 100}},
            "context 'refund_ceilings.acme': 'usd' must be the ISO 4217 code of a circulating "
            "currency",
        ),
        ({"acme": {}}, "context 'refund_ceilings.acme' must be a non-empty object"),
        ({"initech": {"USD": 100}}, "context 'refund_ceilings.initech' names no tenant"),
        (
            {"hooli": {"USD": 99_999}},
            "context 'refund_ceilings.hooli.USD' (99999) is below "
            "'approval_thresholds.hooli.USD' (100000): no refund four eyes applies to could "
            "ever leave",
        ),
        ([], "context 'refund_ceilings' must be an object"),
    ],
)
def test_synth_refuses_ceilings_that_cannot_be_honoured(ceilings: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        SagaConfig.from_mapping(_context(refund_ceilings=ceilings))


def test_a_ceiling_at_the_threshold_or_in_a_currency_without_one_is_accepted() -> None:
    ceilings = {"hooli": {"USD": 100_000, "CHF": 1}, "acme": {"USD": 10_000}}
    config = SagaConfig.from_mapping(_context(refund_ceilings=ceilings))
    assert config.refund_ceilings == ceilings
    assert SagaConfig.from_mapping(_context()).refund_ceilings == {}  # none by default


def test_the_refund_and_validation_carry_the_ceilings_and_only_the_refund_writes_counters(
    synthesized: Synthesized,
) -> None:
    functions = synthesized.saga.stack.tools.functions
    for construct_id in ("ValidateCaseFunction", "IssueRefundFunction"):
        props = synthesized.resources("AWS::Lambda::Function")[
            synthesized.logical_id(functions[construct_id])
        ]["Properties"]
        assert props["Environment"]["Variables"]["REFUND_CEILINGS"] == "{}"
    limits = synthesized.logical_id(synthesized.saga.stack.tables.limits)
    writers = set()
    for policy in synthesized.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            resources = statement["Resource"]
            resources = resources if isinstance(resources, list) else [resources]
            if any(limits in json.dumps(resource) for resource in resources):
                writers.add((policy["Properties"]["Roles"][0]["Ref"], str(statement["Action"])))
    # IssueRefund writes the counters; the operator role reads them (`sagactl limits`); no one else.
    grants = {
        ("IssueRefund" in role, "PeopleOperator" in role, actions) for role, actions in writers
    }
    assert grants == {(True, False, "dynamodb:UpdateItem"), (False, True, "dynamodb:GetItem")}
    outputs = synthesized.template_json["Outputs"]
    assert outputs["LimitsTableName"]["Value"] == {"Ref": limits}
    assert outputs["RefundCeilings"]["Value"] == "{}"


def test_the_readmes_example_is_a_configuration_synth_accepts() -> None:
    readme = (CDK_JSON.parent / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```json refund-ceilings\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
    example = json.loads(block)
    config = SagaConfig.from_mapping(_context(**example))
    assert config.refund_ceilings == {"acme": {"USD": 500_000, "EUR": 400_000}}
