"""Typed user-facing errors of the operator commands and the wrapper that prints them.

A user error (an unknown case, an invalid case file, a refused redrive, a missing stack) is a
message and a non-zero exit code, never a traceback. Each class names the kind of failure so that
`--json` callers can branch on `error.type`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
)

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_TIMEOUT = 4


class SagactlError(Exception):
    """Base of every user-facing error: printed as `sagactl: <message>`, exit `exit_code`."""

    exit_code = EXIT_ERROR

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


class RedriveRefused(SagactlError):
    """Redrive cannot help: the reason says why (design.md §6)."""

    exit_code = EXIT_REFUSED


class WatchTimeout(SagactlError):
    exit_code = EXIT_TIMEOUT


Handler = Callable[[argparse.Namespace], int]


def guarded(handler: Handler) -> Handler:
    """Turn user errors and the usual AWS client failures into a message and an exit code."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except SagactlError as exc:
            return _report(args, exc.error_type, str(exc), exc.exit_code)
        except NoCredentialsError:
            return _report(
                args,
                "NoCredentials",
                "no AWS credentials found by the default credential chain "
                "(set AWS_PROFILE or run `aws configure`), or use --local",
                EXIT_ERROR,
            )
        except NoRegionError:
            return _report(args, "NoRegion", "no AWS region configured: pass --region", EXIT_ERROR)
        except EndpointConnectionError as exc:
            return _report(
                args,
                "EndpointUnreachable",
                f"cannot reach {exc.kwargs.get('endpoint_url', 'the endpoint')}: "
                "is `sagactl local up` running?",
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
            return 130

    return run


def _report(args: argparse.Namespace, error_type: str, message: str, exit_code: int) -> int:
    if getattr(args, "json", False):
        print(json.dumps({"error": {"type": error_type, "message": message}}))
    print(f"sagactl: {message}", file=sys.stderr)
    return exit_code
