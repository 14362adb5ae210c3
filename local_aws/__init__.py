"""The local AWS: a moto server on loopback running this project's stack (`sagactl local up`).

Public API:
- `run_local(StackSource...)`: context manager yielding a provisioned `LocalAws` handle
  (endpoint, outputs, boto3 clients, `run_case(case)`).
- `StackSource.synthesized()` / `.from_cloud_assembly()` / `.from_file()`: the template to use.
- `install_dynamodb_atomicity()`, `install_hooks()`: the emulator hooks, also for `mock_aws`.
- `seed_inventory()`: sandbox stock.

The names load on first use: a Lambda worker process (local_aws.lambda_worker) imports this
package without paying for moto.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DEFAULT_SANDBOX_STOCK": "local_aws.seed",
    "LocalAws": "local_aws.environment",
    "LocalServer": "local_aws.emulator",
    "StackSource": "local_aws.environment",
    "install_dynamodb_atomicity": "local_aws.emulator",
    "install_hooks": "local_aws.emulator",
    "run_local": "local_aws.environment",
    "seed_inventory": "local_aws.seed",
}

__all__ = [
    "DEFAULT_SANDBOX_STOCK",
    "LocalAws",
    "LocalServer",
    "StackSource",
    "install_dynamodb_atomicity",
    "install_hooks",
    "run_local",
    "seed_inventory",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
