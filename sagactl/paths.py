"""Where the project's files are: sagactl runs from a checkout of this repository."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# This repository's top-level packages (pyproject.toml ships them all; docs/architecture.md):
# the operator's CLI and the stack's own code, then the instruments they are tested with, which
# the operator's code never imports.
OPERATOR_PACKAGES = ("sagactl", "saga", "stacks")
LAB_PACKAGES = ("local_aws", "fault_campaign", "saga_bench", "offline_iam", "saga_build")
EXAMPLES_DIR = PROJECT_ROOT / "examples"  # ready, approved case files, one per scenario
CDK_JSON = PROJECT_ROOT / "cdk.json"  # the one place for policy values
LOCAL_STATE_DIR = PROJECT_ROOT / ".local"  # `sagactl local up`: outputs, pid, env, logs
# `npm ci` (package.json) puts Node.js 22 itself here on Linux x64/arm64, beside cdk and
# asl-validator: whatever Node the machine has, the project's Node tools run on this one.
NODE_BIN = PROJECT_ROOT / "node_modules" / ".bin"


def with_pinned_node(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with node_modules/.bin first on PATH: the pinned Node runs the CDK's jsii kernel,
    the reference JSONata and the ASL validator (where npm installed it; elsewhere the `node`
    on PATH, which must be 22 or later: README, "The two commands")."""
    path = env.get("PATH", os.defpath)
    if path.split(os.pathsep)[0] == str(NODE_BIN):
        return dict(env)
    return {**env, "PATH": os.pathsep.join([str(NODE_BIN), path])}


def display_path(path: Path) -> str:
    """The path as a user would type it from here (relative when under the working directory)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
