"""Each tenant's agent configuration, one SSM parameter per tenant (saga.agent.config,
docs/design.md §10, §11): what `sagactl mcp --tenant T` serves with, readable by that tenant's
agent role alone (stacks/constructs/people.py grants ssm:GetParameter on it).

The values are ValidateCase's own, from the same configuration (its APPROVAL_KEYS entry of the
tenant, the alias prefix, the tenant's thresholds) and the names of what the tools call (the
state machine, the cases and drafts tables). The output `AgentConfigParameters` names the
parameters (tenant -> name) for the operator and the local AWS; on AWS, `sagactl mcp` computes
a name from the stack's (it cannot read the outputs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from saga.agent.config import AGENT_CONFIG_OUTPUT, AgentConfig, agent_config_parameter
from stacks.config import SagaConfig
from stacks.constructs.approvals import ApprovalKeys, id_part


class AgentConfigs(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SagaConfig,
        tables: Mapping[str, dynamodb.ITable],
        state_machine: sfn.StateMachine,
        approval_keys: ApprovalKeys,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        trusted = approval_keys.trusted_keys()
        self.names: dict[str, str] = {}  # tenant -> parameter name
        self.values: dict[str, str] = {}  # tenant -> the value (a deploy-time token)
        for tenant in sorted(config.tenants):
            name = agent_config_parameter(stack.stack_name, tenant)
            settings = AgentConfig(
                tenant_id=tenant,
                state_machine_arn=state_machine.state_machine_arn,
                cases_table=tables["cases"].table_name,
                drafts_table=tables["drafts"].table_name,
                legacy_drafts_table=tables["legacy_drafts"].table_name,
                approval_keys=dict(trusted[tenant]),
                approval_key_aliases=approval_keys.alias_prefix,
                approval_thresholds=dict(config.approval_thresholds.get(tenant, {})),
            )
            value = stack.to_json_string(settings.model_dump(mode="json", exclude_none=True))
            ssm.StringParameter(
                self,
                f"{id_part(tenant)}AgentConfig",
                parameter_name=name,
                string_value=value,
                description=f"The agent tools' configuration of tenant {tenant} (sagactl mcp)",
                tier=ssm.ParameterTier.STANDARD,
            )
            self.names[tenant] = name
            self.values[tenant] = value

    @staticmethod
    def arn(name: str) -> str:
        """The parameter's ARN (a name that begins with `/` follows `parameter` directly), from
        the pseudo parameters as every ARN the stack writes (common.execution_arns)."""
        return f"arn:{Aws.PARTITION}:ssm:{Aws.REGION}:{Aws.ACCOUNT_ID}:parameter{name}"

    def add_outputs(self, scope: Construct) -> None:
        CfnOutput(scope, AGENT_CONFIG_OUTPUT, value=json.dumps(self.names, sort_keys=True))
