"""The saga's own tables: action ledger, cases, drafts, inventory, reservations, limits.

Inventory and reservations belong here, not to the sandbox: the ReserveStock step is the
same-account DynamoDB archetype (docs/design.md §1), written in one transaction with the ledger, so
the saga needs them whether or not the sandbox downstreams are deployed.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from stacks.config import SagaConfig

OPEN_ACTIONS_INDEX = "open-actions"
TTL_ATTRIBUTE = "expires_at"


def saga_table(
    scope: Construct,
    construct_id: str,
    *,
    config: SagaConfig,
    partition_key: str,
    sort_key: str | None = None,
    ttl_attribute: str | None = None,
    point_in_time_recovery: bool = True,
) -> dynamodb.Table:
    """An on-demand table whose physical name CloudFormation derives from the stack (stage)."""
    retain = config.retain_data
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=dynamodb.Attribute(name=partition_key, type=dynamodb.AttributeType.STRING),
        sort_key=(
            dynamodb.Attribute(name=sort_key, type=dynamodb.AttributeType.STRING)
            if sort_key
            else None
        ),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        time_to_live_attribute=ttl_attribute,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=point_in_time_recovery
        ),
        # Production data (stages in `retain_data_stages`) survives a stack deletion;
        # development stages clean up after themselves.
        removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
        deletion_protection=retain,
    )


class SagaTables(Construct):
    """Ledger (TTL, PITR, sparse open-actions index), cases, drafts, inventory, reservations,
    the daily refund counters (TTL)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: SagaConfig) -> None:
        super().__init__(scope, construct_id)
        self.ledger = saga_table(
            self,
            "LedgerTable",
            config=config,
            partition_key="action_key",
            ttl_attribute=TTL_ATTRIBUTE,
        )
        # Sparse: the ledger sets `open_status` only while an action is IN_PROGRESS or UNKNOWN,
        # so the sweeper reads only open actions, ordered by when their lease ended.
        self.ledger.add_global_secondary_index(
            index_name=OPEN_ACTIONS_INDEX,
            partition_key=dynamodb.Attribute(
                name="open_status", type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(
                name="lease_expires_at", type=dynamodb.AttributeType.NUMBER
            ),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        self.cases = saga_table(self, "CasesTable", config=config, partition_key="case_id")
        # Cases an agent proposed, until they are started (saga.agent.drafts, docs/design.md §10),
        # keyed tenant first: `dynamodb:LeadingKeys` can scope a principal to its tenant's.
        self.drafts = saga_table(
            self, "TenantDraftsTable", config=config, partition_key="tenant_id", sort_key="case_id"
        )
        # The drafts table as it was before ids carried the tenant, kept as it was (its logical
        # id and key unchanged, so CloudFormation leaves it and its items alone): drafts proposed
        # then are read and approved there; nothing new is written to it.
        self.legacy_drafts = saga_table(self, "DraftsTable", config=config, partition_key="case_id")
        self.inventory = saga_table(self, "InventoryTable", config=config, partition_key="sku")
        self.reservations = saga_table(
            self, "ReservationsTable", config=config, partition_key="reservation_id"
        )
        # The daily refund counters, one per tenant, currency and UTC day (docs/design.md
        # §3.12): a table of their own, created whether or not a tenant has a ceiling, since
        # the ledger is scanned and read as action records (the sweeper's index, sagactl
        # ledger/stuck, keep-open-actions) and counters there would be read as actions. A
        # counter expires (TTL) a day plus the ledger's retention after its day ends.
        self.limits = saga_table(
            self,
            "LimitsTable",
            config=config,
            partition_key="counter_key",
            ttl_attribute=TTL_ATTRIBUTE,
        )
