"""Every person's flow is allowed by the role its job uses, and each role allows nothing more.

Each sagactl flow (docs/design.md §11: which role runs which command) runs in-process against
the local AWS inside `acting_as(<role>)`, so every AWS call it makes is recorded as that role's
(local_aws.aws_calls). Each call becomes the authorization requests AWS makes for it
(offline_iam.requests: actions, resource ARNs, condition keys such as dynamodb:LeadingKeys and
kms:SigningAlgorithm) and is evaluated against the synthesized template's policies of that role
(identity policies, the approval keys' key policies, conditions) by offline_iam.evaluate, IAM's
documented evaluation logic. A call AWS would deny fails the test; so does a (role, action,
resource) that the role's policies allow but no flow used.

The local mode reads the stack's outputs from `.local/outputs.json`; on AWS sagactl reads them
with CloudFormation DescribeStacks. Each role's flows therefore also run that discovery
(`sagactl.target.aws_target`): the local AWS has no CloudFormation stack and answers "does not
exist", but the request is recorded before it is sent, and it is what AWS authorizes. An agent
role reads no outputs: `sagactl mcp --stack` reads its tenant's agent configuration parameter
by the name the stack gives it, and that discovery runs too (the local AWS holds the
parameter). The agent roles' old grants, which handed every tenant's approvers to each agent
(the outputs, ValidateCase's environment), are shown gone, and another tenant's parameter
denied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from local_aws.approval_keys import co_sign_locally, sign_locally
from local_aws.aws_calls import acting_as, recording_aws_calls
from local_aws.environment import LocalAws
from offline_iam.coverage import evaluate_calls, unused_grants
from offline_iam.evaluate import Grants, Request, evaluate, statements
from offline_iam.stack_policies import (
    RolePolicies,
    StackPolicies,
    provisioned_account,
    stack_policies,
)
from saga.approval_keys import forget_public_keys
from sagactl.commands.mcp import call_tool
from sagactl.config import cdk_config
from sagactl.errors import SagactlError
from sagactl.operations.agent_tools import agent_config, agent_tools
from sagactl.target import aws_target, local_target
from tests import legacy_drafts
from tests.cli.sagactl_helpers import Sagactl, example, saga, sagactl
from tests.infra.synth import Synthesized
from tests.unit.test_agent_tools import PROPOSAL

__all__ = ["saga", "sagactl"]

# cdk.json's tenants and their approvers; hooli's refunds above its thresholds need two (§9).
TENANT_APPROVERS = cdk_config().tenants
FOUR_EYES = cdk_config().approval_thresholds
ABOVE_THRESHOLDS = 250_000  # minor units: above every threshold of cdk.json
# The drafts table's partition key that dynamodb:LeadingKeys confines to a tenant.
TENANT_FIRST_KEY = "tenant_id"


@dataclass(frozen=True)
class Flow:
    role: str  # "operator", "approver <tenant>/<approver>", "agent <tenant>"
    title: str
    run: Callable[[Sagactl, LocalAws, Path], None]


def ok(result: Any, *codes: int) -> None:
    """The command ran to its end: exit 0, or one of `codes` (how an execution it watched
    ended)."""
    assert result.code in (0, *codes), (result.code, result.out[-2000:], result.err[-2000:])


def start_cases(s: Sagactl, local: LocalAws, tmp: Path) -> None:
    ok(s("inventory", "seed", "--sku", "SKU-RED-MUG=100"))  # before any case holds stock
    ok(s("start", str(example("happy-path")), "--watch"))
    ok(s("start", str(example("compensation-stuck")), "--watch"), 6)  # ends FAILED
    ok(s("start", str(example("carrier-unavailable")), "--watch"), 5)  # ESCALATED


def inspect(s: Sagactl, local: LocalAws, tmp: Path) -> None:
    for argv in (
        ("status", "case-happy-path"),
        ("watch", "case-happy-path"),
        ("ledger", "--case", "case-happy-path"),
        ("stuck",),
        ("keep-open-actions", "--dry-run"),
        ("keep-open-actions",),
        ("inventory", "show"),
        ("case", "check", str(example("happy-path")), "--deployed"),
    ):
        ok(s(*argv))
    # The other tenants' cases: the operator checks every tenant's approvals (every approver's,
    # where four eyes asks for two).
    for tenant, approvers in TENANT_APPROVERS.items():
        if tenant == "acme":
            continue
        case = json.loads(example("happy-path").read_text(encoding="utf-8"))
        case |= {"case_id": f"case-{tenant}-checked", "tenant_id": tenant}
        case["refund"]["amount_minor"] = _amount(tenant)
        case["approval"]["approved_by"] = approvers[0]
        signed = sign_locally(case)
        for approver in approvers[1:]:
            signed = co_sign_locally(signed, approved_by=approver)
        path = tmp / f"{tenant}-checked.json"
        path.write_text(json.dumps(signed), encoding="utf-8")
        ok(s("case", "check", str(path), "--deployed"))


def limits(s: Sagactl, local: LocalAws, tmp: Path) -> None:
    """`limits`: cdk.json sets no ceiling, so this stack's outputs name none and the command
    reads nothing; the outputs a stack with `refund_ceilings` has (RefundCeilings naming acme)
    make it read the day's counter, the one table call it makes (docs/design.md §3.12)."""
    ok(s("limits"))
    outputs = json.loads(Path(_outputs_path()).read_text(encoding="utf-8"))
    outputs["RefundCeilings"] = json.dumps({"acme": {"USD": 10_000}})
    path = tmp / "outputs-with-a-ceiling.json"
    path.write_text(json.dumps(outputs), encoding="utf-8")
    ok(s("limits", "--outputs", str(path), "--tenant", "acme", "--json"))


def escalations(s: Sagactl, local: LocalAws, tmp: Path) -> None:
    ok(s("escalations"))
    ok(s("escalations", "show", "case-carrier-unavailable"))
    ok(s("escalations", "resolve", "case-carrier-unavailable", "--decision", "refunded"))


def redrive_and_sweep(s: Sagactl, local: LocalAws, tmp: Path) -> None:
    ok(s("redrive", "case-compensation-stuck", "--yes"), 6)  # it fails again: the fault stays
    ok(s("sweep"))


def approve_file(tenant: str, approver: str, s: Sagactl, local: LocalAws, tmp: Path) -> None:
    """The tenant's first approver signs a case file; with four eyes, the second adds theirs."""
    path = tmp / f"{tenant}.json"
    if not path.exists():
        case = json.loads(example("happy-path").read_text(encoding="utf-8"))
        case |= {"case_id": f"case-signed-{tenant}", "tenant_id": tenant}
        case["refund"]["amount_minor"] = _amount(tenant)
        case["approval"] = {"revision": 1, "approved_by": approver}
        path.write_text(json.dumps(case), encoding="utf-8")
    ok(s("case", "approve", str(path), "--as", approver))


def _amount(tenant: str) -> int:
    """A refund the tenant's every approver signs: above its threshold where it has one."""
    return ABOVE_THRESHOLDS if tenant in FOUR_EYES else int(PROPOSAL["amount_minor"])


def propose(tenant: str, s: Sagactl, local: LocalAws, tmp: Path) -> None:
    tools = agent_tools(local_target(Path(_outputs_path())), tenant)
    request = {**PROPOSAL, "request_id": f"people-{tenant}", "amount_minor": _amount(tenant)}
    result = call_tool(tools, "propose_replacement", request)
    assert not result.get("isError"), result
    (tmp / f"draft-{tenant}").write_text(result["structuredContent"]["case_id"])


def approve_draft(tenant: str, approver: str, s: Sagactl, local: LocalAws, tmp: Path) -> None:
    draft = (tmp / f"draft-{tenant}").read_text()
    ok(s("case", "approve", "--case", draft, "--yes", "--as", approver))


def start_draft(tenant: str, s: Sagactl, local: LocalAws, tmp: Path) -> None:
    tools = agent_tools(local_target(Path(_outputs_path())), tenant)
    for name in (f"draft-{tenant}", f"old-draft-{tenant}"):
        case_id = (tmp / name).read_text()
        started = call_tool(tools, "start_replacement", {"case_id": case_id})
        assert not started.get("isError"), started
        local.wait_for_execution(started["structuredContent"]["execution_arn"])
        done = call_tool(tools, "get_replacement", {"case_id": case_id})
        assert done["structuredContent"]["status"] == "COMPLETED", done


def old_draft(local: LocalAws, tmp: Path, tenant: str) -> None:
    """A draft as the agent tools wrote it before ids carried the tenant (set-up: not a flow's
    call), in the table they wrote it to."""
    request = {**PROPOSAL, "request_id": f"people-old-{tenant}", "amount_minor": _amount(tenant)}
    client, table = local.client("dynamodb"), local.outputs["LegacyDraftsTableName"]
    (tmp / f"old-draft-{tenant}").write_text(legacy_drafts.propose(client, table, tenant, request))


def approve_old_draft(tenant: str, approver: str, s: Sagactl, local: LocalAws, tmp: Path) -> None:
    draft = (tmp / f"old-draft-{tenant}").read_text()
    ok(s("case", "approve", "--case", draft, "--yes", "--as", approver))


def flows() -> list[Flow]:
    """Every person's flow, in an order where each finds what it needs (a draft to approve)."""
    people = [
        Flow("operator", "seed the inventory, start and watch cases", start_cases),
        Flow(
            "operator", "status, watch, ledger, stuck, keep-open-actions, inventory, check", inspect
        ),
        Flow("operator", "the daily refund ceilings: used and left", limits),
        Flow("operator", "escalations: list, show, resolve", escalations),
        Flow("operator", "redrive, sweep", redrive_and_sweep),
    ]
    for tenant, approvers in TENANT_APPROVERS.items():
        agent_role = f"agent {tenant}"
        # Each approver in turn: with four eyes the second adds their signature to the first's.
        signers = [(f"approver {tenant}/{approver}", tenant, approver) for approver in approvers]
        people += [
            Flow(r, "approve a case file", partial(approve_file, t, a)) for r, t, a in signers
        ]
        people.append(Flow(agent_role, "propose a replacement", partial(propose, tenant)))
        people += [
            Flow(r, "approve the proposed case", partial(approve_draft, t, a))
            for r, t, a in signers
        ]
        people += [
            Flow(r, "approve a draft from before", partial(approve_old_draft, t, a))
            for r, t, a in signers
        ]
        people.append(Flow(agent_role, "start and follow both", partial(start_draft, tenant)))
    return people


def _outputs_path() -> str:
    import os

    return os.environ["SAGA_LOCAL_OUTPUTS"]


# --- the roles, the account, the evaluation ------------------------------------------------------
def people_roles(outputs: dict[str, str], policies: StackPolicies) -> dict[str, str]:
    """Role key ("operator", "approver acme/supervisor@acme", "agent acme") -> logical id,
    from the stack's outputs (ApproverRoles, OperatorRole, AgentRoles)."""
    by_arn = {role.arn: lid for lid, role in policies.roles.items()}
    keys = {"operator": outputs["OperatorRole"]}
    for tenant, approvers in json.loads(outputs["ApproverRoles"]).items():
        keys |= {f"approver {tenant}/{a}": arn for a, arn in approvers.items()}
    keys |= {f"agent {t}": arn for t, arn in json.loads(outputs["AgentRoles"]).items()}
    return {key: by_arn[arn] for key, arn in keys.items()}


def requires_mfa(role: RolePolicies) -> bool:
    return "aws:MultiFactorAuthPresent" in json.dumps(role.trust)


def test_every_person_flow_is_allowed_and_every_grant_is_used(
    saga: LocalAws, sagactl: Sagactl, tmp_path: Path, synthesized: Synthesized
) -> None:
    assert saga.provisioned is not None and saga.provisioned.resolver is not None
    policies = stack_policies(synthesized.template_json, saga.provisioned.resolver)
    roles = people_roles(saga.outputs, policies)
    account = provisioned_account(synthesized.template_json, saga.provisioned)
    people = flows()
    assert {flow.role for flow in people} == set(roles), (
        "a role without a flow, or a flow without a role"
    )
    for tenant in TENANT_APPROVERS:
        old_draft(saga, tmp_path, tenant)
    with recording_aws_calls() as calls:
        for flow in people:
            forget_public_keys()  # each command is its own process: its caches start empty
            with acting_as(flow.role):
                try:
                    flow.run(sagactl, saga, tmp_path)
                except AssertionError as exc:
                    raise AssertionError(f"{flow.role}: {flow.title}: {exc}") from exc
        stack_name = synthesized.saga.stack.stack_name
        for key in roles:  # how sagactl finds the stack's outputs on AWS
            if key.startswith("agent "):  # `sagactl mcp --stack`: its tenant's parameter only
                tenant = key.removeprefix("agent ")
                with acting_as(key):
                    on_aws = aws_target(stack_name, read_outputs=False)
                    assert agent_config(on_aws, tenant).tenant_id == tenant
                continue
            with acting_as(key), pytest.raises(SagactlError, match="does not exist"):
                aws_target(stack_name)
    drafts = (
        f"arn:aws:dynamodb:us-east-1:{account.account_id}:table/{saga.outputs['DraftsTableName']}"
    )
    problems: list[str] = []
    for key, logical_id in sorted(roles.items()):
        role = policies.roles[logical_id]
        evaluated = evaluate_calls(
            [c for c in calls if c.kind == "role" and c.caller == key],
            account,
            policies.grants(logical_id),
            role.session_context(mfa=requires_mfa(role)),
        )
        problems += [f"DENIED  {e.line()}" for e in evaluated if not e.allowed]
        problems += [
            f"TENANT  {key}: {e.request.action} on another tenant's drafts would be allowed"
            for e in evaluated
            if e.allowed
            and not other_tenants_denied(policies.grants(logical_id), e.request, drafts)
        ]
        problems += [
            f"UNUSED  {key}: {action} on {resource}: allowed, but no flow of this role calls it"
            for action, resource in unused_grants(role, [e.request for e in evaluated if e.allowed])
        ]
    # The approver role as the stack made it before (kms:Sign and the stack's outputs only):
    # its `case approve --case` is denied on AWS, as moto never showed.
    for key, logical_id in roles.items():
        if key.startswith("approver "):
            role = policies.roles[logical_id]
            before = tuple(signing_only(document) for document in role.identity)
            grants = replace(policies.grants(logical_id), identity=before)
            evaluated = evaluate_calls(
                [c for c in calls if c.caller == key and c.service == "dynamodb"],
                account,
                grants,
                role.session_context(mfa=True),
            )
            assert {(e.request.action, e.allowed) for e in evaluated} == {
                ("dynamodb:GetItem", False),
                ("dynamodb:UpdateItem", False),
            }, key
    problems += agents_read_no_other_tenant(saga.outputs, policies, roles, account)
    drafts_key = account.partition_keys[saga.outputs["DraftsTableName"]]
    if drafts_key != TENANT_FIRST_KEY:
        problems.insert(
            0,
            f"KEY     the drafts table's partition key is {drafts_key!r}, not "
            f"{TENANT_FIRST_KEY!r}: the approver and agent roles confine drafts to their tenant "
            "with dynamodb:LeadingKeys, which needs the tenant-first key (issue 21)",
        )
    unique = list(dict.fromkeys(problems))
    assert not unique, "the people's roles differ from their flows:\n" + "\n".join(unique)


def agents_read_no_other_tenant(
    outputs: Mapping[str, str], policies: StackPolicies, roles: Mapping[str, str], account: Any
) -> list[str]:
    """What names every tenant's approvers is denied to each agent role (the stack's outputs,
    ValidateCase's environment), and so is another tenant's agent configuration."""
    region_account = f"us-east-1:{account.account_id}"
    parameters = json.loads(outputs["AgentConfigParameters"])
    function = outputs["ValidateCaseFunctionName"]
    validate_case = f"arn:aws:lambda:{region_account}:function:{function}"
    problems = []
    for tenant in TENANT_APPROVERS:
        role = policies.roles[roles[f"agent {tenant}"]]
        requests = [
            Request("cloudformation:DescribeStacks", next(iter(account.stack_ids.values()))),
            Request("lambda:GetFunctionConfiguration", validate_case),
            *(
                Request("ssm:GetParameter", f"arn:aws:ssm:{region_account}:parameter{name}")
                for other, name in parameters.items()
                if other != tenant
            ),
        ]
        for request in requests:
            asked = replace(request, context=role.session_context(mfa=False))
            if evaluate(policies.grants(role.logical_id), asked).allowed:
                problems.append(f"OTHERS  agent {tenant}: {request.action} on {request.resource}")
    return problems


def other_tenants_denied(grants: Grants, request: Request, drafts: str) -> bool:
    """The same request on every other tenant's drafts is denied (requests on other tables,
    which are not partitioned by tenant, have nothing to vary)."""
    leading = request.context.get("dynamodb:LeadingKeys")
    if request.resource != drafts or not isinstance(leading, list):
        return True
    others = sorted(set(TENANT_APPROVERS) - set(leading))
    return all(
        not evaluate(
            grants, replace(request, context={**request.context, "dynamodb:LeadingKeys": [other]})
        ).allowed
        for other in others
    )


def signing_only(document: Mapping[str, Any]) -> dict[str, Any]:
    """A policy document without its DynamoDB statements (the approver role before)."""
    kept = [
        statement
        for statement in statements(document)
        if not any(str(a).startswith("dynamodb:") for a in as_list(statement["Action"]))
    ]
    return {**document, "Statement": kept}


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]
