"""Each function's IAM grants equal the AWS calls its code makes: recorded, not hand-listed;
and AWS would allow each call (key policies and conditions included, evaluated by offline_iam).

The scenarios below run the saga's paths in the local AWS (the same handlers, the synthesized
template with the agent gateway on, so AgentToolsFunction is among the functions; the flag
changes no other function's grants, checked below) while `recording_aws_calls` notes every API
call each in-process handler makes. Each call becomes what IAM must allow: (function, action,
resource), where a TransactWriteItems counts as one item action per item on that item's table
(that is how IAM authorises it) and a Query on an index is granted on the index. The same
triples are read from the roles' policy statements in the template. The two sets must be equal
per function: a grant nobody exercises is extra, a call without a grant would be AccessDenied
on AWS.

The agent tools are called as AgentCore Gateway calls a Lambda target: the arguments as the
event, the tool in the Invoke's ClientContext (the local runtime hands it to the handler as
Lambda does), through each tenant's target, and followed while the execution runs. Rare paths
are scenarios too: reconciliation of each step (found, absent, undeterminable), the release
(done, lost answer, refused, blocked, redriven), a cancelled transaction, key conflicts, the
sweeper (nothing stuck, something stuck), and two DynamoDB answers no sandbox fault gives (a
throttled commit at the payment provider, a reused ClientRequestToken at ReserveStock), injected
into the local DynamoDB for one transaction. Grants that stay without a recorded call would be
listed in KEPT_WITHOUT_A_LOCAL_CALL with the code path that needs them; today none does.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from moto.dynamodb.exceptions import ERROR_TYPE_PREFIX, DynamodbException
from moto.dynamodb.models import DynamoDBBackend

from local_aws.approval_keys import co_sign_locally, sign_locally
from local_aws.aws_calls import AwsCall, acting_as, recording_aws_calls
from local_aws.emulator import LocalServer, client_environment
from local_aws.environment import LocalAws, StackSource
from local_aws.template import load_template
from offline_iam.coverage import evaluate_calls
from offline_iam.stack_policies import provisioned_account, stack_policies
from saga.agent.drafts import DraftStore, draft_case
from saga.agent.gateway import TARGET_DELIMITER
from saga.approval_keys import forget_public_keys
from saga.identity import Operation
from stacks.constructs.agent_gateway import AGENT_TOOLS_SPEC, target_name
from stacks.constructs.tools import TOOL_SPECS
from tests import legacy_drafts
from tests.e2e.held_functions import validate_case_held
from tests.e2e.test_saga_paths import complete_under_another_approval
from tests.infra.synth import Synthesized, synthesize
from tests.infra.test_agent_gateway import AGENT_GATEWAY
from tests.unit.test_agent_tools import PROPOSAL

ROOT = Path(__file__).resolve().parents[2]
# A function's role session: no MFA (Lambda assumes the role).
FUNCTION_SESSION_MFA = False
GATEWAY_ROLE = "gateway"  # the calls AgentCore Gateway makes with its role: the tool invokes
EXAMPLES = ROOT / "examples"

TENANT_APPROVERS = {"acme": "supervisor@acme", "globex": "ops@globex"}  # cdk.json's tenants
HOOLI_CONTROLLER, HOOLI_CFO = "controller@hooli", "cfo@hooli"  # four eyes above a threshold
Grant = tuple[str, str, str]  # (function construct id, IAM action, resource)

# IAM actions used by the Lambda service and the tracing library for the function, never by
# the code's own clients: CloudWatch Logs (the runtime) and X-Ray (active tracing).
RUNTIME_ACTION_PREFIXES = ("logs:", "xray:")
# TransactWriteItems is authorised per item by these actions on each item's table.
TRANSACT_ITEM_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
TRANSACT_GET_ACTIONS = {"Get": "dynamodb:GetItem"}

# Grants that stay although no local scenario makes the call: (function, action, resource) ->
# the code path that needs it on AWS and why the local AWS cannot reach it.
KEPT_WITHOUT_A_LOCAL_CALL: dict[Grant, str] = {}


# --- naming: physical names in the local account -> the template's names ---------------------
@dataclass(frozen=True)
class Names:
    """Readable names for what the calls and the policies refer to."""

    function_of_name: Mapping[str, str]  # local function name -> construct id
    function_of_logical_id: Mapping[str, str]  # logical id -> construct id
    resource_of_logical_id: Mapping[str, str]  # table / queue logical id -> "table:ledger", ...
    resource_of_name: Mapping[str, str]  # local table name / queue URL -> "table:ledger", ...

    @classmethod
    def of(cls, synth: Synthesized, local: LocalAws) -> Names:
        stack = synth.saga.stack
        functions = {
            synth.logical_id(fn): construct_id for construct_id, fn in stack.tools.functions.items()
        }
        if stack.agent_gateway is not None:
            agent_tools = synth.logical_id(stack.agent_gateway.function)
            functions[agent_tools] = AGENT_TOOLS_SPEC.construct_id
        resources = {
            synth.logical_id(stack.tables.ledger): "table:ledger",
            synth.logical_id(stack.tables.cases): "table:cases",
            synth.logical_id(stack.tables.drafts): "table:drafts",
            synth.logical_id(stack.tables.legacy_drafts): "table:legacy-drafts",
            synth.logical_id(stack.tables.inventory): "table:inventory",
            synth.logical_id(stack.tables.reservations): "table:reservations",
            synth.logical_id(stack.tables.limits): "table:limits",
            synth.logical_id(stack.escalation.queue): "queue:escalation",
            synth.logical_id(stack.escalation.dead_letter_queue): "queue:escalation-dlq",
        }
        if stack.sandbox is not None:
            resources |= {
                synth.logical_id(stack.sandbox.payments): "table:payments",
                synth.logical_id(stack.sandbox.shipments): "table:shipments",
                synth.logical_id(stack.sandbox.control): "table:sandbox",
            }
        resources |= {
            synth.logical_id(key): f"key:{name}"
            for name, key in stack.approval_keys.created.items()
        }
        provisioned = local.provisioned
        assert provisioned is not None
        physical = {**provisioned.tables, **provisioned.queues, **provisioned.keys}
        resource_of_name = {name: resources[lid] for lid, name in physical.items()}
        # The functions name the stack's approval keys by alias (saga.approval_keys).
        key_of_arn = {arn: lid for lid, arn in provisioned.keys.items()}
        resource_of_name |= {
            alias: resources[key_of_arn[arn]] for alias, arn in provisioned.aliases.items()
        }
        return cls(
            function_of_name={name: functions[lid] for lid, name in provisioned.functions.items()},
            function_of_logical_id=functions,
            resource_of_logical_id=resources,
            resource_of_name=resource_of_name,
        )


# --- what the code called ----------------------------------------------------------------------
def required_grants(calls: Iterable[AwsCall], names: Names) -> set[Grant]:
    """The (function, action, resource) IAM must allow for each recorded call."""
    grants: set[Grant] = set()
    for call in calls:
        if call.kind != "function":
            continue  # the gateway's invokes: evaluated against its role in denied_calls
        function = names.function_of_name[call.function_name]
        for action, resource in _authorised_as(call, names):
            grants.add((function, action, resource))
    return grants


def _authorised_as(call: AwsCall, names: Names) -> list[tuple[str, str]]:
    params = call.params
    if call.service == "dynamodb":
        if call.operation == "TransactWriteItems":
            return [
                _transact_item(item, TRANSACT_ITEM_ACTIONS, names)
                for item in params["TransactItems"]
            ]
        if call.operation == "TransactGetItems":
            return [
                _transact_item(item, TRANSACT_GET_ACTIONS, names)
                for item in params["TransactItems"]
            ]
        if call.operation in ("BatchGetItem", "BatchWriteItem"):
            return [
                (f"dynamodb:{call.operation}", names.resource_of_name[table])
                for table in params["RequestItems"]
            ]
        resource = names.resource_of_name[params["TableName"]]
        if params.get("IndexName"):
            resource += f"/index/{params['IndexName']}"
        return [(f"dynamodb:{call.operation}", resource)]
    if call.service == "sqs":
        return [(f"sqs:{call.operation}", names.resource_of_name[params["QueueUrl"]])]
    if call.service == "kms":
        return [(f"kms:{call.operation}", names.resource_of_name[params["KeyId"]])]
    # Any other service is compared by action only (its resources are not mapped here).
    return [(f"{call.service}:{call.operation}", "*")]


def _transact_item(
    item: Mapping[str, Any], actions: Mapping[str, str], names: Names
) -> tuple[str, str]:
    ((kind, body),) = item.items()
    return actions[kind], names.resource_of_name[body["TableName"]]


# --- what the template grants ------------------------------------------------------------------
def template_grants(synth: Synthesized, names: Names) -> set[Grant]:
    """Each function's (action, resource) from its role's policy statements, runtime excluded."""
    resources = synth.template_json["Resources"]
    role_of_function = {
        names.function_of_logical_id[lid]: resource["Properties"]["Role"]["Fn::GetAtt"][0]
        for lid, resource in resources.items()
        if resource["Type"] == "AWS::Lambda::Function"
    }
    statements: dict[str, list[dict[str, Any]]] = {}
    for policy in synth.resources("AWS::IAM::Policy").values():
        for role in policy["Properties"]["Roles"]:
            statements.setdefault(role["Ref"], []).extend(
                policy["Properties"]["PolicyDocument"]["Statement"]
            )
    grants: set[Grant] = set()
    for function, role in role_of_function.items():
        for statement in statements.get(role, []):
            assert statement["Effect"] == "Allow", statement
            for action in _as_list(statement["Action"]):
                if action.startswith(RUNTIME_ACTION_PREFIXES):
                    continue
                if not action.startswith(("dynamodb:", "sqs:", "kms:")):
                    grants.add((function, action, "*"))
                    continue
                grants.update(
                    (function, action, _resource_name(resource, names))
                    for resource in _as_list(statement["Resource"])
                )
    return grants


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _resource_name(resource: Any, names: Names) -> str:
    if isinstance(resource, dict) and "Fn::GetAtt" in resource:
        return names.resource_of_logical_id[resource["Fn::GetAtt"][0]]
    if isinstance(resource, dict) and "Fn::Join" in resource:
        separator, parts = resource["Fn::Join"]
        if separator == "" and len(parts) == 2 and isinstance(parts[1], str):
            return _resource_name(parts[0], names) + parts[1]
    return json.dumps(resource, sort_keys=True)


# --- the comparison ----------------------------------------------------------------------------
def grant_differences(
    granted: set[Grant], required: set[Grant], kept: Mapping[Grant, str]
) -> list[str]:
    """One line per (function, action, resource) that is missing, extra, or wrongly kept."""
    lines = [
        f"MISSING {f} {a} on {r}: the code calls it, the role does not allow it"
        for f, a, r in sorted(required - granted)
    ]
    lines += [
        f"EXTRA   {f} {a} on {r}: granted, but no scenario made the call (remove it, or list "
        "it in KEPT_WITHOUT_A_LOCAL_CALL with the path that needs it)"
        for f, a, r in sorted(granted - required - set(kept))
    ]
    lines += [
        f"KEPT    {f} {a} on {r}: listed as never called locally, but it was called (or is no "
        "longer granted): drop it from KEPT_WITHOUT_A_LOCAL_CALL"
        for f, a, r in sorted(set(kept) & required | set(kept) - granted)
    ]
    return lines


def test_grant_differences_name_each_function_action_and_resource() -> None:
    granted = {("F", "dynamodb:GetItem", "table:t"), ("F", "dynamodb:PutItem", "table:t")}
    required = {("F", "dynamodb:PutItem", "table:t"), ("G", "sqs:SendMessage", "queue:q")}
    kept = {("F", "dynamodb:UpdateItem", "table:t"): "why"}

    lines = grant_differences(granted, required, kept)

    assert lines == [
        "MISSING G sqs:SendMessage on queue:q: the code calls it, the role does not allow it",
        "EXTRA   F dynamodb:GetItem on table:t: granted, but no scenario made the call (remove "
        "it, or list it in KEPT_WITHOUT_A_LOCAL_CALL with the path that needs it)",
        "KEPT    F dynamodb:UpdateItem on table:t: listed as never called locally, but it was "
        "called (or is no longer granted): drop it from KEPT_WITHOUT_A_LOCAL_CALL",
    ]
    # Equal sets, and the kept grant granted but never called: nothing to report.
    assert grant_differences(granted | set(kept), granted, kept) == []


# --- the scenarios -----------------------------------------------------------------------------
def example(
    name: str, case_id: str | None = None, *, tenant: str | None = None, **faults: list[str]
) -> dict[str, Any]:
    """An example case, under another case id (and tenant, approved by that tenant's approver)
    and with other sandbox faults, re-approved."""
    case: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    case = deepcopy(case)
    if case_id is not None:
        case["case_id"] = case_id
    if tenant is not None:
        case["tenant_id"] = tenant
        case["approval"]["approved_by"] = TENANT_APPROVERS[tenant]
    if faults:
        case["sandbox"]["faults"] = {**case["sandbox"]["faults"], **faults}
    return sign_locally(case)


def run(local: LocalAws, case: Mapping[str, Any], *, name: str | None = None) -> dict[str, Any]:
    """Run one execution: its status and the states it entered."""
    description, history = local.run_case(case, name=name)
    states = [
        e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e
    ]
    return {"status": description["status"], "states": states}


def last_delivery(local: LocalAws, case_id: str, task: str) -> dict[str, Any]:
    """The Lambda parameters (FunctionName, Payload) of the case's last delivery to `task`."""
    execution_arn = local.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{case_id}"
    scheduled = [
        e["taskScheduledEventDetails"]
        for e in local.history(execution_arn)
        if e["type"] == "TaskScheduled" and task in e["taskScheduledEventDetails"]["parameters"]
    ]
    parameters: dict[str, Any] = json.loads(scheduled[-1]["parameters"])
    return parameters


def deliver_again(
    local: LocalAws, function_name: str, payload: dict[str, Any], retry: int
) -> tuple[bool, Any]:
    """Invoke the function with `payload` as redrive 1's delivery number `retry` (it sets
    payload's attempt so): whether the function failed, and its answer."""
    payload["attempt"] = {**payload["attempt"], "redrive": 1, "retry": retry}
    response = local.client("lambda").invoke(
        FunctionName=function_name, Payload=json.dumps(payload).encode()
    )
    return bool(response.get("FunctionError")), json.loads(response["Payload"].read())


def redrive_release(local: LocalAws, case_id: str) -> None:
    """What RedriveExecution does for a FAILED ReleaseReservation: deliver its input again."""
    parameters = last_delivery(local, case_id, "ReleaseReservation")
    payload = dict(parameters["Payload"])
    errors = []
    for retry in range(4):  # the fault list outlasts the workflow's own retries by one
        failed, body = deliver_again(local, parameters["FunctionName"], payload, retry)
        if not failed:
            return
        errors.append(body["errorType"])
    raise AssertionError(f"the redriven release never finished: {errors}")


def redeliver_unsigned(local: LocalAws, case_id: str, task: str, *, deliveries: int = 1) -> None:
    """Deliver a task's last input again with the approval as it was before signing (no
    signed_at, key_id, signature): a case under way when signatures were introduced. The tool
    accepts it on the case record (the digest ValidateCase accepted) and replays."""
    parameters = last_delivery(local, case_id, task)
    payload = deepcopy(parameters["Payload"])
    for name in ("signed_at", "key_id", "signature"):
        payload["case"]["approval"].pop(name)
    for retry in range(deliveries):
        failed, body = deliver_again(local, parameters["FunctionName"], payload, retry)
        if not failed:
            return
    raise AssertionError((task, body))


def invoke_sweeper(local: LocalAws, *, hours_later: float) -> dict[str, Any]:
    """The scheduled sweep, with the local clock moved on so open actions are stuck."""
    assert local.provisioned is not None
    (name,) = [n for n in local.provisioned.functions.values() if "SweepStuckActions" in n]
    local.clock.advance(hours_later * 3600)
    response = local.client("lambda").invoke(FunctionName=name, Payload=b"{}")
    body: dict[str, Any] = json.loads(response["Payload"].read())
    assert not response.get("FunctionError"), body
    return body


@contextmanager
def next_transaction_fails(
    local: LocalAws, output_key: str, code: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[str]]:
    """The local DynamoDB answers the next TransactWriteItems that writes the table of
    `output_key` with `code`, applying nothing: what DynamoDB may answer (throttled, a token
    reused with other items) and no sandbox fault produces. Yields the codes it answered."""
    table = local.outputs[output_key]
    answered: list[str] = []
    original = DynamoDBBackend.transact_write_items

    def failing_once(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        tables = {next(iter(item.values())).get("TableName") for item in transact_items}
        if not answered and table in tables:
            answered.append(code)
            raise DynamodbException(ERROR_TYPE_PREFIX + code, f"{code} (injected by the test)")
        original(backend, transact_items)

    with monkeypatch.context() as patch:
        patch.setattr(DynamoDBBackend, "transact_write_items", failing_once)
        yield answered


def gateway_call(local: LocalAws, tenant: str, tool: str, arguments: Mapping[str, Any]) -> Any:
    """A tool call as the tenant's AgentCore Gateway target makes it; its structured result."""
    assert local.provisioned is not None
    (function,) = [n for n in local.provisioned.functions.values() if "AgentTools" in n]
    custom = {
        "bedrockAgentCoreGatewayId": f"gw-{tenant}",
        "bedrockAgentCoreTargetId": "TGT0000001",
        "bedrockAgentCoreMessageVersion": "1.0",
        "bedrockAgentCoreToolName": f"{target_name(tenant)}{TARGET_DELIMITER}{tool}",
    }
    with acting_as(GATEWAY_ROLE):  # the invoke is the gateway role's (evaluated below)
        response = local.client("lambda").invoke(
            FunctionName=function,
            Payload=json.dumps(arguments).encode(),
            ClientContext=base64.b64encode(json.dumps({"custom": custom}).encode()).decode(),
        )
    result = json.loads(response["Payload"].read())
    assert "FunctionError" not in response and result["isError"] is False, result
    return result["structuredContent"]


def draft_store(local: LocalAws) -> DraftStore:
    """The drafts tables of the local stack (both, as sagactl reads them)."""
    return DraftStore(
        local.client("dynamodb"),
        local.outputs["DraftsTableName"],
        legacy_table_name=local.outputs["LegacyDraftsTableName"],
    )


def approve_proposed(local: LocalAws, case_id: str, approver: str) -> None:
    """What `sagactl case approve --case` stores on the draft (signed with the local key)."""
    drafts = draft_store(local)
    draft = drafts.get(case_id)
    assert draft is not None
    case = draft_case(draft)
    case["approval"]["approved_by"] = approver
    approval = sign_locally(case)["approval"]
    drafts.approve(case_id, digest=draft["digest"], approval=approval)


def agent_replacements(monkeypatch: pytest.MonkeyPatch) -> Callable[[LocalAws], None]:
    def scenario(local: LocalAws) -> None:
        for tenant, approver in TENANT_APPROVERS.items():
            request = {**PROPOSAL, "request_id": f"grants-{tenant}"}
            case_id = gateway_call(local, tenant, "propose_replacement", request)["case_id"]
            approve_proposed(local, case_id, approver)
            with validate_case_held(monkeypatch) as waiting:
                started = gateway_call(local, tenant, "start_replacement", {"case_id": case_id})
                assert started["started"] is True, started
                assert waiting.wait(timeout=60), "the execution never reached ValidateCase"
                running = gateway_call(local, tenant, "get_replacement", {"case_id": case_id})
            assert (running["status"], running["current_step"]) == ("RUNNING", "ValidateCase")
            local.wait_for_execution(running["execution_arn"])
            done = gateway_call(local, tenant, "get_replacement", {"case_id": case_id})
            assert done["status"] == "COMPLETED", done

    return scenario


def agent_ids_without_a_draft(local: LocalAws) -> None:
    """ValidateCase reads the draft of a new case under an agent's case id, in the table its id
    names, and the case record where no draft holds it (docs/design.md §10): an old draft
    started through the gateway, and a case started directly under an agent's id, refused."""
    request = {**PROPOSAL, "request_id": "grants-old"}
    client, table = local.client("dynamodb"), local.outputs["LegacyDraftsTableName"]
    old_id = legacy_drafts.propose(client, table, "acme", request)
    approve_proposed(local, old_id, TENANT_APPROVERS["acme"])
    started = gateway_call(local, "acme", "start_replacement", {"case_id": old_id})
    local.wait_for_execution(started["execution_arn"])
    done = gateway_call(local, "acme", "get_replacement", {"case_id": old_id})
    assert done["status"] == "COMPLETED", done
    expect(example("happy-path", "agt-g-no-draft"), "FAILED", "ValidateCase")(local)


def four_eyes(monkeypatch: pytest.MonkeyPatch) -> Callable[[LocalAws], None]:
    """Tenant hooli's two approvers (four eyes, docs/design.md §9): each function reads both
    keys. Through the state machine, with a lost refund answer and a rejected shipment (so
    ReconcileAction and ReleaseReservation verify the co-signed case too), and through the agent
    tools, a draft above the threshold approved by one and co-signed by the other."""

    def scenario(local: LocalAws) -> None:
        case = example("four-eyes", "g-four-eyes", refund=["timeout"], shipment=["reject"])
        co_signed = co_sign_locally(case, approved_by=HOOLI_CFO)
        expect(co_signed, "SUCCEEDED", "ReconcileStep", "ReleaseReservation")(local)

        request = {**PROPOSAL, "request_id": "grants-hooli", "amount_minor": 250_000}
        case_id = gateway_call(local, "hooli", "propose_replacement", request)["case_id"]
        approve_proposed(local, case_id, HOOLI_CONTROLLER)
        drafts = draft_store(local)
        draft = drafts.get(case_id)
        assert draft is not None
        both = co_sign_locally(draft_case(draft), approved_by=HOOLI_CFO)
        (signature,) = both["approval"]["co_signatures"]
        drafts.co_sign(case_id, digest=draft["digest"], signature=signature)
        started = gateway_call(local, "hooli", "start_replacement", {"case_id": case_id})
        assert started["started"] is True, started
        local.wait_for_execution(started["execution_arn"])
        done = gateway_call(local, "hooli", "get_replacement", {"case_id": case_id})
        assert done["status"] == "COMPLETED", done

    return scenario


Scenario = Callable[[LocalAws], None]


def expect(case: Mapping[str, Any], status: str, *states: str, name: str | None = None) -> Scenario:
    def scenario(local: LocalAws) -> None:
        ran = run(local, case, name=name)
        assert ran["status"] == status, ran
        missing = [s for s in states if s not in ran["states"]]
        assert not missing, f"{case['case_id']}: never entered {missing}: {ran['states']}"

    return scenario


def conflict_at(operation: Operation, parameters: dict[str, Any], case_id: str) -> Scenario:
    def scenario(local: LocalAws) -> None:
        case = example("happy-path", case_id)
        complete_under_another_approval(local, case, operation, parameters)
        expect(case, "SUCCEEDED", "ReleaseReservation", "Escalate")(local)

    return scenario


def compensation_redriven(local: LocalAws) -> None:
    expect(example("compensation-stuck"), "FAILED", "ReleaseReservation")(local)
    redrive_release(local, "case-compensation-stuck")


def duplicate_and_conflicting_starts(local: LocalAws) -> None:
    case = example("happy-path", "g-duplicate")
    expect(case, "SUCCEEDED", "CreateShipment")(local)
    run(local, case, name="g-duplicate-again")
    changed = deepcopy(case)
    changed["refund"]["amount_minor"] += 1
    run(local, sign_locally(changed), name="g-duplicate-changed")


def under_way_before_signing(local: LocalAws) -> None:
    expect(example("refund-rejected", "g-legacy-outcome"), "SUCCEEDED", "Escalate")(local)
    redeliver_unsigned(local, "g-legacy-outcome", "Escalate")  # RecordOutcome there
    # A closed case releases nothing: the release is redelivered while its case is still
    # compensating (FAILED there; its sandbox has one timeout left, then answers).
    case = example("compensation-stuck", "g-legacy-release")
    expect(case, "FAILED", "ReleaseReservation")(local)
    redeliver_unsigned(local, "g-legacy-release", "ReleaseReservation", deliveries=2)
    case = example("lost-refund-response", "g-legacy-reconcile")
    expect(case, "SUCCEEDED", "ReconcileStep")(local)
    redeliver_unsigned(local, "g-legacy-reconcile", "ReconcileAction")


def sweeps(local: LocalAws) -> None:
    invoke_sweeper(local, hours_later=0)
    expect(example("carrier-unavailable", "g-stuck"), "SUCCEEDED", "ReconcileStep")(local)
    # past the grace (5 minutes) but within one sweep interval of it: a message is due
    report = invoke_sweeper(local, hours_later=7 / 60)
    assert report["stuck"] >= 1 and report["escalated"] >= 1, report


# Every scenario, run one after another in one local AWS by the test below.
def scenarios(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Scenario]]:
    def answered_once(output_key: str, code: str, case_id: str) -> Scenario:
        def scenario(local: LocalAws) -> None:
            with next_transaction_fails(local, output_key, code, monkeypatch) as answered:
                expect(example("happy-path", case_id), "SUCCEEDED", "CreateShipment")(local)
            assert answered == [code], f"{case_id}: no transaction on {output_key} failed"

        return scenario

    mismatch = example("happy-path", "g-mismatch")
    mismatch["refund"]["amount_minor"] += 1  # not what was approved
    return [
        ("happy path", expect(example("happy-path"), "SUCCEEDED", "CreateShipment")),
        ("agent tools through each tenant's gateway target", agent_replacements(monkeypatch)),
        ("agent case ids: an old draft, an id without a draft", agent_ids_without_a_draft),
        ("four eyes: two approvers' keys", four_eyes(monkeypatch)),
        (
            "lost refund response",
            expect(example("lost-refund-response"), "SUCCEEDED", "ReconcileStep"),
        ),
        (
            "lost carrier response",
            expect(example("lost-carrier-response"), "SUCCEEDED", "ReconcileStep"),
        ),
        ("carrier unavailable", expect(example("carrier-unavailable"), "SUCCEEDED", "Escalate")),
        ("refund rejected", expect(example("refund-rejected"), "SUCCEEDED", "ReleaseReservation")),
        (
            "shipment rejected",
            expect(example("shipment-rejected"), "SUCCEEDED", "ReleaseReservation"),
        ),
        (
            "out of stock (cancelled transaction)",
            expect(example("out-of-stock"), "SUCCEEDED", "Escalate"),
        ),
        ("approval mismatch", expect(mismatch, "FAILED", "ValidateCase")),
        ("compensation stuck, then redriven", compensation_redriven),
        ("duplicate and conflicting starts", duplicate_and_conflicting_starts),
        (
            "key conflict at the refund",
            conflict_at(Operation.REFUND, {"amount_minor": 1}, "g-conflict-refund"),
        ),
        (
            "key conflict at the shipment",
            conflict_at(Operation.SHIP, {"address": "x"}, "g-conflict-ship"),
        ),
        (
            "reserve: answer lost",
            expect(
                example("happy-path", "g-reserve-lost", reserve=["lose_response"]),
                "SUCCEEDED",
                "ReconcileStep",
            ),
        ),
        (
            "reserve: no answer",
            expect(
                example("happy-path", "g-reserve-timeout", reserve=["timeout"]),
                "SUCCEEDED",
                "ReconcileStep",
            ),
        ),
        (
            "reserve: rejected",
            expect(
                example("happy-path", "g-reserve-reject", reserve=["reject"]),
                "SUCCEEDED",
                "Escalate",
            ),
        ),
        (
            "reserve: failed before commit",
            expect(
                example("happy-path", "g-reserve-fbc", reserve=["fail_before_commit"]),
                "SUCCEEDED",
                "CreateShipment",
            ),
        ),
        (
            "refund: no answer",
            expect(
                example("happy-path", "g-refund-timeout", refund=["timeout"]),
                "SUCCEEDED",
                "ReconcileStep",
            ),
        ),
        (
            "refund: failed before commit",
            expect(
                example("happy-path", "g-refund-fbc", refund=["fail_before_commit"]),
                "SUCCEEDED",
                "CreateShipment",
            ),
        ),
        (
            "refund: provider unavailable",
            expect(
                example("happy-path", "g-refund-unavailable", refund=["unavailable"]),
                "SUCCEEDED",
                "Escalate",
            ),
        ),
        (
            "shipment: no answer",
            expect(
                example("happy-path", "g-ship-timeout", shipment=["timeout"]),
                "SUCCEEDED",
                "ReconcileStep",
            ),
        ),
        (
            "shipment: failed before commit",
            expect(
                example("happy-path", "g-ship-fbc", shipment=["fail_before_commit"]),
                "SUCCEEDED",
                "CreateShipment",
            ),
        ),
        (
            "release: answer lost",
            expect(
                example("refund-rejected", "g-release-lost", release=["lose_response"]),
                "SUCCEEDED",
                "ReleaseReservation",
            ),
        ),
        (
            "release: refused",
            expect(
                example("refund-rejected", "g-release-reject", release=["reject"]),
                "SUCCEEDED",
                "ReleaseReservation",
            ),
        ),
        (
            "refund: the provider's commit is throttled (the key is given back)",
            answered_once("PaymentsTableName", "ThrottlingException", "g-refund-throttled"),
        ),
        (
            "reserve: DynamoDB reports the token reused (the record is read)",
            answered_once(
                "ReservationsTableName", "IdempotentParameterMismatchException", "g-reserve-token"
            ),
        ),
        ("sweeps", sweeps),
        ("finishing a case under way before signing", under_way_before_signing),
        (
            "another tenant's approver: a lost refund answer",
            expect(
                example("lost-refund-response", "g-globex-lost", tenant="globex"),
                "SUCCEEDED",
                "ReconcileStep",
            ),
        ),
        (
            "another tenant's approver: a refund rejected",
            expect(
                example("refund-rejected", "g-globex-rejected", tenant="globex"),
                "SUCCEEDED",
                "ReleaseReservation",
            ),
        ),
    ]


@pytest.fixture(scope="module")
def with_gateway(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The app synthesized with the agent gateway on (tests/infra/test_agent_gateway.py), a
    target for four-eyes tenant hooli too, and a daily refund ceiling for globex (docs/design.md
    §3.12), generous enough for every scenario: its refunds charge the counter, and its refused
    refund gives the amount back."""
    hooli = {
        "discovery_url": "https://idp.example.com/hooli/.well-known/openid-configuration",
        "allowed_clients": ["hooli-agent"],
    }
    tenants = {**AGENT_GATEWAY["tenants"], "hooli": hooli}  # type: ignore[dict-item]
    gateway = {**AGENT_GATEWAY, "tenants": tenants}
    return synthesize(
        tmp_path_factory.mktemp("gateway"),
        {"agent_gateway": gateway, "refund_ceilings": {"globex": {"USD": 1_000_000}}},
    )


@pytest.fixture
def gateway_local_aws(
    local_server: LocalServer, with_gateway: Synthesized, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalAws]:
    """That template in a fresh local account (as `local_aws` provisions cdk.json's)."""
    stack_name = with_gateway.saga.stack.stack_name
    source = StackSource(load_template(with_gateway.template_path), stack_name)
    local = LocalAws(server=local_server, source=source)
    local.reprovision()
    for name, value in client_environment(local.endpoint).items():
        monkeypatch.setenv(name, value)
    yield local
    local.clock.reset()


def test_each_function_is_granted_exactly_the_calls_its_code_makes(
    gateway_local_aws: LocalAws, with_gateway: Synthesized, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = Names.of(with_gateway, gateway_local_aws)
    forget_public_keys()  # every function starts cold: its first verification reads the key
    gateway_local_aws.server.retire_lambda_environments()
    with recording_aws_calls() as calls:
        for title, scenario in scenarios(monkeypatch):
            try:
                scenario(gateway_local_aws)
            except AssertionError as exc:
                raise AssertionError(f"scenario {title!r}: {exc}") from exc

    required = required_grants(calls, names)
    granted = template_grants(with_gateway, names)
    functions = {spec.construct_id for spec in (*TOOL_SPECS, AGENT_TOOLS_SPEC)}
    assert {f for f, _, _ in required} == functions
    differences = grant_differences(granted, required, KEPT_WITHOUT_A_LOCAL_CALL)
    assert not differences, "grants differ from the calls:\n" + "\n".join(differences)
    denied = denied_calls(gateway_local_aws, with_gateway, calls)
    assert not denied, "AWS would deny these calls:\n" + "\n".join(denied)


def denied_calls(local: LocalAws, synth: Synthesized, calls: list[AwsCall]) -> list[str]:
    """Each function's recorded calls evaluated as IAM would (offline_iam: its role's policies,
    the approval keys' key policies, conditions): one line per request AWS would deny."""
    provisioned = local.provisioned
    assert provisioned is not None and provisioned.resolver is not None
    policies = stack_policies(synth.template_json, provisioned.resolver)
    account = provisioned_account(synth.template_json, provisioned)
    denied: list[str] = []
    for function_id, name in provisioned.functions.items():
        role_id = policies.role_of_function[function_id]
        evaluated = evaluate_calls(
            [call for call in calls if call.kind == "function" and call.caller == name],
            account,
            policies.grants(role_id),
            policies.roles[role_id].session_context(mfa=FUNCTION_SESSION_MFA),
        )
        denied += [e.line() for e in evaluated if not e.allowed]
    gateway = synth.saga.stack.agent_gateway
    assert gateway is not None
    role_id = synth.logical_id(gateway.gateway_role)
    invokes = [call for call in calls if call.kind == "role" and call.caller == GATEWAY_ROLE]
    assert invokes, "no tool call went through a gateway"
    evaluated = evaluate_calls(
        invokes,
        account,
        policies.grants(role_id),
        policies.roles[role_id].session_context(mfa=FUNCTION_SESSION_MFA),
    )
    denied += [e.line() for e in evaluated if not e.allowed]
    return list(dict.fromkeys(denied))


def _role_statements(synth: Synthesized, construct_id: str) -> list[Any]:
    function = synth.saga.stack.tools.functions[construct_id]
    resources = synth.template_json["Resources"]
    role = resources[synth.logical_id(function)]["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_agent_gateway_changes_no_other_functions_grants(
    synthesized: Synthesized, with_gateway: Synthesized
) -> None:
    for spec in TOOL_SPECS:
        statements = _role_statements(synthesized, spec.construct_id)
        assert statements, spec.construct_id
        assert _role_statements(with_gateway, spec.construct_id) == statements, spec.construct_id
