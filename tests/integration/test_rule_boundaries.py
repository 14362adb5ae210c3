"""Three ledger rules tested at their boundary, just inside and just outside (issue 24, item 5):
a review planted small mutants at them (`<` for `<=`, the lease or the margin left out) and the
whole suite still passed. Each test here fails when its rule is relaxed or shifted; the mutants
`reattempt-window-edge`, `reattempt-window-lease`, `retention-margin` and
`old-execution-fresh-claim` (fault_campaign/mutants.py) are how that was shown.

- the reconcile tool answers RETRY for a refund "not found" only while a re-attempt would land
  inside the provider's key retention (docs/design.md §3.6, §3.8);
- a re-attempt after "not found" is dispatched only if it lands inside that window, counting the
  lease the attempt may hold (`now + lease < first_dispatch_at + key retention`, §3.6);
- finding no record proves nothing was sent only while no earlier record can have expired: in
  an execution younger than the retention less its margin (§3.2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from local_aws.tables import StackTables
from saga import clock as saga_clock
from saga.errors import OutcomeUnknown
from saga.identity import Operation, action_request
from saga.ledger import Attempt
from saga.models import Case, parse_case
from saga.tools.reconcile import reconcile_action
from saga.tools.refund import issue_refund, reconcile_refund
from tests.local_clock import local_clock
from tests.tools_harness import EXECUTION, Delivery, ToolsEnv, make_case, raw_case, tools_env

__all__ = ["local_clock"]

REMAINING = Delivery("IssueRefund", "x").remaining_seconds  # each delivery's time left
# A record written less than this before its retention ended may already be gone (TTL): the
# rule's margin (saga.ledger.decisions), written out here so that a shifted margin fails.
RETENTION_MARGIN_SECONDS = 3600


class CountingLookups:
    """The sandbox payment provider, counting its lookups by business reference."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.lookups = 0

    def find_refunds(self, business_ref: str) -> Any:
        self.lookups += 1
        return self.provider.find_refunds(business_ref)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.provider, name)


def _uncertain_refund(env: ToolsEnv, case: Case) -> float:
    """The first delivery times out (the request may have reached the provider; it did not):
    the record is UNKNOWN, a possible dispatch from its claim. Returns when the provider's key
    retention closes for a re-attempt with the same key."""
    with pytest.raises(OutcomeUnknown):
        env.issue_refund(case)
    record = env.record(action_request(case, Operation.REFUND).key)
    assert record is not None and record.first_dispatch_at is not None
    return record.first_dispatch_at + env.provider(case).idempotency_window_seconds


def _at(env: ToolsEnv, moment: float) -> None:
    env.clock.advance(moment - env.clock())


# Moments before the window closes: a re-attempt holds a lease of `lease` seconds from then.
def _moments(env: ToolsEnv) -> dict[str, float]:
    lease = env.policy.lease_seconds(REMAINING)
    return {
        "just inside": lease + 0.5,  # it ends half a second before the window closes
        "at the edge": lease,  # it would end as the window closes: too late
        "inside, but not with its lease": lease / 2,  # sent in time, could still be held after
    }


INSIDE = ("just inside", True)
OUTSIDE = [("at the edge", False), ("inside, but not with its lease", False)]


@pytest.mark.parametrize(("moment", "allowed"), [INSIDE, *OUTSIDE])
def test_the_reconcile_tool_answers_retry_only_inside_the_key_retention(
    stack_tables: StackTables, moment: str, allowed: bool
) -> None:
    with tools_env(stack_tables) as env:
        case = make_case("case-window-reconcile", faults={"refund": ["timeout"]})
        closes = _uncertain_refund(env, case)
        _at(env, closes - _moments(env)[moment])
        provider = env.provider(case)
        answer = reconcile_action(
            case,
            "refund",
            Delivery("ReconcileStep", case.case_id).next(),
            execution_arn=EXECUTION.format(case_id=case.case_id),
            ledger=env.ledger,
            reconcile=lambda: reconcile_refund(
                action_request(case, Operation.REFUND).reference, provider
            ),
            reattempt_window_seconds=provider.idempotency_window_seconds,
        )
        assert answer.decision == ("RETRY" if allowed else "ESCALATE"), answer.reason
        if not allowed:
            assert "may still commit" in answer.reason
        assert env.refunds(case.case_id) == 0  # reconciliation never dispatches


@pytest.mark.parametrize(("moment", "allowed"), [INSIDE, *OUTSIDE])
def test_a_re_attempt_after_not_found_lands_inside_the_window_with_its_lease(
    stack_tables: StackTables, moment: str, allowed: bool
) -> None:
    with tools_env(stack_tables) as env:
        case = make_case("case-window-reattempt", faults={"refund": ["timeout"]})
        closes = _uncertain_refund(env, case)
        _at(env, closes - _moments(env)[moment])
        if allowed:
            result = env.issue_refund(case)  # taken over, looked up, not found: sent again
            assert not result.replayed and env.refunds(case.case_id) == 1
        else:
            with pytest.raises(OutcomeUnknown, match="may still commit"):
                env.issue_refund(case)
            assert env.refunds(case.case_id) == 0


@pytest.mark.parametrize(
    ("before_the_margin", "looks_up_first"), [(1.0, False), (0.0, True), (-1.0, True)]
)
def test_no_record_proves_nothing_was_sent_only_while_no_record_can_have_expired(
    stack_tables: StackTables, before_the_margin: float, looks_up_first: bool
) -> None:
    """A delivery of an execution that started `retention - margin - before_the_margin` ago
    finds no record. Younger than that, a record an earlier delivery wrote cannot have expired:
    it sends at once. From there on it must look the refund up first (and then, the provider's
    key retention long past, may not send at all)."""
    with tools_env(stack_tables) as env:
        case = make_case("case-old-execution")
        started = env.clock()
        _at(
            env,
            started + env.policy.retention_seconds - RETENTION_MARGIN_SECONDS - before_the_margin,
        )
        provider = CountingLookups(env.provider(case))
        delivery = Attempt(
            attempt_id=Delivery("IssueRefund", case.case_id).next().attempt_id,
            remaining_seconds=REMAINING,
            execution_started_at=started,
        )
        if looks_up_first:
            with pytest.raises(OutcomeUnknown, match="may still commit"):
                issue_refund(
                    case, delivery, execution_arn="arn:e", ledger=env.ledger, provider=provider
                )
            assert (provider.lookups, env.refunds(case.case_id)) == (1, 0)
        else:
            result = issue_refund(
                case, delivery, execution_arn="arn:e", ledger=env.ledger, provider=provider
            )
            assert (provider.lookups, env.refunds(case.case_id)) == (0, 1)
            assert not result.replayed


# --- the window as the reconcile tool gets it from its wiring (issue 41, item 1) ------------------
@dataclass(frozen=True)
class PaymentWiring:
    """A payment provider as the functions are wired with it: the environment that selects it,
    and how long it deduplicates a repeat by its idempotency key."""

    name: str
    environment: dict[str, str]
    key_window_seconds: float


# Each payment provider adapter the functions can be wired with. The Stripe adapter (a later
# issue) joins here with the environment that selects it and Stripe's 24-hour key retention:
# the test below must hold for it unchanged.
PAYMENT_WIRINGS = [
    PaymentWiring("sandbox", {"PAYMENT_KEY_RETENTION_SECONDS": "86400"}, 86400.0),
]
HOUR = 3600.0


class HandlerContext:
    """The Lambda context a handler reads: its request id and the time it has left."""

    def __init__(self, request_id: str) -> None:
        self.aws_request_id = request_id
        self.function_name = "saga-tool"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:saga-tool"
        self.function_version = "$LATEST"

    def get_remaining_time_in_millis(self) -> int:
        return int(REMAINING * 1000)


def _delivery(state: str, started: str, retry: int = 0) -> dict[str, Any]:
    """`attempt` as the state machine's payloads give it."""
    execution = "arn:aws:states:us-east-1:123456789012:execution:sm:case-window-wiring"
    return {"execution": execution, "state": state, "retry": retry, "started": started}


@pytest.mark.parametrize("wiring", PAYMENT_WIRINGS, ids=lambda wiring: wiring.name)
@pytest.mark.parametrize(("hours_later", "decision"), [(1.0, "RETRY"), (25.0, "ESCALATE")])
def test_the_reconcile_tool_gets_the_providers_key_window_from_its_wiring(  # noqa: PLR0917
    stack_tables: StackTables,
    monkeypatch: pytest.MonkeyPatch,
    local_clock: Callable[[float], None],
    wiring: PaymentWiring,
    hours_later: float,
    decision: str,
) -> None:
    """A refund whose request timed out (it may have reached the provider; it did not), looked
    up by ReconcileStep as the state machine calls it: the handler wires the lookup and the
    provider's key window from the function's environment. Not found an hour later, a repeat
    under the same key is still one refund: RETRY. Not found 25 hours later, the provider has
    forgotten the key, and a request in flight could still commit: ESCALATE, never RETRY."""
    from saga.handlers import issue_refund, reconcile_action, validate_case

    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "SagaTest")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "saga-tools-test")
    with tools_env(stack_tables) as env:
        for name, value in {**env.env_vars(), **wiring.environment}.items():
            monkeypatch.setenv(name, value)
        started = saga_clock.now_iso()
        raw = raw_case("case-window-wiring", faults={"refund": ["timeout"]})
        case = validate_case.handler(
            {"case": raw, "attempt": _delivery("ValidateCase", started)}, HandlerContext("v-1")
        )["case"]
        with pytest.raises(OutcomeUnknown):
            issue_refund.handler(
                {"case": case, "attempt": _delivery("IssueRefund", started)},
                HandlerContext("r-1"),
            )
        key = action_request(parse_case(case), Operation.REFUND).key
        first = env.ledger.get(key)
        assert first is not None and first.first_dispatch_at is not None

        local_clock(hours_later * HOUR)
        answer = reconcile_action.handler(
            {"case": case, "attempt": _delivery("ReconcileStep", started), "step": "refund"},
            HandlerContext("c-1"),
        )

        assert answer["decision"] == decision, answer["reason"]
        record = env.ledger.get(key)
        assert record is not None
        if decision == "ESCALATE":
            assert (
                saga_clock.now() + REMAINING > first.first_dispatch_at + wiring.key_window_seconds
            )
            assert "may still commit" in answer["reason"]
            assert record.status.value == "UNKNOWN" and record.escalated_at is not None
        else:
            assert record.reconcile_rounds == 1 and record.escalated_at is None
        assert env.refunds(case["case_id"]) == 0  # reconciliation never dispatches
