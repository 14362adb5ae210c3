"""A small hand-written CloudFormation template (CDK-shaped) and the handlers it names.

It exercises what the local provisioning must resolve: GSIs, TTL, Ref / Fn::GetAtt in function
environments, a definition given as Fn::Join with DefinitionSubstitutions, outputs.
The handlers run in-process inside the local AWS, like the project's real ones.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import boto3

HANDLERS = "tests.e2e.local_stack_fixture"


class CustomRejection(Exception):
    """A business error: its class name is the Lambda error type the ASL catches."""


class Flaky(Exception):
    """Raised while the case's `fail_times` budget lasts."""


def record(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Write one item per call to TABLE (resolved from Ref) and echo what it saw."""
    table = os.environ["TABLE"]
    dynamodb = boto3.client("dynamodb")
    item_id = f"{event['case_id']}#{context.aws_request_id}"
    dynamodb.put_item(
        TableName=table,
        Item={"action_key": {"S": item_id}, "case_id": {"S": event["case_id"]}},
    )
    return {
        "case_id": event["case_id"],
        "table": table,
        "queue_url": os.environ["QUEUE_URL"],
        "function_name": context.function_name,
        "remaining_ms_positive": context.get_remaining_time_in_millis() > 0,
        "memory": context.memory_limit_in_mb,
        "marker_seen": os.environ.get("ONLY_IN_REJECT"),
    }


def reject(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Fail a few times with Flaky (counted in the table), then with CustomRejection.
    `hold_seconds`: each call takes that long first (a call still in flight)."""
    time.sleep(float(event.get("hold_seconds", 0)))
    dynamodb = boto3.client("dynamodb")
    table = os.environ["TABLE"]
    counter = dynamodb.update_item(
        TableName=table,
        Key={"action_key": {"S": f"{event['case_id']}#reject-calls"}},
        UpdateExpression="ADD calls :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="UPDATED_NEW",
    )
    calls = int(counter["Attributes"]["calls"]["N"])
    if calls <= int(event.get("fail_times", 0)):
        raise Flaky(f"call {calls} failed")
    if event.get("reject"):
        raise CustomRejection(f'case {event["case_id"]} rejected: "{event["reject"]}"')
    return {"accepted": True, "calls": calls}


_DEFINITION = {
    "QueryLanguage": "JSONata",
    "StartAt": "Record",
    "States": {
        "Record": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Arguments": {"FunctionName": "${RecordFunctionArn}", "Payload": "{% $states.input %}"},
            "Assign": {
                "recorded": "{% $states.result.Payload %}",
                "case_id": "{% $states.input.case_id %}",
            },
            "Output": "{% $states.input %}",
            "Next": "Reject",
        },
        "Reject": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Arguments": {"FunctionName": "${RejectFunctionArn}", "Payload": "{% $states.input %}"},
            "Retry": [
                {"ErrorEquals": ["Flaky"], "IntervalSeconds": 2, "MaxAttempts": 3, "BackoffRate": 2}
            ],
            "Catch": [
                {
                    "ErrorEquals": ["CustomRejection"],
                    "Assign": {"error": "{% $states.errorOutput %}"},
                    "Next": "Rejected",
                }
            ],
            "Next": "Done",
        },
        "Done": {
            "Type": "Pass",
            "Output": (
                "{% {'outcome': 'COMPLETED', 'case_id': $case_id, 'recorded': $recorded,"
                " 'result': $states.input.Payload} %}"
            ),
            "End": True,
        },
        "Rejected": {
            "Type": "Pass",
            "Output": (
                "{% {'outcome': 'REJECTED', 'case_id': $case_id, 'error': $error.Error,"
                " 'message': $parse($error.Cause).errorMessage,"
                " 'summary': 'case ' & $case_id & ' failed ' & $string(1 + 1) & ' ways'} %}"
            ),
            "End": True,
        },
    },
}


def _definition_as_join() -> dict[str, Any]:
    """The definition the way CDK writes it when it holds tokens: Fn::Join of string parts."""
    text = json.dumps(_DEFINITION)
    head, _, tail = text.partition("${RecordFunctionArn}")
    return {"Fn::Join": ["", [head, "${RecordFunctionArn}", tail]]}


TEMPLATE: dict[str, Any] = {
    "Resources": {
        "LedgerTableA1B2C3D4": {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "KeySchema": [{"AttributeName": "action_key", "KeyType": "HASH"}],
                "AttributeDefinitions": [
                    {"AttributeName": "action_key", "AttributeType": "S"},
                    {"AttributeName": "open_status", "AttributeType": "S"},
                    {"AttributeName": "lease_expires_at", "AttributeType": "N"},
                ],
                "BillingMode": "PAY_PER_REQUEST",
                "GlobalSecondaryIndexes": [
                    {
                        "IndexName": "open-actions",
                        "KeySchema": [
                            {"AttributeName": "open_status", "KeyType": "HASH"},
                            {"AttributeName": "lease_expires_at", "KeyType": "RANGE"},
                        ],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                ],
                "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            },
        },
        "InventoryTable0F9E8D7C": {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "KeySchema": [{"AttributeName": "sku", "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": "sku", "AttributeType": "S"}],
                "ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
            },
        },
        "EscalationQueue5E6F7A8B": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "VisibilityTimeout": 60,
                "RedrivePolicy": {
                    "deadLetterTargetArn": {"Fn::GetAtt": ["EscalationDlq11223344", "Arn"]},
                    "maxReceiveCount": 3,
                },
            },
        },
        "EscalationDlq11223344": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "RecordFunctionServiceRoleAAAA1111": {
            "Type": "AWS::IAM::Role",
            "Properties": {"AssumeRolePolicyDocument": {}},
        },
        "RecordFunctionBBBB2222": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": f"{HANDLERS}.record",
                "Runtime": "python3.12",
                "Role": {"Fn::GetAtt": ["RecordFunctionServiceRoleAAAA1111", "Arn"]},
                "Code": {
                    "S3Bucket": {
                        "Fn::Sub": "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}"
                    },
                    "S3Key": "x.zip",
                },
                "Timeout": 30,
                "MemorySize": 256,
                "Architectures": ["arm64"],
                "Environment": {
                    "Variables": {
                        "TABLE": {"Ref": "LedgerTableA1B2C3D4"},
                        "QUEUE_URL": {"Ref": "EscalationQueue5E6F7A8B"},
                        "POWERTOOLS_SERVICE_NAME": "fixture",
                    }
                },
            },
        },
        "RejectFunctionCCCC3333": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": f"{HANDLERS}.reject",
                "Runtime": "python3.12",
                "Role": {"Fn::GetAtt": ["RecordFunctionServiceRoleAAAA1111", "Arn"]},
                "Code": {"ZipFile": "ignored"},
                "Timeout": 10,  # a held call lasts up to 4 s (Lambda's default timeout is 3 s)
                "Environment": {
                    "Variables": {
                        "TABLE": {"Ref": "LedgerTableA1B2C3D4"},
                        "ONLY_IN_REJECT": "reject-only",
                    }
                },
            },
        },
        "LogGroupDDDD4444": {"Type": "AWS::Logs::LogGroup", "Properties": {}},
        "StateMachineEEEE5555": {
            "Type": "AWS::StepFunctions::StateMachine",
            "Properties": {
                "DefinitionString": _definition_as_join(),
                "DefinitionSubstitutions": {
                    "RecordFunctionArn": {"Fn::GetAtt": ["RecordFunctionBBBB2222", "Arn"]},
                    "RejectFunctionArn": {"Fn::GetAtt": ["RejectFunctionCCCC3333", "Arn"]},
                },
                "RoleArn": {"Fn::GetAtt": ["RecordFunctionServiceRoleAAAA1111", "Arn"]},
                "StateMachineType": "STANDARD",
                "LoggingConfiguration": {
                    "Destinations": [
                        {
                            "CloudWatchLogsLogGroup": {
                                "LogGroupArn": {"Fn::GetAtt": ["LogGroupDDDD4444", "Arn"]}
                            }
                        }
                    ]
                },
            },
        },
    },
    "Outputs": {
        "StateMachineArn": {"Value": {"Ref": "StateMachineEEEE5555"}},
        "LedgerTableName": {"Value": {"Ref": "LedgerTableA1B2C3D4"}},
        "InventoryTableName": {"Value": {"Ref": "InventoryTable0F9E8D7C"}},
        "EscalationQueueUrl": {"Value": {"Ref": "EscalationQueue5E6F7A8B"}},
        "RecordFunctionArn": {"Value": {"Fn::GetAtt": ["RecordFunctionBBBB2222", "Arn"]}},
        "Described": {"Value": {"Fn::Sub": "${AWS::StackName} in ${AWS::Region}"}},
    },
}
