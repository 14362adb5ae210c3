"""The names Step Functions gives a Lambda task's failures that the function's code never raised
(docs/design.md §4): one place for the workflow's routing (the definition names the crash
family as CRASH_FAMILY and stacks/workflow_policy.py expands it; cdk.json's retry policies the
same) and for the local runtime's answers (local_aws/lambda_runtime.py).

- **Invoke-level faults** (`LAMBDA_INVOKE_ERRORS`): the invoke itself failed (the function did
  not run, or ran and its answer was lost on the way back). Step Functions' "Handle Lambda
  service exceptions" recommends retrying them; every tool is ledger-guarded, so a repeat is
  decided by the ledger.
- **A function that died** (`LAMBDA_CRASH_ERRORS`): its process ended before it answered, so it
  may have dispatched. A Lambda task's error is the function's `errorType`, and a dead process
  has the one Lambda gives it: `Sandbox.Timedout` for its own timeout ("Task timed out after
  N seconds"), `Runtime.ExitError` for a process that exited or was killed ("Runtime exited
  with error: signal: killed", also out of memory), `Runtime.OutOfMemory` for an out-of-memory
  kill on current runtimes, and `Lambda.Unknown` where there is no error type (what the Step
  Functions guide still documents: "Unhandled errors in Lambda are reported as Lambda.Unknown
  ... These include out-of-memory errors and function timeouts"). Which of them an account
  reports today is not verified against one: all four are routed alike (docs/design.md §4
  cites what AWS documents and what public projects observe).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

LAMBDA_INVOKE_ERRORS: tuple[str, ...] = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Lambda.ClientExecutionTimeoutException",
)

LAMBDA_UNKNOWN = "Lambda.Unknown"


class Death(StrEnum):
    """How a function's process ended before it answered."""

    TIMED_OUT = "timed_out"  # its own timeout
    EXITED = "exited"  # a crash: the process exited or was killed
    OUT_OF_MEMORY = "out_of_memory"


# What current Lambda runtimes answer for each death (the local runtime answers the same).
CRASH_ERROR_OF: dict[Death, str] = {
    Death.TIMED_OUT: "Sandbox.Timedout",
    Death.EXITED: "Runtime.ExitError",
    Death.OUT_OF_MEMORY: "Runtime.OutOfMemory",
}
LAMBDA_CRASH_ERRORS: tuple[str, ...] = (*CRASH_ERROR_OF.values(), LAMBDA_UNKNOWN)

# How the ASL file and cdk.json name the crash family: never its members one by one, so that no
# Catch or Retry can route some of them and miss the others.
CRASH_FAMILY = "@LambdaCrash"


class ErrorNamesError(ValueError):
    """An ErrorEquals that names crash-family members itself (the message says what to write)."""


def expand_error_names(errors: Iterable[str]) -> list[str]:
    """ErrorEquals with CRASH_FAMILY replaced by the family's members, in place. A member named
    on its own is refused: the family is routed whole or not at all."""
    names = list(errors)
    members = [name for name in names if name in LAMBDA_CRASH_ERRORS]
    if members:
        raise ErrorNamesError(
            f"names {', '.join(members)} itself: name the whole family of a function that died "
            f"as {CRASH_FAMILY!r} ({', '.join(LAMBDA_CRASH_ERRORS)}; stacks/lambda_errors.py)"
        )
    expanded: list[str] = []
    for name in names:
        expanded.extend(LAMBDA_CRASH_ERRORS if name == CRASH_FAMILY else (name,))
    return expanded


__all__ = [
    "CRASH_ERROR_OF",
    "CRASH_FAMILY",
    "LAMBDA_CRASH_ERRORS",
    "LAMBDA_INVOKE_ERRORS",
    "LAMBDA_UNKNOWN",
    "Death",
    "ErrorNamesError",
    "expand_error_names",
]
