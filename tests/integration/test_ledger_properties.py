"""Hypothesis stateful test of the ledger against moto DynamoDB.

Random interleavings of deliveries (new attempt ids), duplicate deliveries, changed parameters,
crashes before dispatch / after dispatch before recording / after recording before responding,
lost DynamoDB responses retried by the SDK, transient and permanent failures, attempts that stall
past their lease and are taken over, reconcile-tool calls, and clock jumps past leases and past
retention. Effects are real: refunds appended to a counting downstream.

Invariants, after every step:
- at most one effect per action;
- a COMPLETED record's result equals the effect's result, and a FAILED record has no effect;
- a delivery rejected as a conflict (or pending, late, over budget) dispatched nothing, and the
  reconcile tool never dispatches;
- no record is left IN_PROGRESS without either a live owner or a path to reconciliation: every
  open record (IN_PROGRESS / UNKNOWN) is on the open-actions index, and one whose lease was
  given up (no owner) hides no effect;
- `attempts` never exceeds the budget.

Examples: 40 examples x up to 30 steps by default; the slow campaign (`make test-long`,
SAGA_LONG_TESTS=1) runs 250 x up to 50.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from moto import mock_aws

from local_aws.tables import StackTables
from saga.aws import dynamodb_client
from saga.errors import (
    ActionPending,
    BudgetExhausted,
    KeyConflict,
    OutcomeUnknown,
    RefundRejected,
    ReplayWindowExpired,
    SagaError,
    TransientError,
)
from saga.ledger import (
    OPEN_STATUSES,
    ActionLedger,
    ActionOutcome,
    ActionRequest,
    Attempt,
    EffectResult,
    LedgerPolicy,
    LedgerStatus,
    Reconciliation,
    Undeterminable,
)
from tests.integration.ledger_harness import (
    CountingDownstream,
    FakeClock,
    RecordingObserver,
    lose_responses,
    refund_request,
)

MAX_EXAMPLES, STEPS = 40, 30
LONG_EXAMPLES, LONG_STEPS = 250, 50
BUDGET = 4
RETENTION = 3 * 86400
MARGIN = 30
TABLE = "ledger-properties"
CASES = ("case-a", "case-b")
MODES = (
    "ok",
    "crash_before_dispatch",
    "crash_after_dispatch",
    "crash_after_record",
    "lose_response",
    "transient",
    "reject",
    "lost_claim_response",
    "lost_completion_response",
    "stall_past_lease",
)


class SimulatedCrash(BaseException):
    """The Lambda died (timeout, OOM): no handler code runs after this point."""


class LedgerMachine(RuleBasedStateMachine):
    """One example = one fresh ledger table in the moto account the test function set up."""

    client: Any = None  # set by the test function (one mock and client for all examples)
    admin: Any = None  # botocore's whole model: creates and deletes each example's table
    stack_tables: StackTables | None = None  # likewise: the stack's tables, from its template
    tables = 0

    def __init__(self) -> None:
        super().__init__()
        LedgerMachine.tables += 1
        self.table = f"{TABLE}-{LedgerMachine.tables}"
        assert self.stack_tables is not None
        self.stack_tables.create(self.admin, {"LedgerTableName": self.table})
        [self.index] = self.stack_tables.index_names("LedgerTableName")  # open actions
        self.clock = FakeClock()
        self.downstream = CountingDownstream()
        self.ledger = ActionLedger(
            self.table,
            self.client,
            LedgerPolicy(
                attempt_budget=BUDGET,
                retention_seconds=RETENTION,
                lease_margin_seconds=MARGIN,
                min_lease_seconds=5,
            ),
            clock=self.clock,
            observer=RecordingObserver(),
        )
        self.sequence = 0

    def teardown(self) -> None:
        self.admin.delete_table(TableName=self.table)

    # --- helpers ---------------------------------------------------------------------------
    def _request(self, case_id: str, changed: bool) -> ActionRequest:
        return refund_request(case_id=case_id, amount_minor=2500 if changed else 2000)

    def _attempt(self, remaining: float) -> Attempt:
        self.sequence += 1
        return Attempt(f"exec#IssueRefund#0#{self.sequence}", remaining)

    def _lookup(self, ref: str, lookup_ok: bool) -> Callable[[], Reconciliation]:
        if lookup_ok:
            return self.downstream.lookup(ref)
        return lambda: Undeterminable("carrier lookup unavailable")

    def _effect(self, request: ActionRequest, mode: str, remaining: float) -> Callable[[], Any]:
        ref = request.action_id
        amount = 2000 if request.digest == refund_request(case_id=request.case_id).digest else 2500

        def effect() -> EffectResult:
            if mode == "crash_before_dispatch":
                raise SimulatedCrash
            if mode == "transient":
                raise TransientError("provider unavailable before commit")
            if mode == "reject":
                raise RefundRejected("payment closed")
            done = self.downstream.refund(ref, amount)
            if mode == "crash_after_dispatch":
                raise SimulatedCrash
            if mode == "lose_response":
                raise OutcomeUnknown("provider timed out after commit")
            if mode == "stall_past_lease":
                self.clock.advance(remaining + MARGIN + 1)
                self._deliver_and_check(request, "ok", lookup_ok=True, remaining=remaining)
            return done

        return effect

    def _deliver_and_check(
        self, request: ActionRequest, mode: str, *, lookup_ok: bool, remaining: float
    ) -> None:
        ref = request.action_id
        before = len(self.downstream.effects_for(ref))
        attempt = self._attempt(remaining)
        try:
            if mode in ("lost_claim_response", "lost_completion_response"):
                operation = "PutItem" if mode == "lost_claim_response" else "UpdateItem"
                with lose_responses(self.client, operation):
                    outcome = self.ledger.execute(
                        request,
                        attempt,
                        effect=self._effect(request, "ok", remaining),
                        reconcile=self._lookup(ref, lookup_ok),
                    )
            else:
                outcome = self.ledger.execute(
                    request,
                    attempt,
                    effect=self._effect(request, mode, remaining),
                    reconcile=self._lookup(ref, lookup_ok),
                )
        except (KeyConflict, ActionPending, ReplayWindowExpired, BudgetExhausted):
            # rejected deliveries never dispatch
            assert len(self.downstream.effects_for(ref)) == before
            return
        except (SimulatedCrash, TransientError, OutcomeUnknown, RefundRejected):
            return
        if mode == "crash_after_record":
            return  # recorded, but the caller never saw the response
        assert isinstance(outcome, ActionOutcome)
        effects = self.downstream.effects_for(ref)
        assert len(effects) == 1
        assert outcome.result == effects[0]
        assert outcome.status == "COMPLETED"

    # --- rules -----------------------------------------------------------------------------
    @rule(
        case_id=st.sampled_from(CASES),
        changed=st.booleans(),
        mode=st.sampled_from(MODES),
        lookup_ok=st.booleans(),
        remaining=st.sampled_from([0.0, 10.0, 60.0]),
    )
    def deliver(
        self, case_id: str, changed: bool, mode: str, lookup_ok: bool, remaining: float
    ) -> None:
        self._deliver_and_check(
            self._request(case_id, changed), mode, lookup_ok=lookup_ok, remaining=remaining
        )

    @rule(case_id=st.sampled_from(CASES), copies=st.integers(min_value=2, max_value=3))
    def duplicate_deliveries(self, case_id: str, copies: int) -> None:
        for _ in range(copies):
            self._deliver_and_check(
                self._request(case_id, False), "ok", lookup_ok=True, remaining=10.0
            )

    @rule(case_id=st.sampled_from(CASES), changed=st.booleans(), lookup_ok=st.booleans())
    def reconcile_tool(self, case_id: str, changed: bool, lookup_ok: bool) -> None:
        request = self._request(case_id, changed)
        before = len(self.downstream.effects)
        try:
            decision = self.ledger.reconcile(
                request, self._attempt(10.0), reconcile=self._lookup(request.action_id, lookup_ok)
            )
        except SagaError:
            pass
        else:
            assert decision.decision in ("RESUME", "RETRY", "ESCALATE")
            if decision.outcome is not None:
                assert decision.outcome.result == self.downstream.effects_for(request.action_id)[0]
        assert len(self.downstream.effects) == before  # reconciliation never dispatches

    @rule(seconds=st.sampled_from([1, MARGIN + 11, MARGIN + 61, 3600, RETENTION + 1]))
    def advance_clock(self, seconds: int) -> None:
        self.clock.advance(seconds)

    # --- invariants ------------------------------------------------------------------------
    @invariant()
    def at_most_one_effect_per_action(self) -> None:
        for case_id in CASES:
            assert len(self.downstream.effects_for(f"{case_id}.refund")) <= 1

    @invariant()
    def records_agree_with_effects(self) -> None:
        open_keys: set[str] = set()
        for case_id in CASES:
            key = refund_request(case_id=case_id).key
            record = self.ledger.get(key)
            if record is None:
                continue
            effects = self.downstream.effects_for(f"{case_id}.refund")
            assert record.attempts <= BUDGET
            if record.status is LedgerStatus.COMPLETED:
                assert len(effects) == 1 and record.result == effects[0]
            if record.status is LedgerStatus.FAILED:
                assert effects == []
            if record.status is LedgerStatus.IN_PROGRESS and record.owner is None:
                assert effects == [], "a released lease must not hide an effect"
            if record.status in OPEN_STATUSES:
                open_keys.add(key)
                assert record.item["open_status"] == {"S": record.status.value}
            else:
                assert "open_status" not in record.item
        indexed = set()
        for status in OPEN_STATUSES:
            items = self.client.query(
                TableName=self.table,
                IndexName=self.index,
                KeyConditionExpression="open_status = :s",
                ExpressionAttributeValues={":s": {"S": status.value}},
            )["Items"]
            indexed |= {item["action_key"]["S"] for item in items}
        assert indexed == open_keys  # every open action is visible to the sweeper


def run_machine(tables: StackTables, max_examples: int, steps: int) -> None:
    with mock_aws():
        LedgerMachine.client = dynamodb_client()
        LedgerMachine.admin = boto3.client("dynamodb", region_name="us-east-1")
        LedgerMachine.stack_tables = tables
        try:
            run_state_machine_as_test(
                LedgerMachine,
                settings=settings(
                    max_examples=max_examples,
                    stateful_step_count=steps,
                    deadline=None,
                    suppress_health_check=[HealthCheck.too_slow],
                ),
            )
        finally:
            LedgerMachine.client = None
            LedgerMachine.stack_tables = None


def test_ledger_state_machine(aws_credentials: None, stack_tables: StackTables) -> None:
    run_machine(stack_tables, MAX_EXAMPLES, STEPS)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(
    os.environ.get("SAGA_LONG_TESTS") != "1", reason="long campaign: SAGA_LONG_TESTS=1"
)
def test_ledger_state_machine_long_campaign(
    aws_credentials: None, stack_tables: StackTables
) -> None:
    run_machine(stack_tables, LONG_EXAMPLES, LONG_STEPS)
