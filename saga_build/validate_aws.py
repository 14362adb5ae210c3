"""`make validate-aws`: ask AWS itself about the synthesized stack before `cdk deploy`.

No local check can promise what Step Functions accepts: this runs, with the caller's own
credentials (the default chain: AWS_PROFILE, environment, SSO...), the real AWS CLI's
`aws stepfunctions validate-state-machine-definition` on every state machine definition of the
template, as CloudFormation will send it, then cfn-lint on the template. Nothing is created and
no role is needed: the caller needs `states:ValidateStateMachineDefinition` (and
`sts:GetCallerIdentity`, which every principal may call).

As CloudFormation would: the DefinitionSubstitutions are applied, each resolved to the ARN or URL
the resource will have (the caller's account and region, the stack's resource names); the names
CloudFormation generates are not known before deploy, so a Lambda function's ARN uses the name
`<stack>-<logical id>`. Validation checks the definition's shape, not that resources exist.

Usage: python -m saga_build.validate_aws [--template PATH] [--stack-name NAME] [--region REGION]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from local_aws.synth import SynthError, synthesize_with_cdk_cli
from local_aws.template import (
    PhysicalResource,
    ResolutionContext,
    TemplateError,
    load_template,
    readable_logical_id,
)
from sagactl.paths import PROJECT_ROOT

BIN = Path(sys.executable).parent
AWS_CLI = BIN / "aws"
CFN_LINT = BIN / "cfn-lint"
STATE_MACHINE_TYPE = "AWS::StepFunctions::StateMachine"
CLI_TIMEOUT_SECONDS = 120
_TEMPLATE_SUFFIX = ".template.json"


class ValidationFailed(Exception):
    """A check could not run (credentials, CLI); the message says what to do."""


@dataclass(frozen=True)
class Target:
    template_path: Path
    stack_name: str
    region: str
    account_id: str


def deployed_resource(
    target: Target, resources: dict[str, Any], logical_id: str
) -> PhysicalResource:
    """What Ref / Fn::GetAtt of a resource will be once deployed (name: `<stack>-<id>`)."""
    resource = resources[logical_id]
    kind = str(resource.get("Type", ""))
    props = resource.get("Properties", {})
    region, account = target.region, target.account_id
    service = kind.split("::")[1].lower() if kind.count("::") == 2 else "cloudformation"
    name = f"{target.stack_name}-{readable_logical_id(logical_id)}"
    if kind == "AWS::Lambda::Function":
        name = str(props.get("FunctionName", name))
        arn = f"arn:aws:lambda:{region}:{account}:function:{name}"
        return PhysicalResource(ref=name, attributes={"Arn": arn})
    if kind == "AWS::SQS::Queue":
        name = str(props.get("QueueName", name))
        url = f"https://sqs.{region}.amazonaws.com/{account}/{name}"
        arn = f"arn:aws:sqs:{region}:{account}:{name}"
        return PhysicalResource(
            ref=url, attributes={"Arn": arn, "QueueName": name, "QueueUrl": url}
        )
    if kind == "AWS::DynamoDB::Table":
        name = str(props.get("TableName", name))
        arn = f"arn:aws:dynamodb:{region}:{account}:table/{name}"
        return PhysicalResource(ref=name, attributes={"Arn": arn, "StreamArn": f"{arn}/stream/x"})
    if kind == STATE_MACHINE_TYPE:
        arn = f"arn:aws:states:{region}:{account}:stateMachine:{name}"
        return PhysicalResource(ref=arn, attributes={"Arn": arn, "Name": name})
    if kind == "AWS::IAM::Role":
        arn = f"arn:aws:iam::{account}:role/{name}"
        return PhysicalResource(ref=name, attributes={"Arn": arn})
    return PhysicalResource(
        ref=name, attributes={"Arn": f"arn:aws:{service}:{region}:{account}:{name}"}
    )


def definitions(target: Target) -> dict[str, str]:
    """Each state machine's definition, by logical id, with DefinitionSubstitutions applied."""
    template = load_template(target.template_path)
    resources: dict[str, Any] = template["Resources"]
    ctx = ResolutionContext(
        stack_name=target.stack_name,
        region=target.region,
        account_id=target.account_id,
        template=template,
        fallback=lambda logical_id: deployed_resource(target, resources, logical_id),
    )
    found: dict[str, str] = {}
    for logical_id, resource in resources.items():
        if resource.get("Type") != STATE_MACHINE_TYPE:
            continue
        props = resource.get("Properties", {})
        if "DefinitionString" in props:
            text = str(ctx.resolve(props["DefinitionString"]))
        elif "Definition" in props:
            text = json.dumps(ctx.resolve(props["Definition"]))
        else:
            raise TemplateError(f"{logical_id} has no inline definition (DefinitionS3Location?)")
        for key, value in ctx.resolve(props.get("DefinitionSubstitutions", {})).items():
            text = text.replace(f"${{{key}}}", str(value))
        found[logical_id] = text
    if not found:
        raise TemplateError(f"{target.template_path} has no {STATE_MACHINE_TYPE}")
    return found


def _run(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(command),
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_SECONDS,
            check=False,
            env=os.environ.copy(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValidationFailed(f"cannot run {command[0]} (run `make venv`): {exc}") from exc


def _aws(*args: str, region: str) -> Any:
    """One AWS CLI call, always in `region`: a profile's or the environment's own region
    would otherwise decide where the definition is validated."""
    completed = _run([str(AWS_CLI), "--output", "json", "--region", region, *args])
    if completed.returncode != 0:
        raise ValidationFailed(
            f"`aws {' '.join(args[:2])}` failed: {completed.stderr.strip() or completed.stdout}"
        )
    return json.loads(completed.stdout)


def validate_definition(path: Path, region: str) -> dict[str, Any]:
    """`aws stepfunctions validate-state-machine-definition` on one definition file."""
    answer: dict[str, Any] = _aws(
        "stepfunctions",
        "validate-state-machine-definition",
        "--definition",
        f"file://{path}",
        "--type",
        "STANDARD",
        "--severity",
        "WARNING",
        region=region,
    )
    return answer


def cfn_lint(template_path: Path) -> subprocess.CompletedProcess[str]:
    """cfn-lint; only errors fail (warnings are shown: the template's own metadata decides)."""
    return _run(
        [
            str(CFN_LINT),
            "--format",
            "parseable",
            "--non-zero-exit-code",
            "error",
            "--",
            str(template_path),
        ]
    )


def _template(args: argparse.Namespace) -> tuple[Path, str]:
    if args.template is not None:
        path: Path = args.template
        name = args.stack_name or path.name.removesuffix(_TEMPLATE_SUFFIX)
        return path, name
    outdir: Path = args.outdir
    context = {"stage": args.stage} if args.stage else {}
    shown = " ".join(f"-c {k}={v}" for k, v in context.items())
    print(f"npx cdk synth {shown}{' ' if shown else ''}-o {outdir} ...", file=sys.stderr)
    stack = synthesize_with_cdk_cli(outdir, context=context, stack_name=args.stack_name)
    return stack.template_path, stack.stack_name


def run(args: argparse.Namespace) -> int:
    template_path, stack_name = _template(args)
    region = args.region or boto3.session.Session().region_name or "us-east-1"
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    where = f"the endpoint {endpoint}" if endpoint else f"AWS ({region})"
    account = str(_aws("sts", "get-caller-identity", region=region)["Account"])
    target = Target(template_path, stack_name, region, account)
    print(f"validating {template_path} with {where}, account {account}")
    failed = False
    outdir = template_path.parent
    for logical_id, text in definitions(target).items():
        path = outdir / f"{stack_name}.{logical_id}.asl.json"
        path.write_text(text, encoding="utf-8")
        answer = validate_definition(path, region)
        diagnostics = answer.get("diagnostics", [])
        print(
            f"aws stepfunctions validate-state-machine-definition --region {region} "
            f"--definition file://{path}: "
            f"{answer['result']} ({len(diagnostics)} diagnostics)"
        )
        for d in diagnostics:
            print(f"  {d['severity']} {d['code']} at {d.get('location', '-')}: {d['message']}")
        failed = failed or answer["result"] != "OK"
    lint = cfn_lint(template_path)
    print(f"cfn-lint {template_path}: {'errors' if lint.returncode else 'no errors'}")
    if lint.stdout.strip():
        print(lint.stdout.rstrip())
    failed = failed or lint.returncode != 0
    print("validate-aws: FAILED" if failed else "validate-aws: OK")
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="make validate-aws",
        description="Validate the synthesized stack with AWS (your credentials) and cfn-lint.",
    )
    parser.add_argument(
        "--template", type=Path, help="a synthesized template (default: `npx cdk synth`)"
    )
    parser.add_argument("--stage", help="the stage to synthesize (default: cdk.json's)")
    parser.add_argument(
        "--outdir",
        type=Path,
        default=PROJECT_ROOT / "cdk.out",
        help="where `npx cdk synth` writes (default: cdk.out)",
    )
    parser.add_argument("--stack-name", help="stack name (default: from the template)")
    parser.add_argument("--region", help="region (default: your AWS configuration)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except (ValidationFailed, SynthError, TemplateError) as exc:
        print(f"validate-aws: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
