"""The shipment carries the case's outcome (docs/design.md §3.11): every way CreateShipment
succeeds leaves the case record COMPLETED, in one transaction with the ledger's completion where
the delivery writes it; a case record that refuses it never costs the shipment its record."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from local_aws.tables import StackTables
from saga.cases import OwningExecution
from saga.errors import CaseRecordRefused, OutcomeUnknown
from saga.identity import Operation, case_action_keys
from saga.ledger import LedgerStatus, Resolution
from saga.ledger.store import LedgerStore
from saga.models import Case, approval_digest
from saga.ports.carrier import Carrier, ShipmentReceipt, ShipmentRequest
from saga_bench.metering import count_dynamodb_requests
from tests.tools_harness import ToolsEnv, make_case, tools_env

DECIDED = Resolution(by="ops@acme", decision="refund only", at="2026-12-02T10:00:00Z")


@pytest.fixture
def env(stack_tables: StackTables) -> Iterator[ToolsEnv]:
    with tools_env(stack_tables) as tools:
        yield tools


def ship_key(case: Case) -> str:
    return case_action_keys(case.tenant_id, case.case_id)[Operation.SHIP.value]


def outcome(env: ToolsEnv, case: Case) -> str | None:
    record = env.case_record(case.case_id)
    return None if record is None else str(record["outcome"])


def transactions(env: ToolsEnv) -> list[list[str]]:
    """The tables of each TransactWriteItems on the ledger the tools' client sends from now on
    (the sandbox carrier writes its shipment in one of its own)."""
    sent: list[list[str]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        tables = [next(iter(item.values()))["TableName"] for item in params["TransactItems"]]
        if env.names["LEDGER_TABLE"] in tables:
            sent.append(tables)

    env.client.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", record)
    return sent


# --- every success path ----------------------------------------------------------------------
def test_a_first_dispatch_completes_the_case_in_the_shipments_own_transaction(
    env: ToolsEnv,
) -> None:
    case = make_case()
    env.accept(case)
    sent = transactions(env)
    with count_dynamodb_requests(env.client) as requests:
        result = env.create_shipment(case)

    assert (result.status, result.replayed, result.reconciled) == ("COMPLETED", False, False)
    assert outcome(env, case) == "COMPLETED"
    assert sent == [[env.names["LEDGER_TABLE"], env.names["CASES_TABLE"]]]
    # the claim, then one transaction; the sandbox carrier's shipment (a transaction of its own)
    assert dict(requests) == {"PutItem": 1, "TransactWriteItems": 2}, requests
    record = env.record(ship_key(case))
    assert record is not None and record.status is LedgerStatus.COMPLETED
    assert record.downstream_ref == result.downstream_ref
    assert record.expires_at is not None  # a closed record keeps its retention (§3.7)
    assert env.shipments(case.case_id) == 1


def test_two_cases_shipped_within_minutes_each_complete_in_their_own_transaction(
    env: ToolsEnv,
) -> None:
    """Two cases' completions (each an Update of the ledger record, then the case record's) are
    two requests: each carries its own token (docs/design.md §3.9), so DynamoDB, which refuses a
    token seen in the last 10 minutes with another body (IdempotentParameterMismatchException;
    the local AWS enforces it), applies both."""
    cases = [make_case(), make_case("case-0002")]
    sent = transactions(env)
    for case in cases:
        env.accept(case)
        result = env.create_shipment(case)
        assert (result.status, result.replayed) == ("COMPLETED", False)

    assert len(sent) == 2
    for case in cases:
        assert outcome(env, case) == "COMPLETED"
        record = env.record(ship_key(case))
        assert record is not None and record.status is LedgerStatus.COMPLETED
        assert env.shipments(case.case_id) == 1


def test_a_takeover_that_finds_the_shipment_completes_the_case(env: ToolsEnv) -> None:
    case = make_case(faults={"shipment": ["lose_response"]})
    env.accept(case)
    with pytest.raises(OutcomeUnknown):
        env.create_shipment(case)
    assert outcome(env, case) == "IN_PROGRESS"
    sent = transactions(env)

    result = env.create_shipment(case)  # the next delivery takes over and looks it up first

    assert (result.reconciled, result.replayed) == (True, False)
    assert sent == [[env.names["LEDGER_TABLE"], env.names["CASES_TABLE"]]]
    assert outcome(env, case) == "COMPLETED"
    assert env.shipments(case.case_id) == 1


def test_a_replay_of_a_shipment_reconciliation_recorded_completes_the_case(
    env: ToolsEnv,
) -> None:
    case = make_case(faults={"shipment": ["lose_response"]})
    env.accept(case)
    with pytest.raises(OutcomeUnknown):
        env.create_shipment(case)
    assert env.reconcile(case, "ship").decision == "RESUME"  # the ledger: COMPLETED
    assert outcome(env, case) == "IN_PROGRESS"

    with count_dynamodb_requests(env.client) as requests:
        result = env.create_shipment(case)

    assert result.replayed is True
    assert outcome(env, case) == "COMPLETED"
    assert dict(requests) == {"PutItem": 1, "UpdateItem": 1}  # the claim's replay, the case
    assert env.shipments(case.case_id) == 1


def test_a_lookup_with_the_budget_spent_completes_the_case(stack_tables: StackTables) -> None:
    with tools_env(stack_tables, attempt_budget=1) as env:
        case = make_case(faults={"shipment": ["lose_response"]})
        env.accept(case)
        with pytest.raises(OutcomeUnknown):
            env.create_shipment(case)

        result = env.create_shipment(case)  # no dispatch left: only the lookup

        assert result.reconciled is True
        assert outcome(env, case) == "COMPLETED"
        assert env.shipments(case.case_id) == 1


def test_a_transaction_cancelled_by_a_conflict_records_both_one_after_the_other(
    env: ToolsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = make_case()
    env.accept(case)
    cancelled = _cancel_next_transaction(monkeypatch, [{"Code": "None"}, {"Code": "Conflict"}])

    with count_dynamodb_requests(env.client) as requests:
        env.create_shipment(case)

    assert cancelled == [1]
    assert outcome(env, case) == "COMPLETED"
    record = env.record(ship_key(case))
    assert record is not None and record.status is LedgerStatus.COMPLETED
    # the completion alone, then the case record alone
    assert requests["UpdateItem"] == 2, requests


def test_a_transaction_nobody_answered_is_left_to_reconciliation(
    env: ToolsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Committed or not, nobody knows: the delivery says OutcomeUnknown (the workflow
    reconciles, then RecordOutcome writes the case) and ships nothing more."""
    case = make_case()
    env.accept(case)

    def no_answer(self: LedgerStore, items: Any) -> None:
        raise ReadTimeoutError(endpoint_url="http://dynamodb")

    monkeypatch.setattr(LedgerStore, "transact", no_answer)
    with pytest.raises(OutcomeUnknown, match="could not be recorded"):
        env.create_shipment(case)
    monkeypatch.undo()

    assert outcome(env, case) == "IN_PROGRESS"
    env.clock.advance(3600)  # the delivery's lease runs out
    assert env.reconcile(case, "ship").decision == "RESUME"
    assert env.shipments(case.case_id) == 1


# --- a case record that refuses ---------------------------------------------------------------
def _resolved(env: ToolsEnv, case: Case) -> None:
    """A person resolves the case while the delivery ships, its lease run out by their clock
    (what `sagactl escalations resolve` writes)."""
    env.clock.advance(3600)
    record = env.cases.get(case.case_id)
    assert record is not None
    writes = env.ledger.settle_case_writes(
        case_action_keys(case.tenant_id, case.case_id), DECIDED, case_id=case.case_id
    )
    env.cases.resolve(record, DECIDED.to_record(), settle=[write for _, write in writes])


def _escalated(env: ToolsEnv, case: Case) -> None:
    """The execution escalated the case meanwhile (this delivery is a late one)."""
    env.cases.record_outcome(
        case,
        approval_digest(case),
        execution_arn="arn:e",
        outcome="ESCALATED",
        steps={},
        compensations=[],
        escalation={"reason": "RECONCILIATION_FAILED"},
    )


@pytest.mark.parametrize(
    ("owner", "meanwhile", "why"),
    [
        ("arn:e", _resolved, "was resolved by ops@acme at 2026-12-02T10:00:00Z"),
        ("arn:e", _escalated, "the case is ESCALATED already"),
        ("arn:other", None, "the case belongs to execution arn:other, not arn:e"),
    ],
)
def test_a_refusing_case_record_never_costs_the_shipment_its_record(
    env: ToolsEnv,
    owner: str,
    meanwhile: Callable[[ToolsEnv, Case], None] | None,
    why: str,
) -> None:
    case = make_case()
    env.accept(case, owner)
    carrier: Carrier = env.carrier(case)
    if meanwhile is not None:
        carrier = _Meanwhile(carrier, lambda: meanwhile(env, case))
    before = env.case_record(case.case_id)

    with pytest.raises(CaseRecordRefused, match=why) as refused:
        env.create_shipment(case, carrier=carrier)

    assert f"shipment {ship_key(case)} is recorded COMPLETED in the ledger" in str(refused.value)
    assert "refund only" not in str(refused.value)  # the decision's text stays out of errors
    assert env.shipments(case.case_id) == 1
    record = env.record(ship_key(case))
    assert record is not None and record.status is LedgerStatus.COMPLETED
    after = env.case_record(case.case_id)
    assert after is not None and after["outcome"] != "COMPLETED"
    if meanwhile is None:
        assert after == before
    if meanwhile is _resolved:
        assert record.resolution == DECIDED.to_record()  # the decision stays on the record
        assert after["resolution"]["by"] == "ops@acme"


class _Meanwhile:
    """A carrier whose shipment is made, then something happens before the delivery records it."""

    def __init__(self, inner: Carrier, then: Callable[[], None]) -> None:
        self.inner = inner
        self.then = then

    def create_shipment(self, request: ShipmentRequest) -> ShipmentReceipt:
        receipt = self.inner.create_shipment(request)
        self.then()
        return receipt

    def find_shipments(self, business_ref: str) -> list[ShipmentReceipt]:
        return list(self.inner.find_shipments(business_ref))


def _cancel_next_transaction(
    monkeypatch: pytest.MonkeyPatch, reasons: list[dict[str, Any]]
) -> list[int]:
    """DynamoDB cancels the next transaction of the ledger with these reasons (nothing written)."""
    original = LedgerStore.transact
    cancelled: list[int] = []

    def transact(self: LedgerStore, items: Any) -> None:
        if not cancelled:
            cancelled.append(1)
            response: Any = {
                "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                "CancellationReasons": reasons,
            }
            raise ClientError(response, "TransactWriteItems")
        original(self, items)

    monkeypatch.setattr(LedgerStore, "transact", transact)
    return cancelled


def test_the_owner_arn_in_the_refusal_is_the_case_records(env: ToolsEnv) -> None:
    """completion_refused reads what the case record says, for each reason in turn."""
    case = make_case()
    digest = approval_digest(case)
    refusal = env.cases.completion_refused
    assert "has no record" in str(refusal(case, digest, "arn:e", "x", None))
    assert "approval digest sha256:other" in str(
        refusal(case, digest, "arn:e", "x", {"digest": "sha256:other"})
    )
    assert OwningExecution("arn:e").arn in str(
        refusal(case, digest, "arn:x", "x", {"digest": digest, "execution_arn": "arn:e"})
    )
