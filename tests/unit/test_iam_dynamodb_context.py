"""DynamoDB's request-dependent condition keys as the offline IAM check computes them
(offline_iam.dynamodb_context): what a policy on dynamodb:Attributes / ReturnValues decides on."""

from __future__ import annotations

import pytest

from offline_iam.dynamodb_context import (
    EVERY_ATTRIBUTE,
    UnmappedExpression,
    request_context,
    top_level_names,
)


def test_an_update_names_its_key_and_every_top_level_attribute_it_writes_or_reads() -> None:
    context = request_context(
        "UpdateItem",
        {
            "Key": {"tenant_id": {"S": "acme"}, "case_id": {"S": "c"}},
            "UpdateExpression": "SET approval = :a, #when = if_not_exists(#when, :now) "
            "REMOVE lease.holder",
            "ConditionExpression": "digest = :d AND attribute_not_exists(approval) "
            "AND size(notes[0]) > :n",
            "ExpressionAttributeNames": {"#when": "approved_at"},
        },
    )
    assert context == {
        "dynamodb:Attributes": [
            "approval",
            "approved_at",
            "case_id",
            "digest",
            "lease",
            "notes",
            "tenant_id",
        ],
        "dynamodb:ReturnValues": "NONE",
    }


def test_a_read_without_a_projection_reads_every_attribute() -> None:
    get = request_context("GetItem", {"Key": {"case_id": {"S": "c"}}})
    assert get["dynamodb:Attributes"] == [EVERY_ATTRIBUTE, "case_id"]
    projected = request_context(
        "Query",
        {"KeyConditionExpression": "pk = :p", "ProjectionExpression": "a, b.c"},
    )
    assert projected == {
        "dynamodb:Attributes": ["a", "b", "pk"],
        "dynamodb:Select": "SPECIFIC_ATTRIBUTES",
    }


@pytest.mark.parametrize(
    ("params", "refused"),
    [
        ({"AttributeUpdates": {"a": {}}}, "legacy parameter AttributeUpdates"),
        ({"UpdateExpression": "SET #x = :v"}, "placeholder #x"),
    ],
)
def test_what_it_cannot_tell_is_refused(params: dict[str, object], refused: str) -> None:
    with pytest.raises(UnmappedExpression, match=refused):
        request_context("UpdateItem", {"Key": {"k": {"S": "1"}}, **params})


def test_keywords_functions_and_values_are_not_attributes() -> None:
    names = top_level_names("NOT contains(tags, :t) OR a BETWEEN :lo AND :hi", {})
    assert names == {"tags", "a"}
