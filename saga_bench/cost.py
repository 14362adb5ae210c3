"""What a case costs at list prices, per million cases: Step Functions, Lambda and DynamoDB.

From what `make bench` counts for each example case in the local AWS (cases.py): the state
transitions Step Functions bills (each state entered, plus the start), the Lambda invocations,
and the DynamoDB request units the requests were billed (local_aws.request_units: item
sizes, read against write units, transactional items twice). Prices are AWS's list prices in
us-east-1 (saga_bench.deploy_cost.PRICES, each with its page), without free tiers. Assumptions,
named where the figure is printed:

- every invocation is billed BILLED_MS_PER_INVOCATION, at the configured memory (cdk.json
  `functions.memory_mb`) on arm64: a warm tool makes a few DynamoDB requests and at most one
  downstream call; a cold start adds its init time (`make bench`'s cold-start table);
- the sandbox's tables (payments, shipments, its fault and reference bookkeeping) stand for the
  payment provider's and the carrier's APIs, which bill their owners, not this account, and are
  not deployed without the sandbox: their units are shown, not added;
- not in the total: CloudWatch Logs and X-Ray, estimated beside it (LogsAndTraces: the
  execution's log events and what the functions printed are measured, Lambda's own records per
  invocation assumed, every execution traced); KMS (none when warm), SQS (an escalation's
  message).
"""

from __future__ import annotations

from dataclasses import dataclass

from saga_bench.deploy_cost import PRICES

PER = 1_000_000  # cases
BILLED_MS_PER_INVOCATION = 100  # an assumption (above)
# Lambda's own records per invocation in the JSON log format (platform.start, platform.report
# with its X-Ray ids): an assumption, about what one pair measures.
PLATFORM_LOG_BYTES_PER_INVOCATION = 600
SANDBOX_OUTPUTS = ("PaymentsTableName", "ShipmentsTableName", "SandboxTableName")


@dataclass(frozen=True)
class CaseCost:
    """One case's billed quantities, and what a million such cases cost (USD)."""

    transitions: int
    invocations: int
    memory_mb: int
    read_units: float  # the saga's own tables
    write_units: float  # their items
    sandbox_read_units: float
    sandbox_write_units: float
    index_write_units: int = 0  # the saga's tables' secondary indexes (the ledger's open-actions)

    @property
    def gb_seconds(self) -> float:
        return self.invocations * self.memory_mb / 1024 * BILLED_MS_PER_INVOCATION / 1000

    @property
    def step_functions(self) -> float:
        return self.transitions * PRICES["sfn_transition"].usd / 1000 * PER

    @property
    def lambda_requests(self) -> float:
        return self.invocations * PRICES["lambda_request"].usd

    @property
    def lambda_compute(self) -> float:
        return self.gb_seconds * PRICES["lambda_arm_gb_second"].usd * PER

    @property
    def all_write_units(self) -> float:
        return self.write_units + self.index_write_units

    @property
    def dynamodb(self) -> float:
        reads = self.read_units * PRICES["dynamodb_read"].usd
        return reads + self.all_write_units * PRICES["dynamodb_write"].usd

    @property
    def total(self) -> float:
        return self.step_functions + self.lambda_requests + self.lambda_compute + self.dynamodb

    def per_million(self) -> dict[str, float]:
        return {
            "step_functions": round(self.step_functions, 2),
            "lambda": round(self.lambda_requests + self.lambda_compute, 2),
            "dynamodb": round(self.dynamodb, 2),
            "total": round(self.total, 2),
        }

    def arithmetic(self) -> str:
        """The sum, as it is computed (per million cases)."""
        sfn = PRICES["sfn_transition"].usd * PER / 1000
        gb_s = PRICES["lambda_arm_gb_second"].usd * PER
        return (
            f"SFN {self.transitions} x ${sfn:.2f} = ${self.step_functions:.2f}; "
            f"Lambda {self.invocations} x ${PRICES['lambda_request'].usd:.2f} + "
            f"{self.gb_seconds:.3f} GB-s x ${gb_s:.4f} = "
            f"${self.lambda_requests + self.lambda_compute:.2f}; "
            f"DynamoDB {self.read_units:g} RRU x ${PRICES['dynamodb_read'].usd:.3f} + "
            f"({self.write_units:g} table + {self.index_write_units} index) WRU x "
            f"${PRICES['dynamodb_write'].usd:.3f} = ${self.dynamodb:.2f}; total ${self.total:.2f}"
        )


@dataclass(frozen=True)
class LogsAndTraces:
    """An estimate beside the total, not in it: what a case's CloudWatch Logs ingestion and
    X-Ray traces cost per million cases. The state machine logs every history event (level
    ALL, without execution data: stacks/constructs/workflow.py); each function prints its
    Powertools lines and EMF metrics, and Lambda adds its own records; every execution is one
    X-Ray trace (tracing on the state machine and the functions), at most: X-Ray's sampling
    rules may record fewer (https://aws.amazon.com/xray/pricing/ bills traces recorded)."""

    execution_log_events: int
    execution_log_bytes: int  # measured: the history as log events (cases.py)
    function_log_bytes: int  # measured: what the functions printed during the case
    invocations: int

    @property
    def log_bytes(self) -> int:
        platform = self.invocations * PLATFORM_LOG_BYTES_PER_INVOCATION
        return self.execution_log_bytes + self.function_log_bytes + platform

    @property
    def logs(self) -> float:
        return self.log_bytes / 1e9 * PRICES["log_ingestion"].usd * PER

    @property
    def traces(self) -> float:
        return PRICES["xray_trace"].usd  # one trace a case, per million traces

    def arithmetic(self) -> str:
        gb = self.log_bytes * PER / 1e9
        return (
            f"estimate, not in the total: CloudWatch Logs ({self.execution_log_events} execution "
            f"events {self.execution_log_bytes} B + functions' lines {self.function_log_bytes} B "
            f"+ {self.invocations} x {PLATFORM_LOG_BYTES_PER_INVOCATION} B Lambda records, "
            f"assumed) = {self.log_bytes} B a case, {gb:.2f} GB x "
            f"${PRICES['log_ingestion'].usd:.2f} = ${self.logs:.2f}; X-Ray at most 1 trace a "
            f"case x ${PRICES['xray_trace'].usd:.2f} = ${self.traces:.2f}; together "
            f"${self.logs + self.traces:.2f}"
        )


def assumptions(memory_mb: int) -> list[str]:
    prices = ", ".join(
        f"{PRICES[name].usd:g} USD {PRICES[name].unit}"
        for name in (
            "sfn_transition",
            "lambda_request",
            "lambda_arm_gb_second",
            "dynamodb_read",
            "dynamodb_write",
        )
    )
    return [
        f"list prices, us-east-1, no free tier: {prices}",
        f"each invocation billed {BILLED_MS_PER_INVOCATION} ms at {memory_mb} MB (arm64), an "
        "assumption: warm, a few DynamoDB requests and at most one downstream call",
        "DynamoDB units as billed: reads 1 per 4 KB strongly consistent (half eventually), "
        "writes 1 per 1 KB of the larger of the item before and after, every transactional "
        "item twice, a failed conditional write still billed (local_aws/request_units.py)",
        "index WRU: the ledger's open-actions index (projection ALL) is written when an item "
        "enters it, leaves it, changes its key (twice) or a projected attribute, 1 per 1 KB of "
        "the entry; a transaction's index writes twice (a reading: AWS does not say)",
        "the sandbox's tables stand for the provider's and the carrier's APIs: their units "
        "(sandbox RRU, WRU) are not in the total; KMS and SQS are not counted; logs and traces "
        "are estimated apart (the lines after each case's arithmetic)",
    ]
