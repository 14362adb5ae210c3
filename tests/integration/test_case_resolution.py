"""A person's resolution is final (docs/design.md §3.10, §5), against moto with the stack's
tables: every later write of the automation to the case record is refused without changing it,
and a delivery that passed its gate (the case record read before the decision) and claims only
after it dispatches nothing, whichever step it runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from local_aws.tables import StackTables
from saga.acceptance import accept_forward
from saga.cases import CaseOutcome, OwningExecution
from saga.errors import ActionSettled
from saga.identity import case_action_keys
from saga.ledger import LedgerStatus, Resolution
from saga.models import Case, approval_digest
from tests.tools_harness import EXECUTION, ToolsEnv, make_case, tools_env

DECIDED = Resolution(
    by="ops@acme", decision="replaced by hand, ticket 77", at="2026-11-30T10:00:00Z"
)


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables, attempt_budget=8) as tools:
        yield tools


def _owner(case: Case) -> OwningExecution:
    return OwningExecution(EXECUTION.format(case_id=case.case_id), "2026-11-30T09:00:00Z")


def _accepted(env: ToolsEnv, case: Case) -> None:
    """ValidateCase's record: the case under way in its owning execution."""
    assert env.cases.create(
        case, approval_digest(case), _owner(case), approvals_required=1
    ) == _owner(case)


def _resolve(env: ToolsEnv, case: Case) -> list[str]:
    """What `sagactl escalations resolve` writes: the resolution and the ledger's settlement
    of every action of the case, in one transaction."""
    record = env.cases.get(case.case_id)
    assert record is not None
    writes = env.ledger.settle_case_writes(
        case_action_keys(case.tenant_id, case.case_id), DECIDED, case_id=case.case_id
    )
    settled = [key for key, _ in writes]
    env.cases.resolve(
        record,
        {**DECIDED.to_record(), "settled_actions": settled},
        settle=[write for _, write in writes],
    )
    return settled


def test_every_write_to_a_resolved_case_record_is_refused_and_changes_nothing(
    env: ToolsEnv,
) -> None:
    case = make_case("case-resolved-writes")
    digest = approval_digest(case)
    _accepted(env, case)
    _resolve(env, case)
    resolved = env.cases.get(case.case_id)
    arn = _owner(case).arn

    writes: dict[str, Callable[[], Any]] = {
        "a redrive's ValidateCase": lambda: env.cases.create(
            case, digest, _owner(case), approvals_required=1
        ),
        "COMPENSATION_PENDING": lambda: env.cases.mark_compensation_pending(case, digest, arn),
        "the terminal record": lambda: env.cases.record_outcome(
            case,
            digest,
            execution_arn=arn,
            outcome=CaseOutcome.COMPLETED.value,
            steps={},
            compensations=[],
            escalation=None,
        ),
    }
    for what, write in writes.items():
        with pytest.raises(
            ActionSettled, match="resolved by ops@acme at 2026-11-30T10:00:00Z"
        ) as e:
            write()
        assert "ticket 77" not in e.value.message, what  # case data stays out of errors
        assert env.cases.get(case.case_id) == resolved, what

    # A new execution of the case is still a DUPLICATE, as §8 answers it (no error).
    other = OwningExecution(arn + "-new", "2026-12-01T00:00:00Z")
    assert env.cases.create(case, digest, other, approvals_required=1) == _owner(case)
    assert env.cases.get(case.case_id) == resolved


@pytest.mark.parametrize("step", ["reserve", "refund", "ship"])
def test_a_delivery_past_its_gate_when_the_case_is_resolved_dispatches_nothing(
    env: ToolsEnv, step: str
) -> None:
    """The interleaving the gate alone cannot stop: the delivery reads the case record (under
    way, no resolution) and passes; the person resolves; the delivery claims. The resolution
    wrote a SETTLED record for the action, so the claim meets it."""
    case = make_case(f"case-gate-{step}")
    _accepted(env, case)
    stock = env.available("SKU-RED-MUG")

    accept_forward(env.approvals, case.signed_approvals(), env.cases)  # the gate: passes
    settled = _resolve(env, case)  # the person decides while the delivery is between
    runs: dict[str, Callable[[Case], Any]] = {
        "reserve": env.reserve,
        "refund": env.issue_refund,
        "ship": env.create_shipment,
    }
    with pytest.raises(ActionSettled, match="settled by ops@acme"):
        runs[step](case)

    keys = case_action_keys(case.tenant_id, case.case_id)
    assert settled == [keys[op] for op in ("reserve", "refund", "ship", "release")]
    assert env.available("SKU-RED-MUG") == stock and env.reservations(case.case_id) == []
    assert env.refunds(case.case_id) == 0 and env.shipments(case.case_id) == 0
    record = env.record(keys[step])
    assert record is not None and record.status is LedgerStatus.SETTLED
    # and a gate read after the decision refuses before the ledger is touched
    with pytest.raises(ActionSettled, match="resolved by ops@acme"):
        accept_forward(env.approvals, case.signed_approvals(), env.cases)
