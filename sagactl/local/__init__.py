"""The local AWS: a moto server on loopback running this project's stack (`sagactl local up`).

Public API:
- `run_local(StackSource...)`: context manager yielding a provisioned `LocalAws` handle
  (endpoint, outputs, boto3 clients, `run_case(case)`).
- `StackSource.synthesized()` / `.from_cloud_assembly()` / `.from_file()`: the template to use.
- `install_dynamodb_atomicity()`, `install_hooks()`: the emulator hooks, also for `mock_aws`.
- `seed_inventory()`: sandbox stock.
"""

from sagactl.local.emulator import LocalServer, install_dynamodb_atomicity, install_hooks
from sagactl.local.environment import LocalAws, StackSource, run_local
from sagactl.local.seed import DEFAULT_SANDBOX_STOCK, seed_inventory

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
