"""JSONata for moto's Step Functions interpreter, evaluated by jsonata-python.

moto composes every JSONata field into one self-contained expression (variable declarations for
`$states` and the workflow variables, then the field's expression) and hands it to
`moto.stepfunctions.parser.asl.jsonata.jsonata._eval_jsonata`, which it leaves as None. This
module fills that hook and fixes two gaps of moto 5.2.5 on the way.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from typing import Any

from jsonata import Jsonata

_SF_HASH_ALGORITHMS = {
    "MD5": "md5",
    "SHA-1": "sha1",
    "SHA-256": "sha256",
    "SHA-384": "sha384",
    "SHA-512": "sha512",
}


class JsonataEvaluationError(Exception):
    """A JSONata expression failed to parse or evaluate; `code` is JSONata's (e.g. S0103)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


def _uuid() -> str:
    return str(uuid.uuid4())


def _hash(value: Any, algorithm: Any) -> str:
    # Step Functions' $hash(value, algorithm): hex digest of the string value.
    name = _SF_HASH_ALGORITHMS.get(str(algorithm))
    if name is None:
        raise JsonataEvaluationError(f"$hash: unsupported algorithm {algorithm!r}")
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return hashlib.new(name, text.encode("utf-8")).hexdigest()


# Step Functions functions that moto declares as "not supported" stubs; registered natively here.
_NATIVE_FUNCTIONS: dict[str, Callable[..., Any]] = {"uuid": _uuid, "hash": _hash}


def to_plain_json(value: Any) -> Any:
    """jsonata-python results as plain JSON values (lists, dicts, ints for whole numbers).

    JSONata has one number type; AWS serialises 2000.0 as 2000, so whole floats become ints.
    """
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        return {str(k): to_plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain_json(v) for v in value]
    raise JsonataEvaluationError(
        f"JSONata expression returned a non-JSON value of type {type(value).__name__}"
    )


def evaluate(expression: str) -> Any:
    """Evaluate one self-contained JSONata expression; None means undefined."""
    try:
        compiled = Jsonata(expression)
        for name, function in _NATIVE_FUNCTIONS.items():
            compiled.register_lambda(name, function)
        result = compiled.evaluate(None)
    except JsonataEvaluationError:
        raise
    except Exception as exc:  # jsonata-python raises JException and plain Python errors alike
        raise JsonataEvaluationError(str(exc), getattr(exc, "error", None)) from exc
    return to_plain_json(result)


def _encode_variable_declarations(bindings: dict[str, Any]) -> str:
    # moto writes string values as f'"{value}"' without escaping, so a quote or backslash in any
    # string variable breaks the whole expression; JSON string literals are valid JSONata.
    parts: list[str] = []
    for reference, value in bindings.items():
        literal = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
        parts.append(f"{reference}:={literal};")
    return "".join(parts)


def install_jsonata_evaluator() -> None:
    """Point moto's JSONata hook at jsonata-python (idempotent)."""
    from moto.stepfunctions.parser.asl.component.intrinsic import jsonata as intrinsic_jsonata
    from moto.stepfunctions.parser.asl.eval import states as states_module
    from moto.stepfunctions.parser.asl.eval import variable_store
    from moto.stepfunctions.parser.asl.jsonata import jsonata as moto_jsonata

    def _eval(expression: str) -> Any:
        try:
            return evaluate(expression)
        except JsonataEvaluationError as exc:
            raise moto_jsonata.JSONataException("UNKNOWN", str(exc)) from exc

    moto_jsonata._eval_jsonata = _eval
    for module in (moto_jsonata, states_module, variable_store):
        module.encode_jsonata_variable_declarations = _encode_variable_declarations  # type: ignore[attr-defined]
    # moto's declarations of $uuid/$hash shadow real functions with "not supported" strings.
    declarations = intrinsic_jsonata._DECLARATION_BY_VARIABLE_REFERENCE
    for name in _NATIVE_FUNCTIONS:
        declarations.pop(f"${name}", None)
