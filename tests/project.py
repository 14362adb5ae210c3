"""Commands run as a developer runs them: from the project's root, in another process."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

from sagactl.paths import PROJECT_ROOT


def run_in_project(
    args: list[str], env: Mapping[str, str], *, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`args` run in the project's root with exactly `env`, output captured as text; whatever
    the exit code (the test asserts it)."""
    return subprocess.run(
        args,
        cwd=PROJECT_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
