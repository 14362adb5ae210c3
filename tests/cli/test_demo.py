"""`make demo` (`sagactl local demo`): the stuck compensation is redriven to its outcome."""

from __future__ import annotations

import io
from pathlib import Path

from local_aws.environment import StackSource
from sagactl.cli import build_parser
from sagactl.commands.demo import DEFAULT_SCENARIOS, SCENARIO_KEYS, run_demo
from sagactl.paths import EXAMPLES_DIR


def test_the_demo_redrives_the_stuck_compensation_to_escalated_with_stock_released_once(
    saga_stack_source: StackSource, tmp_path: Path
) -> None:
    out = io.StringIO()

    code = run_demo(
        saga_stack_source,
        scenarios=("compensation-stuck",),
        time_scale=0.05,
        out=out,
        handler_log=tmp_path / "handlers.log",
    )

    text = out.getvalue()
    assert code == 0, text
    failed = text.index("execution FAILED: OutcomeUnknown")
    cause = text.index("why it FAILED: the case file tells the sandbox inventory not to answer")
    removed = text.index("what removes the cause here: that list runs out (1 left)")
    redrive = text.index("$ sagactl redrive case-compensation-stuck --yes")
    redriven = text.index("execution redriven (1)")
    succeeded = text.index("execution SUCCEEDED: case ESCALATED")
    assert failed < cause < removed < redrive < redriven < succeeded
    assert "-> ValidateCase" not in text[redriven:]  # the states that succeeded are not rerun
    assert (
        "stock of SKU-RED-MUG: 100 before the case, 99 while FAILED (reserved), "
        "100 after the redrive (released once)"
    ) in text
    assert "ok         case-compensation-stuck      SUCCEEDED ESCALATED" in text


def test_every_example_is_a_scenario_and_make_demo_runs_the_four_it_describes() -> None:
    examples = sorted(path.stem for path in EXAMPLES_DIR.glob("*.json"))
    assert sorted(SCENARIO_KEYS) == examples
    assert DEFAULT_SCENARIOS == (
        "happy-path",
        "lost-refund-response",
        "shipment-rejected",
        "compensation-stuck",
    )
    parsed = build_parser().parse_args(
        ["local", "demo", *(arg for name in examples for arg in ("--scenario", name))]
    )
    assert sorted(parsed.scenario) == examples


def test_a_scenario_outside_the_default_four_runs_when_named(
    saga_stack_source: StackSource, tmp_path: Path
) -> None:
    out = io.StringIO()

    code = run_demo(
        saga_stack_source,
        scenarios=("out-of-stock", "lost-carrier-response", "four-eyes"),
        time_scale=0.05,
        out=out,
        handler_log=tmp_path / "handlers.log",
    )

    text = out.getvalue()
    assert code == 0, text
    assert "ok         case-out-of-stock            SUCCEEDED ESCALATED" in text
    assert "ok         case-lost-carrier-response   SUCCEEDED COMPLETED" in text
    summary = text.splitlines()
    for case_id in ("case-lost-carrier-response", "case-four-eyes"):
        # The four-eyes example is above tenant hooli's threshold, signed by both its approvers.
        line = f"  {'ok':<10} {case_id:<28} {'SUCCEEDED':<9} {'COMPLETED':<21} "
        assert line + "refunds 1, shipments 1" in summary, text
