"""What the sandbox's port adapters (payment_provider.py, carrier.py) share: a sandbox service
on one side, and on the other the faults of the one case the adapter serves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Generic, Protocol, Self, TypeVar

from saga.clock import Clock
from saga.sandbox.faults import FaultInjector

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


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
