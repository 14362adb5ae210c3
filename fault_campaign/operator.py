"""The operator nemesis: a person at work on the saga, through the operator's own code paths.

A plan's `operator` says when the person looks (`closed`: at the first close, before any
redrive; `end`: after everything else) and what they do, in order:

- `sweep`: time passes (past the stuck-action grace), then the stack's sweeper function runs on
  the saga's clock (`sagactl.operations.functions.sweep`, what the schedule invokes);
- `jump`: the clock moves `jump_days` days (31 and more: past the ledger's retention) while the
  case's actions are as they are;
- `resolve`: the person records a decision (`sagactl.operations.escalations.resolve`, the code
  path of `sagactl escalations resolve`);
- `redrive:sagactl`: `sagactl redrive` (its plan, then RedriveExecution when it allows one);
- `redrive:plain`: a plain RedriveExecution, as the console or the AWS CLI sends it;
- `late`: the last delivery of each forward task and of the release arrives again, straight to
  its function (a task Step Functions timed out whose function still ran, a stray retry); after
  a resolution, the last delivery of the outcome's recording (RecordOutcome, Escalate) too;
- `release`: a delivery the overlap nemesis still holds goes on (fault_campaign.overlap); in a
  plan with this step, the person's earlier steps run while it waits (its lease may run out
  meanwhile: a resolution then settles its action, and its outcome lands after the decision,
  §3.10's backstop).

Each step is recorded (`run.operator`) with what the operator's tools answered, and followed by a
snapshot; the invariants (fault_campaign.operator_checks) judge them. The operator acts after
the faults of the case are over (its nemeses disarmed): what is tested is the person's decision
and time, not one more fault on top. One more step comes from the overlap nemesis, not from the
plan's `operator`: `resolve:in-flight`, a resolution while the case's execution is stopped and a
delivery holds one of its actions (fault_campaign.overlap), with no snapshot of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.config import Config
from botocore.exceptions import ClientError

from fault_campaign import overlap
from fault_campaign.nemeses import OBSERVER_AGENT
from fault_campaign.paths import FORWARD_STATES, OUTCOME_RECORD_STATES, RELEASE_STATE
from sagactl.errors import SagactlError

if TYPE_CHECKING:
    from fault_campaign.observe import Observer
    from fault_campaign.runner import CaseRun, CaseRunner

STEPS = ("sweep", "jump", "resolve", "redrive:sagactl", "redrive:plain", "late", "release")
# The sweeper counts an action stuck once its lease ended more than the grace ago (cdk.json
# monitoring.stuck_grace_seconds); a person looks a while after the close.
SWEEP_AFTER_SECONDS = 600
RESOLVED_BY = "operator@campaign"
LATE_STATES = (*FORWARD_STATES.values(), RELEASE_STATE)
# Repeated on a case under way or closed, the recording rewrites its record and re-sends its
# message (at least once, §5); repeated after a person's decision it must change nothing (§3.10).
LATE_AFTER_RESOLUTION = (*LATE_STATES, *OUTCOME_RECORD_STATES)
DECISION = "campaign: settled by hand"


def operator_target(observer: Observer) -> Any:
    """sagactl's target for this local AWS, its DynamoDB requests exempt from the nemeses (one
    per account: CaseRunner.operator_target)."""
    from sagactl.target import local_target_from_outputs

    target = local_target_from_outputs(observer.outputs)
    config = Config(
        retries={"mode": "standard", "max_attempts": 3}, user_agent_extra=OBSERVER_AGENT
    )
    session: Any = target.session
    for service in ("dynamodb", "stepfunctions", "sqs", "lambda"):
        target._clients[service] = session.client(
            service, endpoint_url=target.endpoint_url, config=config
        )
    return target


class Operator:
    def __init__(self, runner: CaseRunner, budget: int) -> None:
        self.runner = runner
        self.budget = budget
        self.target = runner.operator_target

    def act(self, run: CaseRun, arns: list[str]) -> None:
        operator = run.plan.operator or {}
        resolved = False
        for number, step in enumerate(operator.get("steps", ()), start=1):
            event: dict[str, Any] = {"step": step, "messages_from": len(run.messages)}
            if step == "sweep":
                event.update(self._sweep())
            elif step == "jump":
                seconds = float(operator.get("jump_days", 31)) * 86400
                self.runner.local.clock.advance(seconds)
                event["seconds"] = seconds
            elif step == "resolve":
                event.update(self.resolve(run.plan.case_id))
                resolved = resolved or bool(event.get("resolved"))
            elif step == "redrive:sagactl":
                event.update(self._sagactl_redrive(run.plan.case_id))
            elif step == "redrive:plain":
                event.update(self._plain_redrive(run.owner_arn or arns[0]))
            elif step == "late":
                states = LATE_AFTER_RESOLUTION if resolved else LATE_STATES
                event.update(self._late(run.owner_arn or arns[0], states))
            elif step == "release":
                event["released"] = overlap.release_held()
            event["clock"] = self.runner.local.clock.now()
            run.operator.append(event)
            self.runner.close(run, f"operator {number}: {step}", arns)
            event["snapshot"] = len(run.snapshots) - 1
            event["messages_to"] = len(run.messages)

    def _sweep(self) -> dict[str, Any]:
        from sagactl.operations.functions import sweep

        self.runner.local.clock.advance(SWEEP_AFTER_SECONDS)
        try:
            return {"report": sweep(self.target)["report"]}
        except SagactlError as exc:
            return {"error": type(exc).__name__, "message": str(exc)}

    def resolve(self, case_id: str) -> dict[str, Any]:
        """`sagactl escalations resolve`'s code path: resolved (and what it settled), or the
        refusal's type and message."""
        from sagactl.operations.escalations import resolve

        try:
            report = resolve(
                self.target, case_id, decision=DECISION, by=RESOLVED_BY, budget=self.budget
            )
        except SagactlError as exc:
            return {"error": type(exc).__name__, "message": str(exc)}
        return {"resolved": True, "settled": list(report.settled)}

    def _sagactl_redrive(self, case_id: str) -> dict[str, Any]:
        from sagactl.operations.redrive import plan_redrive, redrive

        try:
            plan = plan_redrive(self.target, case_id, budget=self.budget)
            answer = redrive(self.target, plan)
        except SagactlError as exc:
            return {"refused": type(exc).__name__, "message": str(exc)}
        self.runner.wait_all([str(answer["execution_arn"])])
        return {"redriven": answer["execution_arn"]}

    def _late(self, arn: str, states: tuple[str, ...]) -> dict[str, Any]:
        """Each late delivery's answer by state (its error type, or None: it succeeded); first,
        each forward delivery `tampered`: again, with a refund amount nobody approved (§8: every
        tool verifies the approval digest again, whatever sent it)."""
        deliveries = {
            state: parameters
            for state, parameters in self.runner.observer.last_deliveries(arn).items()
            if state in states
        }
        tampered = {
            state: self._invoke(parameters["FunctionName"], _unapproved(parameters["Payload"]))
            for state, parameters in deliveries.items()
            if state in FORWARD_STATES.values()
        }
        answers = {
            state: self._invoke(parameters["FunctionName"], parameters["Payload"])
            for state, parameters in deliveries.items()
        }
        return {"answers": answers, "tampered": tampered}

    def _invoke(self, function: str, payload: Any) -> str | None:
        response = self.target.client("lambda").invoke(
            FunctionName=function, Payload=json.dumps(payload).encode()
        )
        answer = json.loads(response["Payload"].read() or b"null")
        return (answer.get("errorType") or "?") if response.get("FunctionError") else None

    def _plain_redrive(self, arn: str) -> dict[str, Any]:
        try:
            self.runner.observer.redrive(arn)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            return {"refused": code, "message": str(exc)}
        self.runner.wait_all([arn])
        return {"redriven": arn}


def _unapproved(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The delivery's payload with the refund's amount changed by one minor unit."""
    changed: dict[str, Any] = json.loads(json.dumps(payload))
    refund = changed["case"]["refund"]
    refund["amount_minor"] += 1 if refund["amount_minor"] == 1 else -1
    return changed
