"""Counts, not timings, for every example case run through the real state machine locally.

For each example case it runs the real state machine in the local emulator and reports:
- states entered and state transitions (what a STANDARD workflow is billed for),
- Lambda invocations (TaskScheduled events, retries included),
- DynamoDB requests made by the tools (every botocore call to DynamoDB in this process:
  the executor itself makes none, so these are the handlers' requests),
- KMS requests made by the tools (GetPublicKey of the approval keys: the signature itself is
  verified in the function, saga/signatures.py),
- effects counted in the sandbox tables.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from saga.approval_keys import forget_public_keys
from sagactl.local.emulator import client_environment
from sagactl.local.environment import StackSource, run_local
from sagactl.metering import count_dynamodb_requests, count_requests
from sagactl.operations.records import count_items
from sagactl.paths import EXAMPLES_DIR
from sagactl.target import local_target_from_outputs


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


def measure_cases(time_scale: float) -> list[CaseCounts]:
    results: list[CaseCounts] = []
    source = StackSource.synthesized()
    with run_local(source, time_scale=time_scale) as local:
        os.environ.update(client_environment(local.endpoint))
        target = local_target_from_outputs(local.outputs)
        # Every function starts cold: the first case pays each container's public-key reads.
        forget_public_keys()
        for path in sorted(EXAMPLES_DIR.glob("*.json")):
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
                    refunds=count_items(
                        target, target.output("PaymentsTableName"), case["case_id"]
                    ),
                    shipments=count_items(
                        target, target.output("ShipmentsTableName"), case["case_id"]
                    ),
                )
            )
    return results


def format_cases(cases: list[CaseCounts]) -> str:
    header = f"{'case':<24} {'status':<10} {'outcome':<11} {'states':>6} {'transitions':>11} "
    header += f"{'lambda':>6} {'ddb req':>7} {'kms req':>7} {'refunds':>7} {'shipments':>9}"
    lines = [header]
    for c in cases:
        lines.append(
            f"{c.case:<24} {c.status:<10} {c.outcome or '-':<11} {c.states_entered:>6} "
            f"{c.state_transitions:>11} {c.lambda_invocations:>6} {c.dynamodb_requests:>7} "
            f"{c.kms_requests:>7} {c.refunds:>7} {c.shipments:>9}"
        )
    lines.append(
        "kms req: GetPublicKey, one per function and approval key the first time a container "
        "verifies (the cases run in one process: the first case finds every function cold), "
        "none when warm."
    )
    return "\n".join(lines)
