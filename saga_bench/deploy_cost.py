"""What a deploy creates and what it costs at rest, read from the synthesized template.

    python -m saga_bench.deploy_cost [--template cdk.out/<stack>.template.json] [--write FILE]

"At rest" is a month with no case: every resource exists, and only what runs by itself runs,
the scheduled sweeper (every `rate(...)` rule's target). The counts, the keys, alarms and
dashboards, the schedule, the sweeper's memory and architecture and which tables keep
point-in-time recovery are read from the template, so the page follows the stack
(docs/deploy.md is this module's output for the default app; tests/infra/test_deploy_cost.py
checks it is current). The prices are AWS's list prices in us-east-1 (PRICES, each with its
page); other regions differ by a few percent. One figure is an assumption, and says so: how
long a sweep is billed for.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagactl.paths import PROJECT_ROOT

HOURS_PER_MONTH = 730  # AWS's pricing pages count a month as 730 hours
SWEEP_BILLED_SECONDS = 1.0  # an assumption: one Query of an empty sparse index, billed at most 1 s
SWEEP_LOG_BYTES = 1024  # START/END/REPORT, the sweeper's one log line and its EMF metrics line
DEFAULT_OUTPUT = PROJECT_ROOT / "docs" / "deploy.md"


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str
    source: str


PRICES = {
    "kms_key": Price(1.00, "per key-month", "https://aws.amazon.com/kms/pricing/"),
    "alarm": Price(
        0.10,
        "per standard-resolution alarm metric-month",
        "https://aws.amazon.com/cloudwatch/pricing/",
    ),
    "dashboard": Price(3.00, "per dashboard-month", "https://aws.amazon.com/cloudwatch/pricing/"),
    "custom_metric": Price(0.30, "per metric-month", "https://aws.amazon.com/cloudwatch/pricing/"),
    "log_ingestion": Price(0.50, "per GB ingested", "https://aws.amazon.com/cloudwatch/pricing/"),
    "lambda_request": Price(0.20, "per million requests", "https://aws.amazon.com/lambda/pricing/"),
    "lambda_arm_gb_second": Price(
        0.0000133334, "per GB-second (arm64)", "https://aws.amazon.com/lambda/pricing/"
    ),
    "xray_trace": Price(
        5.00, "per million traces recorded", "https://aws.amazon.com/xray/pricing/"
    ),
    "dynamodb_read": Price(
        0.125,
        "per million on-demand read request units",
        "https://aws.amazon.com/dynamodb/pricing/",
    ),
    "dynamodb_write": Price(
        0.625,
        "per million on-demand write request units",
        "https://aws.amazon.com/dynamodb/pricing/",
    ),
    "sfn_transition": Price(
        0.025,
        "per 1,000 state transitions (STANDARD workflows)",
        "https://aws.amazon.com/step-functions/pricing/",
    ),
}
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


@dataclass(frozen=True)
class Line:
    resource: str
    count: int
    usd: float  # per month at rest
    why: str


def _resources(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == kind]


def _logical(template: dict[str, Any], ref: Any) -> dict[str, Any] | None:
    """The resource a `{"Fn::GetAtt": [id, ...]}` or `{"Ref": id}` names."""
    if isinstance(ref, dict):
        name = ref.get("Ref") or (ref.get("Fn::GetAtt") or [None])[0]
        return template["Resources"].get(name) if isinstance(name, str) else None
    return None


def scheduled_functions(template: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(invocations a month, function properties) for each function a `rate(...)` rule runs."""
    found = []
    for rule in _resources(template, "AWS::Events::Rule"):
        match = _RATE.match(str(rule["Properties"].get("ScheduleExpression", "")))
        if match is None:
            continue
        period = int(match.group(1)) * _UNIT_SECONDS[match.group(2).rstrip("s")]
        for target in rule["Properties"].get("Targets", []):
            function = _logical(template, target.get("Arn"))
            if function is not None and function["Type"] == "AWS::Lambda::Function":
                found.append((HOURS_PER_MONTH * 3600 // period, function["Properties"]))
    return found


def _custom_metrics_at_rest(template: dict[str, Any], services: set[str]) -> list[str]:
    """Metrics of the stack's own namespace that an alarm watches and a scheduled function
    publishes (its Powertools `service` dimension): they exist every hour, cases or not."""
    names = set()
    for alarm in _resources(template, "AWS::CloudWatch::Alarm"):
        props = alarm["Properties"]
        dimensions = {d["Name"]: d["Value"] for d in props.get("Dimensions", [])}
        if not str(props.get("Namespace", "AWS/")).startswith("AWS/") and (
            dimensions.get("service") in services
        ):
            names.add(str(props["MetricName"]))
    return sorted(names)


def _sweeps(template: dict[str, Any]) -> Line:
    scheduled = scheduled_functions(template)
    runs = sum(count for count, _ in scheduled)
    gb_seconds = sum(
        count * props.get("MemorySize", 128) / 1024 * SWEEP_BILLED_SECONDS
        for count, props in scheduled
    )
    traced = sum(
        count
        for count, props in scheduled
        if props.get("TracingConfig", {}).get("Mode") == "Active"
    )
    requests = runs / 1e6 * PRICES["lambda_request"].usd
    compute = gb_seconds * PRICES["lambda_arm_gb_second"].usd
    traces = traced / 1e6 * PRICES["xray_trace"].usd
    logs = runs * SWEEP_LOG_BYTES / 1e9 * PRICES["log_ingestion"].usd
    reads = runs / 1e6 * PRICES["dynamodb_read"].usd  # one Query of the sparse index each
    memory = ", ".join(sorted({f"{p.get('MemorySize', 128)} MB" for _, p in scheduled}))
    return Line(
        "scheduled runs (Lambda, X-Ray, Logs, DynamoDB)",
        runs,
        requests + compute + traces + logs + reads,
        f"{runs:,} sweeps a month ({memory}, billed at most {SWEEP_BILLED_SECONDS:g} s each, an "
        f"assumption): requests ${requests:.4f}, compute ${compute:.4f}, traces ${traces:.4f} "
        f"(active tracing), about {SWEEP_LOG_BYTES / 1024:g} KB of log each ${logs:.4f}, one "
        f"Query each ${reads:.4f}",
    )


def cost_lines(template: dict[str, Any]) -> list[Line]:
    """What costs money at rest, from the template (zero-cost resources are `free_resources`)."""
    keys = len(_resources(template, "AWS::KMS::Key"))
    alarm_metrics = sum(
        max(1, len(a["Properties"].get("Metrics", [])))
        for a in _resources(template, "AWS::CloudWatch::Alarm")
    )
    dashboards = len(_resources(template, "AWS::CloudWatch::Dashboard"))
    services = {
        str(p.get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME"))
        for _, p in scheduled_functions(template)
    }
    metrics = _custom_metrics_at_rest(template, services)
    return [
        Line(
            "AWS::KMS::Key",
            keys,
            keys * PRICES["kms_key"].usd,
            "one approval key per approver; a rotation keeps the retired key: $1.00 more each",
        ),
        Line(
            "AWS::CloudWatch::Alarm",
            alarm_metrics,
            alarm_metrics * PRICES["alarm"].usd,
            "standard resolution, one metric each (an account's first 10 are free)",
        ),
        Line(
            "AWS::CloudWatch::Dashboard",
            dashboards,
            dashboards * PRICES["dashboard"].usd,
            "an account's first 3 dashboards are free",
        ),
        Line(
            "custom metrics",
            len(metrics),
            len(metrics) * PRICES["custom_metric"].usd,
            f"published by every sweep: {', '.join(metrics) or 'none'} (an account's first 10 "
            "are free); the saga's other metrics exist only in hours with cases",
        ),
        _sweeps(template),
    ]


FREE = {
    "AWS::DynamoDB::Table": "on demand: requests only; storage $0.25 and point-in-time "
    "recovery $0.20 per GB-month of what they hold (nothing while empty)",
    "AWS::Lambda::Function": "idle functions cost nothing (the sweeper's runs are above)",
    "AWS::Lambda::LayerVersion": "stored with the function code",
    "AWS::StepFunctions::StateMachine": "per state transition only",
    "AWS::SQS::Queue": "requests only",
    "AWS::Events::Rule": "scheduled and AWS service events on the default bus are free",
    "AWS::Logs::LogGroup": "$0.03 per GB-month stored (the sweeper's lines are above)",
    "AWS::SSM::Parameter": "standard parameters (each tenant's agent configuration) and their "
    "standard throughput are free",
}


# Stands for the reader's account in the example: AWS's documentation account.
EXAMPLE_ACCOUNT = "111122223333"


def four_eyes_approvers(template: dict[str, Any]) -> dict[str, list[str]]:
    """The approvers of each tenant with four-eyes thresholds (the `ApprovalThresholds` output),
    as the tags of their approval keys name them."""
    output = template.get("Outputs", {}).get("ApprovalThresholds", {}).get("Value", "{}")
    tenants = set(json.loads(output)) if isinstance(output, str) else set()
    approvers: dict[str, set[str]] = {tenant: set() for tenant in tenants}
    for key in _resources(template, "AWS::KMS::Key"):
        tags = {tag["Key"]: tag["Value"] for tag in key["Properties"].get("Tags", [])}
        if tags.get("saga:tenant") in approvers and "saga:approver" in tags:
            approvers[tags["saga:tenant"]].add(tags["saga:approver"])
    return {tenant: sorted(names) for tenant, names in sorted(approvers.items())}


def own_principals_example(approvers: dict[str, list[str]]) -> dict[str, Any]:
    """`approval_keys` naming each four-eyes approver's own IAM user (a user name may be the
    approver's own name: letters, digits and `+=,.@_-`)."""
    return {
        f"{tenant}/{approver}": {
            "role_assumed_by": [f"arn:aws:iam::{EXAMPLE_ACCOUNT}:user/{approver}"]
        }
        for tenant, names in approvers.items()
        for approver in names
    }


def approver_trust_lines(template: dict[str, Any]) -> list[str]:
    """Who may assume the approver roles the template creates: the risk of the default (the
    account) and how to tighten it (`role_assumed_by`, stacks/constructs/approvals.py), and
    for four eyes how to name each approver's own principal (stacks/four_eyes_config.py)."""
    roles = {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::IAM::Role" and "ApproverRole" in logical_id
    }
    confined = sorted(
        logical_id
        for logical_id, role in roles.items()
        if any(
            "aws:PrincipalArn" in json.dumps(statement.get("Condition", {}))
            for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        )
    )
    open_to_account = len(roles) - len(confined)
    lines = [
        "## Who may assume the approver roles",
        "",
        f"{len(roles)} approver role(s), each able to sign approvals with its approver's key; "
        f"{open_to_account} trust(s) the whole account (the default): any principal of the "
        "account whose own IAM policies allow `sts:AssumeRole` on it (an administrator, a "
        "developer with `sts:AssumeRole` on `*`) may assume it, with MFA unless "
        "`role_requires_mfa` is false, and sign as that approver. That is the account's IAM "
        "deciding who approves refunds. To tighten it, name who may assume each role in "
        '`cdk.json`: `approval_keys."<tenant>/<approver>".role_assumed_by`, a list of IAM '
        "role or user ARNs (the trust policy then requires `aws:PrincipalArn` to be one of "
        "them); keep `sts:AssumeRole` on `*` out of other principals' policies, or deny the "
        "approver roles' ARNs there.",
        "",
    ]
    four_eyes = four_eyes_approvers(template)
    if not four_eyes:
        return lines
    example = json.dumps({"approval_keys": own_principals_example(four_eyes)}, indent=2)
    return [
        *lines,
        "**Four eyes means two people.** For a tenant with `approval_thresholds` "
        f"({', '.join(four_eyes)}), each approver's signature must be one person's, or one "
        "person who may assume two approver roles signs with both keys and counts as two. So "
        "synth refuses, for such a tenant, any principal who could sign for two of its "
        "approvers (named in two `role_assumed_by` lists, or one approver's `principal` in "
        "another's `role_assumed_by`; ARNs compared by account, kind and name, "
        "case-insensitively, an account's `root` standing for all of it, `sts:` session ARNs "
        "refused), and it refuses the default trust above unless `sandbox` is on and the "
        "payments provider is the sandbox's (`payments`, default `sandbox`), where it warns "
        "(`saga:four-eyes-account-trust`). Before `-c sandbox=false`, name each approver's own "
        "principal: in `cdk.json`, or with `-c 'approval_keys={...}'`, for example (your "
        "account id, each person's own IAM user or role):",
        "",
        "```json",
        *example.splitlines(),
        "```",
        "",
        "A role named there must be one person's: whoever may assume it signs as that approver. "
        "The trust policy compares `aws:PrincipalArn` with `ArnEquals`, which is "
        "case-sensitive and includes the path: spell each ARN as IAM does, or nobody can "
        "assume the role (an account confirms it: assume each role once as its person). "
        "The tests evaluate the synthesized trust policies offline: no principal may assume "
        "two approver roles of one four-eyes tenant.",
        "",
    ]


def render(template: dict[str, Any], stack_name: str) -> str:
    counts = Counter(r["Type"] for r in template["Resources"].values())
    lines = cost_lines(template)
    total = sum(line.usd for line in lines)
    pitr = sum(
        1
        for table in _resources(template, "AWS::DynamoDB::Table")
        if table["Properties"]
        .get("PointInTimeRecoverySpecification", {})
        .get("PointInTimeRecoveryEnabled")
    )
    out = [
        f"# What `cdk deploy` creates, and what it costs at rest ({stack_name})",
        "",
        "Generated by `python -m saga_bench.deploy_cost` from the synthesized template of the "
        "default app (`cdk.json`); `--template cdk.out/<stack>.template.json` reads another "
        "(a stack without the sandbox has three tables fewer). A test keeps this page equal "
        "to the template. At rest means a month without a case: everything exists and only "
        "the scheduled sweeper runs. Prices: AWS list prices in us-east-1, without the free "
        "tier.",
        "",
        "## Resources",
        "",
        "| resource type | count |",
        "|---|---|",
        *(f"| `{kind}` | {count} |" for kind, count in sorted(counts.items())),
        "",
        f"{pitr} of the tables keep point-in-time recovery (the sandbox's do not).",
        "",
        "## Cost at rest, per month",
        "",
        "| what | count | USD | why |",
        "|---|---|---|---|",
        *(f"| {line.resource} | {line.count:,} | {line.usd:.2f} | {line.why} |" for line in lines),
        f"| **total** | | **{total:.2f}** | |",
        "",
        "Everything else costs nothing until it is used:",
        "",
        *(f"- `{kind}` ({counts[kind]}): {why}" for kind, why in FREE.items() if counts[kind]),
        "- IAM roles and policies, queue policies, Lambda permissions: free.",
        "",
        "Outside the template: the CDK bootstrap bucket keeps each deployed asset (the function "
        "code and the dependencies layer, a few MB each) at S3's $0.023 per GB-month. Within "
        "an account's always-free tier (10 alarms, 10 custom metrics, 3 dashboards, Lambda's "
        "1 million requests and 400,000 GB-seconds, X-Ray's 100,000 traces, 5 GB of logs) "
        "only the KMS keys are billed.",
        "",
        *approver_trust_lines(template),
        "Prices used:",
        "",
        *(f"- ${_usd(price.usd)} {price.unit}: {price.source}" for price in PRICES.values()),
        "",
    ]
    return "\n".join(out)


def _usd(value: float) -> str:
    return f"{value:.2f}" if round(value, 2) == value else f"{value:.10f}".rstrip("0")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m saga_bench.deploy_cost", description=__doc__)
    parser.add_argument("--template", type=Path, help="a synthesized template (default: synth)")
    parser.add_argument("--write", type=Path, help=f"write here (e.g. {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    if args.template is None:
        from local_aws.synth import synthesize

        stack = synthesize(PROJECT_ROOT / "cdk.out")
        path, name = stack.template_path, stack.stack_name
    else:
        path, name = args.template, args.template.name.removesuffix(".template.json")
    text = render(json.loads(path.read_text(encoding="utf-8")), name)
    if args.write:
        args.write.write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
