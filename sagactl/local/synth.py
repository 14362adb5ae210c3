"""Synthesize the CDK app (offline) and locate the stack's template."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagactl.paths import PROJECT_ROOT, with_pinned_node

ASL_PATH = PROJECT_ROOT / "statemachines" / "replacement_order.asl.json"


class SynthError(RuntimeError):
    """The CDK app did not synthesize, or its output holds no usable stack."""


@dataclass(frozen=True)
class SynthesizedStack:
    stack_name: str
    template_path: Path


def find_stack(cloud_assembly: Path, stack_name: str | None = None) -> SynthesizedStack:
    """The stack template in a cloud assembly directory (cdk.out), by manifest."""
    manifest_path = cloud_assembly / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SynthError(f"no cloud assembly manifest at {manifest_path}: {exc}") from exc
    stacks = _manifest_stacks(cloud_assembly, manifest)
    if stack_name is not None:
        stacks = [stack for stack in stacks if stack.stack_name == stack_name]
    if len(stacks) != 1:
        names = ", ".join(stack.stack_name for stack in stacks) or "none"
        raise SynthError(f"expected exactly one stack in {cloud_assembly}, found: {names}")
    return stacks[0]


def _manifest_stacks(cloud_assembly: Path, manifest: dict[str, Any]) -> list[SynthesizedStack]:
    return [
        SynthesizedStack(
            stack_name=str(artifact.get("properties", {}).get("stackName") or artifact_id),
            template_path=cloud_assembly / artifact["properties"]["templateFile"],
        )
        for artifact_id, artifact in manifest.get("artifacts", {}).items()
        if artifact.get("type") == "aws:cloudformation:stack"
    ]


def stack_name_of_template(template_path: Path) -> str | None:
    """The name of the stack a synthesized template belongs to, as `cdk synth` wrote it: the
    cloud assembly manifest next to the template names it; without one (a copied template),
    CDK's file name `<stack>.template.json` does. None when neither tells."""
    try:
        manifest = json.loads((template_path.parent / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        manifest = None
    if isinstance(manifest, dict):
        for stack in _manifest_stacks(template_path.parent, manifest):
            if stack.template_path.name == template_path.name:
                return stack.stack_name
    name, suffix, rest = template_path.name.partition(".template.json")
    return name if suffix and not rest and name else None


def synthesize(
    outdir: Path,
    *,
    project_root: Path = PROJECT_ROOT,
    stack_name: str | None = None,
    python: str = sys.executable,
    context: dict[str, Any] | None = None,
) -> SynthesizedStack:
    """Run `python app.py` with CDK_OUTDIR=outdir (no AWS access needed) and find the stack.
    `context` is given to the app as the CDK CLI gives `-c` values (CDK_CONTEXT_JSON): it
    overrides cdk.json's."""
    app = project_root / "app.py"
    if not app.is_file():
        raise SynthError(f"no CDK app at {app}")
    env = with_pinned_node({**os.environ, "CDK_OUTDIR": str(outdir)})
    if context:
        env["CDK_CONTEXT_JSON"] = json.dumps(context)
    completed = subprocess.run(
        [python, str(app)],
        cwd=project_root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if completed.returncode != 0:
        raise SynthError(f"synth failed (exit {completed.returncode}):\n{completed.stderr[-4000:]}")
    return find_stack(outdir, stack_name)


def synthesize_with_cdk_cli(
    outdir: Path,
    *,
    context: dict[str, str] | None = None,
    project_root: Path = PROJECT_ROOT,
    stack_name: str | None = None,
) -> SynthesizedStack:
    """`npx cdk synth` into `outdir`, as a user's `cdk deploy` synthesizes: the CLI gives the
    app its region and, where the caller's credentials resolve, its account (so the stack has
    the environment a deploy gives it, which `python app.py` never has)."""
    args = ["npx", "cdk", "synth", "--no-notices", "-q", "-o", str(outdir)]
    for key, value in (context or {}).items():
        args += ["-c", f"{key}={value}"]
    env = with_pinned_node({"CDK_DISABLE_CLI_TELEMETRY": "true", **os.environ})
    try:
        completed = subprocess.run(
            args,
            cwd=project_root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SynthError(f"cannot run the CDK CLI (run `make venv`): {exc}") from exc
    if completed.returncode != 0:
        output = (completed.stdout + completed.stderr)[-4000:]
        raise SynthError(f"`{' '.join(args)}` failed (exit {completed.returncode}):\n{output}")
    return find_stack(outdir, stack_name)
