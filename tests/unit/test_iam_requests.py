"""The offline IAM check's request mapping (offline_iam.requests) for a transaction: DynamoDB
authorizes each item of a TransactWriteItems on its own, by the item's own action on its own
table, with its own condition keys (docs/design.md §11). A mapping that looked at the first item
only would pass a transaction whose later item the role may not write; before this test only the
~12-minute roles test noticed, and only because a grant then looked unused (issue 41, item 5).
"""

from __future__ import annotations

from typing import Any

from local_aws.aws_calls import AwsCall
from offline_iam.coverage import evaluate_calls
from offline_iam.evaluate import Grants, Principal, Request
from offline_iam.requests import Account, authorization_requests

ACCOUNT = "123456789012"
REGION = "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/reserve-stock"
TABLES = {"ledger": "action_key", "inventory": "sku", "cases": "case_id"}
LEDGER, INVENTORY, CASES = (f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}" for name in TABLES)
ACCOUNT_TABLES = Account(ACCOUNT, partition_keys=TABLES)


def _transaction(case_id: str) -> AwsCall:
    """A claim on the ledger, the stock taken, and the case record marked: three items, three
    tables, each with its own key and expressions."""
    items: list[dict[str, Any]] = [
        {
            "Put": {
                "TableName": "ledger",
                "Item": {"action_key": {"S": f"acme#reserve#{case_id}.reserve"}},
                "ConditionExpression": "attribute_not_exists(action_key)",
            }
        },
        {
            "Update": {
                "TableName": "inventory",
                "Key": {"sku": {"S": "SKU-RED-MUG"}},
                "UpdateExpression": "SET available = available - :q",
                "ConditionExpression": "available >= :q",
                "ExpressionAttributeValues": {":q": {"N": "1"}},
            }
        },
        {
            "Update": {
                "TableName": "cases",
                "Key": {"case_id": {"S": case_id}},
                "UpdateExpression": "SET reserved_at = :now",
                "ConditionExpression": "#outcome = :in_progress",
                "ExpressionAttributeNames": {"#outcome": "outcome"},
                "ExpressionAttributeValues": {
                    ":in_progress": {"S": "IN_PROGRESS"},
                    ":now": {"N": "1"},
                },
            }
        },
    ]
    return AwsCall(
        caller="ReserveStockFunction",
        kind="function",
        service="dynamodb",
        operation="TransactWriteItems",
        params={"TransactItems": items},
        region=REGION,
    )


def _allow(action: str, resource: str, condition: dict[str, Any] | None = None) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Action": action, "Resource": resource}
    if condition is not None:
        statement["Condition"] = condition
    return statement


# The role may claim on the ledger, take stock, and mark its own case's record only.
GRANTS = Grants(
    Principal(ROLE, ACCOUNT),
    [
        {
            "Version": "2012-10-17",
            "Statement": [
                _allow("dynamodb:PutItem", LEDGER),
                _allow(
                    "dynamodb:UpdateItem",
                    INVENTORY,
                    {"ForAllValues:StringEquals": {"dynamodb:Attributes": ["sku", "available"]}},
                ),
                _allow(
                    "dynamodb:UpdateItem",
                    CASES,
                    {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["case-mine"]}},
                ),
            ],
        }
    ],
)


def test_each_item_of_a_transaction_is_its_own_request_on_its_own_table() -> None:
    requests = authorization_requests(_transaction("case-mine"), ACCOUNT_TABLES)

    assert requests == [
        Request(
            "dynamodb:PutItem",
            LEDGER,
            {
                "dynamodb:Attributes": ["action_key"],
                "dynamodb:ReturnValues": "NONE",
                "dynamodb:LeadingKeys": ["acme#reserve#case-mine.reserve"],
            },
        ),
        Request(
            "dynamodb:UpdateItem",
            INVENTORY,
            {
                "dynamodb:Attributes": ["available", "sku"],
                "dynamodb:ReturnValues": "NONE",
                "dynamodb:LeadingKeys": ["SKU-RED-MUG"],
            },
        ),
        Request(
            "dynamodb:UpdateItem",
            CASES,
            {
                "dynamodb:Attributes": ["case_id", "outcome", "reserved_at"],
                "dynamodb:ReturnValues": "NONE",
                "dynamodb:LeadingKeys": ["case-mine"],
            },
        ),
    ]


def test_a_transaction_whose_later_item_is_not_allowed_is_denied() -> None:
    """Its first two items are allowed; the third marks another case's record, which the
    role's condition on `dynamodb:LeadingKeys` excludes: the transaction is denied there."""
    evaluated = evaluate_calls([_transaction("case-theirs")], ACCOUNT_TABLES, GRANTS, {})

    assert [(e.request.action, e.request.resource, e.allowed) for e in evaluated] == [
        ("dynamodb:PutItem", LEDGER, True),
        ("dynamodb:UpdateItem", INVENTORY, True),
        ("dynamodb:UpdateItem", CASES, False),
    ]
    assert evaluated[-1].reason == "no policy allows it"
    # The same transaction on the role's own case is allowed, item by item.
    allowed = evaluate_calls([_transaction("case-mine")], ACCOUNT_TABLES, GRANTS, {})
    assert [e.allowed for e in allowed] == [True, True, True]
