"""Two costs of moto's server that are the same for every request or execution, paid once.

Measured on the saga's happy path (about 40 requests per case, cProfile over all threads):

- routing: for every request whose backend is found from its signature, moto's
  `DomainDispatcherApplication.get_backend_for_host` asks `moto.backends.list_of_moto_modules()`,
  which lists moto's package directory and stats each entry (about 2 ms a request, half the CPU
  of a case). The directory does not change while the process runs: it is listed once.
- definitions: every execution parses its state machine's definition with the ANTLR grammar
  (about 45 ms of CPU for the saga's). Each definition text is parsed once and every execution
  gets its own deep copy of the parsed program (about 3 ms), so no evaluation state is shared
  between executions.
- clients: for every Lambda task (and other service integration) the interpreter builds a boto3
  client (`boto_client_for`: about 10 ms of CPU, a tenth of the campaign's server time). The
  clients are the same for the same region, service and endpoint (fixed credentials and
  configuration), and boto3 clients are thread-safe: one is built per region, service and
  endpoint, and reused.

Nothing else changes: the same backends answer, the same program runs.
"""

from __future__ import annotations

import copy
import sys
import threading
from typing import Any

from local_aws.patching import wrap_once

_MARK = "_saga_speedup"
_PROGRAMS: dict[str, Any] = {}
_PROGRAMS_LOCK = threading.Lock()
_MAX_PROGRAMS = 64  # definitions of one account: a bound, not a working-set estimate
_CLIENTS: dict[tuple[str, str, bool, str], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def install_module_list_cache() -> None:
    """`moto.backends.list_of_moto_modules()` lists the directory once (idempotent)."""
    from moto import backends

    def wrap(original: Any) -> Any:
        modules = tuple(original())

        def cached() -> tuple[str, ...]:
            return modules

        return cached

    wrap_once(backends, "list_of_moto_modules", _MARK, wrap)


def parsed_program(definition: str) -> Any:
    """A fresh copy of the parsed program of `definition` (parsed at most once)."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    with _PROGRAMS_LOCK:
        program = _PROGRAMS.get(definition)
    if program is None:
        program = AmazonStateLanguageParser.parse(definition)[0]
        with _PROGRAMS_LOCK:
            if len(_PROGRAMS) >= _MAX_PROGRAMS:
                _PROGRAMS.clear()
            _PROGRAMS[definition] = program
    return copy.deepcopy(program)


def install_program_cache() -> None:
    """Executions (and redrives, which call the same method) reuse the parsed definition."""
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    def wrap(_original: Any) -> Any:
        def entrypoint(self: Any) -> Any:
            return parsed_program(self._evaluation_details.state_machine_details.definition)

        return entrypoint

    wrap_once(ExecutionWorker, "_get_evaluation_entrypoint", _MARK, wrap)


def install_client_cache() -> None:
    """The interpreter's service clients are built once per region, service and endpoint."""
    from moto.core.models import botocore_stubber
    from moto.settings import moto_server_port
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import (  # noqa: F401
        lambda_eval_utils,  # imported now, so that its copy of the function is replaced below
    )
    from moto.stepfunctions.parser.asl.utils import boto_client

    original = boto_client.boto_client_for

    def wrap(build: Any) -> Any:
        def cached(region: str, service: str, state_credentials: Any = None) -> Any:
            # what the built client depends on (it ignores the state's credentials)
            key = (region, service, bool(botocore_stubber.enabled), moto_server_port())
            with _CLIENTS_LOCK:
                client = _CLIENTS.get(key)
                if client is None:
                    client = _CLIENTS[key] = build(region, service, state_credentials)
            return client

        return cached

    wrap_once(boto_client, "boto_client_for", _MARK, wrap)
    # The modules that imported the function by name before (the Lambda task's among them).
    for name, module in list(sys.modules.items()):
        if name.startswith("moto.stepfunctions.parser") and (
            getattr(module, "boto_client_for", None) is original
        ):
            module.boto_client_for = boto_client.boto_client_for  # type: ignore[attr-defined]


def install_speedups() -> None:
    install_module_list_cache()
    install_program_cache()
    install_client_cache()
