"""Which fault a request to the local Stripe server draws: the case's `sandbox.faults.refund`.

With payments=stripe the saga's adapter passes nothing of a case's faults (it is the real
adapter); the local Stripe server plays the sandbox's part instead (docs/design.md §8): it finds
the case a request belongs to, reads that case's refund faults from the local AWS (the input of
the execution that owns the case: the cases table names it), and hands them out one per call,
in order, atomically (the Lambda runtime runs deliveries in parallel), `unavailable` sticky.

A call is what the port calls one (saga.ports.payments): a refund (`POST /v1/refunds`, its case
in `metadata[case_id]`) or a lookup (the first page of `GET /v1/refunds` for a payment, its case
the one whose refund names that payment). The lookup the adapter makes inside a refund, when
less is left to refund than the amount, is a lookup too: it draws, and a fault there leaves the
refund unsent. The payment read that opens a refund, and the further pages of a lookup, draw
nothing: they belong to their call. A request whose case has no refund faults, or cannot be told
(several cases with refund faults name one payment: the server says so, give each case its own
payment), draws none.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from saga.fault_plan import UNAVAILABLE, validate_faults

DOWNSTREAM: Final = "refund"


class AmbiguousPlan(LookupError):
    """Several cases with refund faults name one payment: whose call this is cannot be told."""


class FaultPlans(Protocol):
    """Where the cases' refund faults come from."""

    def refund_faults(self, case_id: str) -> tuple[str, ...]: ...

    def cases_of_payment(self, payment: str) -> list[str]: ...


class StaticPlans:
    """Fault plans given directly (tests of the server and the adapter alone)."""

    def __init__(self) -> None:
        self._faults: dict[str, tuple[str, ...]] = {}
        self._payments: dict[str, str] = {}

    def plan(self, case_id: str, payment: str, faults: Sequence[str]) -> None:
        self._faults[case_id] = validate_faults(DOWNSTREAM, faults)
        self._payments[case_id] = payment

    def refund_faults(self, case_id: str) -> tuple[str, ...]:
        return self._faults.get(case_id, ())

    def cases_of_payment(self, payment: str) -> list[str]:
        return sorted(case for case, paid in self._payments.items() if paid == payment)


class ExecutionPlans:
    """The faults of the cases the local AWS runs: each case's owning execution's input.

    Reads through the local AWS's API (the cases table, DescribeExecution); an execution's input
    never changes, so each is read once.
    """

    def __init__(self, dynamodb: Any, stepfunctions: Any, cases_table: str) -> None:
        self._dynamodb = dynamodb
        self._sfn = stepfunctions
        self._cases_table = cases_table
        self._inputs: dict[str, Mapping[str, Any]] = {}
        self._lock = threading.Lock()

    def _input(self, execution_arn: str) -> Mapping[str, Any]:
        with self._lock:
            cached = self._inputs.get(execution_arn)
        if cached is None:
            described = self._sfn.describe_execution(executionArn=execution_arn)
            cached = json.loads(described.get("input") or "{}")
            with self._lock:
                self._inputs[execution_arn] = cached
        return cached

    def _owners(self) -> dict[str, str]:
        """case id -> the execution that owns it, for every case of the account."""
        owners: dict[str, str] = {}
        for page in self._dynamodb.get_paginator("scan").paginate(
            TableName=self._cases_table,
            ProjectionExpression="case_id, execution_arn",
            ConsistentRead=True,
        ):
            for item in page["Items"]:
                if "execution_arn" in item:
                    owners[item["case_id"]["S"]] = item["execution_arn"]["S"]
        return owners

    def refund_faults(self, case_id: str) -> tuple[str, ...]:
        record = self._dynamodb.get_item(
            TableName=self._cases_table,
            Key={"case_id": {"S": case_id}},
            ConsistentRead=True,
        ).get("Item")
        if record is None or "execution_arn" not in record:
            return ()
        return _refund_faults(self._input(record["execution_arn"]["S"]))

    def cases_of_payment(self, payment: str) -> list[str]:
        return sorted(
            case_id
            for case_id, arn in self._owners().items()
            if (self._input(arn).get("refund") or {}).get("payment_reference") == payment
        )


def _refund_faults(case: Mapping[str, Any]) -> tuple[str, ...]:
    faults = ((case.get("sandbox") or {}).get("faults") or {}).get(DOWNSTREAM) or ()
    try:
        return validate_faults(DOWNSTREAM, faults)
    except ValueError:
        return ()  # ValidateCase refused this case: none of its calls reach the server


class FaultBook:
    """The cursors: how many calls each case has made, atomically."""

    def __init__(self, plans: FaultPlans) -> None:
        self.plans = plans
        self._lock = threading.Lock()
        self._calls: dict[str, int] = {}

    def reset(self, plans: FaultPlans | None = None) -> None:
        with self._lock:
            self._calls.clear()
            if plans is not None:
                self.plans = plans

    def case_of_payment(self, payment: str) -> str | None:
        """The one case with refund faults that names `payment` (None: no such case)."""
        cases = [c for c in self.plans.cases_of_payment(payment) if self.plans.refund_faults(c)]
        if len(cases) > 1:
            raise AmbiguousPlan(
                f"cases {', '.join(cases)} all name payment {payment} and have refund faults: "
                "whose call this is cannot be told; give each such case its own payment"
            )
        return cases[0] if cases else None

    def draw(self, case_id: str | None) -> str | None:
        """This call's fault (None: it behaves normally); the case's cursor moves by one."""
        if case_id is None:
            return None
        faults = self.plans.refund_faults(case_id)
        if not faults:
            return None
        with self._lock:
            index = self._calls.get(case_id, 0)
            self._calls[case_id] = index + 1
        if UNAVAILABLE in faults and index >= faults.index(UNAVAILABLE):
            return UNAVAILABLE
        return faults[index] if index < len(faults) else None

    def unavailable(self, payment: str | None) -> bool:
        """Whether a case naming `payment` drew `unavailable` already: then every later request
        about the payment (a payment read, a further page) gets no answer either."""
        if payment is None:
            return False
        for case_id in self.plans.cases_of_payment(payment):
            faults = self.plans.refund_faults(case_id)
            if UNAVAILABLE in faults:
                with self._lock:
                    if self._calls.get(case_id, 0) > faults.index(UNAVAILABLE):
                        return True
        return False

    def calls(self, case_id: str) -> int:
        with self._lock:
            return self._calls.get(case_id, 0)
