"""`approval_thresholds` in cdk.json, checked at synth (docs/design.md §9, four eyes).

`approval_thresholds` is `{tenant: {CURRENCY: minor units}}`: a refund above its currency's
threshold needs two distinct approvers of the tenant (saga.four_eyes). Synth refuses what would
make the rule meaningless or unsatisfiable: a threshold that is not a positive integer, a
currency that is not a circulating ISO 4217 code, a tenant that is not configured or has fewer
than two approvers. And for every tenant, thresholds or not, two approvers who share a key (by
key id: a multi-Region key and its replica are two ARNs of one key material) or a signing
principal: a key (or a principal who may sign with two keys) shared by two approvers would let
one person count as two.

Four eyes means two people, so for a tenant with thresholds synth also refuses any principal
who could sign for two of its approvers: one named in two approvers' `role_assumed_by`, or as
one's `principal` and in another's `role_assumed_by` (principals compared by account, kind and
name, case-insensitively; an account's `root` stands for the whole account). And it refuses the
created approver role's default trust (no `role_assumed_by`: any principal of the account
allowed sts:AssumeRole, an administrator, may assume every such role and sign as each) unless
`sandbox` is on and the payments provider is the sandbox's, where the stack warns instead
(stacks/constructs/approvals.py). Who may sign with a brought key (`key_arn`) is that key's own
policy, which synth cannot read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from saga.approval_keys import key_uuid
from saga.four_eyes import FOUR_EYES
from stacks.config_sections import ApproverKeyConfig, PrincipalName
from stacks.context import minor_units_by_tenant, refused

thresholds_value = minor_units_by_tenant("approval_thresholds")


def check_thresholds_name_four_eyes_tenants(
    thresholds: Mapping[str, Mapping[str, int]], tenants: Mapping[str, tuple[str, ...]]
) -> None:
    """Each tenant with thresholds is configured and has at least two approvers."""
    for tenant in thresholds:
        approvers = tenants.get(tenant)
        if approvers is None:
            raise refused(
                f"context 'approval_thresholds.{tenant}' names no tenant of 'tenants' "
                f"({sorted(tenants)})"
            )
        if len(set(approvers)) < FOUR_EYES:
            raise refused(
                f"context 'approval_thresholds.{tenant}': four eyes needs at least {FOUR_EYES} "
                f"approvers of the tenant, 'tenants.{tenant}' has {len(set(approvers))}: add "
                "an approver or remove the thresholds"
            )


def check_no_shared_signers(
    tenants: Mapping[str, tuple[str, ...]], keys_of: Callable[[str, str], ApproverKeyConfig]
) -> None:
    """No two approvers of one tenant share a key (a brought `key_arn` or retired key, compared
    by key id) or a signing principal (`principal`); `keys_of(tenant, approver)` is how each
    signs. Keys the stack creates, and the approver roles that sign with them, are each one
    approver's."""
    for tenant, approvers in tenants.items():
        key_owner: dict[str, tuple[str, str]] = {}  # key id -> (approver, ARN)
        principal_owner: dict[tuple[str, str, str], str] = {}
        for approver in approvers:
            spec = keys_of(tenant, approver)
            for key in (spec.key_arn, *spec.retired_key_arns):
                if key is None:
                    continue
                other, other_key = key_owner.setdefault(key_uuid(key).lower(), (approver, key))
                if other != approver:
                    raise refused(_shared(tenant, other, approver, _key_text(other_key, key)))
            if spec.principal is not None:
                name = PrincipalName.of(spec.principal)
                other = principal_owner.setdefault((name.account, name.kind, name.name), approver)
                if other != approver:
                    raise refused(
                        _shared(tenant, other, approver, f"the signing principal {spec.principal}")
                    )


def _key_text(first: str, second: str) -> str:
    if first == second:
        return f"the key {first}"
    return (
        f"the key id {key_uuid(first)} ({first} and {second}: one key under two names (a "
        "multi-Region key and its replica) is one key material)"
    )


def _shared(tenant: str, first: str, second: str, what: str) -> str:
    return (
        f"context 'approval_keys': {first!r} and {second!r} of tenant {tenant!r} share {what}: "
        "approvals are counted by key, so one person could count as two approvers; give each "
        "approver their own key and principal"
    )


# --- who may sign for an approver ----------------------------------------------------------------
def who_signs(spec: ApproverKeyConfig) -> tuple[PrincipalName, ...] | None:
    """The principals who may sign as an approver: its `principal`, or whom `role_assumed_by`
    lets assume its created role. None: the created role's default trust, any principal of the
    account allowed sts:AssumeRole. A brought key: () (its own key policy decides)."""
    if spec.key_arn is not None:
        return ()
    if spec.principal is not None:
        return (PrincipalName.of(spec.principal),)
    if not spec.role_assumed_by:
        return None
    return tuple(PrincipalName.of(arn) for arn in spec.role_assumed_by)


def account_wide_four_eyes_approvers(
    thresholds: Mapping[str, Mapping[str, int]],
    tenants: Mapping[str, tuple[str, ...]],
    keys_of: Callable[[str, str], ApproverKeyConfig],
) -> list[tuple[str, str]]:
    """(tenant, approver) of each approver of a tenant with thresholds whose created role any
    principal of the account may assume (the default trust), sorted."""
    return sorted(
        (tenant, approver)
        for tenant in thresholds
        for approver in set(tenants.get(tenant, ()))
        if who_signs(keys_of(tenant, approver)) is None
    )


def check_one_person_one_signature(
    thresholds: Mapping[str, Mapping[str, int]],
    tenants: Mapping[str, tuple[str, ...]],
    keys_of: Callable[[str, str], ApproverKeyConfig],
    *,
    account_wide_allowed: bool,
) -> None:
    """For each tenant with thresholds: no principal may sign for two of its approvers, and no
    approver role trusts the whole account unless `account_wide_allowed` (the sandbox with the
    sandbox payments provider, where the stack warns)."""
    if not account_wide_allowed:
        for tenant, approver in account_wide_four_eyes_approvers(thresholds, tenants, keys_of):
            raise refused(_account_wide(tenant, approver))
    for tenant in thresholds:
        signers = {
            approver: who_signs(keys_of(tenant, approver))
            for approver in sorted(set(tenants.get(tenant, ())))
        }
        named = [(a, principals) for a, principals in signers.items() if principals]
        for i, (first, theirs) in enumerate(named):
            for second, others in named[i + 1 :]:
                for mine in theirs:
                    other = next((o for o in others if mine.overlaps(o)), None)
                    if other is not None:
                        raise refused(_one_person(tenant, first, second, mine, other))


def _account_wide(tenant: str, approver: str) -> str:
    return (
        f"context 'approval_keys.\"{tenant}/{approver}\"' names nobody in 'role_assumed_by': "
        f"tenant {tenant!r} has four-eyes thresholds, and any principal of the account allowed "
        "sts:AssumeRole could assume this approver's role and another's, and count as two "
        f"approvers. Name the approver's own principal: 'approval_keys.\"{tenant}/{approver}\""
        ".role_assumed_by' = [\"arn:aws:iam::<account>:user/<them>\"] (one person's user or "
        "role; or 'principal'); the account-wide default is accepted only with 'sandbox' on and "
        "the sandbox payments provider (docs/deploy.md)"
    )


def _one_person(
    tenant: str, first: str, second: str, mine: PrincipalName, other: PrincipalName
) -> str:
    same = mine.arn if mine.arn == other.arn else f"{mine.arn} (as {other.arn})"
    return (
        f"context 'approval_keys': {first!r} and {second!r} of tenant {tenant!r} (four eyes "
        f"above 'approval_thresholds.{tenant}') may both be signed for by {same}: one person "
        "would count as two approvers; name disjoint principals in 'role_assumed_by' and "
        "'principal', each one person's own (an account's root stands for all of it)"
    )
