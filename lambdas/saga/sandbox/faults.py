"""The fault cursor of the sandbox downstreams: which fault of a case's plan this call draws.

A case names, per downstream, a list of faults (saga.fault_plan). Each call to that downstream
(creates and lookups alike) consumes one entry, in order; after the list runs out calls behave
normally. The position is an atomic counter in the sandbox control table, so concurrent Lambdas,
retries and redrives of one case all draw from the same sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Final, Generic, Protocol, Self, TypeVar

from saga import clock as saga_clock
from saga.clock import Clock
from saga.fault_plan import UNAVAILABLE, validate_faults

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Cursor items only matter while a case runs (redrives included); the table's TTL cleans them
# up afterwards.
CURSOR_RETENTION_SECONDS: Final = 30 * 86400


class FaultSource(Protocol):
    """The next fault of one downstream for one case (None: this call behaves normally)."""

    def next(self) -> str | None: ...


class NoFaults:
    """A downstream without injected faults (a case without `sandbox`, or nothing left)."""

    def next(self) -> str | None:
        return None


def cursor_key(case_id: str, downstream: str) -> str:
    return f"faults#{case_id}#{downstream}"


class FaultInjector:
    """Hands out the next fault of one downstream for one case.

    `next()` returns the fault name for this call, or None when the call behaves normally.
    `unavailable` is sticky: the call that consumes it and every later call of this case to this
    downstream return "unavailable". Stickiness follows from the cursor position (the list is
    the same for every call of a case), so it holds even for calls racing the one that consumed
    the entry; the item also gets a flag so an operator can see it.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        case_id: str,
        downstream: str,
        faults: Sequence[str],
        *,
        clock: Clock = saga_clock.now,
    ) -> None:
        if not case_id:
            raise ValueError("FaultInjector needs a case_id")
        self._faults = validate_faults(downstream, faults)
        self._client = client
        self._table_name = table_name
        self._case_id = case_id
        self._downstream = downstream
        self._clock = clock
        self._sticky_from = self._faults.index(UNAVAILABLE) if UNAVAILABLE in self._faults else None

    @property
    def downstream(self) -> str:
        return self._downstream

    @property
    def faults(self) -> tuple[str, ...]:
        return self._faults

    def next(self) -> str | None:
        # The happy path (no faults configured) costs no request at all.
        if not self._faults:
            return None
        index = self._advance_cursor() - 1
        if self._sticky_from is not None and index >= self._sticky_from:
            if index == self._sticky_from:
                self._mark_unavailable()
            return UNAVAILABLE
        return self._faults[index] if index < len(self._faults) else None

    def _advance_cursor(self) -> int:
        response = self._client.update_item(
            TableName=self._table_name,
            Key={"pk": {"S": cursor_key(self._case_id, self._downstream)}},
            UpdateExpression=(
                # Retention from the latest call: a case redriven weeks later must not see its
                # fault list start over.
                "ADD #cursor :one SET case_id = :case_id, downstream = :downstream, "
                "expires_at = :expires_at"
            ),
            # CURSOR is a DynamoDB reserved word.
            ExpressionAttributeNames={"#cursor": "cursor"},
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":case_id": {"S": self._case_id},
                ":downstream": {"S": self._downstream},
                ":expires_at": {"N": str(int(self._clock()) + CURSOR_RETENTION_SECONDS)},
            },
            ReturnValues="UPDATED_NEW",
        )
        return int(response["Attributes"]["cursor"]["N"])

    def _mark_unavailable(self) -> None:
        self._client.update_item(
            TableName=self._table_name,
            Key={"pk": {"S": cursor_key(self._case_id, self._downstream)}},
            UpdateExpression="SET unavailable = :true",
            ExpressionAttributeValues={":true": {"BOOL": True}},
        )


# --- the port adapters over the sandbox services (payment_provider.py, carrier.py) ---------------


class SandboxService(Protocol):
    """A sandbox downstream's server side: its fault cursors live in its control table."""

    @property
    def client(self) -> DynamoDBClient: ...
    @property
    def sandbox_table(self) -> str: ...
    @property
    def clock(self) -> Clock: ...


ServiceT = TypeVar("ServiceT", bound=SandboxService)


class SandboxAdapter(Generic[ServiceT]):
    """A port over one sandbox service, with the faults of one case."""

    DOWNSTREAM: ClassVar[str]  # the fault list it draws from
    NAME: ClassVar[str]  # what its errors call it

    def __init__(self, service: ServiceT, faults: FaultInjector) -> None:
        if faults.downstream != self.DOWNSTREAM:
            raise ValueError(f"the {self.NAME} draws from the {self.DOWNSTREAM!r} fault list")
        self._service = service
        self._faults = faults

    @classmethod
    def of_case(cls, service: ServiceT, *, case_id: str, faults: Sequence[str]) -> Self:
        """The adapter for one case, drawing its faults through the service's control table."""
        injector = FaultInjector(
            service.client,
            service.sandbox_table,
            case_id,
            cls.DOWNSTREAM,
            faults,
            clock=service.clock,
        )
        return cls(service, injector)
