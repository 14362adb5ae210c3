"""Lambda errors as Step Functions names them on AWS, for moto's Lambda task.

A function that dies before answering (a crash, out of memory, its own timeout) returns no error
type, and AWS reports that to Step Functions as `Lambda.Unknown` ("Unhandled errors in Lambda
are reported as Lambda.Unknown ... These include out-of-memory errors and function timeouts",
Step Functions developer guide, "Handle Lambda service exceptions"). moto names it `Exception`,
which no Retry or Catch of the saga matches, so a forward step that died after dispatching would
end FAILED with its effect unrecorded instead of going to reconciliation.

The in-process runtime (sagactl.local.lambda_runtime) answers a `SimulatedCrash` the way Lambda
answers a dead process: an error payload without `errorType`.
"""

from __future__ import annotations

import json
from typing import Any

from sagactl.local.patching import wrap_once

LAMBDA_UNKNOWN = "Lambda.Unknown"
_MARK = "_saga_lambda_unknown"


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
