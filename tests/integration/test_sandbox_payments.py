"""The sandbox payment provider against moto DynamoDB: idempotency contract and every fault."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from saga.ports import (
    DownstreamConflict,
    DownstreamKeyMismatch,
    DownstreamNotDispatched,
    DownstreamRejected,
    DownstreamTimeout,
    DownstreamUnavailable,
)
from saga.ports.payments import RefundReceipt, RefundRequest
from saga.sandbox.faults import FaultInjector
from saga.sandbox.payment_keys import (
    IN_FLIGHT_LOCK_SECONDS,
    PAYMENT_KEY_RETENTION_SECONDS,
    ProviderResponse,
    idempotency_item_key,
)
from saga.sandbox.payment_provider import SandboxPaymentProvider
from saga.sandbox.payments import SandboxPaymentsService
from tests.integration.ledger_harness import FakeClock
from tests.tables import SandboxTables

TABLES = SandboxTables()
CASE = "case-0001"
KEY = "acme#refund#case-0001.refund"


def provider(
    sandbox_client: Any,
    clock: FakeClock,
    faults: list[str] | None = None,
    case_id: str = CASE,
    retention: int = PAYMENT_KEY_RETENTION_SECONDS,
) -> SandboxPaymentProvider:
    return SandboxPaymentProvider.create(
        sandbox_client,
        payments_table=TABLES.payments,
        sandbox_table=TABLES.sandbox,
        case_id=case_id,
        faults=faults or [],
        key_retention_seconds=retention,
        clock=clock,
    )


def refund_request(case_id: str = CASE, amount_minor: int = 2000) -> RefundRequest:
    return RefundRequest(
        case_id=case_id,
        business_ref=f"{case_id}.refund",
        payment_reference="pay-777",
        amount_minor=amount_minor,
        currency="USD",
    )


def refunds_of(sandbox_client: Any, case_id: str = CASE) -> list[dict[str, Any]]:
    items = sandbox_client.scan(
        TableName=TABLES.payments,
        FilterExpression="case_id = :c",
        ExpressionAttributeValues={":c": {"S": case_id}},
        ConsistentRead=True,
    )["Items"]
    return list(items)


def key_record(sandbox_client: Any, key: str = KEY) -> dict[str, Any] | None:
    item: dict[str, Any] | None = sandbox_client.get_item(
        TableName=TABLES.sandbox, Key={"pk": {"S": idempotency_item_key(key)}}, ConsistentRead=True
    ).get("Item")
    return item


# --- the happy path and the idempotency contract ------------------------------------------------
def test_refund_makes_one_item_with_the_case_id_and_returns_a_receipt(
    sandbox_client: Any, clock: FakeClock
) -> None:
    receipt = provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)

    items = refunds_of(sandbox_client)
    assert len(items) == 1
    item = items[0]
    assert item["refund_id"]["S"] == receipt.refund_id
    assert item["case_id"] == {"S": CASE}
    assert item["business_ref"] == {"S": "case-0001.refund"}
    assert item["payment_reference"] == {"S": "pay-777"}
    assert item["amount_minor"] == {"N": "2000"}
    assert item["currency"] == {"S": "USD"}
    assert item["idempotency_key"] == {"S": KEY}
    assert item["created_at"] == {"N": str(int(clock.now))}
    assert receipt == RefundReceipt(receipt.refund_id, "case-0001.refund", 2000, "USD", "succeeded")
    record = key_record(sandbox_client)
    assert record is not None
    assert record["expires_at"] == {"N": str(int(clock.now) + PAYMENT_KEY_RETENTION_SECONDS)}


def test_same_key_same_parameters_replays_the_stored_refund(
    sandbox_client: Any, clock: FakeClock
) -> None:
    first = provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)
    clock.now += 3600
    second = provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)

    assert second == first
    assert len(refunds_of(sandbox_client)) == 1


def test_same_key_other_parameters_is_a_mismatch_and_changes_nothing(
    sandbox_client: Any, clock: FakeClock
) -> None:
    first = provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)
    before = key_record(sandbox_client)

    with pytest.raises(DownstreamKeyMismatch, match="same parameters") as caught:
        provider(sandbox_client, clock).refund(
            refund_request(amount_minor=2500), idempotency_key=KEY
        )

    assert caught.value.downstream == "refund"
    assert [item["refund_id"]["S"] for item in refunds_of(sandbox_client)] == [first.refund_id]
    assert key_record(sandbox_client) == before
    # The original request still replays.
    assert provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY) == first


def test_two_separately_approved_refunds_with_equal_amounts_both_happen(
    sandbox_client: Any, clock: FakeClock
) -> None:
    provider(sandbox_client, clock, case_id="case-a").refund(
        refund_request("case-a"), idempotency_key="acme#refund#case-a.refund"
    )
    provider(sandbox_client, clock, case_id="case-b").refund(
        refund_request("case-b"), idempotency_key="acme#refund#case-b.refund"
    )

    assert len(refunds_of(sandbox_client, "case-a")) == 1
    assert len(refunds_of(sandbox_client, "case-b")) == 1


def test_key_expires_after_the_retention_and_then_makes_a_second_refund(
    sandbox_client: Any, clock: FakeClock
) -> None:
    retention = 600
    first = provider(sandbox_client, clock, retention=retention).refund(
        refund_request(), idempotency_key=KEY
    )
    clock.now += retention - 1
    assert (
        provider(sandbox_client, clock, retention=retention).refund(
            refund_request(), idempotency_key=KEY
        )
        == first
    )
    assert len(refunds_of(sandbox_client)) == 1

    clock.now += 1  # the key's expires_at has passed (TTL deletion lags: the provider checks)
    second = provider(sandbox_client, clock, retention=retention).refund(
        refund_request(), idempotency_key=KEY
    )

    assert second.refund_id != first.refund_id
    assert len(refunds_of(sandbox_client)) == 2
    found = provider(sandbox_client, clock).find_refunds("case-0001.refund")
    assert [r.refund_id for r in found] == [first.refund_id, second.refund_id]


def test_find_refunds_lists_only_the_reference_asked_for(
    sandbox_client: Any, clock: FakeClock
) -> None:
    assert provider(sandbox_client, clock).find_refunds("case-0001.refund") == []
    mine = provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)
    provider(sandbox_client, clock, case_id="case-b").refund(
        refund_request("case-b"), idempotency_key="acme#refund#case-b.refund"
    )

    assert provider(sandbox_client, clock).find_refunds("case-0001.refund") == [mine]


# --- concurrency --------------------------------------------------------------------------------
class InterceptingClient:
    """Delegates to the real client; runs `before_commit` just before the commit transaction."""

    def __init__(self, real: Any, before_commit: Any) -> None:
        self._real = real
        self._before_commit = before_commit

    def transact_write_items(self, **kwargs: Any) -> Any:
        hook, self._before_commit = self._before_commit, None
        if hook is not None:
            hook()
        return self._real.transact_write_items(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_concurrent_request_with_the_same_key_gets_a_conflict(
    sandbox_client: Any, clock: FakeClock
) -> None:
    seen: list[BaseException] = []

    def second_request_while_first_in_flight() -> None:
        with pytest.raises(DownstreamConflict, match="in-progress") as caught:
            provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)
        seen.append(caught.value)

    first = provider(
        InterceptingClient(sandbox_client, second_request_while_first_in_flight), clock
    )
    receipt = first.refund(refund_request(), idempotency_key=KEY)

    assert len(seen) == 1
    # "in progress" is not "nothing happened": the request in flight may still commit
    assert not isinstance(seen[0], DownstreamNotDispatched)
    assert len(refunds_of(sandbox_client)) == 1
    # Repeating after the first finished replays its refund.
    assert provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY) == receipt


def test_a_request_that_died_in_flight_is_taken_over_after_its_lock_expires(
    sandbox_client: Any, clock: FakeClock
) -> None:
    def crash() -> None:
        raise SystemExit("worker died between claim and commit")

    with pytest.raises(SystemExit):
        provider(InterceptingClient(sandbox_client, crash), clock).refund(
            refund_request(), idempotency_key=KEY
        )
    assert refunds_of(sandbox_client) == []

    with pytest.raises(DownstreamConflict):
        provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)
    clock.now += IN_FLIGHT_LOCK_SECONDS
    receipt = provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)

    assert [item["refund_id"]["S"] for item in refunds_of(sandbox_client)] == [receipt.refund_id]


def test_the_original_request_cannot_commit_after_its_lock_was_taken_over(
    sandbox_client: Any, clock: FakeClock
) -> None:
    taken_over: list[RefundReceipt] = []

    def retry_takes_over_meanwhile() -> None:
        clock.now += IN_FLIGHT_LOCK_SECONDS
        taken_over.append(
            provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)
        )

    slow = provider(InterceptingClient(sandbox_client, retry_takes_over_meanwhile), clock)
    with pytest.raises(DownstreamConflict, match="held by another request"):
        slow.refund(refund_request(), idempotency_key=KEY)

    assert [item["refund_id"]["S"] for item in refunds_of(sandbox_client)] == [
        taken_over[0].refund_id
    ]


class SerialisedClient:
    """moto does not serialise concurrent requests; DynamoDB makes each one atomic."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)

        def call(**kwargs: Any) -> Any:
            with self._lock:
                return method(**kwargs)

        return call


def test_many_concurrent_requests_with_one_key_make_one_refund(
    sandbox_client: Any, clock: FakeClock
) -> None:
    shared = SerialisedClient(sandbox_client)
    barrier = threading.Barrier(8)
    outcomes: list[object] = []

    def worker() -> None:
        barrier.wait()
        try:
            outcomes.append(provider(shared, clock).refund(refund_request(), idempotency_key=KEY))
        except DownstreamConflict as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    receipts = {o for o in outcomes if isinstance(o, RefundReceipt)}
    assert len(outcomes) == 8
    assert len(refunds_of(sandbox_client)) == 1
    assert len(receipts) == 1
    assert next(iter(receipts)).refund_id == refunds_of(sandbox_client)[0]["refund_id"]["S"]


# --- faults ------------------------------------------------------------------------------------
def test_fail_before_commit_does_nothing_and_the_retry_succeeds(
    sandbox_client: Any, clock: FakeClock
) -> None:
    payments = provider(sandbox_client, clock, ["fail_before_commit"])

    with pytest.raises(DownstreamNotDispatched, match="failed before committing"):
        payments.refund(refund_request(), idempotency_key=KEY)
    assert refunds_of(sandbox_client) == []
    assert key_record(sandbox_client) is None

    payments.refund(refund_request(), idempotency_key=KEY)
    assert len(refunds_of(sandbox_client)) == 1


def test_lose_response_commits_the_refund_and_the_key_then_times_out(
    sandbox_client: Any, clock: FakeClock
) -> None:
    payments = provider(sandbox_client, clock, ["lose_response"])

    with pytest.raises(DownstreamTimeout, match="lost"):
        payments.refund(refund_request(), idempotency_key=KEY)
    assert len(refunds_of(sandbox_client)) == 1

    # The retry with the same key is answered from the key: still one refund.
    receipt = payments.refund(refund_request(), idempotency_key=KEY)
    assert [item["refund_id"]["S"] for item in refunds_of(sandbox_client)] == [receipt.refund_id]


def test_reject_makes_no_refund_and_is_stored_for_the_key(
    sandbox_client: Any, clock: FakeClock
) -> None:
    payments = provider(sandbox_client, clock, ["reject"])

    with pytest.raises(DownstreamRejected, match="declined") as first:
        payments.refund(refund_request(), idempotency_key=KEY)
    assert refunds_of(sandbox_client) == []

    # The faults are used up, but the key replays the stored rejection.
    with pytest.raises(DownstreamRejected) as replayed:
        payments.refund(refund_request(), idempotency_key=KEY)
    assert replayed.value.reason == first.value.reason
    assert refunds_of(sandbox_client) == []
    assert payments.find_refunds("case-0001.refund") == []


def test_timeout_has_no_effect(sandbox_client: Any, clock: FakeClock) -> None:
    payments = provider(sandbox_client, clock, ["timeout"])

    with pytest.raises(DownstreamTimeout, match="no response"):
        payments.refund(refund_request(), idempotency_key=KEY)
    assert refunds_of(sandbox_client) == []
    assert key_record(sandbox_client) is None
    assert payments.find_refunds("case-0001.refund") == []


def test_unavailable_is_sticky_for_refunds_and_lookups(
    sandbox_client: Any, clock: FakeClock
) -> None:
    payments = provider(sandbox_client, clock, ["unavailable"])

    for _ in range(3):
        with pytest.raises(DownstreamUnavailable):
            payments.refund(refund_request(), idempotency_key=KEY)
        with pytest.raises(DownstreamUnavailable):
            payments.find_refunds("case-0001.refund")
    assert refunds_of(sandbox_client) == []
    # Another case is not affected.
    provider(sandbox_client, clock, case_id="case-b").refund(
        refund_request("case-b"), idempotency_key="acme#refund#case-b.refund"
    )
    assert len(refunds_of(sandbox_client, "case-b")) == 1


def test_faults_are_consumed_in_order_across_refunds_and_lookups(
    sandbox_client: Any, clock: FakeClock
) -> None:
    payments = provider(sandbox_client, clock, ["lose_response", "timeout", "reject"])

    with pytest.raises(DownstreamTimeout, match="lost"):  # 1: refund commits, answer lost
        payments.refund(refund_request(), idempotency_key=KEY)
    with pytest.raises(DownstreamTimeout, match="no response"):  # 2: the lookup times out
        payments.find_refunds("case-0001.refund")
    with pytest.raises(DownstreamRejected, match="refused the lookup"):  # 3: lookup refused
        payments.find_refunds("case-0001.refund")
    found = payments.find_refunds("case-0001.refund")  # 4: list exhausted, normal

    assert len(found) == 1
    assert found[0].refund_id == refunds_of(sandbox_client)[0]["refund_id"]["S"]


def test_lookup_faults_each_leave_the_caller_without_an_answer(
    sandbox_client: Any, clock: FakeClock
) -> None:
    payments = provider(sandbox_client, clock, ["fail_before_commit", "lose_response"])

    with pytest.raises(DownstreamNotDispatched):
        payments.find_refunds("case-0001.refund")
    with pytest.raises(DownstreamTimeout):
        payments.find_refunds("case-0001.refund")
    assert payments.find_refunds("case-0001.refund") == []


def test_invalid_parameters_are_rejected_and_nothing_is_stored(
    sandbox_client: Any, clock: FakeClock
) -> None:
    with pytest.raises(DownstreamRejected, match="currency"):
        provider(sandbox_client, clock).refund(
            RefundRequest(CASE, "case-0001.refund", "pay-777", 2000, "usd"), idempotency_key=KEY
        )
    with pytest.raises(DownstreamRejected, match="amount_minor"):
        provider(sandbox_client, clock).refund(refund_request(amount_minor=0), idempotency_key=KEY)

    assert refunds_of(sandbox_client) == []
    assert key_record(sandbox_client) is None


# --- failures of the provider's own storage ---------------------------------------------------
class FailingCommit:
    """Delegates to the real client; the commit transaction fails as configured."""

    def __init__(self, real: Any, error: Exception, *, commit_first: bool) -> None:
        self._real = real
        self._error = error
        self._commit_first = commit_first

    def transact_write_items(self, **kwargs: Any) -> Any:
        if self._commit_first:
            self._real.transact_write_items(**kwargs)
        raise self._error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_commit_whose_answer_is_lost_is_a_timeout_and_the_key_replays_it(
    sandbox_client: Any, clock: FakeClock
) -> None:
    broken = FailingCommit(
        sandbox_client, ReadTimeoutError(endpoint_url="http://ddb"), commit_first=True
    )

    with pytest.raises(DownstreamTimeout, match="no answer"):
        provider(broken, clock).refund(refund_request(), idempotency_key=KEY)
    receipt = provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)

    assert [item["refund_id"]["S"] for item in refunds_of(sandbox_client)] == [receipt.refund_id]


def test_a_definitely_failed_commit_frees_the_key_for_an_immediate_retry(
    sandbox_client: Any, clock: FakeClock
) -> None:
    throttled = ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "TransactWriteItems"
    )
    broken = FailingCommit(sandbox_client, throttled, commit_first=False)

    with pytest.raises(DownstreamNotDispatched):
        provider(broken, clock).refund(refund_request(), idempotency_key=KEY)
    assert refunds_of(sandbox_client) == []
    assert key_record(sandbox_client) is None

    provider(sandbox_client, clock).refund(refund_request(), idempotency_key=KEY)
    assert len(refunds_of(sandbox_client)) == 1


def test_the_provider_replays_the_exact_stored_status_and_body(
    sandbox_client: Any, clock: FakeClock
) -> None:
    service = SandboxPaymentsService(
        sandbox_client, payments_table=TABLES.payments, sandbox_table=TABLES.sandbox, clock=clock
    )
    params: dict[str, Any] = {
        "case_id": CASE,
        "business_ref": "case-0001.refund",
        "payment_reference": "pay-777",
        "amount_minor": 2000,
        "currency": "USD",
    }

    def call(faults: list[str]) -> ProviderResponse:
        injector = FaultInjector(sandbox_client, TABLES.sandbox, CASE, "refund", faults)
        return service.create_refund(idempotency_key=KEY, faults=injector, **params)

    rejected = call(["reject"])
    clock.now += 60
    replayed = call([])  # the same injector cursor: the reject entry is used up

    assert (rejected.status, rejected.replayed) == (402, False)
    assert (replayed.status, replayed.body, replayed.replayed) == (402, rejected.body, True)
    assert refunds_of(sandbox_client) == []


# --- in_flight: accepted, no answer, commits late ----------------------------------------------
def test_an_in_flight_refund_commits_after_the_next_lookup_answered_not_found(
    sandbox_client: Any, clock: FakeClock
) -> None:
    with pytest.raises(DownstreamTimeout, match="in_flight"):
        provider(sandbox_client, clock, ["in_flight"]).refund(refund_request(), idempotency_key=KEY)
    assert refunds_of(sandbox_client) == []  # accepted, not committed yet
    looking = provider(sandbox_client, clock, ["in_flight"])
    assert looking.find_refunds(f"{CASE}.refund") == []  # the answer comes before the commit
    assert len(refunds_of(sandbox_client)) == 1
    [found] = looking.find_refunds(f"{CASE}.refund")
    replayed = looking.refund(refund_request(), idempotency_key=KEY)  # the key deduplicates
    assert replayed.refund_id == found.refund_id and len(refunds_of(sandbox_client)) == 1


@pytest.mark.parametrize("hours_later", [13, 25, 60])
def test_an_in_flight_refund_nobody_asked_about_has_committed_within_the_key_retention(
    sandbox_client: Any, clock: FakeClock, hours_later: int
) -> None:
    """docs/design.md §8: it commits "always within the provider's key retention of the first call",
    whether or not anyone asked in between; a lookup long after finds it, never an error."""
    with pytest.raises(DownstreamTimeout):
        provider(sandbox_client, clock, ["in_flight"]).refund(refund_request(), idempotency_key=KEY)
    clock.now += hours_later * 3600
    if hours_later * 3600 >= PAYMENT_KEY_RETENTION_SECONDS:  # what TTL does to the key by then
        sandbox_client.delete_item(
            TableName=TABLES.sandbox, Key={"pk": {"S": idempotency_item_key(KEY)}}
        )
    found = provider(sandbox_client, clock, ["in_flight"]).find_refunds(f"{CASE}.refund")
    assert [receipt.business_ref for receipt in found] == [f"{CASE}.refund"]
    assert len(refunds_of(sandbox_client)) == 1
