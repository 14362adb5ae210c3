"""The sandbox inventory: the Inventory port (saga.inventory) with a case's faults acted out on
the way to the tables, as a flaky network between the tool and DynamoDB would; and its seed.

A reserve or release call draws one fault from its list (`reserve`, `release`):
`fail_before_commit` -> TransientError, nothing written; `timeout`, `unavailable` ->
OutcomeUnknown, nothing written; `reject` -> refused before anything is written (OutOfStock,
ReservationNotHeld: the ledger records it); `lose_response` -> written, then OutcomeUnknown
(the answer was lost). A lookup draws one too, and any fault leaves it without an answer.
The fault cursor is an item in DynamoDB: a throttled or conflicting draw stops the call before
anything is written (TransientError; a lookup is left without an answer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from saga.errors import OutcomeUnknown, OutOfStock, ReservationNotHeld, SagaError, TransientError
from saga.fault_plan import FAIL_BEFORE_COMMIT, LOSE_RESPONSE, REJECT, TIMEOUT, UNAVAILABLE
from saga.identity import Operation
from saga.ports import DownstreamUnavailable
from saga.ports.inventory import Inventory, ReleaseRequest, Reservation, StockWrite
from saga.sandbox.faults import FaultSource

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from saga.models import Case

T = TypeVar("T")


@dataclass(frozen=True)
class FaultTexts:
    """What the caller is told when a fault is acted out: the inventory's answers of one call."""

    before_commit: str  # fail_before_commit: nothing written
    no_answer: str  # timeout, unavailable: {fault}
    refused: Callable[[], SagaError]  # reject: refused before anything is written
    lost: str  # lose_response: written, the answer lost
    lookup: str  # a lookup that drew any fault: {fault}

    @classmethod
    def of(cls, case: Case, operation: Operation) -> FaultTexts:
        if operation is Operation.RESERVE:
            sku = case.reserve.sku
            return cls(
                before_commit=f"reserve {sku}: inventory write failed before commit (sandbox)",
                no_answer=f"reserve {sku}: no answer from the inventory (sandbox: {{fault}})",
                refused=partial(
                    OutOfStock, f"SKU {sku}: reservation refused (sandbox fault: reject)"
                ),
                lost=f"reserve {sku}: the inventory's answer was lost (sandbox: lose_response)",
                lookup="inventory lookup failed (sandbox fault: {fault})",
            )
        what = f"release for {case.case_id}"
        return cls(
            before_commit=f"{what}: inventory refused the write ({{fault}})",
            no_answer=f"{what}: inventory did not answer ({{fault}})",
            refused=partial(
                ReservationNotHeld, f"{what}: refused by the inventory (sandbox fault: reject)"
            ),
            lost=(
                f"{what}: the inventory's answer was lost (sandbox fault: lose_response); the "
                "next delivery finds the reservation released by this key"
            ),
            lookup="reservation lookup failed (sandbox fault: {fault})",
        )


class SandboxInventory:
    """The Inventory port over `tables`, drawing one case's faults for one operation."""

    def __init__(self, tables: Inventory, faults: FaultSource, texts: FaultTexts) -> None:
        self._tables = tables
        self._faults = faults
        self._texts = texts

    @classmethod
    def for_case(
        cls, tables: Inventory, faults: FaultSource, case: Case, operation: Operation
    ) -> SandboxInventory:
        return cls(tables, faults, FaultTexts.of(case, operation))

    def reserve(self, reservation: Reservation) -> StockWrite:
        return self._tables.reserve(reservation)

    def _draw(self, what: str) -> str | None:
        try:
            return self._faults.next()
        except (BotoCoreError, ClientError) as exc:
            raise TransientError(f"{what}: sandbox control unavailable ({exc})") from exc

    def commit(self, write: Callable[[], T]) -> T:
        texts = self._texts
        fault = self._draw(texts.before_commit.format(fault="control"))
        if fault == FAIL_BEFORE_COMMIT:
            raise TransientError(texts.before_commit.format(fault=fault))
        # No answer may hide a write that happened: the next delivery reconciles first.
        if fault in (TIMEOUT, UNAVAILABLE):
            raise OutcomeUnknown(texts.no_answer.format(fault=fault))
        if fault == REJECT:
            raise texts.refused()
        answer = self._tables.commit(write)
        if fault == LOSE_RESPONSE:
            raise OutcomeUnknown(texts.lost)
        return answer

    def release(self, request: ReleaseRequest) -> Reservation:
        return self._tables.release(request)  # inside commit(): its fault is drawn already

    def find_reservation(self, reservation_id: str) -> Reservation | None:
        try:
            fault = self._draw(f"lookup of reservation {reservation_id}")
        except TransientError as exc:
            raise DownstreamUnavailable(exc.message) from exc
        if fault is not None:
            raise DownstreamUnavailable(self._texts.lookup.format(fault=fault))
        return self._tables.find_reservation(reservation_id)


# The examples use these: plenty, a little, and none (for OutOfStock).
DEFAULT_STOCK: Final[Mapping[str, int]] = {"SKU-RED-MUG": 100, "SKU-BLUE-MUG": 5, "SKU-EMPTY": 0}


def seed_inventory(client: DynamoDBClient, table_name: str, stock: Mapping[str, int]) -> None:
    """Set each SKU's `available` to the given level (a plain put: seeding twice is harmless).

    The whole mapping is checked before anything is written, so bad input changes nothing.
    """
    for sku, available in stock.items():
        if not isinstance(sku, str) or not sku:
            raise ValueError(f"inventory seed: SKU must be a non-empty string, got {sku!r}")
        if isinstance(available, bool) or not isinstance(available, int) or available < 0:
            raise ValueError(
                f"inventory seed: {sku}: available must be a non-negative integer, "
                f"got {available!r}"
            )
    for sku, available in stock.items():
        client.put_item(
            TableName=table_name,
            Item={"sku": {"S": sku}, "available": {"N": str(available)}},
        )


def read_available(client: DynamoDBClient, table_name: str, sku: str) -> int | None:
    """The SKU's current stock (consistent read), or None when the SKU is not stocked."""
    response = client.get_item(TableName=table_name, Key={"sku": {"S": sku}}, ConsistentRead=True)
    item = response.get("Item")
    if item is None:
        return None
    return int(item["available"]["N"])
