"""The sandbox downstreams: a payment provider and a carrier of this project (docs/design.md §1).

Deployed only when the context flag `sandbox` is true. The flag removes the payments,
shipments and sandbox-control tables (and every grant and environment variable naming them);
inventory and reservations stay, because the saga itself reserves stock in them. With the flag
off, the refund and shipment tools need real provider adapters behind the same interfaces.
"""

from __future__ import annotations

from constructs import Construct

from stacks.config import SagaConfig
from stacks.constructs.common import acknowledge
from stacks.constructs.tables import TTL_ATTRIBUTE, saga_table

_NO_PITR_REASON = (
    "Sandbox downstream data is synthetic (fake refunds, shipments, fault cursors) and is "
    "recreated by running cases again; point-in-time recovery would only add cost."
)


class SandboxDownstreams(Construct):
    """Payments (pk refund_id), shipments (pk shipment_id), sandbox control (pk pk, TTL)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: SagaConfig) -> None:
        super().__init__(scope, construct_id)
        # No secondary index: lookups by business reference read the reference index item in
        # the control table (written in the effect's transaction, read consistently), and a
        # GSI, being eventually consistent, could hide a just-made effect.
        self.payments = saga_table(
            self,
            "PaymentsTable",
            config=config,
            partition_key="refund_id",
            point_in_time_recovery=False,
        )
        self.shipments = saga_table(
            self,
            "ShipmentsTable",
            config=config,
            partition_key="shipment_id",
            point_in_time_recovery=False,
        )
        self.control = saga_table(
            self,
            "SandboxTable",
            config=config,
            partition_key="pk",
            ttl_attribute=TTL_ATTRIBUTE,
            point_in_time_recovery=False,
        )
        for table in (self.payments, self.shipments, self.control):
            acknowledge(table, "AwsSolutions-DDB3", _NO_PITR_REASON)
