"""What a handler's cold start imports, counted (never timed) in a fresh interpreter each, the
way `make bench` measures it (sagactl/bench_coldstart.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sagactl.bench_coldstart import (
    BARE,
    HANDLERS,
    ColdStartRun,
    Function,
    bare_handler_dir,
    function_environments,
    run_cold_start,
)

# What the bare boto3 handler imports is the baseline; a handler's import plus its first
# clients adds pydantic (and its models), Powertools' Logger and Metrics, and the saga package:
# 129 modules beyond the baseline when this was written. The bound leaves room for a module or
# two, not for another SDK.
EXTRA_MODULES_BOUND = 140
# Heavy packages no handler needs at cold start: the X-Ray SDK (Lambda active tracing traces
# the functions) and Powertools' parser package (it builds a model for every event source).
NOT_IMPORTED = ("aws_xray_sdk", "wrapt", "aws_lambda_powertools.utilities.parser")


@pytest.fixture(scope="module")
def bare_dir() -> Iterator[Path]:
    with bare_handler_dir() as path:
        yield path


@pytest.fixture(scope="module")
def functions() -> dict[str, Function]:
    return function_environments()


@pytest.fixture(scope="module")
def bare(bare_dir: Path) -> ColdStartRun:
    return run_cold_start(BARE, bare_dir, None)


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_cold_start_imports_no_tracing_sdk_and_a_bounded_number_of_modules(
    handler: str, bare_dir: Path, functions: dict[str, Function], bare: ColdStartRun
) -> None:
    run = run_cold_start(handler, bare_dir, functions[handler])
    heavy = sorted(m for m in run.modules if m.startswith(NOT_IMPORTED))
    assert heavy == []
    assert "boto3" in run.modules and "pydantic" in run.modules  # it did import the handler
    extra = run.modules - bare.modules
    assert len(extra) <= EXTRA_MODULES_BOUND, sorted(extra)
