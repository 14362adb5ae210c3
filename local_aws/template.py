"""Reading a synthesized CloudFormation template: local physical names and intrinsic functions.

Only what the stack's emulated resources need is resolved (Ref, Fn::GetAtt, Fn::Join, Fn::Sub,
Fn::Select, Fn::Split, pseudo parameters, parameter defaults). Anything that points at a resource
the local AWS does not emulate (an IAM role, a log group, a layer) resolves to a stable,
well-formed placeholder ARN so that the value stays readable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# CDK appends an 8-hex-digit hash to every logical id; the readable part is what remains.
_CDK_HASH_SUFFIX = re.compile(r"^(?P<name>.+?)[0-9A-F]{8}$")
_SUB_PLACEHOLDER = re.compile(r"\$\{([^}!][^}]*)\}")


class TemplateError(ValueError):
    """The template uses something the local provisioning cannot resolve."""


def readable_logical_id(logical_id: str) -> str:
    match = _CDK_HASH_SUFFIX.match(logical_id)
    return match.group("name") if match else logical_id


def load_template(path: Path) -> dict[str, Any]:
    try:
        template = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TemplateError(f"cannot read template {path}: {exc}") from exc
    if not isinstance(template, dict) or not isinstance(template.get("Resources"), dict):
        raise TemplateError(f"{path} is not a CloudFormation template (no Resources)")
    return template


@dataclass
class PhysicalResource:
    """What a Ref / Fn::GetAtt of one resource resolves to locally."""

    ref: str
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class ResolutionContext:
    stack_name: str
    region: str
    account_id: str
    template: Mapping[str, Any]
    resources: dict[str, PhysicalResource] = field(default_factory=dict)
    # Called for a logical id without a local physical resource (not emulated).
    fallback: Callable[[str], PhysicalResource] | None = None

    def pseudo(self, name: str) -> str | None:
        return {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account_id,
            "AWS::Partition": "aws",
            "AWS::StackName": self.stack_name,
            "AWS::StackId": (
                f"arn:aws:cloudformation:{self.region}:{self.account_id}:stack/"
                f"{self.stack_name}/local"
            ),
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": None,
        }.get(name)

    def physical(self, logical_id: str) -> PhysicalResource:
        found = self.resources.get(logical_id)
        if found is not None:
            return found
        if logical_id not in self.template.get("Resources", {}):
            raise TemplateError(f"reference to unknown resource {logical_id!r}")
        if self.fallback is None:
            raise TemplateError(f"resource {logical_id!r} has no local physical id yet")
        return self.fallback(logical_id)

    def ref(self, name: str) -> Any:
        if name.startswith("AWS::"):
            return self.pseudo(name)
        parameters = self.template.get("Parameters", {})
        if name in parameters:
            if "Default" not in parameters[name]:
                raise TemplateError(f"parameter {name!r} has no default")
            return parameters[name]["Default"]
        return self.physical(name).ref

    def get_att(self, logical_id: str, attribute: str) -> str:
        physical = self.physical(logical_id)
        if attribute not in physical.attributes:
            raise TemplateError(f"{logical_id}.{attribute} is not available locally")
        return physical.attributes[attribute]

    def resolve(self, value: Any) -> Any:
        """Resolve every intrinsic function inside `value`."""
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            handler = _INTRINSICS.get(key)
            if handler is not None:
                return handler(self, argument)
            if key.startswith("Fn::"):
                raise TemplateError(f"intrinsic function {key} is not supported locally")
        return {key: self.resolve(item) for key, item in value.items()}


def _ref(ctx: ResolutionContext, argument: Any) -> Any:
    return ctx.ref(str(argument))


def _get_att(ctx: ResolutionContext, argument: Any) -> str:
    if isinstance(argument, str):
        logical_id, _, attribute = argument.partition(".")
    else:
        logical_id, attribute = argument[0], ctx.resolve(argument[1])
    return ctx.get_att(logical_id, attribute)


def _join(ctx: ResolutionContext, argument: Any) -> str:
    delimiter, parts = argument
    return str(delimiter).join(str(ctx.resolve(part)) for part in ctx.resolve(parts))


def _sub(ctx: ResolutionContext, argument: Any) -> str:
    if isinstance(argument, str):
        text, variables = argument, {}
    else:
        text, variables = argument[0], {k: ctx.resolve(v) for k, v in argument[1].items()}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in variables:
            return str(variables[name])
        if "." in name and not name.startswith("AWS::"):
            logical_id, _, attribute = name.partition(".")
            return ctx.get_att(logical_id, attribute)
        return str(ctx.ref(name))

    # ${!Literal} is an escaped placeholder: it stays as ${Literal}.
    return _SUB_PLACEHOLDER.sub(replace, text).replace("${!", "${")


def _select(ctx: ResolutionContext, argument: Any) -> Any:
    index, items = argument
    return ctx.resolve(items)[int(ctx.resolve(index))]


def _split(ctx: ResolutionContext, argument: Any) -> list[str]:
    delimiter, text = argument
    return str(ctx.resolve(text)).split(str(delimiter))


_INTRINSICS: dict[str, Callable[[ResolutionContext, Any], Any]] = {
    "Ref": _ref,
    "Fn::GetAtt": _get_att,
    "Fn::Join": _join,
    "Fn::Sub": _sub,
    "Fn::Select": _select,
    "Fn::Split": _split,
}
