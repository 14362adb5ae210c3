"""Fixtures of the unit tests."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from local_aws.tables import StackTables
from saga.agent.drafts import DraftStore
from saga.agent.tools import AgentTools
from saga.approval_keys import KmsPublicKeys, forget_public_keys, parse_trusted_keys
from saga.approvals import ApprovalVerifier
from saga.aws import dynamodb_client
from saga.cases import CaseRecords
from tests.tools_harness import (
    APPROVAL_KEYS_JSON,
    TABLE_NAMES,
    create_approval_keys,
    create_tables,
)

ROLE = "arn:aws:iam::123456789012:role/sfn"


@pytest.fixture
def tools(stack_tables: StackTables) -> Iterator[AgentTools]:
    """The agent tools for tenant acme on moto (the stack's tables, approval keys in KMS, a
    state machine that records executions without running them)."""
    forget_public_keys()
    with mock_aws():
        client = dynamodb_client()
        create_tables(stack_tables, boto3.client("dynamodb"), TABLE_NAMES)
        create_approval_keys(boto3.client("kms"))
        sfn = boto3.client("stepfunctions")
        machine = sfn.create_state_machine(
            name="saga",
            definition=json.dumps({"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}}),
            roleArn=ROLE,
        )["stateMachineArn"]
        yield AgentTools(
            tenant_id="acme",
            drafts=DraftStore(
                client,
                TABLE_NAMES["DRAFTS_TABLE"],
                legacy_table_name=TABLE_NAMES["LEGACY_DRAFTS_TABLE"],
            ),
            cases=CaseRecords(client, TABLE_NAMES["CASES_TABLE"]),
            stepfunctions=sfn,
            state_machine_arn=machine,
            approvals=ApprovalVerifier(
                parse_trusted_keys(APPROVAL_KEYS_JSON),
                KmsPublicKeys(lambda: boto3.client("kms")),
                thresholds={},
            ),
        )
