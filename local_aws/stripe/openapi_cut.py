"""Cut the part of Stripe's API description the local Stripe server serves (openapi/subset.json).

    python -m local_aws.stripe.openapi_cut --spec spec3.json   # Stripe's published description
    python -m local_aws.stripe.openapi_cut --from-sdk          # the pinned SDK's own types

Both write the same shape, an OpenAPI 3.0 document: the served operations (`OPERATIONS`) under
`paths`, the schemas they name under `components.schemas`, every `$ref` closed, and
`info.version` the API version. Two cuts keep it small without loosening it:

- an expandable field (`anyOf: [id, $ref]`) keeps only its id form unless the server expands it
  (`EXPANSIONS`: a PaymentIntent's `latest_charge`);
- any other reference to a resource the server does not serve (a PaymentMethod inside an error,
  a Customer) becomes `{"not": {}}`: nothing validates there but null or absence, so a response
  that filled it fails instead of passing unchecked.

And a request may carry only the parameters the server acts on (`SERVED_PARAMETERS`): what it
does not implement it refuses (400, "Received unknown parameter", as Stripe answers an unknown
one) rather than ignoring. What passes the cut passes Stripe's description.

`--spec` cuts from the published spec3.json of github.com/stripe/openapi (MIT). `--from-sdk`
derives the same document from the pinned `stripe` SDK (MIT), which Stripe generates from that
description at the SDK's API version: its resource classes (fields, nullability, literals) and
its request parameter types (names, types, required). It is what the repository carries today,
because no spec3.json of the SDK's API version could be fetched where it was cut
(openapi/README.md); the SDK's types say less than the spec (no maxLength, widened enums,
required response fields only where the SDK says non-Optional).
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import importlib
import inspect
import json
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, ForwardRef, Literal, Union, get_args, get_origin

SUBSET_PATH: Final = Path(__file__).parent / "openapi" / "subset.json"
REF_PREFIX: Final = "#/components/schemas/"
NOTHING: Final[dict[str, Any]] = {"not": {}, "description": "cut: the local server never fills it"}
_PLAIN: Final[dict[Any, dict[str, Any]]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    typing.Any: {},
    object: {},
}


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    params: str  # the SDK's parameter type (stripe.params.<module>.<class>)
    response: str  # the resource schema a 200 carries; "list:<schema>" for a list


OPERATIONS: Final = (
    Operation("get", "/v1/charges/{charge}", "ChargeRetrieveParams", "charge"),
    Operation(
        "get", "/v1/payment_intents/{intent}", "PaymentIntentRetrieveParams", "payment_intent"
    ),
    Operation("post", "/v1/payment_intents", "PaymentIntentCreateParams", "payment_intent"),
    Operation("get", "/v1/refunds", "RefundListParams", "list:refund"),
    Operation("post", "/v1/refunds", "RefundCreateParams", "refund"),
    Operation("get", "/v1/refunds/{refund}", "RefundRetrieveParams", "refund"),
)
# Resource schemas the server serves, by the SDK class that describes each.
RESOURCES: Final = {"charge": "Charge", "payment_intent": "PaymentIntent", "refund": "Refund"}
# Expandable fields the server expands (schema -> fields); every other one is its id only.
EXPANSIONS: Final = {"payment_intent": frozenset({"latest_charge"})}
# What a request may carry, per operation (method, path): the parameters the server acts on.
SERVED_PARAMETERS: Final = {
    ("post", "/v1/payment_intents"): frozenset(
        {
            "amount",
            "currency",
            "confirm",
            "payment_method",
            "payment_method_types",
            "description",
            "metadata",
            "expand",
        }
    ),
    ("post", "/v1/refunds"): frozenset(
        {"amount", "charge", "payment_intent", "metadata", "reason", "expand"}
    ),
    ("get", "/v1/refunds"): frozenset(
        {"charge", "payment_intent", "limit", "starting_after", "expand"}
    ),
}
PATH_PARAMETER: Final = {"type": "string", "maxLength": 5000}


# --- from the published description ------------------------------------------------------------
def cut_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The served operations of a full spec3.json, their schemas closed (the cuts above)."""
    schemas: Mapping[str, Any] = spec["components"]["schemas"]
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        operation = copy.deepcopy(spec["paths"][op.path][op.method])
        _restrict_operation(operation, SERVED_PARAMETERS.get((op.method, op.path)))
        paths.setdefault(op.path, {})[op.method] = operation
    kept: dict[str, Any] = {}
    pending = list(_refs(paths))
    while pending:
        name = pending.pop()
        if name in kept:
            continue
        schema = _cut_expansions(name, copy.deepcopy(schemas[name]))
        if name not in RESOURCES and name != "error" and _is_resource(schema):
            kept[name] = NOTHING
            continue
        kept[name] = schema
        pending.extend(_refs(schema))
    return _document(str(spec["info"]["version"]), paths, kept, source="spec")


def _is_resource(schema: Mapping[str, Any]) -> bool:
    return "x-resourceId" in schema


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            yield ref.removeprefix(REF_PREFIX)
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _cut_expansions(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    expanded = EXPANSIONS.get(name, frozenset())
    for field, prop in (schema.get("properties") or {}).items():
        if "x-expansionResources" in prop and field not in expanded and "anyOf" in prop:
            prop["anyOf"] = [alt for alt in prop["anyOf"] if "$ref" not in alt]
            del prop["x-expansionResources"]
    return schema


def _restrict_operation(operation: dict[str, Any], served: frozenset[str] | None) -> None:
    if served is None:
        return
    if "parameters" in operation:
        operation["parameters"] = [
            p for p in operation["parameters"] if p["in"] != "query" or p["name"] in served
        ]
    body = (
        operation.get("requestBody", {})
        .get("content", {})
        .get("application/x-www-form-urlencoded", {})
    )
    schema = body.get("schema")
    if schema is not None:
        schema["properties"] = {
            k: v for k, v in schema.get("properties", {}).items() if k in served
        }
        schema["required"] = [k for k in schema.get("required", []) if k in served]
        schema["additionalProperties"] = False
        if "encoding" in body:
            body["encoding"] = {k: v for k, v in body["encoding"].items() if k in served}


# --- from the pinned SDK --------------------------------------------------------------------------
class _SdkTypes:
    """JSON schemas (OpenAPI 3.0 style) from the SDK's generated classes."""

    def __init__(self) -> None:
        import stripe

        self.stripe = stripe
        self.schemas: dict[str, Any] = {}
        from stripe._request_options import RequestOptions
        from stripe._stripe_object import StripeObject

        self.options = frozenset(RequestOptions.__annotations__)
        self.stripe_object = StripeObject

    # -- resolving the annotations (strings, forward references) ----------------------------
    def _namespace(self, owner: type) -> dict[str, Any]:
        module = sys.modules[owner.__module__]
        namespace = {**vars(typing), **vars(module)}
        import typing_extensions

        namespace.update({k: getattr(typing_extensions, k) for k in ("Literal", "NotRequired")})
        return namespace

    def _resolve(self, annotation: Any, owner: type) -> Any:
        if isinstance(annotation, ForwardRef):
            annotation = annotation.__forward_arg__
        if isinstance(annotation, str):
            namespace = self._namespace(owner)
            namespace.update(_type_checking_imports(owner.__module__))
            return eval(annotation, namespace)  # noqa: S307 (the SDK's own annotations)
        return annotation

    # -- types ---------------------------------------------------------------------------------
    def schema(self, annotation: Any, owner: type, *, field: str = "") -> dict[str, Any]:
        tp = self._resolve(annotation, owner)
        origin = get_origin(tp)
        if origin is Literal:
            return _literal(get_args(tp))
        if tp in _PLAIN:
            return dict(_PLAIN[tp])
        if origin is None:
            if isinstance(tp, type) and _is_typed_dict(tp):
                return self.params(tp)
            if isinstance(tp, type) and issubclass(tp, self.stripe_object):
                return self._object(tp)
            raise TypeError(f"{owner.__name__}.{field}: no schema for {tp!r}")
        return self._generic(
            origin, tuple(self._resolve(a, owner) for a in get_args(tp)), owner, field
        )

    def _generic(
        self, origin: Any, args: tuple[Any, ...], owner: type, field: str
    ) -> dict[str, Any]:
        if origin in (Union, types.UnionType):
            return self._union(args, owner, field)
        if origin is list:
            return {"type": "array", "items": self.schema(args[0], owner)}
        if origin is dict:
            return {"type": "object", "additionalProperties": self.schema(args[1], owner)}
        name = getattr(origin, "__name__", "")
        if name == "UntypedStripeObject":
            return {"type": "object", "additionalProperties": self.schema(args[0], owner)}
        if name == "ListObject":
            return _list(self.schema(args[0], owner))
        raise TypeError(f"{owner.__name__}.{field}: no schema for {origin!r}{list(args)}")

    def _union(self, args: tuple[Any, ...], owner: type, field: str) -> dict[str, Any]:
        nullable = type(None) in args
        members = [a for a in args if a is not type(None)]
        if str in members and all(
            get_origin(m) is Literal and all(isinstance(v, str) for v in get_args(m))
            for m in members
            if m is not str
        ):  # an enum the SDK widens to any string
            schema: dict[str, Any] = {"type": "string"}
        elif len(members) == 2 and str in members and self._is_resource(_other(members, str)):
            schema = self._expandable(_other(members, str), owner, field)
        elif len(members) == 1:
            schema = self.schema(members[0], owner, field=field)
        else:
            alternatives: list[dict[str, Any]] = []
            for member in members:
                alternative = self.schema(member, owner, field=field)
                if alternative not in alternatives:  # Dict[str, str] and UntypedStripeObject[str]
                    alternatives.append(alternative)
            schema = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
        return {**schema, "nullable": True} if nullable else schema

    def _is_resource(self, tp: Any) -> bool:
        return (
            isinstance(tp, type)
            and issubclass(tp, self.stripe_object)
            and "." not in tp.__qualname__
            and isinstance(getattr(tp, "OBJECT_NAME", None), str)
        )

    def _expandable(self, resource: type, owner: type, field: str) -> dict[str, Any]:
        """An expandable field: its id, or the object where the server expands it."""
        name = getattr(owner, "OBJECT_NAME", "")
        if field in EXPANSIONS.get(name, frozenset()):
            return {"anyOf": [{"type": "string"}, self.resource(resource)]}
        return {"type": "string"}

    def resource(self, cls: type) -> dict[str, Any]:
        name = str(cls.OBJECT_NAME)  # type: ignore[attr-defined]
        if name not in RESOURCES:
            return dict(NOTHING)
        if name not in self.schemas:
            self.schemas[name] = {}  # a placeholder while its fields refer back to it
            self.schemas[name] = self._fields(cls)
        return {"$ref": REF_PREFIX + name}

    def _object(self, cls: type) -> dict[str, Any]:
        if self._is_resource(cls):
            return self.resource(cls)
        return self._fields(cls)

    def _fields(self, cls: type) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field, annotation in vars(cls).get("__annotations__", {}).items():
            resolved = self._resolve(annotation, cls)
            if get_origin(resolved) is typing.ClassVar:
                continue
            schema = self.schema(resolved, cls, field=field)
            properties[field] = schema
            if not schema.get("nullable"):
                required.append(field)
        return {
            "type": "object",
            "properties": properties,
            "required": sorted(required),
            "additionalProperties": False,
        }

    def params(self, cls: type) -> dict[str, Any]:
        """A request parameter type (a TypedDict): its fields, required as the SDK says."""
        properties = {
            name: self.schema(_not_required(self._resolve(annotation, cls)), cls, field=name)
            for name, annotation in cls.__annotations__.items()
            if name not in self.options
        }
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        return {
            "type": "object",
            "properties": properties,
            "required": sorted(k for k in required_keys if k in properties),
            "additionalProperties": False,
        }

    def error(self) -> dict[str, Any]:
        from stripe._error_object import ErrorObject

        body = self._fields(ErrorObject)
        return {
            "type": "object",
            "properties": {"error": body},
            "required": ["error"],
            "additionalProperties": False,
        }


@functools.cache
def _type_checking_imports(module_name: str) -> dict[str, Any]:
    """The names a module imports only for type checking (`if TYPE_CHECKING:`), imported."""
    source = inspect.getsource(sys.modules[module_name])
    names: dict[str, Any] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    module = importlib.import_module(statement.module)
                    for alias in statement.names:
                        names[alias.asname or alias.name] = getattr(module, alias.name)
    return names


def _other(members: list[Any], exclude: Any) -> Any:
    return next(m for m in members if m is not exclude)


def _is_typed_dict(tp: type) -> bool:
    return isinstance(getattr(tp, "__required_keys__", None), frozenset)


def _not_required(tp: Any) -> Any:
    """A TypedDict field's type without its NotRequired / Required wrapper (the class's
    `__required_keys__` says which it was)."""
    if get_origin(tp) in (typing.NotRequired, typing.Required):
        return get_args(tp)[0]
    return tp


def _literal(values: tuple[Any, ...]) -> dict[str, Any]:
    kinds = {type(v) for v in values}
    if kinds == {str}:
        return {"type": "string", "enum": list(values)}
    if kinds == {bool}:
        return {"type": "boolean", "enum": list(values)}
    if kinds == {int}:
        return {"type": "integer", "enum": list(values)}
    return {"enum": list(values)}


def _list(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "data": {"type": "array", "items": item},
            "has_more": {"type": "boolean"},
            "object": {"type": "string", "enum": ["list"]},
            "url": {"type": "string"},
        },
        "required": ["data", "has_more", "object", "url"],
        "additionalProperties": False,
    }


def _param_class(name: str) -> type:
    module = "".join(f"_{c.lower()}" if c.isupper() else c for c in name).removesuffix("_params")
    cls: type = getattr(importlib.import_module(f"stripe.params.{module}_params"), name)
    return cls


def cut_sdk() -> dict[str, Any]:
    """The served operations and their schemas, from the installed SDK's types."""
    import stripe

    sdk = _SdkTypes()
    for name, class_name in RESOURCES.items():
        sdk.resource(getattr(stripe, class_name))
        assert name in sdk.schemas
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        params = sdk.params(_param_class(op.params))
        served = SERVED_PARAMETERS.get((op.method, op.path))
        if served is not None:
            params["properties"] = {k: v for k, v in params["properties"].items() if k in served}
            params["required"] = [k for k in params["required"] if k in served]
        paths.setdefault(op.path, {})[op.method] = _operation(op, params)
    schemas = {**sdk.schemas, "error": sdk.error()}
    version = str(stripe._api_version._ApiVersion.CURRENT)
    return _document(version, paths, schemas, source="sdk")


def _operation(op: Operation, params: dict[str, Any]) -> dict[str, Any]:
    if op.response.startswith("list:"):
        ok = _list({"$ref": REF_PREFIX + op.response.removeprefix("list:")})
    else:
        ok = {"$ref": REF_PREFIX + op.response}
    path_parameters = [
        {"in": "path", "name": part[1:-1], "required": True, "schema": dict(PATH_PARAMETER)}
        for part in op.path.split("/")
        if part.startswith("{")
    ]
    operation: dict[str, Any] = {
        "responses": {
            "200": {"content": {"application/json": {"schema": ok}}},
            "default": {
                "content": {"application/json": {"schema": {"$ref": REF_PREFIX + "error"}}}
            },
        }
    }
    if op.method == "get":
        operation["parameters"] = path_parameters + [
            {
                "in": "query",
                "name": name,
                "required": name in params["required"],
                "schema": schema,
                "style": "deepObject",
                "explode": True,
            }
            for name, schema in params["properties"].items()
        ]
    else:
        operation["parameters"] = path_parameters
        operation["requestBody"] = {
            "content": {"application/x-www-form-urlencoded": {"schema": params}},
            "required": bool(params["required"]),
        }
    return operation


def _document(
    version: str, paths: dict[str, Any], schemas: dict[str, Any], *, source: str
) -> dict[str, Any]:
    return {
        "openapi": "3.0.0",
        "info": {
            "title": "Stripe API: the part the local Stripe server serves",
            "version": version,
            "x-cut-from": source,
        },
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def write(document: Mapping[str, Any], path: Path = SUBSET_PATH) -> None:
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_aws.stripe.openapi_cut")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--spec", type=Path, help="a full spec3.json of github.com/stripe/openapi")
    source.add_argument("--from-sdk", action="store_true", help="the installed stripe SDK's types")
    parser.add_argument("--out", type=Path, default=SUBSET_PATH, help="default %(default)s")
    args = parser.parse_args(argv)
    if args.spec is not None:
        document = cut_spec(json.loads(args.spec.read_text(encoding="utf-8")))
    else:
        document = cut_sdk()
    write(document, args.out)
    print(f"wrote {args.out} (API version {document['info']['version']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
