"""Saga benchmark: counts, not timings, for every example case in the local AWS.

    python -m sagactl.bench            (or `make bench`)

For each example case it runs the real state machine in the local emulator and reports:
- states entered and state transitions (what a STANDARD workflow is billed for),
- Lambda invocations (TaskScheduled events, retries included),
- DynamoDB requests made by the tools (every botocore call to DynamoDB in this process:
  the executor itself makes none, so these are the handlers' requests),
- KMS requests made by the tools (GetPublicKey of the approval keys: the signature itself is
  verified in the function, saga/signatures.py),
- effects counted in the sandbox tables.
Then each handler's cold start against a bare boto3 handler (sagactl/bench_coldstart.py):
modules imported, and the time of import plus first clients in fresh interpreters, as a ratio
measured in this one run (the one figure here that is a duration: reported, never asserted).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import botocore.client

from saga.approvals import forget_public_keys
from sagactl.bench_coldstart import format_cold_starts, measure_cold_starts
from sagactl.local.emulator import client_environment
from sagactl.local.environment import StackSource, run_local
from sagactl.local.lambda_runtime import quiet_handlers
from sagactl.local.synth import PROJECT_ROOT

EXAMPLES = PROJECT_ROOT / "examples"


@dataclass(frozen=True)
class CaseCounts:
    case: str
    status: str
    outcome: str | None
    states_entered: int
    state_transitions: int
    lambda_invocations: int
    dynamodb_requests: int
    kms_requests: int  # GetPublicKey: only where a function's container reads a key first
    refunds: int
    shipments: int


@contextmanager
def count_dynamodb_requests() -> Iterator[Counter[str]]:
    """Counts every DynamoDB API call made by any botocore client in this process."""
    with count_requests("dynamodb") as counts:
        yield counts


@contextmanager
def count_requests(service: str) -> Iterator[Counter[str]]:
    """Counts every API call to `service` (botocore's name: "dynamodb", "kms") made by any
    botocore client in this process, by operation."""
    counts: Counter[str] = Counter()
    lock = threading.Lock()
    client_class: Any = botocore.client.BaseClient
    original = client_class._make_api_call

    def counting(self: Any, operation_name: str, api_params: Any) -> Any:
        if self.meta.service_model.signing_name == service:  # saga-kms signs as kms
            with lock:
                counts[operation_name] += 1
        return original(self, operation_name, api_params)

    client_class._make_api_call = counting
    try:
        yield counts
    finally:
        client_class._make_api_call = original


def _count_items(client: Any, table: str, case_id: str) -> int:
    response = client.scan(
        TableName=table,
        FilterExpression="case_id = :c",
        ExpressionAttributeValues={":c": {"S": case_id}},
        Select="COUNT",
        ConsistentRead=True,
    )
    return int(response["Count"])


def measure_cases(time_scale: float) -> list[CaseCounts]:
    results: list[CaseCounts] = []
    source = StackSource.synthesized()
    with run_local(source, time_scale=time_scale) as local:
        os.environ.update(client_environment(local.endpoint))
        ddb = local.client("dynamodb")
        # Every function starts cold: the first case pays each container's public-key reads.
        forget_public_keys()
        for path in sorted(EXAMPLES.glob("*.json")):
            case = json.loads(path.read_text(encoding="utf-8"))
            with count_dynamodb_requests() as counts, count_requests("kms") as kms:
                arn = local.start_case(case)
                description = local.wait_for_execution(arn)
                requests = sum(counts.values())
            history = local.history(arn)
            entered = [e for e in history if e["type"].endswith("StateEntered")]
            outcome = None
            if description.get("output"):
                outcome = json.loads(description["output"]).get("outcome")
            results.append(
                CaseCounts(
                    case=path.stem,
                    status=description["status"],
                    outcome=outcome,
                    states_entered=len(entered),
                    # Step Functions bills each state entered plus the start of the execution.
                    state_transitions=len(entered) + 1,
                    lambda_invocations=sum(1 for e in history if e["type"] == "TaskScheduled"),
                    dynamodb_requests=requests,
                    kms_requests=sum(kms.values()),
                    refunds=_count_items(ddb, local.outputs["PaymentsTableName"], case["case_id"]),
                    shipments=_count_items(
                        ddb, local.outputs["ShipmentsTableName"], case["case_id"]
                    ),
                )
            )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sagactl.bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--runs", type=int, default=9, help="cold-start rounds (fresh interpreters each)"
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=0.05,
        help="scale for the ASL Retry sleeps in the emulator (counts do not depend on it)",
    )
    args = parser.parse_args(argv)

    handler_log = PROJECT_ROOT / ".local" / "bench-handlers.log"
    with quiet_handlers(handler_log):
        cases = measure_cases(args.time_scale)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    cold_starts = measure_cold_starts(args.runs)
    if args.json:
        document = {
            "cases": [asdict(c) for c in cases],
            "cold_starts": [asdict(c) for c in cold_starts],
        }
        print(json.dumps(document, indent=2))
        return 0

    header = f"{'case':<24} {'status':<10} {'outcome':<11} {'states':>6} {'transitions':>11} "
    header += f"{'lambda':>6} {'ddb req':>7} {'kms req':>7} {'refunds':>7} {'shipments':>9}"
    print(header)
    for c in cases:
        print(
            f"{c.case:<24} {c.status:<10} {c.outcome or '-':<11} {c.states_entered:>6} "
            f"{c.state_transitions:>11} {c.lambda_invocations:>6} {c.dynamodb_requests:>7} "
            f"{c.kms_requests:>7} {c.refunds:>7} {c.shipments:>9}"
        )
    print(
        "kms req: GetPublicKey, one per function and approval key the first time a container "
        "verifies (the cases run in one process: the first case finds every function cold), "
        "none when warm."
    )
    print()
    print(format_cold_starts(cold_starts, args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
