"""docs/deploy.md (what a deploy creates and costs at rest) is the synthesized template's, and
what it counts follows the template."""

from __future__ import annotations

import copy

from saga_bench.deploy_cost import DEFAULT_OUTPUT, cost_lines, render, scheduled_functions
from tests.infra.synth import Synthesized


def test_the_committed_page_is_the_synthesized_templates(synthesized: Synthesized) -> None:
    expected = render(synthesized.template_json, synthesized.saga.stack.stack_name)
    assert DEFAULT_OUTPUT.read_text(encoding="utf-8") == expected, (
        "docs/deploy.md is stale: python -m saga_bench.deploy_cost --write docs/deploy.md"
    )


def test_the_costs_at_rest_are_counted_from_the_template(synthesized: Synthesized) -> None:
    template = synthesized.template_json
    lines = {line.resource: line for line in cost_lines(template)}
    keys = synthesized.resources("AWS::KMS::Key")
    assert (lines["AWS::KMS::Key"].count, lines["AWS::KMS::Key"].usd) == (len(keys), len(keys))
    assert lines["AWS::CloudWatch::Alarm"].count == len(
        synthesized.resources("AWS::CloudWatch::Alarm")
    )
    assert lines["custom metrics"].why.startswith("published by every sweep: StuckActions ")
    # The sweeper, every 5 minutes: 730 h x 12 a month.
    [(runs, sweeper)] = scheduled_functions(template)
    assert runs == 8760
    assert sweeper["Handler"] == "saga.handlers.sweep_stuck_actions.handler"

    # Another approver's key, or a sweep every minute, changes the figures.
    changed = copy.deepcopy(template)
    [key_id] = [k for k, r in changed["Resources"].items() if r["Type"] == "AWS::KMS::Key"][:1]
    changed["Resources"][key_id + "Copy"] = changed["Resources"][key_id]
    for resource in changed["Resources"].values():
        if resource["Properties"].get("ScheduleExpression") == "rate(5 minutes)":
            resource["Properties"]["ScheduleExpression"] = "rate(1 minute)"
    more = {line.resource: line for line in cost_lines(changed)}
    assert more["AWS::KMS::Key"].usd == lines["AWS::KMS::Key"].usd + 1
    assert more["scheduled runs (Lambda, X-Ray, Logs, DynamoDB)"].count == 5 * 8760


def test_a_stack_without_the_sandbox_has_three_tables_fewer(
    synthesized: Synthesized, synthesized_without_sandbox: Synthesized
) -> None:
    with_sandbox = render(synthesized.template_json, "a")
    without = render(synthesized_without_sandbox.template_json, "b")
    assert "| `AWS::DynamoDB::Table` | 10 |" in with_sandbox
    assert "| `AWS::DynamoDB::Table` | 7 |" in without
