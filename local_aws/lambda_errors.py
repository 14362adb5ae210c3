"""The answer of a function that died, as Lambda gives it, and its name in moto's Lambda task.

A function whose process ends before it answers (its own timeout, a crash, out of memory) has
the error type Lambda gives it, which Step Functions reports as the task's error
(stacks/lambda_errors.py, the one list the definition routes). Two namings, chosen per local
AWS (`sagactl local up --crash-errors`, else $SAGA_LOCAL_CRASH_ERRORS, docs/design.md §7):

- `current` (the default): what current runtimes answer: `Sandbox.Timedout` for a timeout,
  `Runtime.ExitError` for a crash, `Runtime.OutOfMemory` for out of memory;
- `lambda-unknown`: no error type, which Step Functions reports as `Lambda.Unknown` ("Unhandled
  errors in Lambda are reported as Lambda.Unknown ... These include out-of-memory errors and
  function timeouts", Step Functions developer guide, "Handle Lambda service exceptions").

moto names an answer without an error type `Exception`, which no Retry or Catch of the saga
matches (a forward step that died after dispatching would end FAILED with its effect
unrecorded): `install_lambda_unknown_mapping` names it `Lambda.Unknown`, as AWS does.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from typing import Any

from local_aws.patching import wrap_once
from stacks.lambda_errors import CRASH_ERROR_OF, LAMBDA_UNKNOWN, Death

CRASH_ERRORS_ENV = "SAGA_LOCAL_CRASH_ERRORS"
_MARK = "_saga_lambda_unknown"


class CrashNaming(StrEnum):
    """How the local runtime names a function that died."""

    CURRENT = "current"
    LAMBDA_UNKNOWN = "lambda-unknown"


def crash_naming_from_env() -> CrashNaming:
    raw = os.environ.get(CRASH_ERRORS_ENV) or CrashNaming.CURRENT.value
    try:
        return CrashNaming(raw)
    except ValueError:
        choices = ", ".join(naming.value for naming in CrashNaming)
        raise ValueError(f"{CRASH_ERRORS_ENV} must be one of {choices}, got {raw!r}") from None


def crash_payload(
    death: Death, naming: CrashNaming, *, request_id: str, timeout_seconds: float, detail: str
) -> dict[str, str]:
    """Lambda's answer for a process that ended in `death` (`detail`: the local cause)."""
    if death is Death.TIMED_OUT:
        what = f"Task timed out after {timeout_seconds:.2f} seconds"
    else:
        what = "Runtime exited with error: signal: killed"
    message = f"RequestId: {request_id} Error: {what} ({detail})"
    if naming is CrashNaming.LAMBDA_UNKNOWN:
        return {"errorMessage": message}
    return {"errorType": CRASH_ERROR_OF[death], "errorMessage": message}


def _has_error_type(payload: str) -> bool:
    try:
        body = json.loads(payload)
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("errorType"), str)


def install_lambda_unknown_mapping() -> None:
    """Name an answer without an error type `Lambda.Unknown`, as AWS does (idempotent)."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_lambda,
    )

    task = state_task_service_lambda.StateTaskServiceLambda

    def wrap(original: Any) -> Any:
        def _from_error(self: Any, env: Any, ex: Exception) -> Any:
            if isinstance(ex, lambda_eval_utils.LambdaFunctionErrorException) and not (
                _has_error_type(ex.payload)
            ):
                cause = (
                    "The cause could not be determined because Lambda did not return an error "
                    f"type. Returned payload: {ex.payload}"
                )
                ex = lambda_eval_utils.LambdaFunctionErrorException(
                    ex.function_error,
                    json.dumps({"errorType": LAMBDA_UNKNOWN, "errorMessage": cause}),
                )
            return original(self, env, ex)

        return _from_error

    wrap_once(task, "_from_error", _MARK, wrap)
