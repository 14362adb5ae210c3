"""The project's own sandbox downstreams: payment provider, carrier, inventory seed, faults.

Each keeps its state in DynamoDB (PAYMENTS_TABLE, SHIPMENTS_TABLE, SANDBOX_TABLE) so that every
recovery path can be shown on a real account and counted item by item (docs/design.md §1, §8).
"""
