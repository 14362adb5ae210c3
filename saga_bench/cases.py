"""Counts, not timings, for every example case run through the real state machine locally.

For each example case it runs the real state machine in the local emulator and reports:
- states entered and state transitions (what a STANDARD workflow is billed for),
- Lambda invocations (TaskScheduled events of Lambda tasks, retries included),
- DynamoDB requests made by the tools (every botocore call to DynamoDB in this process:
  the executor itself makes none, so these are the handlers' requests), and the request units
  they were billed (local_aws.request_units), the saga's tables apart from the sandbox's
  and the ledger's index writes apart from its items',
- KMS requests made by the tools (GetPublicKey of the approval keys: the signature itself is
  verified in the function, saga/signatures.py),
- effects counted in the sandbox tables,
- what a million such cases cost at list prices (cost.py: the arithmetic and its assumptions),
  and beside it an estimate of their CloudWatch Logs and X-Ray: the execution's history as the
  state machine logs it (level ALL, no execution data) and what the functions printed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from local_aws.approval_keys import sign_locally
from local_aws.emulator import client_environment
from local_aws.environment import LocalAws, StackSource, run_local
from local_aws.request_units import Billed, metering_request_units
from saga.approval_keys import forget_public_keys
from saga_bench.cost import SANDBOX_OUTPUTS, CaseCost, LogsAndTraces, assumptions
from saga_bench.metering import count_dynamodb_requests, count_requests
from sagactl.config import cdk_config
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
    cost: CaseCost
    logs_and_traces: LogsAndTraces  # an estimate, not in the cost
    requests: tuple[Billed, ...] = ()  # each DynamoDB request as billed, in order


def measure_cases(time_scale: float) -> list[CaseCounts]:
    results: list[CaseCounts] = []
    source = StackSource.synthesized()
    with run_local(source, time_scale=time_scale) as local:
        os.environ.update(client_environment(local.endpoint))
        # Every function starts cold: the first case pays each container's public-key reads.
        forget_public_keys()
        for path in sorted(EXAMPLES_DIR.glob("*.json")):
            case = json.loads(path.read_text(encoding="utf-8"))
            results.append(measure_case(local, path.stem, case))
    return results


# The daily refund ceiling (docs/design.md §3.12) as the bench sets it: acme's USD refunds up to
# the examples' 20.00 USD a day, so the happy path fills the day and one more refund is refused.
BENCH_CEILINGS = {"acme": {"USD": 2000}}
CEILING_SUFFIX = " +ceiling"


def measure_ceiling_cases(time_scale: float) -> list[CaseCounts]:
    """The refund's paths under a daily ceiling, each in a fresh account of a stack synthesized
    with BENCH_CEILINGS: the happy path (its claim charges the counter in one transaction), a
    second refund that day (refused: the limit recorded, the reservation released, escalated),
    and a refund the provider rejects (the charge given back in its FAILED write)."""
    source = StackSource.synthesized(context={"refund_ceilings": BENCH_CEILINGS})
    happy = _example("happy-path")
    second = sign_locally({**happy, "case_id": "case-limit-reached"})
    results: list[CaseCounts] = []
    with run_local(source, time_scale=time_scale) as local:
        os.environ.update(client_environment(local.endpoint))
        forget_public_keys()
        for runs in (
            [("happy-path", happy), ("limit-reached", second)],
            [("refund-rejected", _example("refund-rejected"))],
        ):
            local.reprovision()
            for name, case in runs:
                results.append(measure_case(local, name + CEILING_SUFFIX, case))
    return results


def _example(name: str) -> dict[str, Any]:
    return dict(json.loads((EXAMPLES_DIR / f"{name}.json").read_text(encoding="utf-8")))


def measure_case(local: LocalAws, name: str, case: Mapping[str, Any]) -> CaseCounts:
    """Run one case to its end in `local` and count what it was billed for."""
    target = local_target_from_outputs(local.outputs)
    with (
        count_dynamodb_requests() as counts,
        count_requests("kms") as kms,
        metering_request_units() as units,
        counting_printed() as printed,
    ):
        arn = local.start_case(case)
        description = local.wait_for_execution(arn)
    requests = sum(counts.values())  # the handlers' calls are tallied as the block closes
    if units.unmetered:
        raise RuntimeError(f"{name}: DynamoDB requests the meter cannot bill: {units.unmetered}")
    history = local.history(arn)
    entered = [e for e in history if e["type"].endswith("StateEntered")]
    invocations = sum(
        1
        for e in history
        if e["type"] == "TaskScheduled"
        and e["taskScheduledEventDetails"].get("resourceType") == "lambda"
    )
    outcome = None
    if description.get("output"):
        outcome = json.loads(description["output"]).get("outcome")
    sandbox = {local.outputs[output] for output in SANDBOX_OUTPUTS}
    saga = {table for billed in units.billed for table in billed.tables} - sandbox
    cost = CaseCost(
        # Step Functions bills each state entered plus the start of the execution.
        transitions=len(entered) + 1,
        invocations=invocations,
        memory_mb=configured_memory_mb(),
        read_units=units.read_units(saga),
        write_units=units.write_units(saga),
        sandbox_read_units=units.read_units(sandbox),
        sandbox_write_units=units.write_units(sandbox) + units.index_write_units(sandbox),
        index_write_units=units.index_write_units(saga),
    )
    logged = execution_log_events(history, arn)
    estimate = LogsAndTraces(
        execution_log_events=len(logged),
        execution_log_bytes=sum(len(line.encode("utf-8")) for line in logged),
        function_log_bytes=printed.bytes,
        invocations=invocations,
    )
    return CaseCounts(
        case=name,
        status=description["status"],
        outcome=outcome,
        states_entered=len(entered),
        state_transitions=len(entered) + 1,
        lambda_invocations=invocations,
        dynamodb_requests=requests,
        kms_requests=sum(kms.values()),
        refunds=count_items(target, target.output("PaymentsTableName"), case["case_id"]),
        shipments=count_items(target, target.output("ShipmentsTableName"), case["case_id"]),
        cost=cost,
        logs_and_traces=estimate,
        requests=tuple(units.billed),
    )


class _CountingStream(io.TextIOBase):
    """A stdout that counts the UTF-8 bytes written through it."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner
        self.bytes = 0

    def write(self, text: str) -> int:
        self.bytes += len(text.encode("utf-8"))
        return int(self.inner.write(text))

    def flush(self) -> None:
        self.inner.flush()


@contextlib.contextmanager
def counting_printed() -> Iterator[_CountingStream]:
    """Count what the functions print while the block runs: their log lines and EMF metrics
    as CloudWatch Logs would ingest them (functions in worker processes forward their output to
    this process's stdout, line by line; in this process they print to it)."""
    counting = _CountingStream(sys.stdout)
    with contextlib.redirect_stdout(counting):
        yield counting


# What `includeExecutionData: false` leaves out of the state machine's log events.
_EXECUTION_DATA = frozenset({"input", "output", "parameters", "result", "cause"})


def execution_log_events(history: Sequence[Mapping[str, Any]], arn: str) -> list[str]:
    """The state machine's log events for an execution's history at level ALL without
    execution data, in the format Step Functions logs them (id, type, details, previous event
    id, timestamp, execution ARN, redrive count: https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html)."""
    lines = []
    for event in history:
        details: Mapping[str, Any] = next(
            (value for key, value in event.items() if key.endswith("EventDetails")), {}
        )
        kept = {k: v for k, v in details.items() if k not in _EXECUTION_DATA}
        millis = int(event["timestamp"].timestamp() * 1000)
        logged = {
            "id": str(event["id"]),
            "type": event["type"],
            "details": kept,
            "previous_event_id": str(event.get("previousEventId", 0)),
            "event_timestamp": str(millis),
            "execution_arn": arn,
            "redrive_count": "0",
        }
        lines.append(json.dumps(logged, separators=(",", ":"), default=str))
    return lines


def configured_memory_mb() -> int:
    """The tools' memory, as the default app configures it (cdk.json `functions.memory_mb`)."""
    return cdk_config().functions.memory_mb


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


def format_costs(cases: list[CaseCounts]) -> str:
    """Per million cases at list prices: the columns, then each case's arithmetic."""
    memory = cases[0].cost.memory_mb if cases else configured_memory_mb()
    header = (
        f"{'case':<24} {'transitions':>11} {'lambda':>6} {'GB-s':>6} {'RRU':>5} {'WRU':>5} "
        f"{'idx WRU':>7} {'SFN $':>8} {'Lambda $':>8} {'DDB $':>7} {'total $':>8} "
        f"{'sandbox RRU/WRU':>15}"
    )
    lines = ["cost per 1M cases, SFN + Lambda + DynamoDB (saga_bench/cost.py):", header]
    for c in cases:
        k = c.cost
        sandbox = f"{k.sandbox_read_units:g}/{k.sandbox_write_units:g}"
        lines.append(
            f"{c.case:<24} {k.transitions:>11} {k.invocations:>6} {k.gb_seconds:>6.3f} "
            f"{k.read_units:>5g} {k.write_units:>5g} {k.index_write_units:>7} "
            f"{k.step_functions:>8.2f} {k.lambda_requests + k.lambda_compute:>8.2f} "
            f"{k.dynamodb:>7.2f} {k.total:>8.2f} {sandbox:>15}"
        )
    lines.append("arithmetic (per 1M cases):")
    for c in cases:
        lines.append(f"  {c.case}: {c.cost.arithmetic()}")
        lines.append(f"    {c.logs_and_traces.arithmetic()}")
    lines.append("assumptions:")
    lines += [f"  - {line}" for line in assumptions(memory)]
    return "\n".join(lines)


def format_requests(counts: CaseCounts) -> str:
    """Each DynamoDB request of one case as billed: the units behind its DynamoDB figure."""
    lines = [f"{counts.case}: DynamoDB requests as billed"]
    for billed in counts.requests:
        units = f"{billed.read_units:g} RRU" if billed.read_units else f"{billed.write_units} WRU"
        notes = [billed.note] if billed.note else []
        notes += [
            f"{w.index} {w.kind} {w.units} WRU, entry {w.entry_size} B" for w in billed.index_writes
        ]
        note = f" ({'; '.join(notes)})" if notes else ""
        lines.append(
            f"  {billed.operation:<20} {units:>8}  largest item {billed.largest_item:>5} B  "
            f"{', '.join(_short(t) for t in billed.tables)}{note}"
        )
    return "\n".join(lines)


def _short(table: str) -> str:
    """`ReplacementOrderSaga-dev-TablesLedgerTable...` as `Ledger`."""
    for part in ("Ledger", "Cases", "Inventory", "Reservations", "Payments", "Shipments", "Limits"):
        if part in table:
            return part
    return "Sandbox" if "Sandbox" in table else table
