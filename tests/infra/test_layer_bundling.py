"""The dependencies layer is pip-built once per requirements content and then reused."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from stacks.bytecode import bytecode_python
from stacks.layer_bundling import LayerBuildError, LocalPipBundling, build_cached_layer

RUN = subprocess.run


class FakePip:
    def __init__(self, returncode: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.returncode = returncode

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if "pip" not in command:  # the bytecode compiler runs as itself
            return RUN(command, **kwargs)
        self.calls.append(command)
        target = Path(command[command.index("--target") + 1])
        if self.returncode == 0:
            (target / "pkg").mkdir(parents=True)
            (target / "pkg" / "__init__.py").write_text("VALUE = 1\n", encoding="utf-8")
        return subprocess.CompletedProcess(command, self.returncode, "", "no matching wheel")


@pytest.fixture
def requirements(tmp_path: Path) -> Path:
    path = tmp_path / "requirements.txt"
    path.write_text("pydantic==2.14.3\n", encoding="utf-8")
    return path


def test_pip_targets_the_lambda_platform_and_runs_once_per_requirements(
    requirements: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = FakePip()
    monkeypatch.setattr("stacks.layer_bundling.subprocess.run", pip)
    cache = tmp_path / "cache"
    bundling = LocalPipBundling(requirements, cache)
    for n in range(2):
        out = tmp_path / f"out{n}"
        out.mkdir()
        assert bundling.try_bundle(str(out), image=None) is True  # type: ignore[arg-type]
        assert (out / "python" / "pkg" / "__init__.py").read_text(encoding="utf-8") == "VALUE = 1\n"
    assert len(pip.calls) == 1
    command = pip.calls[0]
    for flag, value in [
        ("--platform", "manylinux2014_aarch64"),
        ("--python-version", "3.12"),
        ("--implementation", "cp"),
        ("-r", str(requirements)),
    ]:
        assert command[command.index(flag) + 1] == value
    assert "--only-binary=:all:" in command
    # The layer's modules carry the runtime's bytecode (tests/infra/test_bytecode.py: its kind).
    if bytecode_python() is not None:
        assert (out / "python" / "pkg" / "__pycache__" / "__init__.cpython-312.pyc").is_file()

    requirements.write_text("pydantic==2.14.4\n", encoding="utf-8")
    build_cached_layer(requirements, cache)
    assert len(pip.calls) == 2, "changed requirements build a new cache entry"
    assert len([p for p in cache.iterdir() if p.name.startswith("layer-")]) == 2


def test_a_failed_pip_run_raises_and_leaves_no_cache(
    requirements: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("stacks.layer_bundling.subprocess.run", FakePip(returncode=1))
    cache = tmp_path / "cache"
    with pytest.raises(LayerBuildError, match="no matching wheel"):
        build_cached_layer(requirements, cache)
    assert list(cache.iterdir()) == []
