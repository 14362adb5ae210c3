"""Plausible bugs in the safety rules, each one (file, exact old text, new text).

`make mutate` applies them one at a time to a scratch copy of the tree and runs the fast suite
and a campaign slice against it: every mutant must be killed by one of them. A mutant whose old
text does not occur exactly once in its file is refused, loudly: code moved, and the list must
be refreshed (`python -m fault_campaign mutate --check` lists what no longer applies).
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
    # Why the campaign slice cannot meet this bug, for a rule outside what a case's execution
    # does (an agent's or an approver's tool, a configuration the campaign's stack lacks); None:
    # a behavioural mutant, which the slice alone should kill.
    outside_slice: str | None = None
    # The tests written for this rule: `make mutate` runs them before the rest of the suite, so
    # a mutant they kill costs seconds, not a suite run (they are part of the suite).
    tests: tuple[str, ...] = ()


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


_AGENT = "the agent tools (MCP): the campaign starts cases as approved inputs, never through them"
_POLICY = (
    "an IAM or KMS key policy: the local AWS does not enforce policies (docs/design.md §7), so no "
    "case's execution meets it (the tests evaluate recorded calls against them, §11)"
)
_SYNTH = "a limit checked when the stack is synthesized: no case's execution meets it"
_VIEW = "what sagactl prints for a person: no case's execution reads its text views"
_STRIPE = (
    "the Stripe adapter: the campaign's stack refunds through the sandbox provider, so no case's "
    "execution reaches it; its tests drive the real SDK against recorded Stripe answers (the "
    "campaign on a local Stripe-compatible server is issue 47's)"
)
_CEILING_TESTS = "tests/integration/test_refund_ceiling.py"
_LOCAL_STRIPE = (
    "the local Stripe server: the campaign's stack refunds through the sandbox provider, so no "
    "case's execution reaches it (the campaign on it is issue 47's); its tests drive the real "
    "adapter against it, and the Stripe e2e paths the state machine"
)
_LOCAL_STRIPE_TESTS = ("tests/integration/test_local_stripe.py",)

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "claim-condition",
        "a claim only writes a record where none exists (§3.2)",
        "lambdas/saga/ledger/items.py",
        'CLAIM_CONDITION = "attribute_not_exists(action_key)"',
        'CLAIM_CONDITION = "attribute_not_exists(action_key) OR attribute_exists(action_key)"',
        tests=("tests/integration/test_ledger_decision_table.py",),
    ),
    Mutant(
        "digest-check",
        "the same key with another digest is a KeyConflict (§2)",
        "lambdas/saga/ledger/decisions.py",
        "    if record.request_digest != digest:\n        return Decision.CONFLICT",
        "    if False:\n        return Decision.CONFLICT",
        tests=("tests/integration/test_ledger_decision_table.py",),
    ),
    Mutant(
        "reconcile-before-dispatch",
        "a takeover of a record that may have dispatched looks the action up first (§3.5)",
        "lambdas/saga/ledger/external.py",
        "            if decision is Decision.RESUME_RELEASED:",
        "            if decision in _TAKEOVERS:",
        tests=("tests/integration/test_ledger_uncertain_dispatch.py",),
    ),
    Mutant(
        "owner-conditional-outcome",
        "outcome writes require owner = this delivery (§3.3)",
        "lambdas/saga/ledger/items.py",
        'OWNED = "#owner = :me AND #status = :in_progress"',
        'OWNED = "#owner = :me OR #status = :in_progress"',
        tests=("tests/integration/test_safety_races.py",),
    ),
    Mutant(
        "budget",
        "attempts never exceed the lifetime budget (§3.2)",
        "lambdas/saga/ledger/decisions.py",
        "    if record.attempts + 1 > budget:",
        "    if record.attempts + 1 > budget + 100:",
        tests=("tests/integration/test_ledger_decision_table.py",),
    ),
    Mutant(
        "open-record-retention",
        "no open record carries a retention: TTL never deletes an unsettled action (§3.7)",
        "lambdas/saga/ledger/outcome_writes.py",
        "        return self.policy.expires_at(now) if status in CLOSED_STATUSES else None",
        "        return self.policy.expires_at(now)",
        tests=(
            "tests/integration/test_ledger_decision_table.py",
            "tests/integration/test_late_and_legacy_deliveries.py",
        ),
    ),
    Mutant(
        "expiry-check",
        "an open record past its retention is taken over and looked up, never trusted (§3.2)",
        "lambdas/saga/ledger/decisions.py",
        "    if check_expiry and record.expires_at is not None and record.expires_at <= now:",
        "    if check_expiry and record.expires_at is not None and record.expires_at < 0:",
        tests=("tests/integration/test_ledger_decision_table.py",),
    ),
    Mutant(
        "first-dispatch-rule",
        "an abandoned or UNKNOWN delivery counts as a possible dispatch from its claim (§3.4)",
        "lambdas/saga/ledger/records.py",
        "        if self.abandoned(now) or (self.status is LedgerStatus.UNKNOWN and self.owner is not None):",  # noqa: E501
        "        if False:",
        tests=("tests/integration/test_ledger_uncertain_dispatch.py",),
    ),
    Mutant(
        "reattempt-window",
        "'not found' allows a re-attempt only inside the provider's key retention (§3.6)",
        "lambdas/saga/ledger/decisions.py",
        "    if now + lease_seconds < closes:",
        "    if True:",
        tests=(
            "tests/integration/test_rule_boundaries.py",
            "tests/integration/test_ledger_uncertain_dispatch.py",
        ),
    ),
    Mutant(
        "escalated-is-final",
        "an action reconciliation escalated is never dispatched again (§3.8)",
        "lambdas/saga/ledger/decisions.py",
        "    if record.escalated_at is not None:\n        return Decision.ESCALATED",
        "    if False:\n        return Decision.ESCALATED",
        tests=("tests/integration/test_ledger_reconcile.py",),
    ),
    Mutant(
        "resolution-gate",
        "a resolution settles every action of the case, a record or none, atomically (§3.10)",
        "lambdas/saga/ledger/operations.py",
        "            if seen is None:\n                compensates =",
        "            if False:\n                compensates =",
        tests=(
            "tests/integration/test_ledger_settle.py",
            "tests/integration/test_case_resolution.py",
        ),
    ),
    Mutant(
        "settle-skew-allowance",
        "a person's clock settles no lease that may still be live on the Lambda's (§3.10)",
        "lambdas/saga/ledger/operations.py",
        "        if held and seen.lease_live(self.clock() - SETTLE_SKEW_SECONDS):",
        "        if held and seen.lease_live(self.clock()):",
        tests=("tests/integration/test_ledger_settle.py",),
    ),
    Mutant(
        "outcome-keeps-the-decision",
        "an outcome on a settled action keeps the decision: no retention, no sweep (§3.10)",
        "lambdas/saga/ledger/items.py",
        '"attribute_exists(resolution)" if settled else "attribute_not_exists(resolution)"',
        '"attribute_exists(resolution)" if settled else "attribute_exists(action_key)"',
        tests=("tests/integration/test_ledger_settle.py",),
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
        tests=("tests/integration/test_case_resolution.py",),
    ),
    Mutant(
        "displayed-amount",
        "an approver sees the amount in the currency's own decimals (§9)",
        "lambdas/saga/formats.py",
        "    exponent = currency_exponent(currency)\n    sign =",
        "    exponent = 2\n    sign =",
        outside_slice="what an approver is shown; no case's execution displays an amount",
        tests=("tests/unit/test_approval_view.py",),
    ),
    Mutant(
        "release-held-condition",
        "the release transaction requires the reservation HELD (§5.1)",
        "lambdas/saga/inventory.py",
        '"ConditionExpression": "#status = :held",',
        '"ConditionExpression": "attribute_exists(reservation_id) OR #status = :held",',
        tests=(
            "tests/integration/test_tools_release_reconcile_outcome.py",
            "tests/integration/test_sandbox_inventory.py",
        ),
    ),
    Mutant(
        "release-checks-held",
        "a reservation that is not HELD is not released (§5.1)",
        "lambdas/saga/inventory.py",
        "        if reservation.status != RESERVATION_HELD:",
        "        if reservation.status not in (RESERVATION_HELD, RESERVATION_RELEASED):",
        tests=(
            "tests/integration/test_tools_release_reconcile_outcome.py",
            "tests/integration/test_sandbox_inventory.py",
        ),
    ),
    Mutant(
        "release-after-uncertain-ship",
        "stock is not released while the shipment may have happened (§5.1)",
        "lambdas/saga/tools/release.py",
        "    if ship is not None and ship.status in _SHIP_STATES_THAT_BLOCK_RELEASE:",
        "    if ship is not None and ship.status is LedgerStatus.COMPLETED:",
        tests=("tests/integration/test_tools_release_reconcile_outcome.py",),
    ),
    Mutant(
        "carrier-lookup-reference",
        "after an uncertain delivery the carrier is asked by the business reference first (§1)",
        "lambdas/saga/tools/ship.py",
        "reconcile=lambda: reconcile_shipment(request.reference, carrier),",
        "reconcile=lambda: reconcile_shipment(request.key, carrier),",
        tests=("tests/integration/test_sandbox_carrier.py",),
    ),
    Mutant(
        "idempotency-key",
        "the action key is the provider's idempotency key, never a hash of the arguments (§2)",
        "lambdas/saga/tools/refund.py",
        "provider.refund(refund, idempotency_key=request.key)",
        "provider.refund(refund, idempotency_key=request.digest)",
        tests=("tests/unit/test_tools_downstreams.py",),
    ),
    Mutant(
        "catch-lambda-crash",
        "a refund step that died goes to reconciliation, whatever Lambda names it (§4)",
        "statemachines/replacement_order.asl.json",
        '            "States.Timeout",\n            "@LambdaCrash"\n          ],\n'
        '          "Assign": {\n            "reconciling": "refund"',
        '            "States.Timeout"\n          ],\n'
        '          "Assign": {\n            "reconciling": "refund"',
        tests=("tests/infra/test_definition_routing.py", "tests/e2e/test_no_second_effect.py"),
    ),
    Mutant(
        "per-tool-approval",
        "each tool verifies the approval digest again (§8)",
        "lambdas/saga/handlers/issue_refund.py",
        "    verify_approval(case)\n",
        "    pass  # the approval is not verified here\n",
        tests=("tests/integration/test_tools_handlers.py",),
    ),
    Mutant(
        "per-tool-signature",
        "each forward tool verifies the approval's signature again (§9)",
        "lambdas/saga/handlers/issue_refund.py",
        "    accept_forward(runtime.approvals, case.signed_approvals(), runtime.cases())\n",
        "    pass  # the signature is not verified here\n",
        tests=("tests/integration/test_tools_handlers.py",),
    ),
    Mutant(
        "validate-signature",
        "a case starts only with a signature by its approver's current key (§9)",
        "lambdas/saga/tools/validate.py",
        "            accepted = accept_new_case(approvals, case.signed_approvals(), "
        "started=_now())\n"
        "            required = accepted.required\n",
        "            pass  # the signatures are not verified at the start\n",
        tests=("tests/integration/test_tools_validate.py",),
    ),
    Mutant(
        "four-eyes-threshold",
        "a refund above its currency's threshold, in minor units, needs two approvers (§9)",
        "lambdas/saga/four_eyes.py",
        "    return FOUR_EYES if amount_minor > limit else ONE_APPROVER",
        "    from saga.formats import currency_exponent  # the threshold read in major units\n\n"
        "    major = 10 ** currency_exponent(currency)\n"
        "    return FOUR_EYES if amount_minor > limit * major else ONE_APPROVER",
        tests=("tests/unit/test_four_eyes.py", "tests/unit/test_agent_four_eyes.py"),
    ),
    Mutant(
        "four-eyes-distinct-keys",
        "approvals are counted by distinct approvers' keys: one approver twice counts once (§9)",
        "lambdas/saga/acceptance.py",
        "    if len(distinct) < required:",
        "    if len(approvals.signatures) < required:",
        tests=("tests/unit/test_four_eyes.py", "tests/unit/test_agent_four_eyes.py"),
    ),
    Mutant(
        "four-eyes-fail-closed",
        "a tenant with thresholds needs two approvers in a currency it names none for (§9)",
        "lambdas/saga/four_eyes.py",
        "    if limit is None:\n        return FOUR_EYES\n",
        "    if limit is None:\n        return ONE_APPROVER\n",
        tests=("tests/unit/test_four_eyes.py", "tests/unit/test_agent_four_eyes.py"),
    ),
    Mutant(
        "four-eyes-public-key",
        "signers are counted by public key: one key under two names is one approver (§9)",
        "lambdas/saga/acceptance.py",
        '("approver", approver), ("key", key.public_key)}',
        '("approver", approver), ("key", key.arn)}',
        tests=("tests/unit/test_four_eyes.py",),
    ),
    Mutant(
        "four-eyes-one-principal",
        "no principal may sign for two approvers of a four-eyes tenant (§9)",
        "stacks/four_eyes_config.py",
        "                    other = next((o for o in others if mine.overlaps(o)), None)",
        "                    other = next((o for o in others if mine.arn == o.arn), None)",
        outside_slice=_SYNTH,
        tests=("tests/infra/test_four_eyes_config.py",),
    ),
    Mutant(
        "four-eyes-account-trust",
        "four-eyes approver roles trust the whole account only in the sandbox (§9)",
        "stacks/four_eyes_config.py",
        "    if not account_wide_allowed:\n",
        "    if False:\n",
        outside_slice=_SYNTH,
        tests=("tests/infra/test_four_eyes_config.py",),
    ),
    Mutant(
        "four-eyes-key-id",
        "two approvers never share a key id, whatever its ARN's Region (§9)",
        "stacks/four_eyes_config.py",
        "key_owner.setdefault(key_uuid(key).lower(), (approver, key))",
        "key_owner.setdefault(key, (approver, key))",
        outside_slice=_SYNTH,
        tests=("tests/infra/test_four_eyes_config.py",),
    ),
    Mutant(
        "stock-condition",
        "a reservation needs available >= quantity (§3.9)",
        "lambdas/saga/inventory.py",
        '"ConditionExpression": "available >= :q",',
        '"ConditionExpression": "available >= :q OR attribute_exists(sku)",',
        tests=("tests/integration/test_tools_reserve.py",),
    ),
    Mutant(
        "duplicate-execution",
        "a new execution of a case that has a record is a DUPLICATE (§5.4)",
        "lambdas/saga/tools/validate.py",
        "    if owner == execution:",
        "    if owner is not None:",
        tests=("tests/integration/test_tools_validate.py",),
    ),
    Mutant(
        "case-digest",
        "one case id, one approved request: another digest is a KeyConflict (§5.4)",
        "lambdas/saga/cases.py",
        '        if old.get("digest") != digest:',
        "        if False:",
        tests=("tests/integration/test_tools_validate.py",),
    ),
    Mutant(
        "agent-status-execution",
        "an agent's status comes only from the execution started with its draft's case (§10)",
        "lambdas/saga/agent/owned.py",
        '        if not _same_json(str(execution.get("input") or ""), started_input(draft)):',
        "        if False:",
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_status.py", "tests/unit/test_agent_tenancy.py"),
    ),
    Mutant(
        "agent-status-record-tenant",
        "an agent's status comes only from a case record of its tenant (§10)",
        "lambdas/saga/agent/owned.py",
        '        if record.get("tenant_id") != self.tenant_id or record.get("digest") != draft',
        '        if record.get("digest") != draft',
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_status.py", "tests/unit/test_agent_tenancy.py"),
    ),
    Mutant(
        "agent-status-owner",
        "an agent's status comes only from an owning execution of its tenant and digest (§10)",
        "lambdas/saga/agent/owned.py",
        '            and approval_digest(case) == draft["digest"]',
        "            or True",
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_status.py", "tests/unit/test_agent_tenancy.py"),
    ),
    Mutant(
        "agent-draft-tenant",
        "an agent sees no draft of another tenant (§10)",
        "lambdas/saga/agent/tools.py",
        "        draft = None if theirs else self.drafts.get(case_id)\n"
        '        if draft is None or draft.get("tenant_id") != self.tenant_id:',
        "        draft = None if theirs else self.drafts.get(case_id)\n        if draft is None:",
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_tenancy.py", "tests/unit/test_agent_tools.py"),
    ),
    Mutant(
        "agent-draft-namespace",
        "an agent does not read another tenant's drafts (§10)",
        "lambdas/saga/agent/tools.py",
        "        theirs = owner is not None and owner != self.tenant_id",
        "        theirs = False",
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_tenancy.py", "tests/unit/test_agent_tools.py"),
    ),
    Mutant(
        "agent-legacy-lookup",
        "a proposal after the upgrade finds the request's draft from before it (§10)",
        "lambdas/saga/agent/tools.py",
        "        draft = self._legacy_draft(request.request_id)",
        "        draft = None",
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_tenancy.py", "tests/unit/test_agent_tools.py"),
    ),
    Mutant(
        "agent-one-draft-starts",
        "a request with drafts in both id forms starts only the older one (§10)",
        "lambdas/saga/agent/tools.py",
        "        if older is not None:",
        "        if False:",
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_tenancy.py", "tests/unit/test_agent_tools.py"),
    ),
    Mutant(
        "agent-case-id-tenant",
        "no other tenant's case runs under an agent case id (§10)",
        "lambdas/saga/models.py",
        "        if owner is not None and owner != tenant_id:",
        "        if False:",
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_tenancy.py", "tests/unit/test_models.py"),
    ),
    Mutant(
        "tenant-id-pattern-at-synth",
        "a configured tenant id is one the case model accepts: no `_`, so an agent role's "
        "agt_<tenant>_* grants are its tenant's alone (§10, §11)",
        "stacks/config.py",
        "re.fullmatch(TENANT_ID_PATTERN, tenant) is None",
        'not tenant or "#" in tenant',
        outside_slice=_SYNTH,
        tests=("tests/infra/test_tenant_ids.py",),
    ),
    # --- the planted bugs of issue 24: each passed the slice before its oracle was made strict --
    Mutant(
        "release-blocked-by-rejected-shipment",
        "a release is blocked only while the shipment may have happened (§5.1)",
        "lambdas/saga/tools/release.py",
        "    {LedgerStatus.COMPLETED, LedgerStatus.IN_PROGRESS, LedgerStatus.UNKNOWN}",
        "    {LedgerStatus.COMPLETED, LedgerStatus.IN_PROGRESS, LedgerStatus.UNKNOWN, "
        "LedgerStatus.FAILED}",
        tests=("tests/integration/test_tools_release_reconcile_outcome.py",),
    ),
    Mutant(
        "reconcile-escalates-found",
        "reconciliation that finds the effect records it and resumes (§3.8)",
        "lambdas/saga/ledger/reconcile.py",
        "                outcome = ActionOutcome.of(written, replayed=False, reconciled=True)\n"
        '                return self._resume("found at the downstream", outcome)',
        '                return self._escalate("found at the downstream", written.attempts)',
        tests=("tests/integration/test_ledger_reconcile.py",),
    ),
    Mutant(
        "escalation-message-compensated",
        "the escalation message names what was compensated (§5)",
        "lambdas/saga/tools/outcome.py",
        '        "compensated": [c["action_key"] for c in payload.compensations if '
        "isinstance(c, Mapping)],",
        '        "compensated": [],',
        tests=("tests/integration/test_tools_release_reconcile_outcome.py",),
    ),
    Mutant(
        "compensation-pending-mark",
        "the release marks the case COMPENSATION_PENDING before anything else (§5, item 3)",
        "lambdas/saga/tools/release.py",
        "    cases.mark_compensation_pending(case, approval_digest(case), execution_arn)\n",
        "    approval_digest(case)  # the case record is not marked\n",
        tests=("tests/integration/test_tools_release_reconcile_outcome.py",),
    ),
    Mutant(
        "conflict-as-out-of-stock",
        "a transaction conflict is transient, never a business refusal (§3.9)",
        "lambdas/saga/ledger/transaction.py",
        '            if reason.get("Code") == "ConditionalCheckFailed"\n',
        '            if reason.get("Code") in ("ConditionalCheckFailed", "TransactionConflict")\n',
        tests=("tests/unit/test_ledger_decide.py", "tests/integration/test_ledger_transaction.py"),
    ),
    # --- rules that had no mutant ------------------------------------------------------------
    Mutant(
        "forward-needs-case-under-way",
        "a forward tool acts only for a case record under way, whatever the signature (§9)",
        "lambdas/saga/acceptance.py",
        '        and record.get("outcome") == CaseOutcome.IN_PROGRESS.value\n',
        "",
        tests=("tests/integration/test_tools_handlers.py",),
    ),
    Mutant(
        "start-by-deadline",
        "a case starts only before its approval's start_by deadline (§9)",
        "lambdas/saga/approvals.py",
        "            if now.astimezone(UTC) > deadline:",
        "            if False:",
        tests=("tests/unit/test_approvals.py",),
    ),
    Mutant(
        "retired-key-new-case",
        "a retired key is refused for a new case (§9)",
        "lambdas/saga/acceptance.py",
        "    keys = verified_keys(verifier, approvals, accept_retired=False, now=started)",
        "    keys = verified_keys(verifier, approvals, accept_retired=True, now=started)",
        outside_slice="the campaign's stack trusts no retired key (cdk.json has none to rotate)",
        tests=("tests/unit/test_approvals.py", "tests/unit/test_four_eyes.py"),
    ),
    Mutant(
        "key-of-own-approver",
        "a key verifies only for its own approver (§9)",
        "lambdas/saga/approvals.py",
        "        if self._is(keys.current, named, strict=True):\n            return keys.current\n",
        "        for tenant_keys in self.trusted.values():\n"
        "            for any_keys in tenant_keys.values():\n"
        "                if self._is(any_keys.current, named, strict=True):\n"
        "                    return any_keys.current\n",
        tests=("tests/unit/test_approvals.py",),
    ),
    Mutant(
        "draft-approval-digest",
        "a draft's approval is stored only for the digest the approver saw (§10)",
        "lambdas/saga/agent/drafts.py",
        '"digest = :digest AND revision = :revision AND attribute_not_exists(approval)"',
        '"revision = :revision AND attribute_not_exists(approval) AND :digest = :digest"',
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_tools.py",),
    ),
    Mutant(
        "closed-case-releases-nothing",
        "a late release of a closed case releases nothing (§5.1)",
        "lambdas/saga/cases.py",
        '            if old.get("outcome") in (CaseOutcome.COMPLETED.value, '
        "CaseOutcome.ESCALATED.value):\n",
        "            if False:\n",
        tests=("tests/integration/test_direct_invoke_replays.py",),
    ),
    Mutant(
        "transaction-token-digest",
        "the transaction token is a digest of the whole body (§3.9)",
        "lambdas/saga/dynamodb.py",
        "    return hashlib.sha256(canonical_json(transact_items).encode()).hexdigest()[:36]",
        # the token names the action (the ledger item's key), not the request's body
        '    return hashlib.sha256(canonical_json(transact_items[0].get("Put", {})'
        '.get("Item", {}).get("action_key")).encode()).hexdigest()[:36]',
        tests=(
            "tests/unit/test_client_request_token.py",
            "tests/integration/test_ship_records_the_outcome.py",
            "tests/integration/test_ledger_transaction.py",
            "tests/e2e/test_transaction_tokens.py",
        ),
    ),
    Mutant(
        "old-execution-fresh-claim",
        "a fresh claim in an execution older than the retention counts as a possible dispatch "
        "(§3.2)",
        "lambdas/saga/ledger/decisions.py",
        "    if now - execution_started_at < retention_seconds - RETENTION_MARGIN_SECONDS:\n"
        "        return None\n",
        "    return None\n",
        tests=(
            "tests/integration/test_ledger_decision_table.py",
            "tests/integration/test_rule_boundaries.py",
        ),
    ),
    Mutant(
        "resolution-one-transaction",
        "a resolution and the settlement of the case's actions commit in one transaction (§3.10)",
        "lambdas/saga/cases.py",
        '        items = [cast("TransactWriteItem", case_update), *settle]',
        '        items = [cast("TransactWriteItem", case_update)]',
        tests=(
            "tests/integration/test_case_resolution.py",
            "tests/integration/test_ledger_settle.py",
        ),
    ),
    Mutant(
        "settle-live-lease",
        "a resolution does not settle an action a live attempt holds (§3.10)",
        "lambdas/saga/ledger/operations.py",
        "        if held and seen.lease_live(self.clock() - SETTLE_SKEW_SECONDS):\n",
        "        if False:\n",
        tests=("tests/integration/test_ledger_settle.py",),
    ),
    Mutant(
        "lease-sizing",
        "a lease outlives the attempt that holds it (§3.2)",
        "lambdas/saga/ledger/records.py",
        "        return max(float(self.min_lease_seconds), remaining_seconds + "
        "self.lease_margin_seconds)",
        "        return float(self.min_lease_seconds)",
        tests=("tests/integration/test_ledger_decision_table.py",),
    ),
    Mutant(
        "compensation-retry-list",
        "the compensation is retried after an uncertain delivery (§5, item 3)",
        "cdk.json",
        '"TransientError", "OutcomeUnknown", "States.Timeout", "@LambdaCrash",',
        '"TransientError", "States.Timeout", "@LambdaCrash",',
        tests=("tests/infra/test_definition_routing.py", "tests/infra/test_template.py"),
    ),
    Mutant(
        "sweeper-index-upkeep",
        "an open record is in the open-actions index the sweeper reads (§3.7, §5)",
        "lambdas/saga/ledger/items.py",
        '    if status in OPEN_STATUSES:\n        item["open_status"]',
        '    if False:\n        item["open_status"]',
        tests=("tests/integration/test_sweeper.py",),
    ),
    Mutant(
        "failed-execution-rule",
        "a refused rerun of a resolved case queues no message and pages nobody (§3.10)",
        "stacks/constructs/escalation.py",
        '    {"error": events.Match.anything_but(RESOLVED_CASE_ERROR)},',
        '    {"error": events.Match.anything_but("")},',
        tests=("tests/infra/test_template.py",),
    ),
    Mutant(
        "failed-execution-statuses",
        "every execution that ends FAILED, TIMED_OUT or ABORTED tells a person (§4)",
        "stacks/constructs/escalation.py",
        'NOT_SUCCEEDED_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")',
        'NOT_SUCCEEDED_STATUSES = ("TIMED_OUT", "ABORTED")',
        tests=("tests/infra/test_template.py", "tests/e2e/test_local_rules.py"),
    ),
    Mutant(
        "escalation-message-effects",
        "the escalation message names the confirmed effects (§5)",
        "lambdas/saga/tools/outcome.py",
        "            for step in payload.steps.values()\n",
        "            for step in list(payload.steps.values())[:1]\n",
        tests=("tests/integration/test_tools_release_reconcile_outcome.py",),
    ),
    # --- the boundaries of issue 24, item 5 ------------------------------------------------
    Mutant(
        "reattempt-window-edge",
        "a re-attempt must land strictly inside the provider's key retention (§3.6)",
        "lambdas/saga/ledger/decisions.py",
        "    if now + lease_seconds < closes:",
        "    if now + lease_seconds <= closes:",
        tests=("tests/integration/test_rule_boundaries.py",),
    ),
    Mutant(
        "reattempt-window-lease",
        "the re-attempt's lease counts against the provider's key retention (§3.6)",
        "lambdas/saga/ledger/decisions.py",
        "    if now + lease_seconds < closes:",
        "    if now < closes:",
        tests=("tests/integration/test_rule_boundaries.py",),
    ),
    Mutant(
        "retention-margin",
        "no record proves nothing was sent only while no earlier record can have expired (§3.2)",
        "lambdas/saga/ledger/decisions.py",
        "RETENTION_MARGIN_SECONDS = 3600\n",
        "RETENTION_MARGIN_SECONDS = 0\n",
        tests=("tests/integration/test_rule_boundaries.py",),
    ),
    Mutant(
        "replacement-completed-closed",
        "get_replacement reports COMPLETED only for a case recorded COMPLETED (§10)",
        "lambdas/saga/agent/status.py",
        '    if status == "SUCCEEDED" and outcome == "COMPLETED":',
        '    if status == "SUCCEEDED" and outcome != "ESCALATED":',
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_status.py",),
    ),
    Mutant(
        "replacement-completed-recorded",
        "get_replacement reports COMPLETED only for a case recorded COMPLETED (§10)",
        "lambdas/saga/agent/status.py",
        '    if outcome == "COMPLETED":\n        return {"status": "COMPLETED"',
        '    if outcome != "ESCALATED":\n        return {"status": "COMPLETED"',
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_status.py",),
    ),
    Mutant(
        "case-completed-with-shipment",
        "every success path of the shipment leaves the case record COMPLETED (§3.11)",
        "lambdas/saga/tools/ship.py",
        "        companion=completed,\n",
        "        companion=None,\n",
        tests=("tests/integration/test_ship_records_the_outcome.py",),
    ),
    Mutant(
        "shipment-recorded-before-refusal",
        "a case record that refuses never costs the shipment its ledger record (§3.11)",
        "lambdas/saga/ledger/core.py",
        "        except NotCommitted as cancelled:\n            written = self.finish(",
        "        except NotCommitted as cancelled:\n"
        "            if cancelled.item is not None:\n"
        "                raise companion.refused(cancelled.item) from cancelled\n"
        "            written = self.finish(",
        tests=("tests/integration/test_ship_records_the_outcome.py",),
    ),
    Mutant(
        "completion-on-resolved-case",
        "the shipment's COMPLETED never lands on a resolved case record (§3.10, §3.11)",
        "lambdas/saga/cases.py",
        '"outcome IN (:in_progress, :completed) AND attribute_not_exists(resolution)"',
        '"outcome IN (:in_progress, :completed)"',
        tests=("tests/integration/test_ship_records_the_outcome.py",),
    ),
    Mutant(
        "replay-only-ship-step",
        "only the step that completed the case answers a replay once it is COMPLETED (§3.11)",
        "lambdas/saga/acceptance.py",
        "    if (\n        completes_case\n        and _records_this_case(record, approvals)",
        "    if (\n        True\n        and _records_this_case(record, approvals)",
        tests=(
            "tests/integration/test_direct_invoke_replays.py",
            "tests/integration/test_ship_records_the_outcome.py",
        ),
    ),
    Mutant(
        "escalate-before-the-record",
        "the escalation message follows the case record's ESCALATED, whose write a person's "
        "decision refuses: a redrive after the decision queues nothing (§3.10)",
        "lambdas/saga/tools/outcome.py",
        "    case = payload.case\n    cases.record_outcome(\n",
        '    case = payload.case\n    if payload.outcome == "ESCALATED":\n'
        "        escalations.send(escalation_message(payload, execution_arn))\n"
        "    cases.record_outcome(\n",
        tests=("tests/integration/test_tools_release_reconcile_outcome.py",),
    ),
    Mutant(
        "unused-expression-value",
        "a claim is a request DynamoDB accepts: no expression value its condition does not use "
        "(§7: moto alone accepts one on PutItem)",
        "lambdas/saga/ledger/items.py",
        '        return {"ConditionExpression": CLAIM_CONDITION}',
        '        return {"ConditionExpression": CLAIM_CONDITION, '
        '"ExpressionAttributeValues": {":new": {"S": "IN_PROGRESS"}}}',
        tests=("tests/unit/test_tools_downstreams.py",),
    ),
    Mutant(
        "key-policy-any-principal",
        "only the approver's role signs with its key: the key policy confines the account (§9)",
        "stacks/constructs/approvals.py",
        '"ArnEquals": {"aws:PrincipalArn": role.role_arn},',
        '"ArnLike": {"aws:PrincipalArn": "*"},',
        outside_slice=_POLICY,
        tests=("tests/infra/test_approval_keys.py", "tests/e2e/test_people_allowed.py"),
    ),
    Mutant(
        "key-policy-recreated-role",
        "a role re-created under the approver role's name cannot sign (§9)",
        "stacks/constructs/approvals.py",
        '"StringLike": {"aws:userid": f"{role.role_id}:*"},',
        '"StringLike": {"aws:userid": "*"},',
        outside_slice=_POLICY,
        tests=("tests/infra/test_approval_keys.py", "tests/e2e/test_people_allowed.py"),
    ),
    Mutant(
        "drafts-any-tenant",
        "an approver or agent role reaches its own tenant's drafts only (§11)",
        "stacks/constructs/people.py",
        '    return {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [tenant]}}',
        "    return {}",
        outside_slice=_POLICY,
        tests=("tests/infra/test_people_roles.py",),
    ),
    Mutant(
        "agent-reads-any-case",
        "an agent role reads its own tenant's agent cases only (§11)",
        "stacks/constructs/people.py",
        '    return {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": patterns}}',
        "    return {}",
        outside_slice=_POLICY,
        tests=("tests/infra/test_people_roles.py",),
    ),
    Mutant(
        "approver-rewrites-draft",
        "an approver role's UpdateItem on a draft only stores an approval (§11)",
        "stacks/constructs/people.py",
        '"ForAllValues:StringEquals": {"dynamodb:Attributes": [*key, *APPROVAL_ATTRIBUTES]},',
        '"ForAllValues:StringLike": {"dynamodb:Attributes": ["*"]},',
        outside_slice=_POLICY,
        tests=("tests/infra/test_people_roles.py",),
    ),
    Mutant(
        "environment-over-4kb",
        "a function's environment that could exceed 4 KB is refused at synth (§9)",
        "stacks/environment_budget.py",
        "LAMBDA_ENVIRONMENT_LIMIT = 4096",
        "LAMBDA_ENVIRONMENT_LIMIT = 65536",
        outside_slice=_SYNTH,
        tests=("tests/infra/test_environment_budget.py",),
    ),
    Mutant(
        "stripe-key-header",
        "a refund at Stripe carries the action key as its Idempotency-Key (§3.6)",
        "lambdas/saga/providers/stripe_provider.py",
        'params=params, options={"idempotency_key": idempotency_key}',
        "params=params, options={}",
        outside_slice=_STRIPE,
        tests=("tests/unit/test_stripe_provider.py",),
    ),
    Mutant(
        "stripe-lost-response",
        "a Stripe answer lost after the request may have left is an uncertain outcome (§3.4)",
        "lambdas/saga/providers/stripe_provider.py",
        '        return DownstreamTimeout(f"no answer: {detail}", downstream=DOWNSTREAM)',
        '        return DownstreamNotDispatched(f"no answer: {detail}", downstream=DOWNSTREAM)',
        outside_slice=_STRIPE,
        tests=("tests/unit/test_stripe_provider.py",),
    ),
    Mutant(
        "stripe-currency-check",
        "a refund is refused before it is sent when the payment is in another currency (§3.4)",
        "lambdas/saga/providers/stripe_provider.py",
        "        if currency != request.currency:",
        "        if False:",
        outside_slice=_STRIPE,
        tests=("tests/unit/test_stripe_provider.py",),
    ),
    Mutant(
        "stripe-amount-rounded",
        "an amount Stripe cannot represent exactly is refused, never rounded (§8)",
        "lambdas/saga/providers/stripe_currencies.py",
        "        if remainder:\n            raise UnrepresentableAmount(\n"
        '                f"{amount_minor}',
        "        if False:\n            raise UnrepresentableAmount(\n"
        '                f"{amount_minor}',
        outside_slice=_STRIPE,
        tests=("tests/unit/test_stripe_currencies.py",),
    ),
    Mutant(
        "stripe-first-page-only",
        "a lookup at Stripe reads every page of the payment's refunds (§3.5)",
        "lambdas/saga/providers/stripe_provider.py",
        "            if not page.has_more:\n                return",
        "            return",
        outside_slice=_STRIPE,
        tests=("tests/unit/test_stripe_provider.py",),
    ),
    # --- the boundaries of issue 41: rules a planted bug slipped through ------------------------
    Mutant(
        "replacement-compensation-pending-rejected",
        "get_replacement leaves a stopped case with unfinished work to a person, for both open "
        "case-record states, never 'rejected before any effect' (§10)",
        "lambdas/saga/agent/status.py",
        '    unfinished = outcome in ("IN_PROGRESS", "COMPENSATION_PENDING")',
        '    unfinished = outcome == "IN_PROGRESS"',
        outside_slice=_AGENT,
        tests=("tests/unit/test_agent_status.py",),
    ),
    Mutant(
        "transaction-first-item-only",
        "the offline IAM check authorizes every item of a TransactWriteItems, each on its own "
        "table with its own condition keys (§11)",
        "offline_iam/requests.py",
        '        for item in params["TransactItems"]:',
        '        for item in params["TransactItems"][:1]:',
        outside_slice=_POLICY,
        tests=("tests/unit/test_iam_requests.py",),
    ),
    Mutant(
        "reconcile-wiring-key-window",
        "a refund 'not found' outside the provider's key window is never re-attempted, through "
        "the reconcile tool's real wiring (§3.6)",
        "lambdas/saga/tools/wiring.py",
        "                lambda: reconcile_refund(reference, provider),\n"
        "                reattempt_window_seconds=provider.idempotency_window_seconds,\n",
        "                lambda: reconcile_refund(reference, provider),\n",
        tests=("tests/integration/test_rule_boundaries.py",),
    ),
    Mutant(
        "takeover-keeps-old-retention",
        "a takeover of a record an earlier release wrote with expires_at removes it: no open "
        "record carries a retention (§3.7)",
        "lambdas/saga/ledger/store.py",
        '            sets += ", charged_day = :charged_day, charged_minor = :charged_minor"\n'
        "        sets += _OPEN_KEEPS_NO_RETENTION\n",
        '            sets += ", charged_day = :charged_day, charged_minor = :charged_minor"\n',
        tests=("tests/integration/test_late_and_legacy_deliveries.py",),
    ),
    Mutant(
        "decision-fail-state-error",
        "an execution that meets a person's decision ends with the error the failed-execution "
        "rule excludes: no message, no page (§3.10)",
        "statemachines/replacement_order.asl.json",
        '      "Error": "ActionSettled",\n',
        '      "Error": "CaseResolved",\n',
        tests=(
            "tests/infra/test_definition_routing.py",
            "tests/e2e/test_escalate_after_decision.py",
        ),
    ),
    Mutant(
        "stuck-metric-counts-sent",
        "the StuckActions metric counts every stuck action on every sweep, those whose re-send "
        "is not due included (§5)",
        "lambdas/saga/handlers/sweep_stuck_actions.py",
        'metrics.add_metric(name="StuckActions", unit=MetricUnit.Count, value=len(report.stuck))',
        'metrics.add_metric(name="StuckActions", unit=MetricUnit.Count, value=report.escalated)',
        outside_slice=(
            "a CloudWatch metric (the sweeper's embedded-metric log line): the campaign judges "
            "each sweep by its answer and the queue, and the local AWS collects no metrics"
        ),
        tests=("tests/integration/test_sweeper.py",),
    ),
    Mutant(
        "three-decimal-currency-list",
        "every three-decimal ISO 4217 currency is shown to an approver with three decimals (§9)",
        "lambdas/saga/formats.py",
        '_codes("BHD IQD JOD KWD LYD OMR TND")',
        '_codes("BHD IQD JOD KWD LYD OMR")',
        outside_slice="what an approver is shown; no case's execution displays an amount",
        tests=("tests/unit/test_approval_view.py",),
    ),
    # The daily refund ceiling (§3.12).
    Mutant(
        "ceiling-charge-on-takeover",
        "only a refund's first claim charges the day's counter: never a takeover (§3.12)",
        "lambdas/saga/ledger/external.py",
        "        return self.charge if record.unclaimed else None",
        "        return self.charge",
        tests=(_CEILING_TESTS,),
    ),
    Mutant(
        "ceiling-give-back-other-day",
        "a refused refund gives its amount back to the day it charged (§3.12)",
        "lambdas/saga/ledger/outcome_writes.py",
        "        day, amount = held.charged_day, held.charged_minor",
        '        day, amount = __import__("saga.ceilings").ceilings.utc_day(self.clock()), '
        "held.charged_minor",
        tests=(_CEILING_TESTS,),
    ),
    Mutant(
        "ceiling-headroom-is-ceiling",
        "the counter admits a refund only while the day's total is at most ceiling - amount "
        "(§3.12)",
        "lambdas/saga/ledger/charges.py",
        '            ":headroom": {"N": str(charge.headroom)},',
        '            ":headroom": {"N": str(charge.ceiling_minor)},',
        tests=(_CEILING_TESTS,),
    ),
    Mutant(
        "ceiling-give-back-outside-the-write",
        "the give-back is in the transaction that records the rejection (§3.12)",
        "lambdas/saga/ledger/outcome_writes.py",
        "            self.transact_through_conflicts("
        "[failed, give_back_update(charge, day, amount)])",
        '            self.client.update_item(**give_back_update(charge, day, amount)["Update"])\n'
        "            self.transact_through_conflicts([failed])",
        tests=(_CEILING_TESTS,),
    ),
    Mutant(
        "ceiling-limit-retried-as-transient",
        "a refund the ceiling refuses is recorded FAILED and replayed, never retried (§3.12)",
        "lambdas/saga/ledger/store.py",
        "            raise ChargeRefused(charge, "
        'counter_total(reasons[1].get("Item")), day) from exc',
        '            raise TransientError(f"the daily refund counter refused {key}; '
        'retry") from exc',
        tests=(_CEILING_TESTS,),
    ),
    Mutant(
        "ceiling-validate-check-removed",
        "ValidateCase refuses a refund above its tenant's daily ceiling, before the reservation "
        "(§3.12)",
        "lambdas/saga/tools/validate.py",
        "        check_within_ceiling("
        "ceilings, case.tenant_id, refund.currency, refund.amount_minor)",
        "        pass",
        tests=("tests/integration/test_tools_validate.py",),
    ),
    # --- issue 40: an agent learns nothing of other tenants; untrusted text drives no terminal --
    Mutant(
        "agent-legacy-ids-widened",
        "an agent reads only the old agent ids' exact shape, agt- and 32 characters (§11)",
        "lambdas/saga/identity.py",
        '        LEGACY_AGENT_CASE_PREFIX + "?" * LEGACY_AGENT_CODE_LENGTH,',
        '        LEGACY_AGENT_CASE_PREFIX + "*",',
        outside_slice=_POLICY,
        tests=("tests/infra/test_people_roles.py",),
    ),
    Mutant(
        "agent-id-without-draft",
        "a new case runs under an agent's case id only as its tenant's draft (§10)",
        "lambdas/saga/tools/validate.py",
        "    require_agents_draft(case, drafts, cases)\n",
        "",
        outside_slice="the campaign's cases have ordinary case ids, never an agent's",
        tests=("tests/integration/test_tools_validate.py",),
    ),
    Mutant(
        "agent-reads-the-outputs",
        "an agent role reads its tenant's configuration, not the stack's outputs (§11)",
        "stacks/constructs/people.py",
        "            reads_stack=False,  # the outputs name every tenant's approvers",
        "            reads_stack=True,",
        outside_slice=_POLICY,
        tests=("tests/infra/test_people_roles.py",),
    ),
    Mutant(
        "terminal-escape-case-view",
        "the case view (status, watch) shows untrusted text written out (sagactl.views.untrusted)",
        "sagactl/commands/render.py",
        "    return visible_lines(lines)",
        '    return "\\n".join(lines)',
        outside_slice=_VIEW,
        tests=("tests/cli/test_untrusted_text.py",),
    ),
    Mutant(
        "terminal-escape-escalations",
        "the escalation worklist shows untrusted text written out (sagactl.views.untrusted)",
        "sagactl/commands/escalations.py",
        "        print(visible_lines(show_lines(view, now=target.now())))",
        '        print("\\n".join(show_lines(view, now=target.now())))',
        outside_slice=_VIEW,
        tests=("tests/cli/test_untrusted_text.py",),
    ),
    Mutant(
        "terminal-escape-timeline",
        "watch's timeline shows untrusted text written out (sagactl.views.untrusted)",
        "sagactl/commands/render.py",
        '    return visible(f"  {_clock(entry.timestamp):<12}  {entry.text}")',
        '    return f"  {_clock(entry.timestamp):<12}  {entry.text}"',
        outside_slice=_VIEW,
        tests=("tests/cli/test_untrusted_text.py",),
    ),
    Mutant(
        "terminal-escape-stuck",
        "the stuck actions' list shows untrusted text written out (sagactl.views.untrusted)",
        "sagactl/commands/ledger.py",
        '            visible(\n                f"  {action.status:<11}',
        '            str(\n                f"  {action.status:<11}',
        outside_slice=_VIEW,
        tests=("tests/cli/test_untrusted_text.py",),
    ),
    Mutant(
        "terminal-escape-errors",
        "an error quoting a case or AWS is shown written out (sagactl.views.untrusted)",
        "sagactl/errors.py",
        '    print(f"sagactl: {visible_lines([message, *more_lines])}", file=sys.stderr)',
        '    print(f"sagactl: {chr(10).join([message, *more_lines])}", file=sys.stderr)',
        outside_slice=_VIEW,
        tests=("tests/cli/test_untrusted_text.py",),
    ),
    Mutant(
        "terminal-escape-c1",
        "U+009B (CSI in one character) and the other C1 controls are written out",
        "sagactl/views/untrusted.py",
        '_DRIVES_A_TERMINAL = re.compile("[\\x00-\\x1f\\x7f-\\x9f',
        '_DRIVES_A_TERMINAL = re.compile("[\\x00-\\x1f\\x7f',
        outside_slice=_VIEW,
        tests=("tests/cli/test_untrusted_text.py",),
    ),
    Mutant(
        "local-stripe-key-replay-params",
        "the local Stripe refuses a key reused with other parameters, as Stripe does (§7)",
        "local_aws/stripe/account.py",
        "            if held.endpoint != endpoint or held.params != dict(params):",
        "            if False:",
        outside_slice=_LOCAL_STRIPE,
        tests=_LOCAL_STRIPE_TESTS,
    ),
    Mutant(
        "local-stripe-key-in-use",
        "the local Stripe answers 409 to a key whose first request still executes (§7)",
        "local_aws/stripe/account.py",
        "            if held.answer is None:\n                return KeyVerdict(key_in_use(key))",
        "            if held.answer is None:\n                return KeyVerdict(None)",
        outside_slice=_LOCAL_STRIPE,
        tests=_LOCAL_STRIPE_TESTS,
    ),
    Mutant(
        "local-stripe-key-retention",
        "the local Stripe keeps an idempotency key 24 hours, no longer (§3.6, §7)",
        "local_aws/stripe/account.py",
        "self.clock() >= held.created + KEY_RETENTION_SECONDS",
        "self.clock() > held.created + KEY_RETENTION_SECONDS",
        outside_slice=_LOCAL_STRIPE,
        tests=_LOCAL_STRIPE_TESTS,
    ),
    Mutant(
        "local-stripe-request-unvalidated",
        "the local Stripe refuses a request Stripe's API description refuses (§7)",
        "local_aws/stripe/openapi.py",
        "        for error in _errors(self._validator(schema), value):",
        "        for error in []:",
        outside_slice=_LOCAL_STRIPE,
        tests=(*_LOCAL_STRIPE_TESTS, "tests/unit/test_stripe_openapi.py"),
    ),
    Mutant(
        "local-stripe-answer-unvalidated",
        "the local Stripe never sends an answer Stripe's API description refuses (§7)",
        "local_aws/stripe/server.py",
        "                operation.check_response(outcome.status, outcome.body)",
        "                pass",
        outside_slice=_LOCAL_STRIPE,
        tests=_LOCAL_STRIPE_TESTS,
    ),
    Mutant(
        "local-stripe-fault-cursor",
        "a case's refund faults are drawn one per call, in order (§8)",
        "local_aws/stripe/faults.py",
        "            self._calls[case_id] = index + 1",
        "            self._calls[case_id] = index",
        outside_slice=_LOCAL_STRIPE,
        tests=_LOCAL_STRIPE_TESTS,
    ),
    Mutant(
        "stripe-refund-faults-unacted",
        "refund faults are refused where refunds go to Stripe's own API: nobody acts them out (§8)",
        "lambdas/saga/providers/stripe_rules.py",
        "    if faults.get(REFUND_DOWNSTREAM) and not local_server:",
        "    if False:",
        outside_slice=_STRIPE,
        tests=("tests/integration/test_stripe_validate.py",),
    ),
    Mutant(
        "sandbox-stripe-only-faults",
        "the sandbox refuses the faults only the local Stripe server acts out (§8)",
        "lambdas/saga/fault_plan.py",
        "    if asked:",
        "    if False:",
        outside_slice=(
            "a case the campaign never generates: its cases carry the six sandbox faults only"
        ),
        tests=("tests/integration/test_stripe_validate.py",),
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
