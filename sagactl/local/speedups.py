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

Nothing else changes: the same backends answer, the same program runs.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from sagactl.local.patching import wrap_once

_MARK = "_saga_speedup"
_PROGRAMS: dict[str, Any] = {}
_PROGRAMS_LOCK = threading.Lock()
_MAX_PROGRAMS = 64  # definitions of one account: a bound, not a working-set estimate


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


def install_speedups() -> None:
    install_module_list_cache()
    install_program_cache()
