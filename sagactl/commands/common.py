"""Helpers shared by the operator commands: common flags, case files, the stack's functions and
its configuration."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagactl.errors import InvalidCaseFile, NotFound, SagactlError
from sagactl.target import PROJECT_ROOT, Target, add_target_arguments
from stacks.config import ConfigError, SagaConfig

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at runtime on Python 3.11
    Subparsers = argparse._SubParsersAction


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")


def add_aws_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)
    add_json_argument(parser)


def add_case_argument(parser: argparse.ArgumentParser) -> None:
    """CASE, as `status`, `watch` and `redrive` take it (sagactl.timeline.find_case_execution)."""
    parser.add_argument(
        "case_id",
        metavar="CASE",
        help="the case id (the case record names its execution; else the execution of that "
        "name), or an execution's own name",
    )


def add_budget_argument(parser: argparse.ArgumentParser) -> None:
    """--budget: overrides the attempt budget shown next to each ledger record."""
    parser.add_argument(
        "--budget",
        type=positive_int,
        help="lifetime attempt budget per action (default: cdk.json ledger.attempt_budget)",
    )


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def read_case_file(path: Path) -> Any:
    """The JSON in a case file; unreadable or malformed files are an InvalidCaseFile."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidCaseFile(f"{path}: no such file") from None
    except OSError as exc:
        raise InvalidCaseFile(f"{path}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidCaseFile(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None


def write_json_file(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def stack_function(
    target: Target, what: str, handler: str, variable: str, output: str
) -> dict[str, Any]:
    """The configuration of the stack's `what` function, the one that runs `handler` with the
    stack's `output` resource in its environment `variable` (ListFunctions), so the same lookup
    works on AWS, where CloudFormation generated the name, and in the local AWS."""
    resource = target.output(output)
    found = []
    for page in target.client("lambda").get_paginator("list_functions").paginate():
        for function in page["Functions"]:
            variables = (function.get("Environment") or {}).get("Variables") or {}
            if function.get("Handler") == handler and variables.get(variable) == resource:
                found.append(function)
    if not found:
        raise NotFound(f"no {what} function ({handler}) has {variable}={resource}")
    if len(found) > 1:
        names = sorted(str(function["FunctionName"]) for function in found)
        raise SagactlError(f"several {what} functions have {variable}={resource}: {names}")
    return dict(found[0])


def cdk_config() -> SagaConfig:
    """The stack's configuration as `cdk synth` (and so `sagactl local up`) reads it from
    cdk.json, without `-c` overrides."""
    path = PROJECT_ROOT / "cdk.json"
    try:
        context = json.loads(path.read_text(encoding="utf-8"))["context"]
        return SagaConfig.from_mapping(context)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # ConfigError is a ValueError
        detail = exc if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
        raise SagactlError(f"cannot read the configuration in {path}: {detail}") from None
