"""`sagactl local demo`: the saga's recovery paths, run against a throwaway local AWS.

Starts the local AWS in this process (a free loopback port), provisions the synthesized stack,
runs each scenario from examples/ through the real state machine and handlers, prints each
case's timeline and outcome (the same view as `sagactl status`), then stops everything.

Scenarios: happy path; lost refund response (reconciled, no second refund); shipment rejected
(reservation released, refund kept, escalated); compensation stuck (execution FAILED at the
release, case COMPENSATION_PENDING), followed by the redrive check and, when the budget allows,
an emulated redrive of the failed step (moto has no RedriveExecution; see sagactl.redrive).
Retry waits are scaled down (--time-scale, default 0.1) so the demo takes seconds.

Wire-up: `sagactl.commands.local` adds `register_demo` to LOCAL_SUBCOMMANDS; `run_demo` is the
callable for scripts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sagactl.errors import RedriveRefused, SagactlError, guarded
from sagactl.local.lambda_runtime import quiet_handlers
from sagactl.redrive import emulate_redrive, plan_redrive
from sagactl.render import case_view_text
from sagactl.target import PROJECT_ROOT, Target, local_target_from_outputs
from sagactl.timeline import CaseView, gather, resolve_budget

if TYPE_CHECKING:
    from sagactl.local.environment import LocalAws, StackSource

EXAMPLES_DIR = PROJECT_ROOT / "examples"
DEFAULT_TIME_SCALE = 0.1
RULE = "=" * 78


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    example: str
    expect_status: str
    expect_outcome: str
    redrive: bool = False


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("happy", "happy path", "happy-path.json", "SUCCEEDED", "COMPLETED"),
    Scenario(
        "lost-refund",
        "lost refund response: reconciled by reference, no second refund",
        "lost-refund-response.json",
        "SUCCEEDED",
        "COMPLETED",
    ),
    Scenario(
        "shipment-rejected",
        "shipment rejected: reservation released, refund kept, escalated",
        "shipment-rejected.json",
        "SUCCEEDED",
        "ESCALATED",
    ),
    Scenario(
        "compensation-stuck",
        "compensation stuck: FAILED at the release, then redrive (emulated)",
        "compensation-stuck.json",
        "FAILED",
        "COMPENSATION_PENDING",
        redrive=True,
    ),
)
SCENARIO_KEYS = tuple(scenario.key for scenario in SCENARIOS)


@dataclass
class ScenarioResult:
    scenario: Scenario
    view: CaseView
    redrive: dict[str, Any] | None

    @property
    def as_expected(self) -> bool:
        return (self.view.status, self.view.outcome) == (
            self.scenario.expect_status,
            self.scenario.expect_outcome,
        )


def run_scenario(
    local: LocalAws, target: Target, scenario: Scenario, *, timeout: float, out: TextIO
) -> ScenarioResult:
    from sagactl.commands.start import start_case

    case = json.loads((EXAMPLES_DIR / scenario.example).read_text(encoding="utf-8"))
    report = start_case(target, case, case["case_id"])
    local.wait_for_execution(report["execution_arn"], timeout_seconds=timeout)
    view = gather(target, case["case_id"])
    print(RULE, file=out)
    print(f"{scenario.title}   (examples/{scenario.example})", file=out)
    print(RULE, file=out)
    print(case_view_text(view), file=out)
    redrive_result: dict[str, Any] | None = None
    if scenario.redrive:
        redrive_result = _redrive(target, view.case_id, out)
    print(file=out)
    return ScenarioResult(scenario, view, redrive_result)


def _redrive(target: Target, case_id: str, out: TextIO) -> dict[str, Any]:
    print(f"\n$ sagactl redrive {case_id} --emulate --yes", file=out)
    try:
        plan = plan_redrive(target, case_id, budget=resolve_budget(target))
    except RedriveRefused as exc:
        print(f"refused: {exc}", file=out)
        return {"refused": str(exc)}
    from sagactl.commands.redrive import invocation_lines, plan_lines

    print("\n".join(plan_lines(plan)), file=out)
    result = emulate_redrive(target, plan)
    print(f"EMULATED redrive #{result['redrive']} of {result['state']}:", file=out)
    print("\n".join(invocation_lines(result)), file=out)
    for action in result["actions"]:
        after = action["after"] or {}
        print(
            f"  {action['action_key']}: {action['before']['status']} -> {after.get('status')}, "
            f"attempts {action['before']['attempts']} -> {after.get('attempts')}",
            file=out,
        )
    print(f"  note: {result['not_run']}", file=out)
    effects = gather(target, case_id).effects
    print(
        f"  after: reservation {(effects.get('reservation') or {}).get('status')}, "
        f"refunds {effects.get('refunds')}, shipments {effects.get('shipments')}",
        file=out,
    )
    return result


def run_demo(
    source: StackSource | None = None,
    *,
    scenarios: Sequence[str] = SCENARIO_KEYS,
    time_scale: float = DEFAULT_TIME_SCALE,
    timeout: float = 120.0,
    out: TextIO | None = None,
    handler_log: Path | None = None,
) -> int:
    """Run the scenarios in a fresh in-process local AWS; 0 when each ended as expected."""
    from sagactl.local.environment import StackSource, run_local

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
    from sagactl.local.environment import StackSource
    from sagactl.local.synth import SynthError

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
        scenarios=args.scenario or SCENARIO_KEYS,
        time_scale=args.time_scale,
        handler_log=args.state_dir / "demo-handlers.log",
    )


def register_demo(local: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds `demo` under `sagactl local` (uses the `local` parser's --state-dir)."""
    demo = local.add_parser(
        "demo",
        help="run the saga's scenarios against a throwaway local AWS and show each timeline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--scenario",
        action="append",
        choices=SCENARIO_KEYS,
        help="run only this scenario (repeatable; default: all)",
    )
    demo.add_argument("--template", type=Path, help="use this synthesized template (skip synth)")
    demo.add_argument("--cloud-assembly", type=Path, help="use this cdk.out directory (skip synth)")
    demo.add_argument(
        "--time-scale",
        type=float,
        default=DEFAULT_TIME_SCALE,
        help="scale Step Functions retry waits (default %(default)s)",
    )
    demo.set_defaults(handler=guarded(command_demo))


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m sagactl.demo` until `sagactl local demo` is wired in."""
    parser = argparse.ArgumentParser(prog="sagactl-demo")
    parser.add_argument("--state-dir", type=Path, default=PROJECT_ROOT / ".local")
    commands = parser.add_subparsers(dest="command", required=True)
    register_demo(commands)
    args = parser.parse_args(["demo", *(argv if argv is not None else sys.argv[1:])])
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
