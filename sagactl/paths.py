"""Where the project's files are: sagactl runs from a checkout of this repository."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = PROJECT_ROOT / "examples"  # ready, approved case files, one per scenario
CDK_JSON = PROJECT_ROOT / "cdk.json"  # the one place for policy values
LOCAL_STATE_DIR = PROJECT_ROOT / ".local"  # `sagactl local up`: outputs, pid, env, logs


def display_path(path: Path) -> str:
    """The path as a user would type it from here (relative when under the working directory)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
