"""The roles people assume to run sagactl against the stack, one per job (docs/design.md §11).

- the operator (`OperatorRole`): start, status, watch, ledger, stuck, keep-open-actions,
  redrive, escalations (list, show, resolve), sweep, inventory, limits, `case check --deployed`;
- an approver per tenant and approver (`ApproverRoles`, created with the approver's key in
  stacks/constructs/approvals.py): `case approve FILE` and `case approve --case`; here it gets
  the drafts of its own tenant only (`dynamodb:LeadingKeys`, the drafts table's partition key
  being the tenant), the drafts from before ids carried the tenant (keyed by case id alone: no
  condition can confine them) and the stack's outputs;
- an agent role per tenant (`AgentRoles`): `sagactl mcp --tenant T` against the stack, the
  drafts of that tenant only (and, read-only, the drafts from before), and its tenant's agent
  configuration (one SSM parameter, stacks/constructs/agent_config.py): not the stack's
  outputs nor ValidateCase's environment, which name every tenant's approvers.

Each is allowed exactly the calls its flows make, recorded in the local AWS and evaluated
against these policies (tests/e2e/test_people_allowed.py): a call AWS would deny fails that
test, and so does a grant no flow uses. The operator and approvers assume their role with MFA;
the agent role is assumed by whatever runs the MCP server (a service, not a person at a
keyboard), so it requires none and can do nothing a person decides: no signing, no resolving.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from saga.identity import agent_readable_patterns
from stacks.config import SagaConfig
from stacks.constructs.agent_config import AgentConfigs
from stacks.constructs.approvals import VERIFIER_ACTIONS, ApprovalKeys, id_part
from stacks.constructs.common import acknowledge_executions, execution_arns
from stacks.constructs.tables import OPEN_ACTIONS_INDEX

GET = "dynamodb:GetItem"
PUT = "dynamodb:PutItem"
UPDATE = "dynamodb:UpdateItem"
QUERY = "dynamodb:Query"
SCAN = "dynamodb:Scan"

# The operator's table actions, by table: what its flows call (recorded; the test names any
# call missing here and any action no flow uses).
OPERATOR_TABLES: Mapping[str, Sequence[str]] = {
    # status and escalations show read a case; escalations lists by Scan; resolve writes the
    # resolution in one transaction with the settled ledger records (docs/design.md §5).
    "cases": (GET, SCAN, UPDATE),
    # resolve settles the case's open records and writes a settled placeholder for an action
    # that has none (PutItem, in the same transaction); keep-open-actions updates open ones.
    "ledger": (GET, PUT, UPDATE),
    # status: the reservation's state; inventory seed: whether cases under way hold stock.
    "reservations": (GET, SCAN),
    "inventory": (SCAN, PUT),  # inventory show, inventory seed
    "payments": (SCAN,),  # status: the effects of a case in the sandbox downstreams
    "shipments": (SCAN,),
    "limits": (GET,),  # limits: one day's counter per tenant and currency with a ceiling
}
# `stuck` queries the ledger's index of open actions (as the sweeper does).
OPERATOR_INDEXES: Mapping[tuple[str, str], Sequence[str]] = {
    ("ledger", OPEN_ACTIONS_INDEX): (QUERY,)
}
# What the operator does with the escalation queue (`escalations`: read, and delete a resolved
# case's messages; `status`: the queue's depth).
OPERATOR_QUEUE_ACTIONS = (
    "sqs:GetQueueAttributes",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
)
AGENT_DRAFT_ACTIONS = (GET, PUT)  # propose (write once), get and start (read)
# The drafts from before ids carried the tenant (docs/design.md §10): approved and read where
# they are, never written anew. Their key is the case id alone, so no condition can confine
# them to a tenant: the one exception to tenant-only drafts, until that table is drained.
AGENT_LEGACY_DRAFT_ACTIONS = (GET,)
# What storing an approval touches besides the draft's key (saga.agent.drafts.DraftStore
# .approve): the approval and its time written, the digest and revision its condition reads.
# An approver's UpdateItem on a draft is confined to them, in both tables (and, since an
# UpdateItem can also read the item, to ReturnValues that return only what it wrote). Never
# the parameters, nor an old draft's tenant (not its key there): those decide what is signed.
APPROVAL_ATTRIBUTES = ("approval", "approved_at", "co_signed_at", "digest", "revision")
UPDATE_RETURNS_WRITTEN_ONLY = ("NONE", "UPDATED_OLD", "UPDATED_NEW")
READ_STACK = "cloudformation:DescribeStacks"  # sagactl finds the outputs on AWS with it
# `sagactl mcp --tenant T` reads its tenant's agent configuration, nothing else of the stack's.
READ_AGENT_CONFIG = "ssm:GetParameter"


def tenant_only(tenant: str) -> dict[str, dict[str, list[str]]]:
    """Every partition key the request touches is the tenant's (the drafts table is keyed by
    tenant first). ForAllValues is also true for a request without keys (a Scan): the roles
    are never given one on that table."""
    return {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [tenant]}}


def agent_ids_only(tenant: str) -> dict[str, dict[str, list[str]]]:
    """Every partition key the request touches is one of the tenant's agent case ids (or an id
    of the exact shape from before ids carried the tenant, which names none): the cases table's
    key."""
    patterns = list(agent_readable_patterns(tenant))
    return {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": patterns}}


def approval_only(
    key: Sequence[str], leading: Mapping[str, Mapping[str, list[str]]] | None = None
) -> dict[str, dict[str, list[str]]]:
    """An UpdateItem of a draft keyed by `key` that stores an approval and nothing else
    (dynamodb:Attributes must list the key's attributes too), and returns no attribute it did
    not write; with the leading keys' condition, if any."""
    conditions: dict[str, dict[str, list[str]]] = {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": [*key, *APPROVAL_ATTRIBUTES]},
        "StringEquals": {"dynamodb:ReturnValues": list(UPDATE_RETURNS_WRITTEN_ONLY)},
    }
    for operator, keys in (leading or {}).items():
        conditions.setdefault(operator, {}).update(keys)
    return conditions


class PeopleRoles(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SagaConfig,
        tables: Mapping[str, dynamodb.ITable],
        escalation_queue: sqs.IQueue,
        state_machine: sfn.StateMachine,
        approval_keys: ApprovalKeys,
        validate_case: lambda_.IFunction,
        sweeper: lambda_.IFunction,
        agent_configs: AgentConfigs,
    ) -> None:
        super().__init__(scope, construct_id)
        self._stack_id = Stack.of(self).stack_id

        executions = execution_arns(state_machine, "*")
        drafts, legacy = tables["drafts"], tables["legacy_drafts"]

        self.operator = self._role("OperatorRole", "Operates the saga with sagactl", mfa=True)
        for table, actions in OPERATOR_TABLES.items():
            if table in tables:
                self._allow(self.operator, actions, [tables[table].table_arn])
        for (table, index), actions in OPERATOR_INDEXES.items():
            self._allow(self.operator, actions, [f"{tables[table].table_arn}/index/{index}"])
        self._allow(self.operator, OPERATOR_QUEUE_ACTIONS, [escalation_queue.queue_arn])
        # ListExecutions: `escalations` counts the failed-execution rule's messages that no open
        # case answers from the executions that stopped (it never receives from the queue).
        self._allow(
            self.operator,
            ["states:StartExecution", "states:ListExecutions"],
            [state_machine.state_machine_arn],
        )
        self._allow(
            self.operator,
            ["states:DescribeExecution", "states:GetExecutionHistory", "states:RedriveExecution"],
            [executions],
        )
        self._allow(self.operator, ["lambda:InvokeFunction"], [sweeper.function_arn])
        self._allow(
            self.operator,
            ["lambda:GetFunctionConfiguration"],
            [validate_case.function_arn, sweeper.function_arn],
        )
        self._allow(self.operator, VERIFIER_ACTIONS, approval_keys.key_arns())

        for tenant, approvers in approval_keys.approvers.items():
            for refs in approvers.values():
                if refs.role is not None:
                    self._allow_approver(refs.role, tenant, drafts, legacy)

        self.agents = {
            tenant: self._agent_role(
                tenant,
                tables=tables,
                state_machine=state_machine,
                approval_keys=approval_keys,
                agent_config=agent_configs.arn(agent_configs.names[tenant]),
            )
            for tenant in sorted(config.tenants)
        }
        acknowledge_executions(
            self,
            state_machine,
            "*",
            "Executions are read (and redriven by the operator) on the saga's own state machine "
            "only (execution:<machine name>:*): execution names are case ids, unknown at deploy.",
        )
        for tenant, agent in self.agents.items():
            # cdk-nag flags `*` only: the old ids' exact pattern (`?`s) needs no acknowledgment.
            for pattern in agent_readable_patterns(tenant):
                if "*" in pattern:
                    acknowledge_executions(
                        agent,
                        state_machine,
                        pattern,
                        f"An agent reads the executions of its tenant's agent cases only "
                        f"({pattern}: names are agent case ids, made per request; the old "
                        "agt-<32 hex> ids, which name no tenant, are granted by their shape).",
                    )

    def _agent_role(
        self,
        tenant: str,
        *,
        tables: Mapping[str, dynamodb.ITable],
        state_machine: sfn.StateMachine,
        approval_keys: ApprovalKeys,
        agent_config: str,
    ) -> iam.Role:
        agent = self._role(
            f"{id_part(tenant)}AgentRole",
            f"Serves the agent tools of tenant {tenant} (sagactl mcp)",
            mfa=False,
            reads_stack=False,  # the outputs name every tenant's approvers
        )
        self._allow(agent, [READ_AGENT_CONFIG], [agent_config])
        self._allow(agent, AGENT_DRAFT_ACTIONS, [tables["drafts"].table_arn], tenant_only(tenant))
        self._allow(agent, AGENT_LEGACY_DRAFT_ACTIONS, [tables["legacy_drafts"].table_arn])
        # Its own drafts' case records and executions only (§10: names are case ids).
        self._allow(agent, [GET], [tables["cases"].table_arn], agent_ids_only(tenant))
        self._allow(agent, ["states:StartExecution"], [state_machine.state_machine_arn])
        self._allow(
            agent,
            ["states:DescribeExecution", "states:GetExecutionHistory"],
            [execution_arns(state_machine, p) for p in agent_readable_patterns(tenant)],
        )
        # Its tenant's approvers' keys only: it verifies its own drafts' approvals.
        self._allow(agent, VERIFIER_ACTIONS, approval_keys.key_arns(tenant))
        return agent

    def _allow_approver(
        self, role: iam.Role, tenant: str, drafts: dynamodb.ITable, legacy: dynamodb.ITable
    ) -> None:
        """`case approve --case`: read the draft (GetItem), store the approval (UpdateItem)."""
        self._allow(role, [READ_STACK], [self._stack_id])
        self._allow(role, [GET], [drafts.table_arn], tenant_only(tenant))
        stores = approval_only(("tenant_id", "case_id"), tenant_only(tenant))
        self._allow(role, [UPDATE], [drafts.table_arn], stores)
        # Old drafts name no tenant in their key: read by id (§11 says what that leaves open),
        # written only where an approval goes.
        self._allow(role, [GET], [legacy.table_arn])
        self._allow(role, [UPDATE], [legacy.table_arn], approval_only(("case_id",)))

    def _role(
        self, construct_id: str, description: str, *, mfa: bool, reads_stack: bool = True
    ) -> iam.Role:
        principal: iam.PrincipalBase = iam.AccountRootPrincipal()
        if mfa:
            principal = principal.with_conditions({"Bool": {"aws:MultiFactorAuthPresent": "true"}})
        role = iam.Role(
            self,
            construct_id,
            assumed_by=principal,
            description=description,
            max_session_duration=Duration.hours(1),
        )
        if reads_stack:
            self._allow(role, [READ_STACK], [self._stack_id])
        return role

    @staticmethod
    def _allow(
        role: iam.Role,
        actions: Sequence[str],
        resources: Sequence[str],
        conditions: Mapping[str, object] | None = None,
    ) -> None:
        role.add_to_policy(
            iam.PolicyStatement(
                actions=sorted(set(actions)),
                resources=list(resources),
                conditions=dict(conditions) if conditions else None,
            )
        )

    def add_outputs(self, scope: Construct) -> None:
        """`OperatorRole` (an ARN) and `AgentRoles` (JSON: tenant -> role ARN)."""
        CfnOutput(scope, "OperatorRole", value=self.operator.role_arn)
        agents = {tenant: role.role_arn for tenant, role in self.agents.items()}
        CfnOutput(scope, "AgentRoles", value=Stack.of(self).to_json_string(agents))
