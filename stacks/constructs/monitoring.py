"""Monitoring: the scheduled stuck-action sweeper, alarms and a dashboard of the saga.

Alarms: executions that ended without success and need a person, an escalation message waiting
too long (nobody is picking up decisions), anything in the escalation dead-letter queue, actions
stuck in the ledger (the sweeper's StuckActions metric), a shipment its case record refused
(CreateShipment's CaseRecordRefused metric), and the sweeper itself: it failed, or it did not
run. No alarm reads a tool's Lambda Errors: a duplicate execution is one (ValidateCase's typed
DuplicateExecution, caught to a Succeed state), so the dashboard shows ValidateCase's errors
less the duplicates it counted.

"Need a person" is what the failed-execution rule matched (EventBridge's TriggeredRules of that
rule), not Step Functions' ExecutionsFailed: a rerun of a case a person resolved ends FAILED
with ActionSettled and nothing done, and must page nobody (docs/design.md §3.10). So the alarm
and the escalation queue agree: every page has its message, every message its page. EventBridge
sends its metrics on a best-effort basis; the escalation-age alarm on the same message is the
backstop.

Missing data is "not breaching" where no data means nothing happened: no executions, no
escalations, no errors in a quiet period are not incidents. The one exception is the sweeper's
Invocations: it is scheduled, so a window of two sweep intervals without a single invocation
means the schedule stopped reaching it (rule disabled, invoke permission lost, throttled before
it ran); that is "breaching", because nothing else would notice that stuck actions are no longer
looked for.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from saga.metric_names import CASE_OUTCOMES, CASE_RECORD_REFUSED, CASES_DUPLICATE
from stacks.config import SagaConfig

STUCK_ACTIONS_METRIC = "StuckActions"
LEDGER_METRICS = (
    "ActionClaimed",
    "ActionReplayed",
    "ActionPending",
    "LeaseTakeover",
    "OutcomeUnknown",
    "BudgetExhausted",
    "KeyConflict",
    "LateReplay",
    "OutcomeAfterSettlement",  # an effect recorded next to a person's decision (§3.10)
    "RefundLimitReached",  # a refund its tenant's daily ceiling refused (§3.12)
)
# Business outcomes emitted by ValidateCase, CreateShipment and RecordOutcome.
CASE_METRICS = CASE_OUTCOMES
# The functions whose own metrics are read here (their `service` dimension).
VALIDATE_ID = "ValidateCaseFunction"
SHIP_ID = "CreateShipmentFunction"
_PERIOD = Duration.minutes(5)
_AT_LEAST = cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD


def _sums_across_functions(
    title: str, namespace: str, names: tuple[str, ...], *, width: int
) -> cw.GraphWidget:
    """One line per metric name, summed over every function's `service` dimension."""
    return cw.GraphWidget(
        title=title,
        left=[
            cw.MathExpression(
                expression=(
                    f"SUM(SEARCH('{{{namespace},service}} MetricName=\"{name}\"', 'Sum', 300))"
                ),
                label=name,
                using_metrics={},
                period=_PERIOD,
            )
            for name in names
        ],
        width=width,
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SagaConfig,
        state_machine: sfn.IStateMachine,
        unsuccessful_execution_rule: events.IRule,
        escalation_queue: sqs.IQueue,
        escalation_dead_letter_queue: sqs.IQueue,
        sweeper: lambda_.IFunction,
        sweeper_service: str,
        metrics_namespace: str,
        functions: Mapping[str, lambda_.IFunction],
        services: Mapping[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        sweep_period = Duration.minutes(config.monitoring.sweep_every_minutes)
        self.sweep_schedule = events.Rule(
            self,
            "SweepSchedule",
            description="Find ledger actions stuck IN_PROGRESS past their lease or UNKNOWN",
            schedule=events.Schedule.rate(sweep_period),
            targets=[targets.LambdaFunction(sweeper, retry_attempts=2)],
        )

        failed = state_machine.metric_failed(period=_PERIOD, statistic="Sum")
        timed_out = state_machine.metric_timed_out(period=_PERIOD, statistic="Sum")
        self.needs_a_person = cw.Metric(
            namespace="AWS/Events",
            metric_name="TriggeredRules",
            dimensions_map={"RuleName": unsuccessful_execution_rule.rule_name},
            period=_PERIOD,
            statistic="Sum",
        )
        queue_age = escalation_queue.metric_approximate_age_of_oldest_message(
            period=_PERIOD, statistic="Maximum"
        )
        dead_letters = escalation_dead_letter_queue.metric_approximate_number_of_messages_visible(
            period=_PERIOD, statistic="Maximum"
        )
        self.stuck_actions = cw.Metric(
            namespace=metrics_namespace,
            metric_name=STUCK_ACTIONS_METRIC,
            dimensions_map={"service": sweeper_service},
            period=sweep_period,
            statistic="Maximum",
        )
        self.case_record_refused = cw.Metric(
            namespace=metrics_namespace,
            metric_name=CASE_RECORD_REFUSED,
            dimensions_map={"service": services[SHIP_ID]},
            period=_PERIOD,
            statistic="Sum",
        )
        self.sweeper_errors = sweeper.metric_errors(period=sweep_period, statistic="Sum")
        # Two sweep intervals: a late schedule (EventBridge may deliver a rate rule's event
        # late) still lands an invocation in every window.
        self.sweeper_invocations = sweeper.metric_invocations(
            period=Duration.minutes(2 * config.monitoring.sweep_every_minutes), statistic="Sum"
        )
        self.alarms = {
            "ExecutionsUnsuccessful": self._alarm(
                "ExecutionsUnsuccessfulAlarm",
                self.needs_a_person,
                1,
                "A saga execution ended FAILED, TIMED_OUT or ABORTED with work for a person (its "
                "message is on the escalation queue: sagactl escalations); a refused rerun of a "
                "resolved case is not one",
            ),
            "EscalationAge": self._alarm(
                "EscalationQueueAgeAlarm",
                queue_age,
                config.monitoring.escalation_age_alarm_minutes * 60,
                "An escalation has waited longer than the agreed pick-up time",
            ),
            "EscalationDeadLetters": self._alarm(
                "EscalationDeadLetterAlarm",
                dead_letters,
                1,
                "Escalations could not be processed or delivered (dead-letter queue)",
            ),
            # A shipment its case record refused (a person resolved the case meanwhile, another
            # execution owns it): the execution may be gone (aborted, timed out), so the
            # function's own count pages (docs/design.md §3.11).
            "CaseRecordRefused": self._alarm(
                "CaseRecordRefusedAlarm",
                self.case_record_refused,
                1,
                "A shipment was made that its case record could not record (a person resolved "
                "the case meanwhile, or another execution owns it): sagactl escalations show CASE",
            ),
            "StuckActions": self._alarm(
                "StuckActionsAlarm",
                self.stuck_actions,
                1,
                "Ledger actions are stuck IN_PROGRESS past their lease or UNKNOWN",
            ),
            # No Errors datapoint: no failed sweep (a sweep that did not run is the next alarm).
            "SweeperErrors": self._alarm(
                "SweeperErrorsAlarm",
                self.sweeper_errors,
                1,
                "The stuck-action sweeper failed: stuck actions may go unreported",
            ),
            "SweeperNotRunning": self._alarm(
                "SweeperNotRunningAlarm",
                self.sweeper_invocations,
                1,
                "The stuck-action sweeper was not invoked for two sweep intervals",
                comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                missing=cw.TreatMissingData.BREACHING,
            ),
        }

        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.hours(24))
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Executions",
                left=[
                    state_machine.metric_started(period=_PERIOD, statistic="Sum"),
                    state_machine.metric_succeeded(period=_PERIOD, statistic="Sum"),
                    failed,
                    timed_out,
                ],
                width=12,
            ),
            cw.GraphWidget(
                title="Escalations",
                left=[
                    escalation_queue.metric_approximate_number_of_messages_visible(
                        period=_PERIOD, statistic="Maximum"
                    ),
                    dead_letters,
                ],
                right=[queue_age],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            _sums_across_functions(
                "Action ledger decisions", metrics_namespace, LEDGER_METRICS, width=12
            ),
            cw.GraphWidget(
                title="Stuck actions and the sweeper",
                left=[self.stuck_actions],
                right=[self.sweeper_invocations, self.sweeper_errors],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            _sums_across_functions(
                "Cases: accepted, completed, escalated", metrics_namespace, CASE_METRICS, width=24
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Tool errors (ValidateCase without duplicates)",
                left=[
                    self._errors(fid, fn, metrics_namespace, services)
                    for fid, fn in functions.items()
                ],
                width=12,
            ),
            cw.GraphWidget(
                title="Tool duration p99",
                left=[
                    fn.metric_duration(period=_PERIOD, statistic="p99", label=fid)
                    for fid, fn in functions.items()
                ],
                width=12,
            ),
        )

    @staticmethod
    def _errors(
        fid: str, fn: lambda_.IFunction, namespace: str, services: Mapping[str, str]
    ) -> cw.IMetric:
        """A function's Errors; ValidateCase's less the duplicates it counted: a duplicate ends
        the execution SUCCEEDED through a Catch of its typed error, yet Lambda counts every
        function error (docs/design.md §4.1)."""
        errors = fn.metric_errors(period=_PERIOD, statistic="Sum", label=fid)
        if fid != VALIDATE_ID:
            return errors
        duplicates = cw.Metric(
            namespace=namespace,
            metric_name=CASES_DUPLICATE,
            dimensions_map={"service": services[fid]},
            period=_PERIOD,
            statistic="Sum",
        )
        return cw.MathExpression(
            expression="errors - FILL(duplicates, 0)",
            using_metrics={"errors": errors, "duplicates": duplicates},
            label=f"{fid} (duplicates excluded)",
            period=_PERIOD,
        )

    def _alarm(
        self,
        construct_id: str,
        metric: cw.IMetric,
        threshold: float,
        description: str,
        *,
        comparison: cw.ComparisonOperator = _AT_LEAST,
        missing: cw.TreatMissingData = cw.TreatMissingData.NOT_BREACHING,
    ) -> cw.Alarm:
        return cw.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=comparison,
            treat_missing_data=missing,
            alarm_description=description,
        )
