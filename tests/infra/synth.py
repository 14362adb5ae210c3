"""Synthesize the real CDK app into a directory and expose its template for assertions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk.assertions import Template

from stacks.app_factory import SagaApp, build_app


@dataclass(frozen=True)
class Synthesized:
    saga: SagaApp
    outdir: Path
    template_path: Path
    template_json: dict[str, Any]
    template: Template

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource
            for logical_id, resource in self.template_json["Resources"].items()
            if resource["Type"] == resource_type
        }

    def logical_id(self, construct: Any) -> str:
        return str(self.saga.stack.get_logical_id(construct.node.default_child))


def synthesize(outdir: Path, context: dict[str, Any] | None = None) -> Synthesized:
    saga = build_app(context, outdir=str(outdir))
    assembly = saga.app.synth()
    artifact = assembly.get_stack_by_name(saga.stack.stack_name)
    template_path = outdir / artifact.template_file
    template_json = json.loads(template_path.read_text(encoding="utf-8"))
    return Synthesized(
        saga=saga,
        outdir=outdir,
        template_path=template_path,
        template_json=template_json,
        template=Template.from_json(template_json),
    )


# The one warning the default app gives by design: the four-eyes demo tenant's approver roles
# trust the whole account, allowed in the sandbox only (stacks/four_eyes_config.py).
ACCEPTED_WARNINGS = {("Annotation::saga:four-eyes-account-trust:hooli", "warning")}


def validation_problems(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(plugin, rule, severity) of everything a validation report holds against the app but
    the accepted warnings; a plugin that did not succeed is one too."""
    problems = []
    for plugin in report["pluginReports"]:
        name = plugin["pluginName"]
        if plugin["conclusion"] != "success":
            problems.append((name, "conclusion", plugin["conclusion"]))
        for violation in plugin.get("violations", []):
            found = (violation["ruleName"], violation["severity"])
            if found not in ACCEPTED_WARNINGS:
                problems.append((name, *found))
    return problems
