"""Local provisioning, the parts without AWS: logical ids, intrinsics, manifests, seed data."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from local_aws.seed import seed_inventory
from local_aws.synth import SynthError, find_stack
from local_aws.template import (
    PhysicalResource,
    ResolutionContext,
    TemplateError,
    readable_logical_id,
)

ACCOUNT = "123456789012"


def _context(**resources: PhysicalResource) -> ResolutionContext:
    template = {
        "Parameters": {"Stage": {"Type": "String", "Default": "dev"}, "NoDefault": {}},
        "Resources": {name: {"Type": "AWS::DynamoDB::Table"} for name in resources},
    }
    return ResolutionContext("stk", "us-east-1", ACCOUNT, template, dict(resources))


# -- template resolution (no AWS) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("logical_id", "readable"),
    [
        ("LedgerTable0A1B2C3D", "LedgerTable"),
        ("TablesLedgerTableA1B2C3D4", "TablesLedgerTable"),
        ("Plain", "Plain"),
        ("lowercasehash0a1b2c3d", "lowercasehash0a1b2c3d"),  # CDK hashes are upper-case hex
    ],
)
def test_readable_logical_id_drops_only_the_cdk_hash(logical_id: str, readable: str) -> None:
    assert readable_logical_id(logical_id) == readable


def test_intrinsics_resolve_to_local_physical_values() -> None:
    ctx = _context(T=PhysicalResource("stk-T", {"Arn": "arn:aws:dynamodb:us-east-1:1:table/stk-T"}))
    value = {
        "name": {"Ref": "T"},
        "arn": {"Fn::GetAtt": ["T", "Arn"]},
        "dotted": {"Fn::GetAtt": "T.Arn"},
        "joined": {"Fn::Join": ["/", [{"Ref": "AWS::Region"}, {"Ref": "Stage"}, "x"]]},
        "sub": {"Fn::Sub": "${AWS::AccountId}:${T}:${T.Arn}:${!Literal}"},
        "sub_vars": {"Fn::Sub": ["${A}-${AWS::StackName}", {"A": {"Ref": "T"}}]},
        "select": {"Fn::Select": [1, {"Fn::Split": [",", "a,b,c"]}]},
        "list": [{"Ref": "AWS::Partition"}, 3],
    }
    assert ctx.resolve(value) == {
        "name": "stk-T",
        "arn": "arn:aws:dynamodb:us-east-1:1:table/stk-T",
        "dotted": "arn:aws:dynamodb:us-east-1:1:table/stk-T",
        "joined": "us-east-1/dev/x",
        "sub": f"{ACCOUNT}:stk-T:arn:aws:dynamodb:us-east-1:1:table/stk-T:${{Literal}}",
        "sub_vars": "stk-T-stk",
        "select": "b",
        "list": ["aws", 3],
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"Ref": "Missing"}, "unknown resource 'Missing'"),
        ({"Fn::GetAtt": ["T", "StreamArn"]}, "T.StreamArn is not available locally"),
        ({"Fn::ImportValue": "x"}, "Fn::ImportValue is not supported locally"),
        ({"Ref": "NoDefault"}, "parameter 'NoDefault' has no default"),
    ],
)
def test_unresolvable_values_are_typed_errors(value: Any, message: str) -> None:
    ctx = _context(T=PhysicalResource("stk-T", {"Arn": "a"}))
    with pytest.raises(TemplateError, match=message):
        ctx.resolve(value)


def test_find_stack_reads_the_manifest_and_rejects_ambiguity(tmp_path: Path) -> None:
    def manifest(*stacks: str) -> None:
        artifacts = {
            name: {
                "type": "aws:cloudformation:stack",
                "properties": {"templateFile": f"{name}.json"},
            }
            for name in stacks
        }
        artifacts["Tree"] = {"type": "cdk:tree", "properties": {}}
        (tmp_path / "manifest.json").write_text(json.dumps({"artifacts": artifacts}))

    manifest("Saga-dev")
    stack = find_stack(tmp_path)
    assert (stack.stack_name, stack.template_path) == ("Saga-dev", tmp_path / "Saga-dev.json")

    manifest("A", "B")
    with pytest.raises(SynthError, match=r"exactly one stack.*found: A, B"):
        find_stack(tmp_path)
    assert find_stack(tmp_path, "B").stack_name == "B"

    (tmp_path / "manifest.json").unlink()
    with pytest.raises(SynthError, match="no cloud assembly manifest"):
        find_stack(tmp_path)


class _RecordingDynamo:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def put_item(self, **request: Any) -> None:
        self.items.append(request)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"SKU-X": -1}, "SKU-X: available must be a non-negative integer, got -1"),
        ({"SKU-X": True}, "SKU-X: available must be a non-negative integer, got True"),
        ({"": 1}, "SKU must be a non-empty string, got ''"),
        ({"SKU-X": 1.5}, "SKU-X: available must be a non-negative integer, got 1.5"),
    ],
)
def test_seed_rejects_bad_stock_before_writing_anything(bad: dict[str, Any], message: str) -> None:
    dynamo = _RecordingDynamo()
    with pytest.raises(ValueError, match=re.escape(message)):
        seed_inventory(dynamo, "inv", {"SKU-GOOD": 3, **bad})
    assert dynamo.items == []


def test_seed_writes_one_item_per_sku() -> None:
    dynamo = _RecordingDynamo()
    seed_inventory(dynamo, "inv", {"SKU-A": 2, "SKU-B": 0})
    assert dynamo.items == [
        {"TableName": "inv", "Item": {"sku": {"S": "SKU-A"}, "available": {"N": "2"}}},
        {"TableName": "inv", "Item": {"sku": {"S": "SKU-B"}, "available": {"N": "0"}}},
    ]
