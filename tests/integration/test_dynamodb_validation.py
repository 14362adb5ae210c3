"""DynamoDB's request validation, which the local AWS enforces for every operation the code uses
(local_aws/dynamodb_validation.py; moto checks unused expression values on UpdateItem only).

Each refused request gets DynamoDB's ValidationException and changes nothing; the well-formed
request next to it succeeds, so each check refuses exactly the mistake.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws.dynamodb_validation import VALIDATED_OPERATIONS

TABLE = "validation-test"
INDEX = "by-owner"
UNUSED = {":unused": {"S": "x"}}
V = {":v": {"S": "v"}}


@pytest.fixture
def ddb(admin_dynamodb: Any) -> Any:
    admin_dynamodb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "owner", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {
                "IndexName": INDEX,
                "KeySchema": [{"AttributeName": "owner", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    admin_dynamodb.put_item(
        TableName=TABLE, Item={"pk": {"S": "a"}, "owner": {"S": "o"}, "n": {"N": "1"}}
    )
    return admin_dynamodb


def _items(ddb: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = ddb.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda item: str(item["pk"]["S"]))


def _refused(ddb: Any, call: Callable[[], Any], message: str) -> None:
    before = _items(ddb)
    with pytest.raises(ClientError) as refused:
        call()
    error = refused.value.response["Error"]
    assert error["Code"] == "ValidationException"
    assert message in error["Message"]
    assert _items(ddb) == before, "a refused request changed nothing"


def _unused(keys: str, what: str = "Values") -> str:
    return f"Value provided in ExpressionAttribute{what} unused in expressions: keys: {{{keys}}}"


# One request per operation with an expression attribute value (a name for GetItem) that no
# expression uses, and the same request without it.
UNUSED_VALUE: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    "PutItem": lambda ddb, values: ddb.put_item(
        TableName=TABLE,
        Item={"pk": {"S": "b"}, "n": {"N": "1"}},
        ConditionExpression="attribute_not_exists(pk) OR n = :v",
        ExpressionAttributeValues={**V, **values},
    ),
    "UpdateItem": lambda ddb, values: ddb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "a"}},
        UpdateExpression="SET n = n + :one",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeValues={":one": {"N": "1"}, **values},
    ),
    "DeleteItem": lambda ddb, values: ddb.delete_item(
        TableName=TABLE,
        Key={"pk": {"S": "a"}},
        ConditionExpression="#o = :v OR attribute_exists(pk)",
        ExpressionAttributeNames={"#o": "owner"},
        ExpressionAttributeValues={**V, **values},
    ),
    "GetItem": lambda ddb, values: ddb.get_item(
        TableName=TABLE,
        Key={"pk": {"S": "a"}},
        ProjectionExpression="#o",
        ExpressionAttributeNames={"#o": "owner", **{k.replace(":", "#"): "x" for k in values}},
    ),
    "Query": lambda ddb, values: ddb.query(
        TableName=TABLE,
        IndexName=INDEX,
        KeyConditionExpression="#o = :o",
        ExpressionAttributeNames={"#o": "owner"},
        ExpressionAttributeValues={":o": {"S": "o"}, **values},
    ),
    "Scan": lambda ddb, values: ddb.scan(
        TableName=TABLE,
        FilterExpression="n = :v OR attribute_exists(pk)",
        ExpressionAttributeValues={**V, **values},
    ),
    "TransactWriteItems": lambda ddb, values: ddb.transact_write_items(
        TransactItems=[
            {
                "ConditionCheck": {
                    "TableName": TABLE,
                    "Key": {"pk": {"S": "a"}},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
            {
                "Put": {
                    "TableName": TABLE,
                    "Item": {"pk": {"S": "c"}},
                    "ConditionExpression": "attribute_not_exists(pk) OR pk = :v",
                    "ExpressionAttributeValues": {**V, **values},
                }
            },
        ]
    ),
}


def test_every_validated_operation_has_its_case() -> None:
    assert set(UNUSED_VALUE) == set(VALIDATED_OPERATIONS)


@pytest.mark.parametrize("operation", sorted(UNUSED_VALUE))
def test_an_unused_expression_attribute_value_is_refused(ddb: Any, operation: str) -> None:
    request = UNUSED_VALUE[operation]
    what = "Names" if operation == "GetItem" else "Values"
    placeholder = "#unused" if operation == "GetItem" else ":unused"
    _refused(ddb, lambda: request(ddb, UNUSED), _unused(placeholder, what))
    request(ddb, {})  # the same request with every placeholder used


def test_values_or_names_without_an_expression_to_use_them_are_refused(ddb: Any) -> None:
    _refused(
        ddb,
        lambda: ddb.put_item(TableName=TABLE, Item={"pk": {"S": "d"}}, ExpressionAttributeValues=V),
        "ExpressionAttributeValues can only be specified when using expressions: "
        "ConditionExpression is null",
    )
    _refused(
        ddb,
        lambda: ddb.scan(TableName=TABLE, ProjectionExpression="pk", ExpressionAttributeValues=V),
        "ExpressionAttributeValues can only be specified when using expressions: "
        "FilterExpression is null",
    )
    _refused(
        ddb,
        lambda: ddb.update_item(
            TableName=TABLE,
            Key={"pk": {"S": "a"}},
            UpdateExpression="SET n = :v",
            ExpressionAttributeValues=V,
            ExpressionAttributeNames={},
        ),
        "ExpressionAttributeNames must not be empty",
    )


def test_a_placeholder_the_request_does_not_define_is_refused(ddb: Any) -> None:
    _refused(
        ddb,
        lambda: ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {"pk": {"S": "a"}},
                        "UpdateExpression": "SET n = :v",
                        "ConditionExpression": "#o = :missing",
                        "ExpressionAttributeNames": {"#o": "owner"},
                        "ExpressionAttributeValues": V,
                    }
                }
            ]
        ),
        "Invalid ConditionExpression: An expression attribute value used in expression is not "
        "defined; attribute value: :missing",
    )
    _refused(
        ddb,
        lambda: ddb.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :a",
            FilterExpression="attribute_exists(#missing)",
            ExpressionAttributeValues={":a": {"S": "a"}},
        ),
        "Invalid FilterExpression: An expression attribute name used in the document path is not "
        "defined; attribute name: #missing",
    )


def test_an_expression_with_the_legacy_parameter_it_replaces_is_refused(ddb: Any) -> None:
    _refused(
        ddb,
        lambda: ddb.put_item(
            TableName=TABLE,
            Item={"pk": {"S": "e"}},
            ConditionExpression="attribute_not_exists(pk)",
            Expected={"pk": {"Exists": False}},
        ),
        "Can not use both expression and non-expression parameters in the same request: "
        "Non-expression parameters: {Expected} Expression parameters: {ConditionExpression}",
    )


@pytest.mark.parametrize(
    "key",
    [{"pk": {"S": "a"}, "owner": {"S": "o"}}, {"pk": {"N": "1"}}, {"owner": {"S": "o"}}],
    ids=["an extra attribute", "another type", "not the key"],
)
def test_a_key_that_is_not_exactly_the_tables_is_refused(ddb: Any, key: dict[str, Any]) -> None:
    message = "The provided key element does not match the schema"
    _refused(ddb, lambda: ddb.get_item(TableName=TABLE, Key=key), message)
    _refused(ddb, lambda: ddb.delete_item(TableName=TABLE, Key=key), message)
    _refused(
        ddb,
        lambda: ddb.update_item(
            TableName=TABLE, Key=key, UpdateExpression="SET n = :v", ExpressionAttributeValues=V
        ),
        message,
    )
    check = {"TableName": TABLE, "Key": key, "ConditionExpression": "attribute_exists(pk)"}
    _refused(
        ddb, lambda: ddb.transact_write_items(TransactItems=[{"ConditionCheck": check}]), message
    )


def test_an_item_without_the_tables_key_or_of_another_type_is_refused(ddb: Any) -> None:
    _refused(
        ddb,
        lambda: ddb.put_item(TableName=TABLE, Item={"owner": {"S": "o"}}),
        "One or more parameter values were invalid: Missing the key pk in the item",
    )
    _refused(
        ddb,
        lambda: ddb.transact_write_items(
            TransactItems=[{"Put": {"TableName": TABLE, "Item": {"pk": {"N": "7"}}}}]
        ),
        "One or more parameter values were invalid: Type mismatch for key pk expected: S actual: N",
    )


def test_values_outside_the_api_models_enums_and_bounds_are_refused(ddb: Any) -> None:
    _refused(
        ddb,
        lambda: ddb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": {"pk": {"S": "f"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_NEW",
                    }
                }
            ],
            ClientRequestToken="t" * 37,
        ),
        "2 validation errors detected: Value 'ALL_NEW' at "
        "'transactItems.1.member.put.returnValuesOnConditionCheckFailure' failed to satisfy "
        "constraint: Member must satisfy enum value set: [ALL_OLD, NONE]; Value '"
        + "t"
        * 37
        + "' at 'clientRequestToken' failed to satisfy constraint: Member must have length less "
        "than or equal to 36",
    )
    _refused(
        ddb,
        lambda: ddb.delete_item(TableName=TABLE, Key={"pk": {"S": "a"}}, ReturnValues="ALL_NEW"),
        "Return values set to invalid value",
    )


def test_a_query_needs_a_key_condition_and_an_index_the_table_has(ddb: Any) -> None:
    _refused(
        ddb,
        lambda: ddb.query(
            TableName=TABLE,
            IndexName="by-nobody",
            KeyConditionExpression="pk = :v",
            ExpressionAttributeValues=V,
        ),
        "The table does not have the specified index: by-nobody",
    )
    _refused(
        ddb,
        lambda: ddb.query(TableName=TABLE),
        "Either the KeyConditions or KeyConditionExpression parameter must be specified",
    )


def test_a_transaction_item_is_exactly_one_action(ddb: Any) -> None:
    put = {"TableName": TABLE, "Item": {"pk": {"S": "g"}}}
    check = {
        "TableName": TABLE,
        "Key": {"pk": {"S": "a"}},
        "ConditionExpression": "attribute_exists(pk)",
    }
    _refused(
        ddb,
        lambda: ddb.transact_write_items(TransactItems=[{"Put": put, "ConditionCheck": check}]),
        "TransactItems can only contain one of Check, Put, Update or Delete",
    )
