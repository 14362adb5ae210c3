"""What IAM authorizes for one recorded AWS call: actions, resource ARNs and condition keys.

Each API call becomes the authorization requests AWS makes for it, as the services' Service
Authorization Reference pages describe them:
- DynamoDB: a TransactWriteItems or TransactGetItems is authorized per item by the item's own
  action on its table; a Query on an index on the index's ARN; `dynamodb:LeadingKeys` holds the
  partition key values the request touches (absent for a Scan); `dynamodb:Attributes`,
  `dynamodb:ReturnValues` and `dynamodb:Select` come from the request (dynamodb_context.py).
  https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazondynamodb.html
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html
- SQS: a batch is authorized as its single action (DeleteMessageBatch as sqs:DeleteMessage).
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-api-permissions-reference.html
- KMS: the key named by ARN, id or alias (authorized on the key); `kms:SigningAlgorithm`,
  `kms:MessageType`, `kms:RequestAlias`.
  https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html
- Secrets Manager: GetSecretValue on the secret's ARN, and kms:Decrypt via Secrets Manager on
  its customer-managed key.
- Lambda Invoke is `lambda:InvokeFunction`; Step Functions calls act on the state machine or
  the execution they name.
- SSM GetParameter on the parameter's ARN, `parameter` followed by the name (a name that begins
  with `/` adds none); a String parameter needs no KMS.
  https://docs.aws.amazon.com/service-authorization/latest/reference/list_awssystemsmanager.html

A call this module cannot map raises UnmappedCall: the check fails, naming it, rather than
passing a call it did not evaluate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from local_aws.aws_calls import AwsCall
from offline_iam.dynamodb_context import UnmappedExpression, request_context
from offline_iam.evaluate import Request


class UnmappedCall(ValueError):
    """A recorded call whose authorization this module does not know."""


@dataclass(frozen=True)
class Account:
    """What the requests are resolved against: the account, its tables' partition keys, the
    approval keys' aliases, the stacks' ids."""

    account_id: str
    partition_keys: Mapping[str, str]  # table name -> its HASH attribute
    key_aliases: Mapping[str, str] = field(default_factory=dict)  # alias name -> key ARN
    stack_ids: Mapping[str, str] = field(default_factory=dict)  # stack name -> stack id (ARN)
    # Secrets Manager secrets: name and ARN -> (ARN, the customer-managed KMS key or None).
    secrets: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)


def _arn(call: AwsCall, account: Account, service: str, resource: str) -> str:
    return f"arn:aws:{service}:{call.region}:{account.account_id}:{resource}"


# --- DynamoDB --------------------------------------------------------------------------------
_TRANSACT_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
_ITEM_OPERATIONS = frozenset(_TRANSACT_ITEM_ACTIONS.values()) | {"Query", "Scan"}
_KEYED = {"GetItem": "Key", "UpdateItem": "Key", "DeleteItem": "Key", "PutItem": "Item"}


def _attribute_text(value: Mapping[str, Any]) -> str:
    ((kind, raw),) = value.items()
    if kind not in ("S", "N", "B"):
        raise UnmappedCall(f"a key attribute of type {kind}")
    return str(raw)


def _query_leading_key(params: Mapping[str, Any], hash_key: str) -> str:
    """The partition key value of a Query's `<key> = :value` condition."""
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    for clause in re.split(r"\s+AND\s+", str(params.get("KeyConditionExpression", "")), flags=re.I):
        left, equals, right = clause.partition("=")
        name = names.get(left.strip(), left.strip())
        if equals and name == hash_key and right.strip() in values:
            return _attribute_text(values[right.strip()])
    raise UnmappedCall(f"a Query whose partition key {hash_key} is not found in its condition")


def _leading_keys(operation: str, params: Mapping[str, Any], account: Account) -> list[str] | None:
    table = str(params["TableName"])
    if operation in ("Scan", "DescribeTable") or params.get("IndexName"):
        return None  # no leading key (an index's partition key is not the table's)
    hash_key = account.partition_keys.get(table)
    if hash_key is None:
        raise UnmappedCall(f"table {table} has no known partition key")
    if operation == "Query":
        return [_query_leading_key(params, hash_key)]
    carried = params.get(_KEYED.get(operation, ""), None)
    if not isinstance(carried, Mapping) or hash_key not in carried:
        raise UnmappedCall(f"dynamodb:{operation} on {table} without its partition key")
    return [_attribute_text(carried[hash_key])]


def _table_request(
    call: AwsCall, account: Account, operation: str, params: Mapping[str, Any]
) -> Request:
    resource = _arn(call, account, "dynamodb", f"table/{params['TableName']}")
    if params.get("IndexName"):
        resource += f"/index/{params['IndexName']}"
    context: dict[str, Any] = {}
    if operation in _ITEM_OPERATIONS:
        try:
            context = request_context(operation, params)
        except UnmappedExpression as exc:
            raise UnmappedCall(str(exc)) from None
    leading = _leading_keys(operation, params, account)
    if leading is not None:
        context["dynamodb:LeadingKeys"] = leading
    return Request(f"dynamodb:{operation}", resource, context)


def _dynamodb(call: AwsCall, account: Account) -> list[Request]:
    params = call.params
    if call.operation in ("TransactWriteItems", "TransactGetItems"):
        requests = []
        for item in params["TransactItems"]:
            ((kind, body),) = item.items()
            requests.append(_table_request(call, account, _TRANSACT_ITEM_ACTIONS[kind], body))
        return requests
    if call.operation in ("BatchGetItem", "BatchWriteItem"):
        raise UnmappedCall(f"dynamodb:{call.operation} (not used by the saga)")
    return [_table_request(call, account, call.operation, params)]


# --- the others -----------------------------------------------------------------------------
_SQS_BATCH = {
    "DeleteMessageBatch": "DeleteMessage",
    "SendMessageBatch": "SendMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


def _sqs(call: AwsCall, account: Account) -> list[Request]:
    name = str(call.params["QueueUrl"]).rstrip("/").rsplit("/", 1)[-1]
    action = _SQS_BATCH.get(call.operation, call.operation)
    return [Request(f"sqs:{action}", _arn(call, account, "sqs", name))]


def _kms(call: AwsCall, account: Account) -> list[Request]:
    named = str(call.params["KeyId"])
    context: dict[str, Any] = {"kms:CallerAccount": account.account_id}
    if named.startswith("alias/") or ":alias/" in named:
        alias = "alias/" + named.split(":alias/", 1)[-1].removeprefix("alias/")
        if alias not in account.key_aliases:
            raise UnmappedCall(f"KMS alias {alias} is not one of the stack's")
        context["kms:RequestAlias"] = alias
        key = account.key_aliases[alias]
    elif named.startswith("arn:"):
        key = named
    else:
        key = _arn(call, account, "kms", f"key/{named}")
    for parameter, condition in (
        ("SigningAlgorithm", "kms:SigningAlgorithm"),
        ("MessageType", "kms:MessageType"),
    ):
        if parameter in call.params:
            context[condition] = str(call.params[parameter])
    return [Request(f"kms:{call.operation}", key, context)]


def _states(call: AwsCall, account: Account) -> list[Request]:
    params = call.params
    resource = params.get("executionArn") or params.get("stateMachineArn")
    if not resource:
        raise UnmappedCall(f"states:{call.operation} without an execution or state machine")
    return [Request(f"states:{call.operation}", str(resource))]


def _lambda(call: AwsCall, account: Account) -> list[Request]:
    action = "InvokeFunction" if call.operation == "Invoke" else call.operation
    if call.operation == "ListFunctions":
        return [Request("lambda:ListFunctions", "*")]
    name = str(call.params["FunctionName"])
    arn = name if name.startswith("arn:") else _arn(call, account, "lambda", f"function:{name}")
    return [Request(f"lambda:{action}", arn)]


def _cloudformation(call: AwsCall, account: Account) -> list[Request]:
    name = str(call.params.get("StackName", ""))
    if call.operation != "DescribeStacks" or not name:
        raise UnmappedCall(f"cloudformation:{call.operation} (sagactl reads one stack's outputs)")
    stack = name if name.startswith("arn:") else account.stack_ids.get(name)
    if stack is None:
        raise UnmappedCall(f"stack {name} is not one of the stacks evaluated")
    return [Request("cloudformation:DescribeStacks", stack)]


def _sts(call: AwsCall, account: Account) -> list[Request]:
    if call.operation != "GetCallerIdentity":
        raise UnmappedCall(f"sts:{call.operation}")
    return [Request("sts:GetCallerIdentity", "*")]


def _secretsmanager(call: AwsCall, account: Account) -> list[Request]:
    """GetSecretValue on the secret's whole ARN (a name is resolved: the ARN carries Secrets
    Manager's six random characters, which a policy's `-??????` matches); a secret encrypted with
    a customer-managed key also needs kms:Decrypt on it, asked by Secrets Manager with the
    caller's credentials: `kms:ViaService` and the encryption context `SecretARN`.
    https://docs.aws.amazon.com/secretsmanager/latest/userguide/security-encryption.html"""
    if call.operation != "GetSecretValue":
        raise UnmappedCall(f"secretsmanager:{call.operation} (the saga reads one secret)")
    named = str(call.params["SecretId"])
    if named not in account.secrets:
        raise UnmappedCall(f"secret {named} is not one of the account's")
    arn, key = account.secrets[named]
    requests = [Request("secretsmanager:GetSecretValue", arn)]
    if key is not None:
        context = {
            "kms:ViaService": f"secretsmanager.{call.region}.amazonaws.com",
            "kms:CallerAccount": account.account_id,
            "kms:EncryptionContext:SecretARN": arn,
        }
        requests.append(Request("kms:Decrypt", key, context))
    return requests


def _ssm(call: AwsCall, account: Account) -> list[Request]:
    if call.operation != "GetParameter":
        raise UnmappedCall(f"ssm:{call.operation} (sagactl reads one parameter)")
    name = str(call.params["Name"])
    if name.startswith("arn:"):
        return [Request("ssm:GetParameter", name)]
    separator = "" if name.startswith("/") else "/"
    return [Request("ssm:GetParameter", _arn(call, account, "ssm", f"parameter{separator}{name}"))]


_SERVICES: dict[str, Callable[[AwsCall, Account], list[Request]]] = {
    "dynamodb": _dynamodb,
    "sqs": _sqs,
    "kms": _kms,
    "states": _states,
    "lambda": _lambda,
    "cloudformation": _cloudformation,
    "sts": _sts,
    "secretsmanager": _secretsmanager,
    "ssm": _ssm,
}


def authorization_requests(call: AwsCall, account: Account) -> list[Request]:
    """The requests IAM evaluates for `call` (UnmappedCall when this module cannot say)."""
    mapper = _SERVICES.get(call.service)
    if mapper is None:
        raise UnmappedCall(f"{call.service}:{call.operation} (service not mapped)")
    return mapper(call, account)
