"""The Lambda dependencies layer, pip-built locally for the Lambda platform (no Docker).

CDK calls `LocalPipBundling.try_bundle` during synth. It runs

    pip install --no-deps -r lambdas/requirements.txt --platform manylinux2014_aarch64
        --only-binary=:all: --python-version 3.12 --implementation cp --target <out>/python

once per requirements-file content, then writes the modules' bytecode (stacks/bytecode.py): the
result is cached under `.build/layer-<hash>/` (the hash covers the requirements file, the target
platform and whether the layer carries bytecode), and each synth copies the cache into
CDK's bundling directory. Repeated synths (every test session) therefore never re-download. The
cache is filled through a temporary directory and an atomic rename, so two concurrent synths
cannot leave a half-built cache behind. The asset hash is the same key, so the layer version
only changes when the dependencies change, not when handler code does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from stacks.bytecode import LAMBDA_PYTHON_VERSION, UNCHECKED, bytecode_tag, compile_tree

# The layer's ABI and the functions' runtime must agree: pydantic-core is a compiled wheel.
LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_12
LAMBDA_ARCHITECTURE = lambda_.Architecture.ARM_64
PIP_PLATFORM = "manylinux2014_aarch64"


class LayerBuildError(RuntimeError):
    """pip could not build the dependencies layer (the message carries pip's output)."""


def requirements_key(requirements: Path) -> str:
    """Cache key and asset hash: the requirements content, the target platform, the bytecode."""
    digest = hashlib.sha256()
    digest.update(requirements.read_bytes())
    digest.update(f"{PIP_PLATFORM}|cp{LAMBDA_PYTHON_VERSION}|{bytecode_tag(UNCHECKED)}".encode())
    return digest.hexdigest()[:32]


def pip_command(requirements: Path, target: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        # lambdas/requirements.txt is a lock: exactly what it lists, nothing pulled in.
        "--no-deps",
        "-r",
        str(requirements),
        "--platform",
        PIP_PLATFORM,
        "--only-binary=:all:",
        "--python-version",
        LAMBDA_PYTHON_VERSION,
        "--implementation",
        "cp",
        "--target",
        str(target / "python"),
    ]


def build_cached_layer(requirements: Path, cache_root: Path) -> Path:
    """The cached layer directory for these requirements, building it on first use."""
    cached = cache_root / f"layer-{requirements_key(requirements)}"
    if (cached / "python").is_dir():
        return cached
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="layer-build-", dir=cache_root))
    try:
        completed = subprocess.run(
            pip_command(requirements, staging), capture_output=True, text=True, check=False
        )
        if completed.returncode != 0:
            raise LayerBuildError(
                f"pip could not build the Lambda layer from {requirements} "
                f"(exit {completed.returncode}):\n{completed.stderr.strip()[-4000:]}"
            )
        # Where Lambda mounts a layer's python/; unchecked: a layer version is immutable.
        compile_tree(staging / "python", "/opt/python", UNCHECKED)
        try:
            staging.rename(cached)
        except OSError:
            # Another synth finished the same build first; its result is identical.
            if not (cached / "python").is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return cached


def _link_or_copy(src: str, dst: str) -> object:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


@jsii.implements(ILocalBundling)
class LocalPipBundling:
    """ILocalBundling: fill CDK's bundling output directory from the pip-built cache."""

    def __init__(self, requirements: Path, cache_root: Path) -> None:
        self._requirements = requirements
        self._cache_root = cache_root

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        cached = build_cached_layer(self._requirements, self._cache_root)
        shutil.copytree(
            cached / "python",
            Path(output_dir) / "python",
            copy_function=_link_or_copy,
            dirs_exist_ok=True,
        )
        return True


def dependencies_layer(
    scope: Construct, construct_id: str, *, requirements: Path, cache_root: Path
) -> lambda_.LayerVersion:
    """A LayerVersion of the third-party dependencies, built without Docker."""
    code = lambda_.Code.from_asset(
        str(requirements.parent),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=requirements_key(requirements),
        bundling=BundlingOptions(
            # Only used if local bundling declines, which it never does; kept so a Docker
            # build would produce the same layer with the same command.
            image=LAMBDA_RUNTIME.bundling_image,
            command=[
                "bash",
                "-c",
                "pip install --no-deps -r requirements.txt --target /asset-output/python",
            ],
            local=LocalPipBundling(requirements, cache_root),
        ),
    )
    return lambda_.LayerVersion(
        scope,
        construct_id,
        code=code,
        compatible_runtimes=[LAMBDA_RUNTIME],
        compatible_architectures=[LAMBDA_ARCHITECTURE],
        description=f"Saga dependencies ({requirements.name}, {PIP_PLATFORM}, "
        f"cp{LAMBDA_PYTHON_VERSION})",
    )
