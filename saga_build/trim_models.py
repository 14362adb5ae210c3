"""Write botocore's data reduced to what the Lambda code calls (lambdas/saga/botocore_models).

    python -m saga_build.trim_models          (rewrites the files; a test checks they are current)

Making a client from botocore's own data lists its ~400 service directories, parses the 1.2 MB
endpoints.json and the service's whole model, most of it documentation and operations the
Lambda code never calls: about 55 ms of CPU for a cold start's first DynamoDB client, 35 ms
more for KMS. So the Lambda package carries, for each service it calls, the model of the
operations it calls (documentation removed; name, metadata and endpoint rules botocore's own),
and the root data botocore reads for a client: `partitions.json`,
`sdk-default-configuration.json` and `_retry.json` as botocore has them, `endpoints.json` with
every partition as botocore has it but only these services' entries. saga.aws makes the Lambda
code's clients from a session whose loader reads this directory alone (about 13 ms for a first
client); no other session in the process sees it.

botocore is Apache-2.0 (Amazon's copyright): the directory also carries botocore's LICENSE and
its NOTICE, preceded by what was changed, so the Lambda asset that ships the data ships them
(the repository's NOTICE says the same).
"""

from __future__ import annotations

import argparse
import json
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

from botocore.loaders import Loader

from sagactl.paths import PROJECT_ROOT

MODELS_DIR = PROJECT_ROOT / "lambdas" / "saga" / "botocore_models"
# botocore's service -> the operations kept: every one lambdas/saga calls
# (tests/unit/test_aws_clients.py scans the code for the calls).
TRIMMED: dict[str, tuple[str, ...]] = {
    "dynamodb": ("DeleteItem", "GetItem", "PutItem", "Query", "TransactWriteItems", "UpdateItem"),
    "kms": ("GetPublicKey",),
    "secretsmanager": ("GetSecretValue",),  # the Stripe API key (payments=stripe)
    "sqs": ("SendMessage",),  # the sweeper's escalations
    "stepfunctions": ("DescribeExecution", "GetExecutionHistory", "StartExecution"),  # agent tools
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


# botocore's root data a client reads, copied as they are (endpoints.json is reduced).
ROOT_DATA = ("partitions", "sdk-default-configuration", "_retry")


def trimmed_endpoints(services: set[str]) -> dict[str, Any]:
    """botocore's endpoints.json: every partition and its regions, the given services only."""
    endpoints: dict[str, Any] = Loader().load_data("endpoints")
    return {
        **endpoints,
        "partitions": [
            {
                **partition,
                "services": {
                    name: entry for name, entry in partition["services"].items() if name in services
                },
            }
            for partition in endpoints["partitions"]
        ],
    }


def expected_files() -> dict[Path, str]:
    """Each file of the trimmed models and its content, from the installed botocore."""
    files: dict[Path, str] = {}
    loader = Loader()
    for name in ROOT_DATA:
        files[MODELS_DIR / f"{name}.json"] = (
            json.dumps(loader.load_data(name), sort_keys=True) + "\n"
        )
    # The legacy endpoint data is keyed by endpoint prefix (the original service's).
    prefixes = {
        loader.load_service_model(service, "service-2")["metadata"]["endpointPrefix"]
        for service in TRIMMED
    }
    files[MODELS_DIR / "endpoints.json"] = (
        json.dumps(trimmed_endpoints(prefixes), sort_keys=True) + "\n"
    )
    for service, operations in TRIMMED.items():
        model = trimmed_model(service, operations)
        directory = MODELS_DIR / service / model["metadata"]["apiVersion"]
        files[directory / "service-2.json"] = json.dumps(model, indent=1, sort_keys=True) + "\n"
        rules = loader.load_service_model(service, "endpoint-rule-set-1")
        files[directory / "endpoint-rule-set-1.json"] = json.dumps(rules, sort_keys=True) + "\n"
    files.update(license_files())
    return files


def license_files() -> dict[Path, str]:
    """botocore's LICENSE and NOTICE, the NOTICE preceded by what this directory changed."""
    botocore = distribution("botocore")
    license_text = botocore.read_text("LICENSE.txt") or botocore.read_text("licenses/LICENSE.txt")
    notice = botocore.read_text("NOTICE") or botocore.read_text("licenses/NOTICE")
    if not license_text or not notice:
        raise RuntimeError("the installed botocore has no LICENSE.txt or NOTICE to carry")
    changed = (
        f"The files in this directory are data of botocore {botocore.version}\n"
        "(https://github.com/boto/botocore, botocore/data), licensed under the Apache License,\n"
        "Version 2.0 (LICENSE in this directory), changed by this project's\n"
        "saga_build/trim_models.py: each service model reduced to the operations the Lambda code\n"
        "calls, without documentation; endpoints.json reduced to those services.\n"
        "botocore's NOTICE follows.\n\n"
    )
    return {MODELS_DIR / "LICENSE": license_text, MODELS_DIR / "NOTICE": changed + notice}


def write() -> list[Path]:
    written = []
    for path, content in expected_files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m saga_build.trim_models", description=__doc__
    ).parse_args(argv)
    for path in write():
        print(path.relative_to(PROJECT_ROOT))
    return 0


__all__ = [
    "MODELS_DIR",
    "ROOT_DATA",
    "expected_files",
    "license_files",
    "trimmed_endpoints",
    "trimmed_model",
    "write",
]

if __name__ == "__main__":
    raise SystemExit(main())
