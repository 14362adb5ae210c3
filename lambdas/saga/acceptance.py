"""What each tool accepts (docs/design.md §9): the signatures a case carries, verified with the
trusted keys (saga.approvals), counted against what four eyes asks for (saga.four_eyes), and the
case record where a tool needs one.

One code path for every tool, and for the agent's start before StartExecution:

- ValidateCase (and `start_replacement`): every signature by its approver's current key, the
  start deadlines (the earliest binds), and as many distinct approvers as the tenant's
  thresholds ask for now; ValidateCase keeps that count on the case record.
- ReserveStock, IssueRefund, CreateShipment: every signature again (current or retired keys),
  the case record of this case still IN_PROGRESS, and the count that record holds: a direct
  invoke with a forged case, or with a genuine one the saga did not accept or has finished, is
  refused before the ledger is touched, and a threshold changed meanwhile changes nothing.
- ReleaseReservation, ReconcileAction, RecordOutcome: the same, or else the case record: a case
  ValidateCase accepted (exactly this digest for this tenant) can always finish.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from saga.approval_keys import ApprovalKeyUnavailable
from saga.approvals import (
    COSIGN_HINT,
    ApprovalVerifier,
    CaseApprovals,
    SignedApproval,
    VerifiedKey,
)
from saga.errors import ActionSettled, ApprovalInvalid, AuthorizationDenied
from saga.four_eyes import progress_text, recorded_approvals_required


class CaseRecordReader(Protocol):
    def get(self, case_id: str) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True)
class Accepted:
    """What a tool accepted a case on: the trusted key of each distinct approver whose signature
    verified (in the order they signed), or the case record (`on_record`, no signature counted),
    and how many distinct approvers the case needs (`required`, saga.four_eyes)."""

    keys: tuple[str, ...]
    required: int
    on_record: bool = False
    # accept_forward's answer to a delivery of the step that completed the case, found
    # COMPLETED (its answer lost, a redrive): it may answer the recorded outcome, never dispatch.
    replay_only: bool = False


def accept_new_case(
    verifier: ApprovalVerifier, approvals: CaseApprovals, *, started: datetime
) -> Accepted:
    """ValidateCase (and the agent's start, before StartExecution): every signature by its
    approver's current key, the start deadlines against the execution's start time (a retry or
    a redrive of the same execution keeps it, so neither is refused because the approval aged
    meanwhile), and as many distinct approvers as the tenant's thresholds ask for now."""
    required = verifier.required(approvals)
    keys = verified_keys(verifier, approvals, accept_retired=False, now=started)
    return Accepted(require_approvers(approvals, keys, required), required)


def accept_forward(
    verifier: ApprovalVerifier,
    approvals: CaseApprovals,
    records: CaseRecordReader,
    *,
    completes_case: bool = False,
) -> Accepted:
    """ReserveStock, IssueRefund, CreateShipment: every signature by current or retired keys;
    no deadline; a case record of exactly this case still under way; and as many distinct
    approvers as that record says ValidateCase required. A signature is public and outlives
    the case: without the record, a direct invoke could carry out an approval ValidateCase never
    accepted (its start deadline passed) or replay a finished case once its ledger records
    expired (a second refund). The resolution is read first: a resolved case is settled
    whoever approved it, even an approver the configuration has since dropped (a refusal of
    the signatures would route to Escalate and ask about the case again).

    `completes_case`: the step whose completion writes the case record's COMPLETED
    (CreateShipment, docs/design.md §3.11). A delivery of it that finds the record COMPLETED
    gets `replay_only`: it may answer the recorded outcome, never dispatch."""
    from saga.cases import CaseOutcome, resolved_text  # saga.cases imports this module

    record = records.get(approvals.case_id)
    resolution = record.get("resolution") if record is not None else None
    if _records_this_case(record, approvals) and isinstance(resolution, Mapping):
        # A person's decision is final (§3.10). This read is a courtesy: what makes it hold
        # against a delivery that read the record just before the decision is the ledger,
        # where the resolution settled every action of the case in the same transaction.
        raise ActionSettled(resolved_text(approvals.case_id, resolution))
    keys = verified_keys(verifier, approvals, accept_retired=True)
    if (
        completes_case
        and _records_this_case(record, approvals)
        and record is not None
        and record.get("outcome") == CaseOutcome.COMPLETED.value
    ):
        required = recorded_approvals_required(record)
        return Accepted(require_approvers(approvals, keys, required), required, replay_only=True)
    if not (
        _records_this_case(record, approvals)
        and record is not None
        and record.get("outcome") == CaseOutcome.IN_PROGRESS.value
    ):
        state = "no case record" if record is None else f"case record {record.get('outcome')}"
        raise AuthorizationDenied(
            f"case {approvals.case_id}: not a case under way ({state}): a forward step runs "
            "only in the execution ValidateCase accepted it for, until the case ends"
        )
    required = recorded_approvals_required(record)
    return Accepted(require_approvers(approvals, keys, required), required)


def accept_finishing(
    verifier: ApprovalVerifier, approvals: CaseApprovals, records: CaseRecordReader
) -> Accepted:
    """ReleaseReservation, ReconcileAction, RecordOutcome: every signature verified (current or
    retired keys) by as many distinct approvers as the thresholds ask for, or else a case record
    showing that ValidateCase accepted exactly this digest for this tenant (with whatever count
    it required then; cases under way when signing was introduced, or whose key was since
    removed): a case already under way must still be able to finish."""
    try:
        keys = verified_keys(verifier, approvals, accept_retired=True)
        required = verifier.required(approvals)
        return Accepted(require_approvers(approvals, keys, required), required)
    except (ApprovalInvalid, AuthorizationDenied, ApprovalKeyUnavailable) as refusal:
        record = records.get(approvals.case_id)
        if _records_this_case(record, approvals):
            return Accepted((), recorded_approvals_required(record), on_record=True)
        raise refusal


# (approver, the trusted key their signature verified with), one per signature.
Signer = tuple[str, VerifiedKey]


def verified_keys(
    verifier: ApprovalVerifier,
    approvals: CaseApprovals,
    *,
    accept_retired: bool,
    now: datetime | None = None,
) -> list[Signer]:
    """Each signature's approver and the trusted key it verified with, for every signature the
    case carries (each must verify: one forged co-signature refuses the case, needed or not).
    With `now`, every signature's start deadline is checked: the earliest binds."""
    return [
        (signature.approved_by, verifier.verify(signature, accept_retired=accept_retired, now=now))
        for signature in approvals.signatures
    ]


def distinct_signers(signers: Sequence[Signer]) -> tuple[str, ...]:
    """The key ARN of each distinct person among the signers, in the order they first signed.
    Signatures are one person's when they share an approver (one approver's key generations
    count once) or a public key (one key under two names: a multi-Region key and its replica,
    or key material imported twice, which no configuration check can see), transitively."""
    people: list[tuple[set[tuple[str, object]], str]] = []  # (approvers and keys, first ARN)
    for approver, key in signers:
        marks: set[tuple[str, object]] = {("approver", approver), ("key", key.public_key)}
        joined = [person for person in people if person[0] & marks]
        if not joined:
            people.append((marks, key.arn))
            continue
        first, *others = joined
        for other in others:
            first[0].update(other[0])
            people.remove(other)
        first[0].update(marks)
    return tuple(arn for _, arn in people)


def require_approvers(
    approvals: CaseApprovals, signers: Sequence[Signer], required: int
) -> tuple[str, ...]:
    """The key of each distinct person who signed (`distinct_signers`), if they are at least
    `required`; else ApprovalInvalid saying how many are missing. People are counted by their
    public keys, not by names: the configuration refuses a key id or signing principal shared
    by two approvers, and a key material shared under two key ids still counts once."""
    distinct = distinct_signers(signers)
    if len(distinct) < required:
        names = dict.fromkeys(approver for approver, _ in signers)
        raise ApprovalInvalid(
            f"case {approvals.case_id}: {progress_text(len(distinct), required)} from distinct "
            f"approvers of tenant {approvals.tenant_id} (signed by "
            f"{', '.join(names) or 'nobody'}): the refund needs {required}; {COSIGN_HINT}"
        )
    return distinct


def _records_this_case(
    record: Mapping[str, Any] | None, approval: SignedApproval | CaseApprovals
) -> bool:
    """The case record shows that ValidateCase accepted exactly this digest for this tenant."""
    return (
        record is not None
        and record.get("digest") == approval.digest
        and record.get("tenant_id") == approval.tenant_id
    )
