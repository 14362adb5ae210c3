"""`make validate-aws` asks AWS in one region: every AWS CLI call it makes carries `--region`
(a profile's own region, or AWS_REGION, would otherwise pick where the definition is checked)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from saga_build import validate_aws
from tests.infra.synth import Synthesized


def test_every_aws_cli_call_names_the_region(
    synthesized: Synthesized, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    template = tmp_path / synthesized.template_path.name
    template.write_text(synthesized.template_path.read_text(encoding="utf-8"), encoding="utf-8")
    commands: list[list[str]] = []

    def run(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        commands.append(list(command))
        if command[0] == str(validate_aws.AWS_CLI):
            answer = {"Account": "123456789012"} if "sts" in command else {"result": "OK"}
            return subprocess.CompletedProcess(command, 0, json.dumps(answer), "")
        return subprocess.CompletedProcess(command, 0, "", "")  # cfn-lint

    monkeypatch.setattr(validate_aws, "_run", run)
    monkeypatch.setenv("AWS_REGION", "us-east-1")  # what the flag must override

    assert validate_aws.main(["--template", str(template), "--region", "eu-west-2"]) == 0

    aws = [c for c in commands if c[0] == str(validate_aws.AWS_CLI)]
    assert [c[c.index("--region") + 1] for c in aws] == ["eu-west-2"] * len(aws)
    assert {c[5] for c in aws} == {"sts", "stepfunctions"}
