"""The local AWS's hooks without a server: JSONata, the in-process Lambda runtime, retry time."""

from __future__ import annotations

import json
import os
import re
import uuid
from typing import Any

import pytest

from local_aws import emulator, lambda_runtime
from local_aws.jsonata_eval import (
    JsonataEvaluationError,
    evaluate,
    install_jsonata_evaluator,
)

# -- JSONata -----------------------------------------------------------------------------------


def _moto_eval(expression: str, **bindings: Any) -> Any:
    """Evaluate the way moto's interpreter does: declarations composed around the expression."""
    from moto.stepfunctions.parser.asl.jsonata import jsonata as moto_jsonata

    install_jsonata_evaluator()
    declarations = moto_jsonata.encode_jsonata_variable_declarations(
        {f"${name}": value for name, value in bindings.items()}
    )
    composed = moto_jsonata.compose_jsonata_expression(expression, [declarations])
    return moto_jsonata.eval_jsonata_expression(composed)


def test_states_input_variables_string_and_concatenation() -> None:
    states = {"input": {"case_id": "case-1", "refund": {"amount_minor": 2000}}}
    result = _moto_eval(
        "$states.input.case_id & ':' & $string($states.input.refund.amount_minor) & ':' & $tenant",
        states=states,
        tenant="acme",
    )
    assert result == "case-1:2000:acme"


def test_object_constructor_keeps_json_types() -> None:
    result = _moto_eval(
        "{'case': $states.input, 'n': 4 / 2, 'ratio': 1 / 4, 'ok': true, 'none': null, 'l': [1]}",
        states={"input": {"a": [1, 2]}},
    )
    assert result == {
        "case": {"a": [1, 2]},
        "n": 2,
        "ratio": 0.25,
        "ok": True,
        "none": None,
        "l": [1],
    }
    assert isinstance(result["n"], int)  # AWS prints a whole number without ".0"


def test_string_variables_with_quotes_and_backslashes_survive() -> None:
    # moto 5.2.5 writes string variables as '"' + value + '"' without escaping.
    tricky = 'He said "no" \\ then left\n'
    assert _moto_eval("$note", note=tricky) == tricky


def test_undefined_is_none_and_errors_are_typed() -> None:
    from moto.stepfunctions.parser.asl.jsonata.jsonata import JSONataException

    assert evaluate("$nothing.here") is None
    with pytest.raises(JsonataEvaluationError, match="before end of expression"):
        evaluate("$string(")
    with pytest.raises(JSONataException):
        _moto_eval("$string(")


def test_step_functions_uuid_and_hash_functions() -> None:
    install_jsonata_evaluator()
    assert uuid.UUID(str(evaluate("$uuid()"))).version == 4
    assert evaluate("$hash('abc', 'SHA-256')") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    with pytest.raises(JsonataEvaluationError, match="unsupported algorithm 'CRC'"):
        evaluate("$hash('abc', 'CRC')")


# -- in-process Lambda runtime ---------------------------------------------------------------


class NotEnoughStock(Exception):
    pass


def _raising_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    raise NotEnoughStock(f"only {event['have']} left")


def _env_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {
        "table": os.environ.get("TABLE"),
        "endpoint": os.environ.get("AWS_ENDPOINT_URL"),
        "key": os.environ.get("AWS_ACCESS_KEY_ID"),
        "function": context.function_name,
        "arn": context.invoked_function_arn,
        "request_ids_differ": event["previous"] != context.aws_request_id,
        "remaining_within_timeout": 0 < context.get_remaining_time_in_millis() <= 7000,
    }


def _invoke(
    handler: str, event: Any, variables: dict[str, str] | None = None
) -> tuple[str, bool, str]:
    return lambda_runtime.invoke_in_process(
        handler_path=handler,
        event=event,
        function_name="fn",
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:fn",
        version="$LATEST",
        memory_mb=512,
        timeout=7,
        variables=variables or {},
    )


def test_exception_becomes_the_runtime_error_shape_with_the_class_name() -> None:
    payload, errored, logs = _invoke(f"{__name__}._raising_handler", {"have": 2})
    body = json.loads(payload)
    assert errored is True
    assert (body["errorType"], body["errorMessage"]) == ("NotEnoughStock", "only 2 left")
    assert any("_raising_handler" in frame for frame in body["stackTrace"])
    assert "NotEnoughStock: only 2 left" in logs


def test_handler_sees_its_environment_and_context_and_nothing_leaks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        lambda_runtime._Runtime,
        "settings",
        lambda_runtime.RuntimeSettings(endpoint_url="http://127.0.0.1:1"),
    )
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "outer")
    monkeypatch.delenv("TABLE", raising=False)
    before = dict(os.environ)
    payload, errored, _ = _invoke(f"{__name__}._env_handler", {"previous": "x"}, {"TABLE": "t1"})
    assert errored is False
    assert json.loads(payload) == {
        "table": "t1",
        "endpoint": "http://127.0.0.1:1",
        "key": "testing",
        "function": "fn",
        "arn": "arn:aws:lambda:us-east-1:123456789012:function:fn",
        "request_ids_differ": True,
        "remaining_within_timeout": True,
    }
    assert dict(os.environ) == before


def test_missing_handler_is_an_import_error_for_the_workflow() -> None:
    payload, errored, _ = _invoke("saga.handlers.no_such_module.handler", {})
    assert errored is True
    assert json.loads(payload)["errorType"] == "Runtime.ImportModuleError"
    payload, errored, _ = _invoke(f"{__name__}.no_such_function", {})
    assert json.loads(payload)["errorMessage"].endswith(
        f"Handler 'no_such_function' missing in module {__name__!r}"
    )


def test_unserialisable_result_is_a_marshal_error() -> None:
    payload, errored, _ = _invoke(f"{__name__}._returns_object", {})
    assert errored is True
    assert json.loads(payload)["errorType"] == "Runtime.MarshalError"


def _returns_object(event: Any, context: Any) -> object:
    return object()


def test_moto_empty_body_string_becomes_an_empty_event() -> None:
    captured: list[Any] = []

    class FakeFunction:
        handler = f"{__name__}._capture"
        function_name = "fn"
        function_arn = "arn"
        version = "1"
        memory_size = 128
        timeout = 3
        environment_vars: dict[str, str] = {}

    _CAPTURED.clear()
    with lambda_runtime.handlers_in_process():  # _CAPTURED is this process's
        lambda_runtime._moto_invoke_lambda(FakeFunction(), "{}")
        lambda_runtime._moto_invoke_lambda(FakeFunction(), {"a": 1})
    captured.extend(_CAPTURED)
    assert captured == [{}, {"a": 1}]


_CAPTURED: list[Any] = []


def _capture(event: Any, context: Any) -> None:
    _CAPTURED.append(event)


# -- Retry time scale ------------------------------------------------------------------------


def test_retry_sleeps_are_scaled(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    slept: list[float] = []
    monkeypatch.setattr("local_aws.emulator.time.sleep", slept.append)
    previous = emulator.retry_time_scale()
    try:
        emulator.set_retry_time_scale(0.25)
        # moto's Retry sleeps through its module's `time`, which the emulator replaced.
        retrier_decl.time.sleep(8)  # type: ignore[attr-defined]
        emulator.set_retry_time_scale(0)
        retrier_decl.time.sleep(8)  # type: ignore[attr-defined]
    finally:
        emulator.set_retry_time_scale(previous)
    assert slept == [2.0, 0.0]


@pytest.mark.parametrize("raw", ["-1", "fast"])
def test_bad_time_scale_env_is_rejected(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(emulator.TIME_SCALE_ENV, raw)
    previous = emulator.retry_time_scale()
    with pytest.raises(ValueError, match=re.escape(f"got {raw!r}")):
        emulator.set_retry_time_scale()
    assert emulator.retry_time_scale() == previous


def test_dynamodb_atomicity_wraps_request_handling_once() -> None:
    from moto.dynamodb.responses import DynamoHandler

    emulator.install_dynamodb_atomicity()
    wrapped = DynamoHandler.call_action
    emulator.install_dynamodb_atomicity()
    assert DynamoHandler.call_action is wrapped
    assert getattr(wrapped, "_saga_atomic_request", False) is True


def test_the_server_listens_on_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback only"):
        emulator.LocalServer("0.0.0.0", 0)
