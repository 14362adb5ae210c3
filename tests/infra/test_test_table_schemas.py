"""The tables the moto-backed tests run on are the tables the stack deploys.

Tests without CloudFormation create their tables from the synthesized template
(local_aws.tables, via tests/tables.py and tests/tools_harness.py). This checks the two
things that could still let them exercise another schema: a table creator that drops part of
a definition (compared here with what moto then describes, not with what was asked for), and
a table of the stack that the test harnesses do not create.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import boto3
from moto import mock_aws

from local_aws.tables import TABLE_TYPES, StackTables
from saga.settings import TABLES, table_field, variable
from tests.infra.synth import Synthesized
from tests.tables import OUTPUT_OF_VARIABLE
from tests.tools_harness import TABLE_NAMES, create_tables


def _shape(definition: Mapping[str, Any], ttl: str | None) -> dict[str, Any]:
    return {
        "keys": [(k["AttributeName"], k["KeyType"]) for k in definition["KeySchema"]],
        "attributes": sorted(
            (a["AttributeName"], a["AttributeType"]) for a in definition["AttributeDefinitions"]
        ),
        "indexes": sorted(
            (
                i["IndexName"],
                tuple((k["AttributeName"], k["KeyType"]) for k in i["KeySchema"]),
                i["Projection"]["ProjectionType"],
            )
            for i in definition.get("GlobalSecondaryIndexes", [])
        ),
        "ttl": ttl,
    }


def test_every_table_of_the_stack_is_created_for_the_tests(synthesized: Synthesized) -> None:
    template = synthesized.template_json
    tables = StackTables.from_template(template)
    declared = {
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] in TABLE_TYPES
    }
    named = {template["Outputs"][output]["Value"]["Ref"] for output in tables.properties}
    assert named == declared  # every table is reachable by the output that names it
    assert set(OUTPUT_OF_VARIABLE.values()) == set(tables.properties)
    assert set(TABLE_NAMES) == {variable(table_field(table)) for table in TABLES}
    assert set(TABLE_NAMES) == set(OUTPUT_OF_VARIABLE)


def test_test_tables_in_moto_have_the_deployed_keys_indexes_and_ttl(
    synthesized: Synthesized, stack_tables: StackTables
) -> None:
    outputs = synthesized.template_json["Outputs"]
    resources = synthesized.template_json["Resources"]
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(stack_tables, client, TABLE_NAMES)
        for variable_name, output in OUTPUT_OF_VARIABLE.items():
            name = TABLE_NAMES[variable_name]
            created = client.describe_table(TableName=name)["Table"]
            ttl = client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
            deployed = resources[outputs[output]["Value"]["Ref"]]["Properties"]
            deployed_ttl = deployed.get("TimeToLiveSpecification")
            assert _shape(created, ttl.get("AttributeName")) == _shape(
                deployed,
                deployed_ttl["AttributeName"]
                if deployed_ttl and deployed_ttl.get("Enabled")
                else None,
            ), variable_name
