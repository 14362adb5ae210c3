"""The typed errors every tool raises.

The Lambda Python runtime reports an unhandled exception's class name as the error type, and the
state machine's `ErrorEquals` matches that name (docs/design.md §4). So the class names here are
part
of the external contract: renaming one is a breaking change to the ASL.
"""

from __future__ import annotations


class SagaError(Exception):
    """Base of every error a tool raises on purpose. What the workflow does with each is the
    ASL's Retry/Catch by class name (docs/design.md §4); a BusinessRejection is the permanent kind
    the ledger records, so that a replay raises it again."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def error_type(self) -> str:
        return type(self).__name__

    def to_record(self) -> dict[str, str]:
        """The shape stored in the ledger's `error` attribute."""
        return {"type": self.error_type, "message": self.message}


# --- safe to repeat -------------------------------------------------------------------------
class TransientError(SagaError):
    """Nothing was dispatched, or the downstream honours the key: repeating is safe."""


class ActionPending(SagaError):
    """Another live attempt owns the action; try again later within the shared deadline."""


# --- uncertain: go to reconciliation ----------------------------------------------------------
class OutcomeUnknown(SagaError):
    """The effect may or may not have happened: reconcile before doing anything else."""


class BudgetExhausted(SagaError):
    """The action's lifetime attempt budget (in the ledger) is spent: no further dispatch."""


class ReplayWindowExpired(SagaError):
    """The ledger record is past its retention window and no longer protects the action."""


# --- decided by a person: never dispatched again ----------------------------------------------
class ActionSettled(SagaError):
    """A person settled this action (a recorded decision on an open action, docs/design.md §5): the
    ledger never dispatches it again automatically. Neither retried nor caught: a task that
    meets it (a redrive or a late delivery after the decision) ends the execution FAILED there,
    with nothing dispatched and the case's outcome and resolution as they were; reconciliation
    answers ESCALATE instead."""


# --- not a failure: the workflow ends SUCCEEDED -------------------------------------------------
# The words the state machine reads the owner's ARN from (the DuplicateCase Catch's Output).
DUPLICATE_OF_EXECUTION = "a duplicate of execution "


class DuplicateExecution(SagaError):
    """A new execution of a case another execution owns (docs/design.md §4.1): ValidateCase
    raises it before anything is dispatched, and the workflow catches it to the DuplicateCase
    Succeed state, whose output names the owner: so the happy path pays no state for it. Never
    retried. The message carries the owner's ARN after DUPLICATE_OF_EXECUTION, ended by a
    space (an ARN has none)."""

    @classmethod
    def of(cls, case_id: str, owner_arn: str | None) -> DuplicateExecution:
        if owner_arn is None:
            return cls(
                f"case {case_id}: this execution is a duplicate of one that ran before cases "
                "named their execution; it did nothing"
            )
        return cls(
            f"case {case_id}: this execution is {DUPLICATE_OF_EXECUTION}{owner_arn} (the "
            "case's owner); it did nothing"
        )


class CaseRecordRefused(SagaError):
    """The last effect happened and its ledger record says COMPLETED, but the case record refused
    this execution's COMPLETED (docs/design.md §3.11): a person resolved the case, another
    execution owns it, or it ended otherwise meanwhile. Neither retried nor caught: the
    execution ends FAILED at the step, which the failed-execution rule reports (a person must
    learn of the effect); the case record keeps its outcome and resolution."""


# --- rejections: never retried, explicit Fail ------------------------------------------------
class InvalidRequest(SagaError):
    """The input is malformed; the message names the offending field."""


class AuthorizationDenied(SagaError):
    """The caller or approver is not allowed to act for this tenant."""


class KeyConflict(SagaError):
    """The same action key was used with different parameters (request digest differs)."""


class ApprovalMismatch(SagaError):
    """The approval digest does not match the parameters that are about to be executed."""


class ApprovalInvalid(SagaError):
    """The approval is not signed by the named approver's trusted key over exactly this case
    (unsigned, malformed, expired for starting, or the signature does not verify): nothing is
    done; the message says how to approve the case (`sagactl case approve FILE`)."""


# --- permanent business failures: recorded, then compensation / outcome ----------------------
class BusinessRejection(SagaError):
    """A downstream said no, for good. Recorded in the ledger and replayed as the same error."""


class OutOfStock(BusinessRejection):
    """Not enough stock to reserve."""


class RefundRejected(BusinessRejection):
    """The payment provider refused the refund."""


class RefundLimitReached(BusinessRejection):
    """The refund would take its tenant's refunds of the day past the daily ceiling
    (docs/design.md §3.12): nothing was refunded. Recorded FAILED like a provider's refusal, so
    every repeat (a retry, a redrive) is refused again and never refunds behind it."""


class ShipmentRejected(BusinessRejection):
    """The carrier refused the shipment."""


class ReservationNotHeld(BusinessRejection):
    """A release was asked for a reservation that is no longer held (shipped or gone)."""


_REGISTRY: dict[str, type[SagaError]] = {}


def _register(cls: type[SagaError]) -> None:
    _REGISTRY[cls.__name__] = cls
    for sub in cls.__subclasses__():
        _register(sub)


_register(SagaError)


def error_from_record(record: dict[str, str]) -> SagaError:
    """Rebuild a recorded error so a replay raises exactly the same type and message."""
    cls = _REGISTRY.get(record.get("type", ""), SagaError)
    return cls(record.get("message", ""))
