"""Both Lambda assets carry bytecode of the functions' Python version, used without a source check.

Lambda's code directories are read-only: a module without bytecode is compiled from source on
every cold start. The bytecode must be Python 3.12's (the runtime's), hash-based (a zipped asset
keeps no modification times to check against) and checked against its source (an edited file
runs as edited), and name the module where Lambda mounts it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Annotations, Match

import stacks.bytecode
from stacks.bytecode import (
    CHECKED,
    UNCHECKED,
    bytecode_python,
    bytecode_tag,
    warn_without_bytecode,
)
from stacks.function_code import LAMBDAS_DIR, LocalCodeBundling, asset_files, code_hash
from stacks.layer_bundling import requirements_key
from tests.infra.synth import Synthesized

CHECKED_HASH = 0b11  # PEP 552: bit 0 hash-based, bit 1 check_source
UNCHECKED_HASH = 0b01


def _python312() -> str:
    python = bytecode_python()
    if python is None:
        pytest.skip("no Python 3.12 here: the assets carry no bytecode (README, Configuration)")
    return python


def _compiled_as(python: str, pyc: Path) -> tuple[int, str]:
    """The pyc's flags and the file name its code object carries, read by the runtime's Python."""
    read = (
        "import marshal, sys; data = open(sys.argv[1], 'rb').read(); "
        "print(marshal.loads(data[16:]).co_filename)"
    )
    filename = subprocess.run(
        [python, "-c", read, str(pyc)], capture_output=True, text=True, check=True
    ).stdout.strip()
    return int.from_bytes(pyc.read_bytes()[4:8], "little"), filename


def test_the_function_code_carries_checked_312_bytecode_naming_var_task(tmp_path: Path) -> None:
    python = _python312()
    assert LocalCodeBundling(LAMBDAS_DIR).try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]

    modules = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.py"))
    assert Path("saga/handlers/issue_refund.py") in modules
    for module in modules:
        pyc = tmp_path / module.parent / "__pycache__" / f"{module.stem}.cpython-312.pyc"
        assert pyc.is_file(), f"{module} has no bytecode"
    flags, filename = _compiled_as(
        python, tmp_path / "saga/handlers/__pycache__/issue_refund.cpython-312.pyc"
    )
    assert flags == CHECKED_HASH
    assert filename == "/var/task/saga/handlers/issue_refund.py"
    # Only 3.12 bytecode: none of the developer's own, no caches, no layer requirements.
    assert [p for p in tmp_path.rglob("*.pyc") if ".cpython-312." not in p.name] == []
    assert not (tmp_path / "requirements.txt").exists()
    assert (tmp_path / "saga/botocore_models/dynamodb/2012-08-10/service-2.json").is_file()


def test_the_asset_hash_follows_the_files_and_the_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "saga").mkdir()
    (tmp_path / "saga" / "__init__.py").write_text("A = 1\n", encoding="utf-8")
    (tmp_path / "saga" / "__pycache__").mkdir()
    (tmp_path / "saga" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"local")
    (tmp_path / "requirements.txt").write_text("pydantic\n", encoding="utf-8")
    assert [p.relative_to(tmp_path).as_posix() for p in asset_files(tmp_path)] == [
        "saga/__init__.py"
    ]
    first = code_hash(tmp_path)
    (tmp_path / "saga" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"other")
    assert code_hash(tmp_path) == first, "local bytecode is not part of the asset"
    (tmp_path / "saga" / "__init__.py").write_text("A = 2\n", encoding="utf-8")
    changed = code_hash(tmp_path)
    assert changed != first

    monkeypatch.setattr(stacks.bytecode, "bytecode_python", lambda: None)
    assert bytecode_tag(CHECKED) == bytecode_tag(UNCHECKED) == "no-pyc"
    assert code_hash(tmp_path) != changed, "an asset without bytecode has a hash of its own"
    requirements = tmp_path / "requirements.txt"
    without = requirements_key(requirements)
    monkeypatch.setattr(stacks.bytecode, "bytecode_python", lambda: "/usr/bin/python3.12")
    assert requirements_key(requirements) != without


def test_without_an_interpreter_the_code_is_copied_without_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stacks.bytecode, "bytecode_python", lambda: None)
    out = tmp_path / "out"
    out.mkdir()
    assert LocalCodeBundling(LAMBDAS_DIR).try_bundle(str(out), image=None)  # type: ignore[arg-type]
    assert (out / "saga" / "handlers" / "issue_refund.py").is_file()
    assert list(out.rglob("*.pyc")) == []


@pytest.mark.parametrize("interpreter", [None, "/usr/bin/python3.12"])
def test_a_synth_without_the_interpreter_warns_that_cold_starts_compile_from_source(
    interpreter: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stacks.bytecode, "bytecode_python", lambda: interpreter)
    stack = Stack(App(), "Probe")
    warn_without_bytecode(stack)
    warnings = Annotations.from_stack(stack).find_warning("*", Match.any_value())
    texts = [str(w.entry.data) for w in warnings]
    if interpreter is None:
        assert len(texts) == 1 and "carry no bytecode" in texts[0]
        assert "SAGA_BYTECODE_PYTHON" in texts[0]
    else:
        assert texts == []


def test_a_module_edited_after_the_synth_runs_as_edited(tmp_path: Path) -> None:
    python = _python312()
    source = tmp_path / "lambdas"
    (source / "saga").mkdir(parents=True)
    (source / "saga" / "__init__.py").write_text("", encoding="utf-8")
    (source / "saga" / "limits.py").write_text("LOCK_SECONDS = 30\n", encoding="utf-8")
    asset = tmp_path / "asset"
    asset.mkdir()
    assert LocalCodeBundling(source).try_bundle(str(asset), image=None)  # type: ignore[arg-type]
    assert (asset / "saga" / "__pycache__" / "limits.cpython-312.pyc").is_file()

    (asset / "saga" / "limits.py").write_text("LOCK_SECONDS = 999\n", encoding="utf-8")
    ran = subprocess.run(
        [python, "-c", "import saga.limits; print(saga.limits.LOCK_SECONDS)"],
        cwd=asset,
        env={"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.strip() == "999"


def test_the_tag_names_the_compiler_release_and_the_recipe() -> None:
    python = _python312()
    version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    recipe = stacks.bytecode.RECIPE
    assert bytecode_tag(CHECKED) == f"pyc-{version}-checked-hash-r{recipe}"
    assert bytecode_tag(UNCHECKED) == f"pyc-{version}-unchecked-hash-r{recipe}"


def test_the_synthesized_assets_carry_the_bytecode_they_promise(synthesized: Synthesized) -> None:
    """The stack as `cdk synth` writes it: the function code checked against its source, the
    layer (an immutable version) not."""
    python = _python312()
    [code] = synthesized.outdir.glob(
        "asset.*/saga/handlers/__pycache__/issue_refund.cpython-312.pyc"
    )
    [layer] = synthesized.outdir.glob("asset.*/python/pydantic/__pycache__/main.cpython-312.pyc")
    assert _compiled_as(python, code) == (CHECKED_HASH, "/var/task/saga/handlers/issue_refund.py")
    assert _compiled_as(python, layer) == (UNCHECKED_HASH, "/opt/python/pydantic/main.py")
