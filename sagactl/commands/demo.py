"""`sagactl local demo`: the saga's recovery paths, run against a throwaway local AWS.

Starts the local AWS in this process (a free loopback port), provisions the synthesized stack,
runs each scenario's case file from examples/ through the real state machine and handlers,
prints each case's timeline and outcome (the same view as `sagactl status`), then stops
everything. Nothing is left running and nothing reaches real AWS.

Scenarios (--scenario NAME, the case file examples/NAME.json); without --scenario, the first
four run:
  happy-path            reserved, refunded, shipped: COMPLETED
  lost-refund-response  the refund's response is lost; reconciliation finds the refund by its
                        reference: COMPLETED, no second refund
  shipment-rejected     the carrier refuses: the reservation is released, the refund kept,
                        the case ESCALATED
  compensation-stuck    the release of the reservation runs out of retries, so the execution
                        ends FAILED at that task (case COMPENSATION_PENDING); the demo says what
                        caused it and what removes the cause, then redrives the execution
                        (`sagactl redrive`): it continues from the release and ends SUCCEEDED,
                        the case ESCALATED, the stock released exactly once
  lost-carrier-response the carrier's response is lost; reconciliation finds the shipment by
                        its reference: COMPLETED, no second parcel
  carrier-unavailable   the carrier never answers: the shipment's outcome cannot be known, the
                        case ESCALATED for a person (nothing is sent again)
  refund-rejected       the payment provider refuses: the reservation is released, ESCALATED
  out-of-stock          nothing to reserve: ESCALATED, nothing done

Retry waits are scaled down (--time-scale, default 0.1) so the demo takes seconds. The
functions' own output (JSON logs, metrics) goes to <state dir>/demo-handlers.log. Exits 0 when
every scenario ended as expected, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from local_aws.lambda_runtime import quiet_handlers
from sagactl.commands.common import add_command
from sagactl.commands.render import case_view_text, plan_lines, timeline_lines
from sagactl.config import resolve_budget
from sagactl.errors import RedriveRefused, SagactlError
from sagactl.operations.case_view import gather
from sagactl.operations.executions import start_case
from sagactl.operations.records import faults_used, stock_level
from sagactl.operations.redrive import plan_redrive, redrive
from sagactl.paths import EXAMPLES_DIR
from sagactl.target import Target, local_target_from_outputs
from sagactl.views.case import CaseView

if TYPE_CHECKING:
    from local_aws.environment import LocalAws, StackSource

DEFAULT_TIME_SCALE = 0.1
RULE = "=" * 78


@dataclass(frozen=True)
class Scenario:
    key: str  # the example file's stem: examples/<key>.json
    title: str
    expect_status: str
    expect_outcome: str
    # (status, outcome) the first run must end in; then the demo redrives it.
    redrive_from: tuple[str, str] | None = None
    default: bool = True  # run by `make demo` (without --scenario)

    @property
    def example(self) -> str:
        return f"{self.key}.json"


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("happy-path", "happy path", "SUCCEEDED", "COMPLETED"),
    Scenario(
        "lost-refund-response",
        "lost refund response: reconciled by reference, no second refund",
        "SUCCEEDED",
        "COMPLETED",
    ),
    Scenario(
        "shipment-rejected",
        "shipment rejected: reservation released, refund kept, escalated",
        "SUCCEEDED",
        "ESCALATED",
    ),
    Scenario(
        "compensation-stuck",
        "compensation stuck: FAILED at the release, the cause goes away, redrive, ESCALATED",
        "SUCCEEDED",
        "ESCALATED",
        redrive_from=("FAILED", "COMPENSATION_PENDING"),
    ),
    Scenario(
        "lost-carrier-response",
        "lost carrier response: reconciled by reference, no second parcel",
        "SUCCEEDED",
        "COMPLETED",
        default=False,
    ),
    Scenario(
        "carrier-unavailable",
        "carrier unavailable: the shipment's outcome unknown, escalated to a person",
        "SUCCEEDED",
        "ESCALATED",
        default=False,
    ),
    Scenario(
        "refund-rejected",
        "refund rejected: reservation released, escalated",
        "SUCCEEDED",
        "ESCALATED",
        default=False,
    ),
    Scenario(
        "out-of-stock",
        "out of stock: nothing done, escalated",
        "SUCCEEDED",
        "ESCALATED",
        default=False,
    ),
    Scenario(
        "four-eyes",
        "four eyes: 2500.00 USD, above tenant hooli's threshold, signed by two approvers",
        "SUCCEEDED",
        "COMPLETED",
        default=False,
    ),
    Scenario(
        "second-refund",
        "a second refund of acme's day: completed here (no ceiling); refused under one, "
        "docs/ceilings.md",
        "SUCCEEDED",
        "COMPLETED",
        default=False,
    ),
)
# Every example file is a scenario (tests/cli/test_demo.py); `make demo` runs the defaults.
SCENARIO_KEYS = tuple(scenario.key for scenario in SCENARIOS)
DEFAULT_SCENARIOS = tuple(scenario.key for scenario in SCENARIOS if scenario.default)
# The names these scenarios had before they were named after their example files.
SCENARIO_ALIASES = {"happy": "happy-path", "lost-refund": "lost-refund-response"}


@dataclass
class ScenarioResult:
    scenario: Scenario
    view: CaseView
    first: CaseView | None = None  # the run before the redrive
    stock: tuple[int, int, int] | None = None  # before the case, while FAILED, after the redrive

    @property
    def as_expected(self) -> bool:
        scenario = self.scenario
        final = (self.view.status, self.view.outcome)
        if scenario.redrive_from is None:
            return final == (scenario.expect_status, scenario.expect_outcome)
        first = (self.first.status, self.first.outcome) if self.first else None
        before, failed, after = self.stock or (0, 0, -1)
        return (
            first == scenario.redrive_from
            and final == (scenario.expect_status, scenario.expect_outcome)
            and failed == before - 1  # reserved, not yet released
            and after == before  # released exactly once
        )


def run_scenario(
    local: LocalAws, target: Target, scenario: Scenario, *, timeout: float, out: TextIO
) -> ScenarioResult:
    case = json.loads((EXAMPLES_DIR / scenario.example).read_text(encoding="utf-8"))
    stock_before = stock_level(target, case["reserve"]["sku"])
    report = start_case(target, case, case["case_id"])
    local.wait_for_execution(report["execution_arn"], timeout_seconds=timeout)
    view = gather(target, case["case_id"])
    print(RULE, file=out)
    print(f"{scenario.title}   (examples/{scenario.example})", file=out)
    print(RULE, file=out)
    print(case_view_text(view), file=out)
    if scenario.redrive_from is None or (view.status, view.outcome) != scenario.redrive_from:
        print(file=out)
        return ScenarioResult(scenario, view)
    stock_failed = stock_level(target, case["reserve"]["sku"])
    _explain_the_cause(target, case, out)
    final = _redrive(local, target, view, timeout=timeout, out=out)
    stock_after = stock_level(target, case["reserve"]["sku"])
    print(
        f"\nstock of {case['reserve']['sku']}: {stock_before} before the case, {stock_failed} "
        f"while FAILED (reserved), {stock_after} after the redrive (released once)",
        file=out,
    )
    print(file=out)
    return ScenarioResult(scenario, final, view, (stock_before, stock_failed, stock_after))


def _explain_the_cause(target: Target, case: dict[str, Any], out: TextIO) -> None:
    """Why the release failed, and what takes the cause away: told, not hidden."""
    faults = list(case.get("sandbox", {}).get("faults", {}).get("release", []))
    calls = faults_used(target, case["case_id"], "release")
    left = max(0, len(faults) - calls)
    print(
        f"""
why it FAILED: the case file tells the sandbox inventory not to answer the release {len(faults)}
  times (sandbox.faults.release); the release's {calls} deliveries (the first and its retries)
  used {calls} of them, so the execution ended FAILED at ReleaseReservation: unfinished work,
  not an outcome. The stack's EventBridge rule put an EXECUTION_NOT_SUCCEEDED message on the
  escalation queue.
what removes the cause here: that list runs out ({left} left); from then on the inventory
  answers. On AWS, this is where a person gets the inventory answering again, then redrives.""",
        file=out,
    )


def _redrive(
    local: LocalAws, target: Target, failed: CaseView, *, timeout: float, out: TextIO
) -> CaseView:
    case_id = failed.case_id
    print(f"\n$ sagactl redrive {case_id} --yes", file=out)
    try:
        plan = plan_redrive(target, case_id, budget=resolve_budget(target))
    except RedriveRefused as exc:
        print(f"refused: {exc}", file=out)
        return failed
    print("\n".join(plan_lines(plan)), file=out)
    result = redrive(target, plan)
    print(f"redriven: {result['execution_arn']} (redrive #{result['redrive']})", file=out)
    local.wait_for_execution(plan.execution_arn, timeout_seconds=timeout)
    view = gather(target, case_id)
    seen = {entry.event_id for entry in failed.timeline}
    print("\nafter the redrive (the states before the release are not rerun):", file=out)
    print("\n".join(timeline_lines(e for e in view.timeline if e.event_id not in seen)), file=out)
    print(case_view_text(view, with_timeline=False), file=out)
    return view


def run_demo(
    source: StackSource | None = None,
    *,
    scenarios: Sequence[str] = DEFAULT_SCENARIOS,
    time_scale: float = DEFAULT_TIME_SCALE,
    timeout: float = 120.0,
    out: TextIO | None = None,
    handler_log: Path | None = None,
) -> int:
    """Run the scenarios in a fresh in-process local AWS; 0 when each ended as expected."""
    from local_aws.environment import StackSource, run_local

    stream = out or sys.stdout
    chosen = [scenario for scenario in SCENARIOS if scenario.key in scenarios]
    if source is None:
        print("synthesizing the CDK app ...", file=sys.stderr)
        source = StackSource.synthesized()
    results: list[ScenarioResult] = []
    with quiet_handlers(handler_log), run_local(source, time_scale=time_scale) as local:
        print(
            f"local AWS on {local.endpoint} (retry waits x{time_scale:g}); "
            f"running {len(chosen)} scenario(s)\n",
            file=stream,
        )
        target = local_target_from_outputs(local.outputs)
        for scenario in chosen:
            results.append(run_scenario(local, target, scenario, timeout=timeout, out=stream))
    print(RULE, file=stream)
    print("summary", file=stream)
    for result in results:
        view = result.view
        mark = "ok" if result.as_expected else "UNEXPECTED"
        print(
            f"  {mark:<10} {view.case_id:<28} {view.status:<9} {view.outcome or '-':<21} "
            f"refunds {view.effects.get('refunds')}, shipments {view.effects.get('shipments')}",
            file=stream,
        )
    if handler_log is not None:
        print(f"handler logs: {handler_log}", file=stream)
    return 0 if all(result.as_expected for result in results) else 1


def command_demo(args: argparse.Namespace) -> int:
    from local_aws.environment import StackSource
    from local_aws.synth import SynthError

    try:
        if args.template is not None:
            source = StackSource.from_file(args.template)
        elif args.cloud_assembly is not None:
            source = StackSource.from_cloud_assembly(args.cloud_assembly)
        else:
            print("synthesizing the CDK app ...", file=sys.stderr)
            source = StackSource.synthesized(args.state_dir / "cdk.out")
    except SynthError as exc:
        raise SagactlError(str(exc)) from None
    return run_demo(
        source,
        scenarios=args.scenario or DEFAULT_SCENARIOS,
        time_scale=args.time_scale,
        handler_log=args.handler_log or args.state_dir / "demo-handlers.log",
    )


def _scenario(name: str) -> str:
    return SCENARIO_ALIASES.get(name, name)


def register_demo(local: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`sagactl local demo` (under `sagactl local`, whose --state-dir it uses)."""
    demo = add_command(
        local,
        "demo",
        "run the saga's scenarios against a throwaway local AWS and show each timeline",
        handler=command_demo,
        doc=__doc__,
    )
    demo.add_argument(
        "--scenario",
        action="append",
        type=_scenario,
        choices=SCENARIO_KEYS,
        help="run this scenario, named after its file in examples/ (repeatable; default: "
        + ", ".join(DEFAULT_SCENARIOS)
        + ")",
    )
    demo.add_argument(
        "--template", type=Path, help="provision this synthesized template (no synthesis)"
    )
    demo.add_argument(
        "--cloud-assembly", type=Path, help="provision from this cdk.out directory (no synthesis)"
    )
    demo.add_argument(
        "--time-scale",
        type=float,
        default=DEFAULT_TIME_SCALE,
        help="scale Step Functions retry waits (default %(default)s)",
    )
    demo.add_argument(
        "--handler-log",
        type=Path,
        metavar="FILE",
        help="where the functions' output goes (default: <state dir>/demo-handlers.log)",
    )
