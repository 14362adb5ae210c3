"""Assertions on the synthesized template: what is deployed is what the design asks for."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
from aws_cdk.assertions import Match

from local_aws.template import ResolutionContext
from saga.settings import variable
from stacks.config import LAMBDA_INVOKE_ERRORS
from stacks.constructs.tools import TABLE_VARIABLES, TOOL_SPECS
from stacks.constructs.workflow import ASL_PATH
from stacks.workflow_policy import iter_states, placeholders
from tests.infra.synth import Synthesized

DESIGN_OUTPUT_KEYS = {
    "StateMachineArn",
    "LedgerTableName",
    "CasesTableName",
    "InventoryTableName",
    "PaymentsTableName",
    "ShipmentsTableName",
    "EscalationQueueUrl",
    "LimitsTableName",
    "RefundCeilings",
}
RETRIER_FIELDS = {
    "ErrorEquals",
    "IntervalSeconds",
    "MaxAttempts",
    "BackoffRate",
    "MaxDelaySeconds",
    "JitterStrategy",
}


def _table(synth: Synthesized, construct: Any) -> dict[str, Any]:
    return dict(synth.template_json["Resources"][synth.logical_id(construct)])


def _state_machine(synth: Synthesized) -> dict[str, Any]:
    (machine,) = synth.resources("AWS::StepFunctions::StateMachine").values()
    return dict(machine["Properties"])


def _definition(synth: Synthesized) -> dict[str, Any]:
    definition = _state_machine(synth)["DefinitionString"]
    assert isinstance(definition, str), "the definition must be a plain string with ${...}"
    return dict(json.loads(definition))


def _tables_by_key(synth: Synthesized) -> dict[str, str]:
    stack = synth.saga.stack
    tables = {
        "ledger": stack.tables.ledger,
        "cases": stack.tables.cases,
        "inventory": stack.tables.inventory,
        "reservations": stack.tables.reservations,
        "limits": stack.tables.limits,
        "drafts": stack.tables.drafts,
        "legacy_drafts": stack.tables.legacy_drafts,
    }
    if stack.sandbox is not None:
        tables |= {
            "payments": stack.sandbox.payments,
            "shipments": stack.sandbox.shipments,
            "sandbox": stack.sandbox.control,
        }
    return {key: synth.logical_id(table) for key, table in tables.items()}


# --- tables ----------------------------------------------------------------------------------
def test_ledger_table_has_key_ttl_pitr_and_sparse_open_actions_index(
    synthesized: Synthesized,
) -> None:
    ledger = _table(synthesized, synthesized.saga.stack.tables.ledger)["Properties"]
    assert ledger["KeySchema"] == [{"AttributeName": "action_key", "KeyType": "HASH"}]
    assert ledger["BillingMode"] == "PAY_PER_REQUEST"
    assert ledger["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert ledger["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    (index,) = ledger["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "open-actions"
    assert index["KeySchema"] == [
        {"AttributeName": "open_status", "KeyType": "HASH"},
        {"AttributeName": "lease_expires_at", "KeyType": "RANGE"},
    ]
    types = {a["AttributeName"]: a["AttributeType"] for a in ledger["AttributeDefinitions"]}
    assert types == {"action_key": "S", "open_status": "S", "lease_expires_at": "N"}


@pytest.mark.parametrize(
    "table_spec",
    [
        ("tables.cases", "case_id", None, False, True),
        ("tables.inventory", "sku", None, False, True),
        ("tables.reservations", "reservation_id", None, False, True),
        ("tables.limits", "counter_key", None, True, True),
        ("sandbox.payments", "refund_id", None, False, False),
        ("sandbox.shipments", "shipment_id", None, False, False),
        ("sandbox.control", "pk", None, True, False),
    ],
)
def test_table_key_schemas(
    synthesized: Synthesized, table_spec: tuple[str, str, str | None, bool, bool]
) -> None:
    construct_path, key, index, ttl, pitr = table_spec
    owner, attribute = construct_path.split(".")
    construct = getattr(getattr(synthesized.saga.stack, owner), attribute)
    props = _table(synthesized, construct)["Properties"]
    assert props["KeySchema"] == [{"AttributeName": key, "KeyType": "HASH"}]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    if index is None:
        assert "GlobalSecondaryIndexes" not in props
    else:
        (gsi,) = props["GlobalSecondaryIndexes"]
        assert gsi["IndexName"] == index
        assert gsi["KeySchema"] == [{"AttributeName": "business_ref", "KeyType": "HASH"}]
    assert ("TimeToLiveSpecification" in props) is ttl
    if ttl:
        assert props["TimeToLiveSpecification"]["AttributeName"] == "expires_at"
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is pitr


def test_dev_tables_are_deleted_with_the_stack_and_have_no_physical_names(
    synthesized: Synthesized,
) -> None:
    tables = synthesized.resources("AWS::DynamoDB::Table")
    assert len(tables) == 10  # the sandbox's three, the drafts tables old and new, limits
    for table in tables.values():
        assert table["DeletionPolicy"] == "Delete"
        assert "TableName" not in table["Properties"], "names come from the stage's stack"


def test_prod_tables_are_retained_and_protected(
    synthesized_without_sandbox: Synthesized,
) -> None:
    assert synthesized_without_sandbox.saga.stack.stack_name == "ReplacementOrderSaga-prod"
    for table in synthesized_without_sandbox.resources("AWS::DynamoDB::Table").values():
        assert table["DeletionPolicy"] == "Retain"
        assert table["Properties"]["DeletionProtectionEnabled"] is True


def test_without_sandbox_only_the_sandbox_tables_and_their_grants_go(
    synthesized_without_sandbox: Synthesized,
) -> None:
    synth = synthesized_without_sandbox
    assert synth.saga.stack.sandbox is None
    keys = sorted(
        p["Properties"]["KeySchema"][0]["AttributeName"]
        for p in synth.resources("AWS::DynamoDB::Table").values()
    )
    # cases, legacy drafts; the drafts table's partition key is the tenant
    assert keys == [
        "action_key",
        "case_id",
        "case_id",
        "counter_key",
        "reservation_id",
        "sku",
        "tenant_id",
    ]
    for function in synth.resources("AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        assert not {"PAYMENTS_TABLE", "SHIPMENTS_TABLE", "SANDBOX_TABLE"} & set(variables)
    outputs = set(synth.template_json["Outputs"])
    assert "PaymentsTableName" not in outputs
    assert {"InventoryTableName", "ReservationsTableName"} <= outputs


PHYSICAL_NAME_PROPERTIES = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Lambda::LayerVersion": "LayerName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::IAM::Role": "RoleName",
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::Events::Rule": "Name",
}


def test_no_resource_hard_codes_a_physical_name(synthesized: Synthesized) -> None:
    """CloudFormation derives names from the stack name, which carries the stage; the one
    explicit name (the state machine's log group, which must start /aws/vendedlogs/) is built
    from the stack's name and id, so it is new for every stack instance."""
    stack_id = {"Ref": "AWS::StackId"}
    named = [
        (logical_id, resource["Type"])
        for logical_id, resource in synthesized.template_json["Resources"].items()
        if PHYSICAL_NAME_PROPERTIES.get(resource["Type"]) in resource.get("Properties", {})
        and json.dumps(stack_id) not in json.dumps(resource["Properties"])
    ]
    assert named == []


@dataclass
class _DeployedAs(ResolutionContext):
    """Resolves a template value as CloudFormation does for a stack with this id."""

    stack_id: str = ""

    def pseudo(self, name: str) -> str | None:
        return self.stack_id if name == "AWS::StackId" else super().pseudo(name)


def _resolved(value: Any, stack_name: str, stack_uuid: str) -> Any:
    arn = f"arn:aws:cloudformation:eu-west-1:123456789012:stack/{stack_name}/{stack_uuid}"
    context = _DeployedAs(
        stack_name=stack_name,
        region="eu-west-1",
        account_id="123456789012",
        template={},
        stack_id=arn,
    )
    return context.resolve(value)


# --- state machine ---------------------------------------------------------------------------
def test_state_machine_logs_all_without_execution_data_and_traces(
    synthesized: Synthesized,
) -> None:
    props = _state_machine(synthesized)
    assert props["StateMachineType"] == "STANDARD"
    logging = props["LoggingConfiguration"]
    assert logging["Level"] == "ALL"
    assert logging["IncludeExecutionData"] is False
    (destination,) = logging["Destinations"]
    log_group_id = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    log_group = synthesized.template_json["Resources"][log_group_id]
    assert log_group["Type"] == "AWS::Logs::LogGroup"
    assert log_group["Properties"]["RetentionInDays"] == 30
    assert log_group["DeletionPolicy"] == "Delete"  # dev; retained stages keep it
    assert props["TracingConfiguration"] == {"Enabled": True}


def test_state_machine_log_group_is_a_vended_log_group_named_per_stack(
    synthesized: Synthesized, synthesized_without_sandbox: Synthesized
) -> None:
    """Under /aws/vendedlogs/ the log delivery does not grow the account's CloudWatch Logs
    resource policies (5,120 characters per region), which many logging stacks would fill."""
    names = {}
    for synth in (synthesized, synthesized_without_sandbox):
        log_group = _table(synth, synth.saga.stack.workflow.log_group)
        assert log_group["Properties"]["RetentionInDays"] == 30
        for stack_uuid in ("1c2fa620-982a-11e3-aff7-50e2416294e0", "9d3e1a77-0b4c-11ef-8c2f-0a1b"):
            name = _resolved(
                log_group["Properties"]["LogGroupName"], synth.saga.stack.stack_name, stack_uuid
            )
            names[(synth.saga.config.stage, stack_uuid[:8])] = name
    assert names == {
        ("dev", "1c2fa620"): "/aws/vendedlogs/states/ReplacementOrderSaga-dev-1c2fa620",
        ("dev", "9d3e1a77"): "/aws/vendedlogs/states/ReplacementOrderSaga-dev-9d3e1a77",
        ("prod", "1c2fa620"): "/aws/vendedlogs/states/ReplacementOrderSaga-prod-1c2fa620",
        ("prod", "9d3e1a77"): "/aws/vendedlogs/states/ReplacementOrderSaga-prod-9d3e1a77",
    }
    for name in names.values():
        assert re.fullmatch(r"[\w#./-]{1,512}", name), name  # CloudWatch Logs' name rule
    retained = _table(
        synthesized_without_sandbox, synthesized_without_sandbox.saga.stack.workflow.log_group
    )
    assert retained["DeletionPolicy"] == "Retain"


def test_execution_timeout_comes_from_context(synthesized: Synthesized) -> None:
    config = synthesized.saga.config
    assert _definition(synthesized)["TimeoutSeconds"] == (
        config.workflow.execution_timeout_minutes * 60
    )


def test_every_placeholder_in_the_asl_has_a_substitution(synthesized: Synthesized) -> None:
    in_file = placeholders(json.loads(ASL_PATH.read_text(encoding="utf-8")))
    substitutions = _state_machine(synthesized)["DefinitionSubstitutions"]
    assert in_file, "the ASL names its resources through ${...} placeholders"
    assert in_file == set(substitutions)
    assert placeholders(_definition(synthesized)) == in_file
    for name, value in substitutions.items():
        if name.endswith("FunctionArn"):
            function_id = value["Fn::GetAtt"][0]
            resource = synthesized.template_json["Resources"][function_id]
            assert resource["Type"] == "AWS::Lambda::Function"
            expected_handler = next(s.handler for s in TOOL_SPECS if name == f"{s.construct_id}Arn")
            assert resource["Properties"]["Handler"] == expected_handler
        else:
            assert name == "EscalationQueueUrl"
            assert value == {"Ref": synthesized.logical_id(synthesized.saga.stack.escalation.queue)}


def test_every_task_has_injected_retry_with_six_fields_and_full_jitter(
    synthesized: Synthesized,
) -> None:
    config = synthesized.saga.config
    tasks = [(n, s) for n, s in iter_states(_definition(synthesized)) if s["Type"] == "Task"]
    assert len(tasks) >= 2
    for name, state in tasks:
        assert state["Retry"], f"{name} has no Retry"
        for retrier in state["Retry"]:
            assert set(retrier) == RETRIER_FIELDS, name
            assert retrier["JitterStrategy"] == "FULL"
            assert retrier["MaxDelaySeconds"] >= retrier["IntervalSeconds"]
            assert "States.ALL" not in retrier["ErrorEquals"]
        errors = [e for r in state["Retry"] for e in r["ErrorEquals"]]
        assert len(errors) == len(set(errors)), f"{name} retries an error twice"
        if state["Resource"] == "arn:aws:states:::lambda:invoke":
            assert set(LAMBDA_INVOKE_ERRORS) <= set(errors), name
            assert "ActionPending" in errors, name
            assert state["TimeoutSeconds"] == config.workflow.lambda_task_timeout_seconds
            assert state["TimeoutSeconds"] < config.functions.timeout_seconds
        else:
            assert state["TimeoutSeconds"] == config.workflow.service_task_timeout_seconds


def test_retry_values_come_from_the_context_policy_of_each_task(
    synthesized: Synthesized,
) -> None:
    config = synthesized.saga.config
    states = dict(iter_states(_definition(synthesized)))
    release = states["ReleaseReservation"]["Retry"][0]
    policy = config.retry["compensation"]
    assert (release["IntervalSeconds"], release["MaxAttempts"], release["BackoffRate"]) == (
        policy.interval_seconds,
        policy.max_attempts,
        policy.backoff_rate,
    )
    assert states["ValidateCase"]["Retry"][0]["MaxAttempts"] == config.retry["tool"].max_attempts
    pending = states["ReserveStock"]["Retry"][1]
    assert pending["ErrorEquals"] == ["ActionPending"]
    assert pending["MaxDelaySeconds"] == config.retry["pending"].max_delay_seconds


def test_every_transition_target_exists(synthesized: Synthesized) -> None:
    def check(scope: dict[str, Any]) -> int:
        names = set(scope["States"])
        assert scope["StartAt"] in names
        checked = 0
        for name, state in scope["States"].items():
            targets = [c["Next"] for c in state.get("Catch", [])]
            targets += [c["Next"] for c in state.get("Choices", [])]
            targets += [state[k] for k in ("Next", "Default") if k in state]
            for target in targets:
                assert target in names, f"{name} -> {target} does not exist"
                checked += 1
            for branch in state.get("Branches", []):
                checked += check(branch)
            if "ItemProcessor" in state:
                checked += check(state["ItemProcessor"])
        return checked

    assert check(_definition(synthesized)) > 0


# --- functions and IAM -----------------------------------------------------------------------
def _policy_statements(synth: Synthesized) -> dict[str, list[dict[str, Any]]]:
    """Role logical id -> its inline policy statements."""
    by_role: dict[str, list[dict[str, Any]]] = {}
    for policy in synth.resources("AWS::IAM::Policy").values():
        for role in policy["Properties"]["Roles"]:
            statements = policy["Properties"]["PolicyDocument"]["Statement"]
            by_role.setdefault(role["Ref"], []).extend(statements)
    return by_role


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def test_no_policy_grants_a_wildcard_action_or_a_managed_policy(
    synthesized: Synthesized,
) -> None:
    statements = [s for ss in _policy_statements(synthesized).values() for s in ss]
    assert statements
    for statement in statements:
        assert statement["Effect"] == "Allow"
        for action in _actions(statement):
            assert "*" not in action, statement
    for role in synthesized.resources("AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]


def test_each_function_gets_only_its_tables_actions_and_environment(
    synthesized: Synthesized,
) -> None:
    tables = _tables_by_key(synthesized)
    table_of_logical_id = {lid: key for key, lid in tables.items()}
    statements_by_role = _policy_statements(synthesized)
    functions = synthesized.saga.stack.tools.functions
    for spec in TOOL_SPECS:
        props = synthesized.resources("AWS::Lambda::Function")[
            synthesized.logical_id(functions[spec.construct_id])
        ]["Properties"]
        role_id = props["Role"]["Fn::GetAtt"][0]
        granted: dict[tuple[str, str | None], set[str]] = {}
        for statement in statements_by_role[role_id]:
            dynamo = [a for a in _actions(statement) if a.startswith("dynamodb:")]
            if not dynamo:
                continue
            # One statement may name several resources (the minimizePolicies feature flag
            # merges statements with the same actions).
            for resource in _as_list(statement["Resource"]):
                if "Fn::Join" in resource:
                    table_ref, suffix = resource["Fn::Join"][1]
                    lid = table_ref["Fn::GetAtt"][0]
                    index = re.fullmatch(r"/index/([\w-]+)", suffix)
                    assert index, f"{spec.construct_id}: unexpected resource {resource}"
                    key = (table_of_logical_id[lid], index.group(1))
                else:
                    key = (table_of_logical_id[resource["Fn::GetAtt"][0]], None)
                granted.setdefault(key, set()).update(dynamo)
        expected = {(a.table, a.index): set(a.actions) for a in spec.access if a.actions}
        assert granted == expected, spec.construct_id
        variables = props["Environment"]["Variables"]
        table_variables = {v for v in variables if v in TABLE_VARIABLES.values()}
        assert table_variables == {TABLE_VARIABLES[a.table] for a in spec.access}
        assert "TENANTS" not in variables  # who approves is APPROVAL_KEYS (one list, 4 KB)
        assert ("ESCALATION_QUEUE_URL" in variables) is spec.escalation_queue


@pytest.mark.parametrize("sandbox", [True, False])
def test_each_function_gets_exactly_the_environment_its_model_declares(
    synthesized: Synthesized, synthesized_without_sandbox: Synthesized, sandbox: bool
) -> None:
    """One place names the variables: the function's model (saga.settings). The template holds
    exactly them (the sandbox tables only with the sandbox), and each function's environment,
    its references resolved, passes the validation the function runs on entry."""
    synth = synthesized if sandbox else synthesized_without_sandbox
    functions = synth.saga.stack.tools.functions
    sandbox_only = {TABLE_VARIABLES[t] for t in ("payments", "shipments", "sandbox")}
    # Set only with payments=stripe (tests/integration/test_stripe_secret_grants.py): both
    # app variants here refund through the sandbox's provider.
    stripe_only = {variable("stripe_secret"), variable("stripe_api_base")}
    for spec in TOOL_SPECS:
        props = synth.resources("AWS::Lambda::Function")[
            synth.logical_id(functions[spec.construct_id])
        ]["Properties"]
        variables = props["Environment"]["Variables"]
        declared = set(spec.environment.variables()) - stripe_only
        assert set(variables) == (declared if sandbox else declared - sandbox_only), spec
        resolved = {k: _variable_resolved(k, v) for k, v in variables.items()}
        env = spec.environment.from_env(resolved)
        assert env.powertools_service_name == spec.service


def _variable_resolved(name: str, value: Any) -> str:
    """A variable as CloudFormation resolves it: a string, or a reference (a stand-in value),
    or a join of strings and references (APPROVAL_KEYS: JSON around key ARNs)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        stand_in = "arn:aws:kms:us-east-1:123456789012:key/resolved"
        return str(separator).join(p if isinstance(p, str) else stand_in for p in parts)
    return f"resolved-{name}"


def test_functions_are_arm64_traced_json_logged_with_explicit_log_groups(
    synthesized: Synthesized,
) -> None:
    functions = synthesized.resources("AWS::Lambda::Function")
    assert len(functions) == len(TOOL_SPECS)
    resources = synthesized.template_json["Resources"]
    for function in functions.values():
        props = function["Properties"]
        assert props["Architectures"] == ["arm64"]
        assert props["Runtime"] == "python3.12"
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["LoggingConfig"]["LogFormat"] == "JSON"
        log_group = resources[props["LoggingConfig"]["LogGroup"]["Ref"]]
        assert log_group["Properties"]["RetentionInDays"] == 30
        (layer,) = props["Layers"]
        assert resources[layer["Ref"]]["Type"] == "AWS::Lambda::LayerVersion"
        assert props["Timeout"] == synthesized.saga.config.functions.timeout_seconds
        assert props["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == (
            "ReplacementOrderSaga-dev"
        )


def test_state_machine_may_invoke_exactly_the_functions_its_definition_names(
    synthesized: Synthesized,
) -> None:
    props = _state_machine(synthesized)
    role_id = props["RoleArn"]["Fn::GetAtt"][0]
    (invoke,) = [
        s
        for s in _policy_statements(synthesized)[role_id]
        if "lambda:InvokeFunction" in s["Action"]
    ]
    invoked = {r["Fn::GetAtt"][0] for r in invoke["Resource"]}
    named = {
        v["Fn::GetAtt"][0]
        for k, v in props["DefinitionSubstitutions"].items()
        if k.endswith("FunctionArn")
    }
    assert invoked == named
    sweeper = synthesized.logical_id(
        synthesized.saga.stack.tools.functions["SweepStuckActionsFunction"]
    )
    assert sweeper not in invoked


# --- escalation and monitoring ---------------------------------------------------------------
def test_escalation_queue_is_encrypted_tls_only_with_a_dead_letter_queue(
    synthesized: Synthesized,
) -> None:
    escalation = synthesized.saga.stack.escalation
    queue_id = synthesized.logical_id(escalation.queue)
    dlq_id = synthesized.logical_id(escalation.dead_letter_queue)
    queues = synthesized.resources("AWS::SQS::Queue")
    assert set(queues) == {queue_id, dlq_id}
    for queue in queues.values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True
    redrive = queues[queue_id]["Properties"]["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": [dlq_id, "Arn"]}
    for policy in synthesized.resources("AWS::SQS::QueuePolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        )


def test_unsuccessful_executions_are_routed_to_the_escalation_queue(
    synthesized: Synthesized,
) -> None:
    queue_id = synthesized.logical_id(synthesized.saga.stack.escalation.queue)
    machine_id = synthesized.logical_id(synthesized.saga.stack.workflow.state_machine)
    synthesized.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.states"],
                "detail-type": ["Step Functions Execution Status Change"],
                "detail": {
                    "status": ["FAILED", "TIMED_OUT", "ABORTED"],
                    "stateMachineArn": [{"Ref": machine_id}],
                },
            },
            "Targets": [
                Match.object_like(
                    {
                        "Arn": {"Fn::GetAtt": [queue_id, "Arn"]},
                        "InputTransformer": Match.any_value(),
                    }
                )
            ],
        },
    )
    rule_id = synthesized.logical_id(synthesized.saga.stack.escalation.unsuccessful_execution_rule)
    detail = synthesized.resources("AWS::Events::Rule")[rule_id]["Properties"]["EventPattern"][
        "detail"
    ]
    # Not a refused rerun of a resolved case (docs/design.md §3.10): any other error, or none.
    assert detail["$or"] == [
        {"error": [{"anything-but": ["ActionSettled"]}]},
        {"error": [None]},
        {"error": [{"exists": False}]},
    ]


def test_sweeper_runs_on_a_schedule(synthesized: Synthesized) -> None:
    sweeper = synthesized.logical_id(
        synthesized.saga.stack.tools.functions["SweepStuckActionsFunction"]
    )
    synthesized.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(5 minutes)",
            "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [sweeper, "Arn"]}})],
        },
    )


def test_a_failing_or_silent_sweeper_raises_an_alarm(synthesized: Synthesized) -> None:
    """Errors: any failed sweep; missing = no failed sweep. Invocations: none in two sweep
    intervals; missing IS breaching, since a scheduled function without invocations stopped."""
    sweeper = synthesized.logical_id(
        synthesized.saga.stack.tools.functions["SweepStuckActionsFunction"]
    )
    every = synthesized.saga.config.monitoring.sweep_every_minutes * 60
    alarms = {
        a["Properties"]["MetricName"]: a["Properties"]
        for a in synthesized.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("Namespace") == "AWS/Lambda"
    }
    assert set(alarms) == {"Errors", "Invocations"}
    expected = {
        "Errors": (every, "GreaterThanOrEqualToThreshold", "notBreaching"),
        "Invocations": (2 * every, "LessThanThreshold", "breaching"),
    }
    for name, (period, comparison, missing) in expected.items():
        alarm = alarms[name]
        assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": sweeper}}]
        assert (alarm["Statistic"], alarm["Threshold"], alarm["EvaluationPeriods"]) == ("Sum", 1, 1)
        assert (alarm["Period"], alarm["ComparisonOperator"]) == (period, comparison), name
        assert alarm["TreatMissingData"] == missing, name
    (widget,) = [
        w
        for w in _dashboard_widgets(synthesized)
        if w["properties"].get("title") == "Stuck actions and the sweeper"
    ]
    lambda_metrics = {m[1] for m in widget["properties"]["metrics"] if m[0] == "AWS/Lambda"}
    assert lambda_metrics == {"Invocations", "Errors"}


def _dashboard_widgets(synth: Synthesized) -> list[dict[str, Any]]:
    """The dashboard body's widgets, each reference to a resource replaced by its logical id."""
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    _, parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"]
    body = "".join(
        p if isinstance(p, str) else json.dumps(p)[1:-1].replace('"', "'") for p in parts
    )
    widgets: list[dict[str, Any]] = json.loads(body)["widgets"]
    return widgets


def test_alarms_dashboard_and_outputs(synthesized: Synthesized) -> None:
    alarms = synthesized.resources("AWS::CloudWatch::Alarm").values()
    metrics = {(a["Properties"]["Namespace"], a["Properties"]["MetricName"]) for a in alarms}
    # Executions are paged on as the failed-execution rule matched them (a refused rerun of a
    # resolved case is not), never on Step Functions' own counts, which include it.
    assert not {namespace for namespace, _ in metrics} & {"AWS/States"}
    (unsuccessful,) = [a for a in alarms if a["Properties"]["MetricName"] == "TriggeredRules"]
    rule_id = synthesized.logical_id(synthesized.saga.stack.escalation.unsuccessful_execution_rule)
    assert unsuccessful["Properties"]["Dimensions"] == [
        {"Name": "RuleName", "Value": {"Ref": rule_id}}
    ]
    assert unsuccessful["Properties"]["Namespace"] == "AWS/Events"
    assert ("AWS/SQS", "ApproximateAgeOfOldestMessage") in metrics
    assert ("ReplacementOrderSaga-dev", "StuckActions") in metrics
    stuck = next(a for a in alarms if a["Properties"]["MetricName"] == "StuckActions")
    assert stuck["Properties"]["Dimensions"] == [
        {"Name": "service", "Value": "sweep-stuck-actions"}
    ]
    assert len(synthesized.resources("AWS::CloudWatch::Dashboard")) == 1
    outputs = synthesized.template_json["Outputs"]
    assert set(outputs) >= DESIGN_OUTPUT_KEYS
    assert outputs["StateMachineArn"]["Value"] == {
        "Ref": synthesized.logical_id(synthesized.saga.stack.workflow.state_machine)
    }


def test_a_shipment_its_case_record_refused_pages_and_duplicates_are_no_tool_errors(
    synthesized: Synthesized,
) -> None:
    """docs/design.md §3.11, §4.1: CreateShipment counts a shipment its case record refused,
    and that count pages (the execution may be gone); a duplicate is ValidateCase's typed
    error, which Lambda counts in Errors, so the dashboard shows ValidateCase's errors less the
    duplicates it counted, and no alarm reads a tool's Errors."""
    alarms = [a["Properties"] for a in synthesized.resources("AWS::CloudWatch::Alarm").values()]
    (refused,) = [a for a in alarms if a["MetricName"] == "CaseRecordRefused"]
    assert (refused["Namespace"], refused["Dimensions"]) == (
        "ReplacementOrderSaga-dev",
        [{"Name": "service", "Value": "create-shipment"}],
    )
    assert (refused["Statistic"], refused["Threshold"], refused["TreatMissingData"]) == (
        "Sum",
        1,
        "notBreaching",
    )
    sweeper = synthesized.logical_id(
        synthesized.saga.stack.tools.functions["SweepStuckActionsFunction"]
    )
    lambda_alarms = [a for a in alarms if a["Namespace"] == "AWS/Lambda"]
    assert {a["Dimensions"][0]["Value"]["Ref"] for a in lambda_alarms} == {sweeper}
    (errors,) = [
        w
        for w in _dashboard_widgets(synthesized)
        if str(w["properties"].get("title", "")).startswith("Tool errors")
    ]
    rows = errors["properties"]["metrics"]
    (math,) = [row for row in rows if isinstance(row[0], dict)]
    assert math[0]["expression"] == "errors - FILL(duplicates, 0)"
    duplicates = [row for row in rows if row[:2] == ["ReplacementOrderSaga-dev", "CasesDuplicate"]]
    assert duplicates and duplicates[0][2:4] == ["service", "validate-case"]
