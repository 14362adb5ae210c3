"""The production stack: a thin composition of one construct per concern, plus its outputs.

Outputs carry the keys of docs/design.md §8 (the local emulator writes the same keys to
`.local/outputs.json`). Physical names are left to CloudFormation, which derives them from the
stack name, and the stack name carries the stage: two stages deploy side by side.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from stacks.config import SANDBOX_PAYMENTS, SagaConfig
from stacks.constructs.agent_config import AgentConfigs
from stacks.constructs.agent_gateway import AgentGateway
from stacks.constructs.approvals import ApprovalKeys
from stacks.constructs.escalation import Escalation
from stacks.constructs.monitoring import Monitoring
from stacks.constructs.people import PeopleRoles
from stacks.constructs.sandbox import SandboxDownstreams
from stacks.constructs.tables import SagaTables
from stacks.constructs.tools import ToolFunctions, metrics_namespace
from stacks.constructs.workflow import ASL_PATH, SagaWorkflow
from stacks.environment_budget import check_agent_configs, check_environments

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BUILD_CACHE = PROJECT_ROOT / ".build"
SWEEPER_ID = "SweepStuckActionsFunction"
VALIDATE_CASE_ID = "ValidateCaseFunction"


class SagaStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SagaConfig,
        build_cache: Path = DEFAULT_BUILD_CACHE,
        asl_path: Path = ASL_PATH,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.tables = SagaTables(self, "Tables", config=config)
        table_map: dict[str, dynamodb.ITable] = {
            "ledger": self.tables.ledger,
            "cases": self.tables.cases,
            "inventory": self.tables.inventory,
            "reservations": self.tables.reservations,
            "limits": self.tables.limits,
            # ValidateCase reads a draft (docs/design.md §10); the people's roles name their own.
            "drafts": self.tables.drafts,
            "legacy_drafts": self.tables.legacy_drafts,
        }
        self.sandbox: SandboxDownstreams | None = None
        if config.sandbox:
            self.sandbox = SandboxDownstreams(self, "Sandbox", config=config)
            table_map |= {
                "payments": self.sandbox.payments,
                "shipments": self.sandbox.shipments,
                "sandbox": self.sandbox.control,
            }
        self.escalation = Escalation(self, "Escalation")
        self.approval_keys = ApprovalKeys(self, "Approvals", config=config)
        self.tools = ToolFunctions(
            self,
            "Tools",
            config=config,
            tables=table_map,
            escalation_queue=self.escalation.queue,
            approval_keys=self.approval_keys,
            build_cache=build_cache,
        )
        saga_functions = {fid: fn for fid, fn in self.tools.functions.items() if fid != SWEEPER_ID}
        self.workflow = SagaWorkflow(
            self,
            "Workflow",
            config=config,
            functions=saga_functions,
            escalation_queue=self.escalation.queue,
            asl_path=asl_path,
        )
        unsuccessful = self.escalation.route_unsuccessful_executions(self.workflow.state_machine)
        self.agent_gateway: AgentGateway | None = None
        if config.agent_gateway.enabled:
            self.agent_gateway = AgentGateway(
                self,
                "AgentGateway",
                config=config,
                tools=self.tools,
                tables={
                    "drafts": self.tables.drafts,
                    "legacy_drafts": self.tables.legacy_drafts,
                    "cases": self.tables.cases,
                },
                state_machine=self.workflow.state_machine,
            )
        self.agent_configs = AgentConfigs(
            self,
            "AgentConfigs",
            config=config,
            tables=table_map,
            state_machine=self.workflow.state_machine,
            approval_keys=self.approval_keys,
        )
        self.people = PeopleRoles(
            self,
            "People",
            config=config,
            tables=table_map,
            escalation_queue=self.escalation.queue,
            state_machine=self.workflow.state_machine,
            approval_keys=self.approval_keys,
            validate_case=self.tools.functions[VALIDATE_CASE_ID],
            sweeper=self.tools.functions[SWEEPER_ID],
            agent_configs=self.agent_configs,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            state_machine=self.workflow.state_machine,
            unsuccessful_execution_rule=unsuccessful,
            escalation_queue=self.escalation.queue,
            escalation_dead_letter_queue=self.escalation.dead_letter_queue,
            sweeper=self.tools.functions[SWEEPER_ID],
            sweeper_service=self.tools.services[SWEEPER_ID],
            metrics_namespace=metrics_namespace(config),
            functions=self.tools.functions,
            services=self.tools.services,
        )

        outputs = {
            "StateMachineArn": self.workflow.state_machine.state_machine_arn,
            "EscalationQueueUrl": self.escalation.queue.queue_url,
            "LedgerTableName": self.tables.ledger.table_name,
            "CasesTableName": self.tables.cases.table_name,
            "DraftsTableName": self.tables.drafts.table_name,
            "LegacyDraftsTableName": self.tables.legacy_drafts.table_name,
            "InventoryTableName": self.tables.inventory.table_name,
            "ReservationsTableName": self.tables.reservations.table_name,
            # The daily refund counters (docs/design.md §3.12).
            "LimitsTableName": self.tables.limits.table_name,
            # What the deployed tools enforce, so operators (sagactl) show the real budget.
            "AttemptBudget": str(config.ledger.attempt_budget),
            # The functions sagactl reads (trusted keys) and invokes (a sweep now), by name:
            # the operator's role may read these two, not every function of the account.
            "ValidateCaseFunctionName": self.tools.functions[VALIDATE_CASE_ID].function_name,
            "SweeperFunctionName": self.tools.functions[SWEEPER_ID].function_name,
        }
        if self.sandbox is not None:
            outputs |= {
                "ShipmentsTableName": self.sandbox.shipments.table_name,
                "SandboxTableName": self.sandbox.control.table_name,
            }
            if config.payments == SANDBOX_PAYMENTS:  # with Stripe no refund lands there
                outputs["PaymentsTableName"] = self.sandbox.payments.table_name
        for key, value in outputs.items():
            CfnOutput(self, key, value=value)
        self.approval_keys.add_outputs(self, config.approval_thresholds)
        # The daily refund ceilings the deployed tools enforce (JSON: tenant -> currency -> minor
        # units per UTC day, docs/design.md §3.12).
        CfnOutput(
            self,
            "RefundCeilings",
            value=json.dumps(config.refund_ceilings, sort_keys=True, separators=(",", ":")),
        )
        self.people.add_outputs(self)
        self.agent_configs.add_outputs(self)
        if self.agent_gateway is not None:
            self.agent_gateway.add_outputs(self)
        # Lambda's 4 KB per environment, checked here rather than refused mid-deploy.
        self.environment_sizes = check_environments(self, self.tools.environments)
        # SSM's 4 KB per standard parameter, likewise.
        check_agent_configs(self, self.agent_configs.values)
