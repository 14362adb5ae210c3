"""What the operator commands share: their common flags, the target they name, case files."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from saga.acceptance import require_approvers
from saga.approvals import VerifiedKey, require_signature
from saga.errors import ApprovalInvalid, ApprovalMismatch, AuthorizationDenied, InvalidRequest
from saga.models import Case
from saga.tools.validate import checked_case
from sagactl.config import Tenants
from sagactl.errors import Handler, InvalidCaseFile, guarded
from sagactl.target import (
    DEFAULT_LOCAL_OUTPUTS,
    DEFAULT_STACK_NAME,
    OUTPUTS_ENV,
    Target,
    find_target,
)

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at runtime on Python 3.11
    Subparsers = argparse._SubParsersAction


def add_command(
    subparsers: Subparsers,
    name: str,
    summary: str,
    *,
    handler: Handler | None = None,
    doc: str | None = None,
    description: str | None = None,
    epilog: str | None = None,
    guard: Callable[[Handler], Handler] = guarded,
) -> argparse.ArgumentParser:
    """A subcommand's parser, running `handler` under `guard`: a user's error is a message and
    an exit code, never a traceback. `doc`, a module docstring, shows in --help as written (so
    does `epilog` then); a `description` is wrapped."""
    if doc is not None:
        parser = subparsers.add_parser(
            name,
            help=summary,
            description=doc,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    else:
        parser = subparsers.add_parser(name, help=summary, description=description, epilog=epilog)
    if handler is not None:
        parser.set_defaults(handler=guard(handler))
    return parser


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("target")
    group.add_argument(
        "--local",
        action="store_true",
        help="use the local AWS of `sagactl local up` (implied by AWS_ENDPOINT_URL)",
    )
    group.add_argument(
        "--stack",
        default=DEFAULT_STACK_NAME,
        help="the deployed stack whose outputs name the resources (default %(default)s)",
    )
    group.add_argument("--region", help="AWS region (default: the configured one)")
    group.add_argument(
        "--outputs",
        type=Path,
        help=f"local outputs file (default ${OUTPUTS_ENV} or {DEFAULT_LOCAL_OUTPUTS})",
    )


def resolve_target(args: argparse.Namespace, *, read_outputs: bool = True) -> Target:
    """The target the command's --local / --stack / --region / --outputs name (on AWS, with
    the stack's outputs unless `read_outputs` is false)."""
    return find_target(
        local=bool(getattr(args, "local", False)),
        outputs=getattr(args, "outputs", None),
        stack=getattr(args, "stack", DEFAULT_STACK_NAME),
        region=getattr(args, "region", None),
        read_outputs=read_outputs,
    )


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")


def add_aws_command_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_arguments(parser)
    add_json_argument(parser)


def add_case_argument(parser: argparse.ArgumentParser) -> None:
    """CASE, as `status`, `watch` and `redrive` take it
    (sagactl.operations.executions.find_case_execution)."""
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


def check_case_file(raw: Any, tenants: Tenants, source: str) -> Case:
    """A case file checked as ValidateCase checks it, in its order (saga.tools.validate.
    checked_case): the fields, the tenant and its approvers (against `tenants`), the digest,
    then that it is signed, by as many distinct approvers as four eyes asks for under
    `tenants`' thresholds (the signatures themselves are verified with the deployed keys only).
    The first failure is an InvalidCaseFile naming the file."""

    def signed_enough(case: Case) -> None:
        require_signature(case)
        approvals = case.signed_approvals()
        # Unverified here: each key stands for itself as the file names it.
        named = [
            (s.approved_by, VerifiedKey(str(s.key_id), str(s.key_id).encode()))
            for s in approvals.signatures
        ]
        require_approvers(approvals, named, tenants.approvals_required(case))

    try:
        return checked_case(raw, tenants.approvers, signed_enough)
    except AuthorizationDenied as exc:  # the tenant or approver: say what is configured
        tenant = raw.get("tenant_id") if isinstance(raw, dict) else None
        raise InvalidCaseFile(f"{source}: {exc} ({tenants.configured(tenant)})") from None
    except (InvalidRequest, ApprovalMismatch, ApprovalInvalid) as exc:
        raise InvalidCaseFile(f"{source}: {exc}") from None


def write_json_file(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
