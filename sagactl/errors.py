"""Typed user-facing errors of the operator commands, the wrapper that prints them, and the
exit statuses scripts can rely on.

A user error (an unknown case, an invalid case file, a refused redrive, a missing stack) is a
message and a non-zero exit code, never a traceback. Each class names the kind of failure so that
`--json` callers can branch on `error.type`. `start` and `watch` also say how the case ended in
their exit status (EXIT_STATUSES).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
)

from sagactl.views.untrusted import visible_lines

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_TIMEOUT = 4
# How a case ended, for `sagactl start` and `sagactl watch` (EXIT_STATUSES says when).
EXIT_ESCALATED = 5
EXIT_NOT_FINISHED = 6
EXIT_DUPLICATE = 7
EXIT_NOT_STARTED = 8
EXIT_INTERRUPTED = 130

# The exit statuses of `start` and `watch`, as their --help and the README list them.
EXIT_STATUSES: tuple[tuple[int, str], ...] = (
    (
        0,
        "COMPLETED: the execution SUCCEEDED and the case is done. Without --watch, `start` "
        "exits 0 once the execution is started, or found already started with this file",
    ),
    (EXIT_ERROR, "an error: AWS or the local AWS unreachable, no such case or stack, ..."),
    (EXIT_USAGE, "a usage error or an invalid case file: nothing was started"),
    (
        EXIT_TIMEOUT,
        "the execution was still RUNNING when --timeout ran out (`sagactl watch CASE` follows "
        "it on)",
    ),
    (
        EXIT_ESCALATED,
        "ESCALATED: the execution SUCCEEDED and a person has to decide what is left "
        "(`sagactl status CASE` shows the decision needed)",
    ),
    (
        EXIT_NOT_FINISHED,
        "the execution FAILED, TIMED_OUT or was ABORTED: the case was rejected at ValidateCase "
        "(nothing was done: correct it, re-approve it as the next revision, start it), or its "
        "work is unfinished (`sagactl redrive CASE`)",
    ),
    (
        EXIT_DUPLICATE,
        "DUPLICATE: the case already ran as another execution; nothing ran again",
    ),
    (
        EXIT_NOT_STARTED,
        "not started: an execution of the same name ran a different input than this file",
    ),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C stops the command, not the execution)"),
)


def exit_statuses_help() -> str:
    """EXIT_STATUSES as an argparse epilog (RawDescriptionHelpFormatter keeps the layout)."""
    lines = ["exit status:"]
    for code, text in EXIT_STATUSES:
        wrapped = textwrap.wrap(text, width=72)
        lines.append(f"  {code:<4} {wrapped[0]}")
        lines.extend(f"       {line}" for line in wrapped[1:])
    return "\n".join(lines)


def execution_exit_code(description: Mapping[str, Any]) -> int:
    """The exit status for a closed execution of the saga (its status, and its output's
    `outcome` when it SUCCEEDED)."""
    status = description.get("status")
    if status in ("FAILED", "TIMED_OUT", "ABORTED"):
        return EXIT_NOT_FINISHED
    try:
        output = json.loads(description.get("output") or "null")
    except ValueError:
        output = None
    outcome = output.get("outcome") if isinstance(output, dict) else None
    codes = {"COMPLETED": 0, "ESCALATED": EXIT_ESCALATED, "DUPLICATE": EXIT_DUPLICATE}
    if status == "SUCCEEDED" and outcome in codes:
        return codes[outcome]
    return EXIT_ERROR  # not a closed execution of this saga


class SagactlError(Exception):
    """Base of every user-facing error: printed as `sagactl: <message>`, exit `exit_code`.
    `more_lines` are lines sagactl made itself (a list under the message), each printed as a line;
    a newline inside the message or a line is text it quotes, shown written out."""

    exit_code = EXIT_ERROR

    def __init__(self, message: object = "", *more_lines: str) -> None:
        super().__init__(message)
        self.message = str(message)  # an exception passed on is shown as its text
        self.more_lines = more_lines

    def __str__(self) -> str:
        return "\n".join([self.message, *self.more_lines])

    @property
    def error_type(self) -> str:
        return type(self).__name__


class InvalidCaseFile(SagactlError):
    """A case file that cannot be read, parsed or validated."""

    exit_code = EXIT_USAGE


class UsageError(SagactlError):
    exit_code = EXIT_USAGE


class NotFound(SagactlError):
    """No such case, execution, ledger record or stack."""


class TargetError(SagactlError):
    """The AWS (or local AWS) the command should talk to cannot be reached or resolved."""


class Refused(SagactlError):
    """The request is understood and declined, with the reason: nothing was changed."""

    exit_code = EXIT_REFUSED


class RedriveRefused(Refused):
    """Redrive cannot help: the reason says why."""


class WatchTimeout(SagactlError):
    exit_code = EXIT_TIMEOUT


class CaseNotOpen(Refused):
    """The case is not an open escalation (done, still running, ...): nothing to resolve."""


class AlreadyResolved(Refused):
    """A person has already resolved the case; a decision is recorded once."""


class ActionInFlight(Refused):
    """An attempt holds one of the case's actions right now: resolve once it has ended."""


class DraftApprovalRefused(Refused):
    """The proposed case is approved already, or changed since it was shown: nothing stored."""


class QueueCleanupFailed(SagactlError):
    """The resolution is recorded, but the case's messages could not all be removed."""


class SweepFailed(SagactlError):
    """The sweeper function ran and raised."""


class SigningRefused(SagactlError):
    """KMS refused to sign: these credentials are not the approver's."""


class NotAnApprover(SagactlError):
    """The approver named is not one of the tenant's approvers in this stack: nothing signed."""

    exit_code = EXIT_USAGE


Handler = Callable[[argparse.Namespace], int]


def guarded(handler: Handler) -> Handler:
    """Turn user errors and the usual AWS client failures into a message and an exit code."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except SagactlError as exc:
            return _report(args, exc.error_type, exc.message, exc.exit_code, exc.more_lines)
        except NoCredentialsError:
            return _report(
                args,
                "NoCredentials",
                with_local_hint(
                    "no AWS credentials found by the default credential chain "
                    "(set AWS_PROFILE or run `aws configure`), or use --local"
                ),
                EXIT_ERROR,
            )
        except NoRegionError:
            return _report(
                args,
                "NoRegion",
                with_local_hint("no AWS region configured: pass --region"),
                EXIT_ERROR,
            )
        except EndpointConnectionError as exc:
            from sagactl.target import unreachable_text

            endpoint = str(exc.kwargs.get("endpoint_url", "the endpoint"))
            local, region = bool(getattr(args, "local", False)), getattr(args, "region", None)
            return _report(
                args,
                "EndpointUnreachable",
                unreachable_text(endpoint, local=local, region=region),
                EXIT_ERROR,
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", "ClientError"))
            message = str(error.get("Message", exc))
            return _report(args, code, f"AWS {exc.operation_name} failed: {code}: {message}", 1)
        except BotoCoreError as exc:  # read/connect timeouts and the like: no traceback either
            return _report(args, type(exc).__name__, f"AWS call failed: {exc}", EXIT_ERROR)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED

    return run


def with_local_hint(message: str) -> str:
    """`message`, and how to use the local AWS when one is running: a command that found no
    AWS configuration was most likely meant for it (its shell lacks the environment)."""
    from sagactl.local_process import usage_hint
    from sagactl.paths import LOCAL_STATE_DIR

    hint = usage_hint(LOCAL_STATE_DIR)
    return f"{message}; {hint}" if hint else message


def _report(
    args: argparse.Namespace,
    error_type: str,
    message: str,
    exit_code: int,
    more_lines: Sequence[str] = (),
) -> int:
    if getattr(args, "json", False):
        text = "\n".join([message, *more_lines])
        print(json.dumps({"error": {"type": error_type, "message": text}}))
    # The message may quote a case or AWS (a refusal, a cause): shown, never obeyed.
    print(f"sagactl: {visible_lines([message, *more_lines])}", file=sys.stderr)
    return exit_code
