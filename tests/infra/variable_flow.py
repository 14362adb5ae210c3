"""Which workflow variables each state reads, and which are assigned on every path into it.

A JSONata state reads variables (`$case`, `$reconciling`, ...) in its Arguments, Output,
Assign, Conditions and its Catchers' Assign and Output; a variable is set by a state's Assign
when the state succeeds, by a Choice rule's (and the Choice state's own) Assign when that rule is
taken, and by a Catcher's Assign when the error is caught (the state's own Assign is then not
applied: its answer is lost). A read of a variable no path assigned evaluates to nothing, so a
reconciliation would send no step and an escalation no reason. This module computes, over the
state graph, the variables assigned on EVERY path into each state (a must-analysis from
StartAt) and the variables each edge's target and everything after it still need.

Expressions are parsed with jsonata-python, the evaluator of the local AWS: its AST names each
variable read, each local binding (`$c := ...`) and each function called (`$merge(...)`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jsonata import Jsonata
from jsonata.parser import Parser

_EXPRESSION = re.compile(r"^\{%(.*)%\}$", re.DOTALL)
_ALWAYS = re.compile(r"^\{%\s*true\s*%\}$")
_CHILDREN = (
    "lhs",
    "rhs",
    "expression",
    "expressions",
    "steps",
    "stages",
    "procedure",
    "arguments",
    "condition",
    "then",
    "_else",
    "body",
    "predicate",
    "group",
    "lhs_object",
    "rhs_object",
    "update",
    "delete",
    "pattern",
    "terms",
    "rhs_terms",
    "focus",
    "index",
    "expr",
)
RESERVED = frozenset({"states"})


def expression_reads(text: str) -> set[str]:
    """The workflow variables a JSONata expression reads (not `$states`, its own bindings or the
    functions it calls)."""
    reads: set[str] = set()
    bound: set[str] = set()
    functions: set[str] = set()
    seen: set[int] = set()

    def walk(node: Any) -> None:
        if isinstance(node, list | tuple):
            for child in node:
                walk(child)
            return
        if not isinstance(node, Parser.Symbol) or id(node) in seen:
            return
        seen.add(id(node))
        procedure: Any = getattr(node, "procedure", None)
        if node.type in ("function", "partial") and getattr(procedure, "type", None) == "variable":
            functions.add(procedure.value)
        if node.type == "bind":
            bound.add(node.lhs.value)
        if node.type == "variable" and node.value:
            reads.add(node.value)
        for name in _CHILDREN:
            walk(getattr(node, name, None))

    walk(Jsonata(text).ast)
    return reads - bound - functions - RESERVED


def value_reads(value: Any) -> set[str]:
    """The variables read by every `{% ... %}` string in a JSON value, at any depth."""
    if isinstance(value, str):
        found = _EXPRESSION.match(value.strip())
        return expression_reads(found.group(1)) if found else set()
    if isinstance(value, Mapping):
        return set().union(*(value_reads(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(value_reads(v) for v in value))
    return set()


@dataclass(frozen=True)
class Edge:
    """A way out of a state: where it goes, what it assigns on the way, what it reads."""

    source: str
    target: str
    assigns: frozenset[str]
    reads: frozenset[str]
    label: str  # "Next", "Catch #1", "Choice #2", "Default"


def edges(states: Mapping[str, Mapping[str, Any]]) -> Iterator[Edge]:
    for name, state in states.items():
        own = frozenset(state.get("Assign", {}))
        if state.get("Type") == "Choice":
            for position, rule in enumerate(state.get("Choices", []), start=1):
                assigns = own | frozenset(rule.get("Assign", {}))
                reads = value_reads(rule.get("Condition")) | value_reads(rule.get("Assign", {}))
                yield Edge(name, rule["Next"], assigns, frozenset(reads), f"Choice #{position}")
                if _ALWAYS.match(str(rule.get("Condition", ""))):
                    break  # rules are tried in order: nothing after this one is ever taken
            else:
                if "Default" in state:
                    yield Edge(name, state["Default"], own, frozenset(), "Default")
            continue
        if "Next" in state:
            yield Edge(name, state["Next"], own, frozenset(), "Next")
        for position, catcher in enumerate(state.get("Catch", []), start=1):
            reads = value_reads(catcher.get("Assign", {})) | value_reads(catcher.get("Output"))
            assigns = frozenset(catcher.get("Assign", {}))
            yield Edge(name, catcher["Next"], assigns, frozenset(reads), f"Catch #{position}")


def state_reads(state: Mapping[str, Any]) -> set[str]:
    """What a state reads as it runs (its Catchers' and Choice rules' reads are their edges')."""
    fields = ("Arguments", "Output", "Assign", "Error", "Cause", "Items", "ItemSelector")
    return set().union(*(value_reads(state.get(field)) for field in fields))


def assigned_on_every_path(definition: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """For each state reachable from StartAt: the variables every path into it assigned."""
    states: Mapping[str, Mapping[str, Any]] = definition["States"]
    all_edges = list(edges(states))
    everything = frozenset().union(*(edge.assigns for edge in all_edges))
    assigned: dict[str, frozenset[str]] = dict.fromkeys(states, everything)
    assigned[definition["StartAt"]] = frozenset()
    reached = {definition["StartAt"]}
    changed = True
    while changed:
        changed = False
        incoming: dict[str, list[frozenset[str]]] = {}
        for edge in all_edges:
            if edge.source in reached:
                incoming.setdefault(edge.target, []).append(assigned[edge.source] | edge.assigns)
        for target, sets in incoming.items():
            meet = frozenset.intersection(*sets)
            if target == definition["StartAt"]:
                meet = frozenset()
            if target not in reached or meet != assigned[target]:
                reached.add(target)
                assigned[target] = meet
                changed = True
    return {name: assigned[name] for name in reached}


def needed_from(definition: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """For each state: the variables it, or any state after it, reads before assigning them
    (a liveness analysis backwards from every end)."""
    states: Mapping[str, Mapping[str, Any]] = definition["States"]
    all_edges = list(edges(states))
    needed: dict[str, frozenset[str]] = {name: frozenset() for name in states}
    changed = True
    while changed:
        changed = False
        for name, state in states.items():
            after = [
                edge.reads | (needed[edge.target] - edge.assigns)
                for edge in all_edges
                if edge.source == name
            ]
            now = frozenset(state_reads(state)).union(*after)
            if now != needed[name]:
                needed[name] = now
                changed = True
    return needed


def unassigned_reads(definition: Mapping[str, Any]) -> list[str]:
    """Every read of a variable that some path into the reading state never assigned."""
    states: Mapping[str, Mapping[str, Any]] = definition["States"]
    assigned = assigned_on_every_path(definition)
    problems = []
    for name, have in assigned.items():
        for variable in sorted(state_reads(states[name]) - have):
            problems.append(f"{name} reads ${variable}, unassigned on some path into it")
    for edge in edges(states):
        if edge.source in assigned:
            for variable in sorted(edge.reads - assigned[edge.source]):
                problems.append(f"{edge.source} {edge.label} reads ${variable}, unassigned")
    return problems
