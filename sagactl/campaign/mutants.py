"""Plausible bugs in the safety rules, each one (file, exact old text, new text).

`make mutate` applies them one at a time to a scratch copy of the tree and runs the fast suite
and a campaign slice against it: every mutant must be killed by one of them. A mutant whose old
text does not occur exactly once in its file is refused, loudly: code moved, and the list must
be refreshed (`python -m sagactl.campaign mutate --check` lists what no longer applies).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mutant:
    name: str
    rule: str  # the safety rule it breaks (docs/design.md)
    file: str  # relative to the repository root
    old: str
    new: str


class MutantDoesNotApply(ValueError):
    """The mutant's old text is not in its file exactly once."""


def apply(mutant: Mutant, root: Path) -> None:
    """Replace the old text with the new in `root`'s copy; refuse unless it occurs exactly once."""
    path = root / mutant.file
    if not path.is_file():
        raise MutantDoesNotApply(f"{mutant.name}: {mutant.file} does not exist")
    text = path.read_text(encoding="utf-8")
    found = text.count(mutant.old)
    if found != 1:
        raise MutantDoesNotApply(
            f"{mutant.name}: the old text occurs {found} times in {mutant.file} (must be once): "
            f"{mutant.old!r}"
        )
    path.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "claim-condition",
        "a claim only writes a record where none exists (§3.2)",
        "lambdas/saga/ledger/items.py",
        'CLAIM_CONDITION = "attribute_not_exists(action_key)"',
        'CLAIM_CONDITION = "attribute_not_exists(action_key) OR attribute_exists(action_key)"',
    ),
    Mutant(
        "digest-check",
        "the same key with another digest is a KeyConflict (§2)",
        "lambdas/saga/ledger/decisions.py",
        "    if record.request_digest != digest:\n        return Decision.CONFLICT",
        "    if False:\n        return Decision.CONFLICT",
    ),
    Mutant(
        "reconcile-before-dispatch",
        "a takeover of a record that may have dispatched looks the action up first (§3.5)",
        "lambdas/saga/ledger/external.py",
        "            if decision is Decision.RESUME_RELEASED:",
        "            if decision in _TAKEOVERS:",
    ),
    Mutant(
        "owner-conditional-outcome",
        "outcome writes require owner = this delivery (§3.3)",
        "lambdas/saga/ledger/store.py",
        '_OWNED = "#owner = :me AND #status = :in_progress"',
        '_OWNED = "#owner = :me OR #status = :in_progress"',
    ),
    Mutant(
        "budget",
        "attempts never exceed the lifetime budget (§3.2)",
        "lambdas/saga/ledger/decisions.py",
        "    if record.attempts + 1 > budget:",
        "    if record.attempts + 1 > budget + 100:",
    ),
    Mutant(
        "open-record-retention",
        "no open record carries a retention: TTL never deletes an unsettled action (§3.7)",
        "lambdas/saga/ledger/store.py",
        "        return self.policy.expires_at(now) if status in CLOSED_STATUSES else None",
        "        return self.policy.expires_at(now)",
    ),
    Mutant(
        "expiry-check",
        "an open record past its retention is taken over and looked up, never trusted (§3.2)",
        "lambdas/saga/ledger/decisions.py",
        "    if check_expiry and record.expires_at is not None and record.expires_at <= now:",
        "    if check_expiry and record.expires_at is not None and record.expires_at < 0:",
    ),
    Mutant(
        "first-dispatch-rule",
        "an abandoned or UNKNOWN delivery counts as a possible dispatch from its claim (§3.4)",
        "lambdas/saga/ledger/records.py",
        "        if self.abandoned(now) or (self.status is LedgerStatus.UNKNOWN and self.owner is not None):",  # noqa: E501
        "        if False:",
    ),
    Mutant(
        "reattempt-window",
        "'not found' allows a re-attempt only inside the provider's key retention (§3.6)",
        "lambdas/saga/ledger/decisions.py",
        "    if now + lease_seconds < closes:",
        "    if True:",
    ),
    Mutant(
        "escalated-is-final",
        "an action reconciliation escalated is never dispatched again (§3.8)",
        "lambdas/saga/ledger/decisions.py",
        "    if record.escalated_at is not None:\n        return Decision.ESCALATED",
        "    if False:\n        return Decision.ESCALATED",
    ),
    Mutant(
        "resolution-gate",
        "a resolution settles every action of the case, a record or none, atomically (§3.10)",
        "lambdas/saga/ledger/operations.py",
        "            if seen is None:\n                compensates =",
        "            if False:\n                compensates =",
    ),
    Mutant(
        "resolved-case-record",
        "no write of the automation lands on a resolved case record (§3.10)",
        "lambdas/saga/cases.py",
        '"(attribute_not_exists(execution_arn) OR execution_arn = :arn) AND "\n'
        '                "attribute_not_exists(resolution))"\n            ),\n'
        "            values={\n"
        '                ":outcome": outcome,',
        '"(attribute_not_exists(execution_arn) OR execution_arn = :arn))"\n            ),\n'
        "            values={\n"
        '                ":outcome": outcome,',
    ),
    Mutant(
        "displayed-amount",
        "an approver sees the amount in the currency's own decimals (§9)",
        "lambdas/saga/formats.py",
        "    exponent = currency_exponent(currency)\n    sign =",
        "    exponent = 2\n    sign =",
    ),
    Mutant(
        "release-held-condition",
        "the release transaction requires the reservation HELD (§5.1)",
        "lambdas/saga/inventory.py",
        '"ConditionExpression": "#status = :held",',
        '"ConditionExpression": "attribute_exists(reservation_id) OR #status = :held",',
    ),
    Mutant(
        "release-checks-held",
        "a reservation that is not HELD is not released (§5.1)",
        "lambdas/saga/inventory.py",
        "        if reservation.status != RESERVATION_HELD:",
        "        if reservation.status not in (RESERVATION_HELD, RESERVATION_RELEASED):",
    ),
    Mutant(
        "release-after-uncertain-ship",
        "stock is not released while the shipment may have happened (§5.1)",
        "lambdas/saga/tools/release.py",
        "    if ship is not None and ship.status in _SHIP_STATES_THAT_BLOCK_RELEASE:",
        "    if ship is not None and ship.status is LedgerStatus.COMPLETED:",
    ),
    Mutant(
        "carrier-lookup-reference",
        "after an uncertain delivery the carrier is asked by the business reference first (§1)",
        "lambdas/saga/tools/ship.py",
        "reconcile=lambda: reconcile_shipment(request.reference, carrier),",
        "reconcile=lambda: reconcile_shipment(request.key, carrier),",
    ),
    Mutant(
        "idempotency-key",
        "the action key is the provider's idempotency key, never a hash of the arguments (§2)",
        "lambdas/saga/tools/refund.py",
        "provider.refund(refund, idempotency_key=request.key)",
        "provider.refund(refund, idempotency_key=request.digest)",
    ),
    Mutant(
        "catch-lambda-crash",
        "a refund step that died goes to reconciliation, whatever Lambda names it (§4)",
        "statemachines/replacement_order.asl.json",
        '            "States.Timeout",\n            "@LambdaCrash"\n          ],\n'
        '          "Assign": {\n            "reconciling": "refund"',
        '            "States.Timeout"\n          ],\n'
        '          "Assign": {\n            "reconciling": "refund"',
    ),
    Mutant(
        "per-tool-approval",
        "each tool verifies the approval digest again (§8)",
        "lambdas/saga/handlers/issue_refund.py",
        "    verify_approval(case)\n",
        "    pass  # the approval is not verified here\n",
    ),
    Mutant(
        "per-tool-signature",
        "each forward tool verifies the approval's signature again (§9)",
        "lambdas/saga/handlers/issue_refund.py",
        "    accept_forward(runtime.approvals, case.signed_approval(), runtime.cases())\n",
        "    pass  # the signature is not verified here\n",
    ),
    Mutant(
        "validate-signature",
        "a case starts only with a signature by its approver's current key (§9)",
        "lambdas/saga/tools/validate.py",
        "        accept_new_case(approvals, case.signed_approval(), started=_now())\n",
        "        pass  # the signature is not verified at the start\n",
    ),
    Mutant(
        "stock-condition",
        "a reservation needs available >= quantity (§3.9)",
        "lambdas/saga/inventory.py",
        '"ConditionExpression": "available >= :q",',
        '"ConditionExpression": "available >= :q OR attribute_exists(sku)",',
    ),
    Mutant(
        "duplicate-execution",
        "a new execution of a case that has a record is a DUPLICATE (§5.4)",
        "lambdas/saga/tools/validate.py",
        "    if owner == execution:",
        "    if owner is not None:",
    ),
    Mutant(
        "case-digest",
        "one case id, one approved request: another digest is a KeyConflict (§5.4)",
        "lambdas/saga/cases.py",
        '        if old.get("digest") != digest:',
        "        if False:",
    ),
    Mutant(
        "agent-status-execution",
        "an agent's status comes only from the execution started with its draft's case (§10)",
        "lambdas/saga/agent/owned.py",
        '        if not _same_json(str(execution.get("input") or ""), started_input(draft)):',
        "        if False:",
    ),
    Mutant(
        "agent-status-record-tenant",
        "an agent's status comes only from a case record of its tenant (§10)",
        "lambdas/saga/agent/owned.py",
        '        if record.get("tenant_id") != self.tenant_id or record.get("digest") != draft',
        '        if record.get("digest") != draft',
    ),
    Mutant(
        "agent-status-owner",
        "an agent's status comes only from an owning execution of its tenant and digest (§10)",
        "lambdas/saga/agent/owned.py",
        '            and approval_digest(case) == draft["digest"]',
        "            or True",
    ),
    Mutant(
        "agent-draft-tenant",
        "an agent sees no draft of another tenant (§10)",
        "lambdas/saga/agent/tools.py",
        "        draft = None if theirs else self.drafts.get(case_id)\n"
        '        if draft is None or draft.get("tenant_id") != self.tenant_id:',
        "        draft = None if theirs else self.drafts.get(case_id)\n        if draft is None:",
    ),
    Mutant(
        "agent-draft-namespace",
        "an agent does not read another tenant's drafts (§10)",
        "lambdas/saga/agent/tools.py",
        "        theirs = owner is not None and owner != self.tenant_id",
        "        theirs = False",
    ),
    Mutant(
        "agent-legacy-lookup",
        "a proposal after the upgrade finds the request's draft from before it (§10)",
        "lambdas/saga/agent/tools.py",
        "        draft = self._legacy_draft(request.request_id)",
        "        draft = None",
    ),
    Mutant(
        "agent-one-draft-starts",
        "a request with drafts in both id forms starts only the older one (§10)",
        "lambdas/saga/agent/tools.py",
        "        if older is not None:",
        "        if False:",
    ),
    Mutant(
        "agent-case-id-tenant",
        "no other tenant's case runs under an agent case id (§10)",
        "lambdas/saga/models.py",
        "        if owner is not None and owner != tenant_id:",
        "        if False:",
    ),
    Mutant(
        "unused-expression-value",
        "a claim is a request DynamoDB accepts: no expression value its condition does not use "
        "(§7: moto alone accepts one on PutItem)",
        "lambdas/saga/ledger/items.py",
        '        return {"ConditionExpression": CLAIM_CONDITION}',
        '        return {"ConditionExpression": CLAIM_CONDITION, '
        '"ExpressionAttributeValues": {":new": {"S": "IN_PROGRESS"}}}',
    ),
    Mutant(
        "key-policy-any-principal",
        "only the approver's role signs with its key: the key policy confines the account (§9)",
        "stacks/constructs/approvals.py",
        '"ArnEquals": {"aws:PrincipalArn": role.role_arn},',
        '"ArnLike": {"aws:PrincipalArn": "*"},',
    ),
    Mutant(
        "key-policy-recreated-role",
        "a role re-created under the approver role's name cannot sign (§9)",
        "stacks/constructs/approvals.py",
        '"StringLike": {"aws:userid": f"{role.role_id}:*"},',
        '"StringLike": {"aws:userid": "*"},',
    ),
    Mutant(
        "drafts-any-tenant",
        "an approver or agent role reaches its own tenant's drafts only (§11)",
        "stacks/constructs/people.py",
        '    return {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [tenant]}}',
        "    return {}",
    ),
    Mutant(
        "environment-over-4kb",
        "a function's environment that could exceed 4 KB is refused at synth (§9)",
        "stacks/environment_budget.py",
        "LAMBDA_ENVIRONMENT_LIMIT = 4096",
        "LAMBDA_ENVIRONMENT_LIMIT = 65536",
    ),
)


def by_name(names: list[str]) -> list[Mutant]:
    if not names:
        return list(MUTANTS)
    known = {mutant.name: mutant for mutant in MUTANTS}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown mutants {unknown}; known: {sorted(known)}")
    return [known[name] for name in names]
