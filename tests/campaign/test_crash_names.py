"""The campaign's crash fault dies under the name Lambda gives a dead process, in both namings of
the local AWS (local_aws.lambda_errors), and every name is routed: a forward step that died
after its effect is reconciled, a compensation that died is retried, each effect happens once."""

from __future__ import annotations

import pytest

from fault_campaign.invariants import check_case
from fault_campaign.observe import Observer
from fault_campaign.plan import CasePlan
from fault_campaign.runner import CaseRunner
from local_aws.environment import LocalAws
from local_aws.lambda_errors import CrashNaming
from local_aws.lambda_runtime import crash_errors_named
from tests.campaign.test_campaign_findings import _case


@pytest.mark.parametrize(
    ("naming", "effect", "answer", "error"),
    [
        (CrashNaming.CURRENT, "shipment", "timed_out", "Sandbox.Timedout"),
        (CrashNaming.CURRENT, "release", "timed_out", "Sandbox.Timedout"),
        (CrashNaming.CURRENT, "release", "exited", "Runtime.ExitError"),
        (CrashNaming.LAMBDA_UNKNOWN, "release", "timed_out", "Lambda.Unknown"),
    ],
)
def test_the_crash_fault_dies_as_lambda_names_it_and_the_case_stays_honest(
    local_aws: LocalAws, naming: CrashNaming, effect: str, answer: str, error: str
) -> None:
    released = effect == "release"
    # The shipment is refused after the refund, so the reservation is released (compensation).
    faults = {"shipment": ["reject"]} if released else {}
    plan = CasePlan(
        seed=0,
        index=0,
        case=_case(f"case-died-{effect}-{answer}-{naming}", faults),
        nemeses=[{"kind": "crash", "effect": effect, "nth": 1, "answer": answer, "jump": 60}],
    )
    with crash_errors_named(naming):
        run = CaseRunner(Observer(local_aws)).run(plan)

    assert run.fired == [f"crash:{effect}:{answer}"]
    final = run.final
    execution = final.executions[run.owner_arn or ""]
    assert error in execution["task_errors"]
    outcome = "ESCALATED" if released else "COMPLETED"
    assert (execution["status"], (execution["output"] or {}).get("outcome")) == (
        "SUCCEEDED",
        outcome,
    )
    assert run.redrives == 0  # routed, not FAILED
    assert (len(final.refunds), len(final.shipments)) == (1, 0 if released else 1)
    assert check_case(run, budget=8).violations == []
