"""The functions' code asset: the `saga` package as it is in `lambdas/`, with its bytecode.

One asset for every function (the handler path picks the function). CDK calls
`LocalCodeBundling.try_bundle` during synth (no Docker): it copies `lambdas/` without caches,
bytecode of the developer's Python or the layer's requirements file, then writes bytecode of the
functions' Python version (stacks/bytecode.py) naming /var/task, where Lambda mounts the code.
The asset hash covers the copied files and whether bytecode was written, so a change to either
is a new asset and nothing else is.
"""

from __future__ import annotations

import fnmatch
import hashlib
import shutil
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from stacks.bytecode import CHECKED, bytecode_tag, compile_tree
from stacks.layer_bundling import LAMBDA_RUNTIME

LAMBDAS_DIR = Path(__file__).resolve().parents[1] / "lambdas"
# Not part of the asset: caches, local bytecode, and the layer's requirements (the layer's own).
EXCLUDED_NAMES = ("__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache", "requirements.txt")


def _excluded(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in EXCLUDED_NAMES)


def asset_files(source: Path) -> list[Path]:
    """The files the asset copies from `source`, sorted."""
    return sorted(
        path
        for path in source.rglob("*")
        if path.is_file() and not any(_excluded(part) for part in path.relative_to(source).parts)
    )


def code_hash(source: Path) -> str:
    """The asset hash: each copied file's path and content, and the bytecode written."""
    digest = hashlib.sha256(bytecode_tag(CHECKED).encode())
    for path in asset_files(source):
        digest.update(path.relative_to(source).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


@jsii.implements(ILocalBundling)
class LocalCodeBundling:
    """ILocalBundling: copy the package into CDK's bundling directory and compile it there."""

    def __init__(self, source: Path) -> None:
        self._source = source

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        out = Path(output_dir)
        for path in asset_files(self._source):
            target = out / path.relative_to(self._source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        compile_tree(out, "/var/task", CHECKED)  # editable in the console: checked
        return True


def function_code(source: Path = LAMBDAS_DIR) -> lambda_.Code:
    """The code asset every function of the stack runs."""
    return lambda_.Code.from_asset(
        str(source),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=code_hash(source),
        bundling=BundlingOptions(
            # Only used if local bundling declines, which it never does.
            image=LAMBDA_RUNTIME.bundling_image,
            command=["bash", "-c", "cp -r /asset-input/saga /asset-output/"],
            local=LocalCodeBundling(source),
        ),
    )


__all__ = ["EXCLUDED_NAMES", "LAMBDAS_DIR", "asset_files", "code_hash", "function_code"]
