"""`npx cdk synth` as a user types it: the CDK CLI itself, in the environments users have.

The CLI always gives the app CDK_DEFAULT_REGION (its SDK's region, us-east-1 without any AWS
configuration) and CDK_DEFAULT_ACCOUNT where credentials resolve, so the stack gets an
environment that `python app.py` (the suite's `synthesized`) never has. Each variant here runs
`npx cdk synth` from the project's root with node_modules/.bin first on PATH, no notices, no
telemetry, no credentials and no network (proxies to a closed port, pip without an index: the
warm layer cache of `synthesized` is what the CLI's synth reuses), and holds it to the same
bar as the suite's synth: exit 0, every validation plugin (cdk-nag, CloudFormation Validate)
clean, the same acknowledgments, and the template of `python app.py` with the same context,
modulo the environment (an account, region or partition the CLI made literal).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from offline_iam.evaluate import Grants, Request, evaluate
from offline_iam.stack_policies import StackPolicies, offline_resolver, stack_policies
from sagactl.paths import with_pinned_node
from tests.infra.synth import Synthesized, synthesize, validation_problems
from tests.project import run_in_project

STACK = "ReplacementOrderSaga-{stage}"
CLOSED_PORT_PROXY = "http://127.0.0.1:9"
AGENT_ROLE = re.compile(r"^Serves the agent tools of tenant (\S+) ")
GATEWAY = {
    "enabled": True,
    "tenants": {
        "acme": {
            "discovery_url": "https://idp.example.com/acme/.well-known/openid-configuration",
            "allowed_clients": ["acme-agent"],
        }
    },
}


@dataclass(frozen=True)
class Variant:
    name: str
    context: Mapping[str, Any]
    region: str  # what the CLI gives the app: AWS_REGION, else us-east-1
    account: str | None  # CDK_DEFAULT_ACCOUNT, passed through where no credentials resolve

    @property
    def stage(self) -> str:
        return str(self.context.get("stage", "dev"))

    def cli_args(self) -> list[str]:
        args = []
        for key, value in self.context.items():
            text = value if isinstance(value, str) else json.dumps(value)
            args += ["-c", f"{key}={text}"]
        return args


VARIANTS = [
    Variant("no AWS configuration", {"stage": "dev"}, "us-east-1", None),
    Variant("account and region", {"stage": "dev"}, "eu-west-1", "111111111111"),
    Variant("another region", {"stage": "dev"}, "ap-southeast-2", "222222222222"),
    Variant(
        "agent gateway on", {"stage": "dev", "agent_gateway": GATEWAY}, "eu-west-1", "111111111111"
    ),
    Variant("prod stage", {"stage": "prod"}, "eu-central-1", "333333333333"),
]


def cli_environment(home: Path, variant: Variant) -> dict[str, str]:
    """What a user's shell gives `npx cdk`: a PATH and a HOME, here with no AWS configuration,
    plus the variant's region (AWS_REGION, as the SDK reads it) and account."""
    env = with_pinned_node({"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home)})
    env.update(
        {
            "CDK_DISABLE_CLI_TELEMETRY": "true",
            "CDK_DISABLE_VERSION_CHECK": "1",
            # Nothing may leave the machine: no instance metadata, no proxy that answers, no
            # package index (a cold layer cache would fail here instead of downloading).
            "AWS_EC2_METADATA_DISABLED": "true",
            "HTTP_PROXY": CLOSED_PORT_PROXY,
            "HTTPS_PROXY": CLOSED_PORT_PROXY,
            "PIP_NO_INDEX": "1",
        }
    )
    if variant.region != "us-east-1":
        env["AWS_REGION"] = variant.region
    if variant.account is not None:
        env["CDK_DEFAULT_ACCOUNT"] = variant.account
    return env


@dataclass(frozen=True)
class CliSynth:
    variant: Variant
    outdir: Path
    stdout: str
    stderr: str
    returncode: int

    def read(self, name: str) -> Any:
        return json.loads((self.outdir / name).read_text(encoding="utf-8"))

    @property
    def template(self) -> dict[str, Any]:
        return dict(self.read(f"{STACK.format(stage=self.variant.stage)}.template.json"))


def cli_synth(variant: Variant, tmp: Path) -> CliSynth:
    home = tmp / "home"
    home.mkdir()
    outdir = tmp / "cdk.out"
    done = run_in_project(
        ["npx", "cdk", "synth", *variant.cli_args(), "--no-notices", "-q", "-o", str(outdir)],
        cli_environment(home, variant),
        timeout=600,
    )
    return CliSynth(variant, outdir, done.stdout, done.stderr, done.returncode)


# `make test` synthesizes the first two (no AWS configuration; an explicit account and region);
# the others, a minute or more each on 2 cores, run in `make test-long` (SAGA_LONG_TESTS=1).
IN_MAKE_TEST = 2
_LONG = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("SAGA_LONG_TESTS") != "1", reason="long: SAGA_LONG_TESTS=1 (make test-long)"
    ),
]
VARIANT_PARAMS = [
    pytest.param(variant, id=variant.name, marks=[] if index < IN_MAKE_TEST else _LONG)
    for index, variant in enumerate(VARIANTS)
]


@pytest.fixture(scope="module", params=VARIANT_PARAMS)
def synths(
    request: pytest.FixtureRequest,
    synthesized: Synthesized,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[CliSynth, Synthesized]:
    """The CLI's synth of one variant, and `python app.py`'s (build_app) with its context.
    `synthesized` first: its synth fills the layer cache the CLI's then reuses offline."""
    variant: Variant = request.param
    cli = cli_synth(variant, tmp_path_factory.mktemp("cli"))
    if dict(variant.context) == {"stage": "dev"}:
        return cli, synthesized
    return cli, synthesize(tmp_path_factory.mktemp("app"), dict(variant.context))


# --- the template modulo the environment -------------------------------------------------------
_PSEUDO = ("AWS::Partition", "AWS::Region", "AWS::AccountId", "AWS::URLSuffix")


def normalized(value: Any, *, account: str | None, region: str) -> Any:
    """`value` with the environment written one way: a pseudo parameter (Ref, or `${...}` in a
    Fn::Sub) and the literal the CLI's environment put in its place both become `${AWS::...}`,
    and a Fn::Join of strings the string it makes."""
    if isinstance(value, str):
        text = re.sub(r"\barn:aws:", "arn:${AWS::Partition}:", value)
        text = text.replace(f":{region}:", ":${AWS::Region}:").replace(
            f"-{region}", "-${AWS::Region}"
        )
        return text.replace(account, "${AWS::AccountId}") if account else text
    if isinstance(value, list):
        return [normalized(v, account=account, region=region) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"} and value["Ref"] in _PSEUDO:
        return "${" + value["Ref"] + "}"
    if set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
        return normalized(value["Fn::Sub"], account=account, region=region)
    if set(value) == {"Fn::Join"} and value["Fn::Join"][0] == "":
        parts: list[Any] = []
        for part in normalized(value["Fn::Join"][1], account=account, region=region):
            if isinstance(part, str) and parts and isinstance(parts[-1], str):
                parts[-1] += part
            else:
                parts.append(part)
        return (
            parts[0] if len(parts) == 1 and isinstance(parts[0], str) else {"Fn::Join": ["", parts]}
        )
    return {k: normalized(v, account=account, region=region) for k, v in value.items()}


def without_cli_metadata(template: Mapping[str, Any]) -> dict[str, Any]:
    """`template` without what the CLI's own settings add to any app's template (its defaults
    pathMetadata, assetMetadata, versionReporting): each resource's `aws:cdk:path` and
    `aws:asset:*` metadata, and the CDKMetadata resource with its condition."""
    out: dict[str, Any] = json.loads(json.dumps(template))
    out["Resources"].pop("CDKMetadata", None)
    out.get("Conditions", {}).pop("CDKMetadataAvailable", None)
    for resource in out["Resources"].values():
        metadata = resource.get("Metadata", {})
        for key in [k for k in metadata if k == "aws:cdk:path" or k.startswith("aws:asset:")]:
            del metadata[key]
        if "Metadata" in resource and not metadata:
            del resource["Metadata"]
    return out


def _acknowledged(cli: CliSynth) -> set[str]:
    stack = STACK.format(stage=cli.variant.stage)
    found = set()
    for entries in cli.read(f"{stack}.metadata.json").values():
        for entry in entries:
            if entry["type"] == "aws:cdk:acknowledged-rules":
                found |= {key.removeprefix("Annotation::") for key in entry["data"]}
    return found


def _acknowledged_in_app(app: Synthesized) -> set[str]:
    from tests.infra.test_quality_gates import _acknowledgements

    return {rule for rule, _ in _acknowledgements(app.saga.stack)}


def test_the_cli_synth_exits_0_with_every_validation_clean(
    synths: tuple[CliSynth, Synthesized],
) -> None:
    cli, _ = synths
    assert cli.returncode == 0, cli.stderr[-4000:]
    assert "Synthesis finished with errors" not in cli.stderr
    assert validation_problems(cli.read("validation-report.json")) == []


def test_the_cli_gave_the_stack_the_variants_environment(
    synths: tuple[CliSynth, Synthesized],
) -> None:
    """The variant is what it says: the CLI's region (and account) reached the stack, which
    then writes them literally where CDK can (the assets bucket)."""
    cli, _ = synths
    manifest = cli.read("manifest.json")
    stack = STACK.format(stage=cli.variant.stage)
    environment = manifest["artifacts"][stack]["environment"]
    account = cli.variant.account or "unknown-account"
    assert environment == f"aws://{account}/{cli.variant.region}"


def test_the_cli_template_is_the_apps_modulo_the_environment(
    synths: tuple[CliSynth, Synthesized],
) -> None:
    cli, app = synths
    account, region = cli.variant.account, cli.variant.region
    # python app.py has no environment: its template names no account or region literally.
    if account:
        assert account not in json.dumps(app.template_json)
    assert normalized(without_cli_metadata(cli.template), account=account, region=region) == (
        normalized(app.template_json, account=account, region=region)
    )


def test_the_acknowledgments_are_the_apps_in_every_environment(
    synths: tuple[CliSynth, Synthesized],
) -> None:
    """The same finding ids, whatever the environment: none rendered from a literal region or
    account, none wider (a `Resource::*` only for the actions that have no resource ARN)."""
    cli, app = synths
    acknowledged = _acknowledged(cli)
    assert acknowledged == _acknowledged_in_app(app)
    assert not [rule for rule in acknowledged if cli.variant.region in rule]
    if cli.variant.account:
        assert not [rule for rule in acknowledged if cli.variant.account in rule]


def _policies(template: Mapping[str, Any], stage: str, account: str, region: str) -> StackPolicies:
    stack = STACK.format(stage=stage)
    return stack_policies(
        template, offline_resolver(template, stack, account_id=account, region=region)
    )


def test_the_offline_iam_verdicts_are_the_same_in_every_environment(
    synths: tuple[CliSynth, Synthesized],
) -> None:
    """Every role's trust and identity policies and every key policy, resolved in the variant's
    account and region, are the app's: every offline verdict is then the same. And the agent
    roles' execution grants, acknowledged above, still allow their own tenant's agent cases and
    nothing else."""
    cli, app = synths
    account, region = cli.variant.account or "123456789012", cli.variant.region
    from_cli = _policies(cli.template, cli.variant.stage, account, region)
    from_app = _policies(app.template_json, cli.variant.stage, account, region)
    assert from_cli.roles == from_app.roles
    assert from_cli.key_policies == from_app.key_policies

    (machine,) = (
        lid
        for lid, r in cli.template["Resources"].items()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
    )
    name = offline_resolver(cli.template, "x", account_id=account, region=region).get_att(
        machine, "Name"
    )
    agents = {
        match.group(1): lid
        for lid, r in cli.template["Resources"].items()
        if (match := AGENT_ROLE.match(str(r.get("Properties", {}).get("Description", ""))))
    }
    assert set(agents) == {"acme", "globex", "hooli"}
    for tenant, lid in agents.items():
        for policies in (from_cli, from_app):
            grants = policies.grants(lid)

            def reads(execution: str, grants: Grants = grants) -> bool:
                arn = f"arn:aws:states:{region}:{account}:execution:{name}:{execution}"
                return evaluate(grants, Request("states:DescribeExecution", arn)).allowed

            assert reads(f"agt_{tenant}_0123456789abcdef0123456789abcdef")
            assert not reads("agt_someone_0123456789abcdef0123456789abcdef")
            assert not reads("case-happy-path")


def test_the_readmes_deploy_command_runs_until_it_needs_an_aws_account(
    synthesized: Synthesized, tmp_path: Path
) -> None:
    """`npx cdk deploy -c stage=dev` as the README writes it, with no AWS configuration: the
    CLI synthesizes (cdk-nag and every validation pass) and stops only where an account is
    needed, saying so."""
    variant = VARIANTS[0]
    (tmp_path / "home").mkdir()
    done = run_in_project(
        ["npx", "cdk", "deploy", "-c", "stage=dev", "--no-notices", "-o", str(tmp_path / "out")],
        cli_environment(tmp_path / "home", variant),
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Synthesis finished with errors" not in output
    assert "Unable to resolve AWS account to use" in output, output[-3000:]
    report = json.loads((tmp_path / "out" / "validation-report.json").read_text(encoding="utf-8"))
    assert validation_problems(report) == []
