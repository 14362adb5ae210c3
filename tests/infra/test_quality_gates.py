"""Gates on the synthesized app: cdk-nag, cfn-lint, and the ASL checked by two validators."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Validations
from constructs import IConstruct
from moto.stepfunctions.parser.asl.parse.asl_parser import (
    AmazonStateLanguageParser,
    ASLParserException,
)

from stacks.constructs.workflow import ASL_PATH
from tests.infra.synth import Synthesized, validation_problems

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CFN_LINT = PROJECT_ROOT / ".venv" / "bin" / "cfn-lint"
ASL_VALIDATOR = PROJECT_ROOT / "node_modules" / ".bin" / "asl-validator"
# W3005: CDK makes every function DependsOn its role although Fn::GetAtt already orders them;
# the redundancy is CDK's own construction and harmless. (E1029, the ${...} placeholders of
# DefinitionSubstitutions, is ignored on the state machine resource itself, in its metadata.)
CFN_LINT_IGNORED = ("W3005",)
EXPECTED_ACKNOWLEDGEMENTS = {
    "AwsSolutions-IAM5[Resource::*]",  # X-Ray / log-delivery actions without resource ARNs
    # The people's roles read and redrive the saga's executions (names are case ids).
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
    "execution:<WorkflowStateMachine8F1B1C15.Name>:*]",
    # ... and a tenant's agent only its own agent cases' (the tenantless old ids are granted by
    # their exact shape, `agt-` and 32 `?`: no `*`, which is all cdk-nag flags).
    *(
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:"
        f"execution:<WorkflowStateMachine8F1B1C15.Name>:{prefix}*]"
        for prefix in ("agt_acme_", "agt_globex_", "agt_hooli_")
    ),
    "AwsSolutions-L1",  # runtime pinned to the layer's cp312 ABI
    "AwsSolutions-DDB3",  # sandbox tables without PITR
    "AwsSolutions-SQS3",  # the dead-letter queue itself
    "AwsSolutions-KMS5",  # asymmetric approval keys cannot rotate automatically
    "CloudFormation-Validate::E1029",  # ${...} resolved by DefinitionSubstitutions
}


def _acknowledgements(root: IConstruct) -> list[tuple[str, str]]:
    """(rule id, reason) of every acknowledgement in the tree (metadata {kind::id: reason})."""
    found: list[tuple[str, str]] = []
    for construct in root.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                data: dict[str, Any] = entry.data
                found += [(key.removeprefix("Annotation::"), str(r)) for key, r in data.items()]
    return found


# --- cdk-nag ---------------------------------------------------------------------------------
def test_cdk_nag_reports_no_unacknowledged_finding(synthesized: Synthesized) -> None:
    report = synthesized.saga.nag.validate_scope(synthesized.saga.stack)
    findings = [
        (v.rule_name, [r.resource_logical_id for r in v.violating_resources])
        for v in report.violations
    ]
    assert findings == []
    assert report.success is True


def test_every_acknowledgement_has_a_specific_reason(synthesized: Synthesized) -> None:
    acknowledgements = _acknowledgements(synthesized.saga.stack)
    assert {rule for rule, _ in acknowledgements} == EXPECTED_ACKNOWLEDGEMENTS
    for rule, reason in acknowledgements:
        assert len(reason) >= 80, (rule, reason)


def test_synth_validation_report_passes(synthesized: Synthesized) -> None:
    report_path = synthesized.outdir / "validation-report.json"
    if not report_path.exists():
        return  # nothing was reported at all
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert validation_problems(report) == []


# --- cfn-lint --------------------------------------------------------------------------------
def test_cfn_lint_passes_on_the_synthesized_template(synthesized: Synthesized) -> None:
    completed = subprocess.run(
        [
            str(CFN_LINT),
            "--ignore-checks",
            *CFN_LINT_IGNORED,
            "--",
            str(synthesized.template_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


# --- ASL -------------------------------------------------------------------------------------
def _rendered_definition(synth: Synthesized, with_arns: bool) -> str:
    (machine,) = synth.resources("AWS::StepFunctions::StateMachine").values()
    text = str(machine["Properties"]["DefinitionString"])
    if with_arns:
        for name in machine["Properties"]["DefinitionSubstitutions"]:
            value = (
                "https://sqs.us-east-1.amazonaws.com/123456789012/escalation"
                if name == "EscalationQueueUrl"
                else f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
            )
            text = text.replace("${" + name + "}", value)
    return text


def test_moto_interpreter_parses_the_asl_file_and_the_rendered_definition(
    synthesized: Synthesized,
) -> None:
    for definition in (
        ASL_PATH.read_text(encoding="utf-8"),
        _rendered_definition(synthesized, with_arns=True),
    ):
        program, tree = AmazonStateLanguageParser.parse(definition)
        assert program is not None
        assert tree is not None


def test_moto_interpreter_rejects_a_broken_definition() -> None:
    broken = json.loads(ASL_PATH.read_text(encoding="utf-8"))
    broken["States"][broken["StartAt"]]["Type"] = "Teleport"
    with pytest.raises(ASLParserException):
        AmazonStateLanguageParser.parse(json.dumps(broken))


def _asl_validator(path: Path) -> subprocess.CompletedProcess[str]:
    if not ASL_VALIDATOR.exists():
        pytest.fail(f"{ASL_VALIDATOR} is missing: run `npm ci` (package.json pins it)")
    node = shutil.which("node")
    assert node, "Node.js is required for asl-validator"
    return subprocess.run(
        [str(ASL_VALIDATOR), "--json-path", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_asl_validator_accepts_the_file_and_the_rendered_definition(
    synthesized: Synthesized, tmp_path: Path
) -> None:
    rendered = tmp_path / "rendered.asl.json"
    rendered.write_text(_rendered_definition(synthesized, with_arns=True), encoding="utf-8")
    for path in (ASL_PATH, rendered):
        completed = _asl_validator(path)
        assert completed.returncode == 0, f"{path}: {completed.stdout}{completed.stderr}"


def test_asl_validator_reports_a_missing_catch_target(tmp_path: Path) -> None:
    broken = json.loads(ASL_PATH.read_text(encoding="utf-8"))
    first = broken["States"][broken["StartAt"]]
    first["Catch"] = [{"ErrorEquals": ["States.ALL"], "Next": "NoSuchState"}]
    path = tmp_path / "broken.asl.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    completed = _asl_validator(path)
    assert completed.returncode != 0
    assert "NoSuchState" in completed.stdout + completed.stderr
