"""Write the trimmed botocore models the tools' clients load (lambdas/saga/botocore_models).

    python -m sagactl.trim_models          (rewrites the files; a test checks they are current)

Making a client from botocore's own model parses its JSON, most of it documentation and
operations the tools never call: about 35 ms of CPU at every cold start for KMS (the tools call
GetPublicKey), about 6 ms for DynamoDB (the tools call six operations). So the Lambda package
carries those operations' models, documentation removed, as the services `saga-kms` and
`saga-dynamodb` (their own names, so that no other client in the process, such as sagactl's or a
test's full client, ever loads them); their metadata is the original's, so they sign, resolve
endpoints and name their botocore events (`before-call.dynamodb.PutItem`) exactly as the
original, and saga.aws.endpoint_url gives them the original's AWS_ENDPOINT_URL(_<SERVICE>).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from botocore.loaders import Loader

from sagactl.paths import PROJECT_ROOT

MODELS_DIR = PROJECT_ROOT / "lambdas" / "saga" / "botocore_models"
TRIMMED: dict[str, tuple[str, tuple[str, ...]]] = {
    # service name in the package -> (botocore's service, the operations kept)
    "saga-kms": ("kms", ("GetPublicKey",)),
    # Every DynamoDB operation lambdas/saga calls (tests/unit/test_aws_clients.py checks the list).
    "saga-dynamodb": (
        "dynamodb",
        ("DeleteItem", "GetItem", "PutItem", "Query", "TransactWriteItems", "UpdateItem"),
    ),
}
_DOCUMENTATION = frozenset({"documentation", "documentationUrl"})


def trimmed_model(service: str, operations: tuple[str, ...]) -> dict[str, Any]:
    """botocore's model of `service` with only `operations` and the shapes they reach."""
    model = Loader().load_service_model(service, "service-2")
    shapes: dict[str, Any] = model["shapes"]
    reached: set[str] = set()

    def reach(name: str) -> None:
        if name in reached:
            return
        reached.add(name)
        shape = shapes[name]
        for key in ("member", "key", "value"):
            if key in shape:
                reach(shape[key]["shape"])
        for member in shape.get("members", {}).values():
            reach(member["shape"])

    kept = {name: model["operations"][name] for name in operations}
    for operation in kept.values():
        for key in ("input", "output"):
            if key in operation:
                reach(operation[key]["shape"])
        for error in operation.get("errors", []):
            reach(error["shape"])
    trimmed: dict[str, Any] = _undocumented(
        {
            "version": model.get("version", "2.0"),
            "metadata": model["metadata"],
            "operations": kept,
            "shapes": {name: shapes[name] for name in sorted(reached)},
        }
    )
    return trimmed


def _undocumented(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _undocumented(v) for k, v in value.items() if k not in _DOCUMENTATION}
    if isinstance(value, list):
        return [_undocumented(v) for v in value]
    return value


def expected_files() -> dict[Path, str]:
    """Each file of the trimmed models and its content, from the installed botocore."""
    files: dict[Path, str] = {}
    loader = Loader()
    for name, (service, operations) in TRIMMED.items():
        model = trimmed_model(service, operations)
        directory = MODELS_DIR / name / model["metadata"]["apiVersion"]
        files[directory / "service-2.json"] = json.dumps(model, indent=1, sort_keys=True) + "\n"
        rules = loader.load_service_model(service, "endpoint-rule-set-1")
        files[directory / "endpoint-rule-set-1.json"] = json.dumps(rules, sort_keys=True) + "\n"
    return files


def write() -> list[Path]:
    written = []
    for path, content in expected_files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m sagactl.trim_models", description=__doc__).parse_args(
        argv
    )
    for path in write():
        print(path.relative_to(PROJECT_ROOT))
    return 0


__all__ = ["MODELS_DIR", "expected_files", "trimmed_model", "write"]

if __name__ == "__main__":
    raise SystemExit(main())
