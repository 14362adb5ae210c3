"""Choice-state `Assign` as AWS documents it, for moto's interpreter.

AWS's Choice-state documentation (Choice Rules, JSONata): a rule's `Assign` "assigns variables
when this specific choice rule matches"; an `Assign` "at the state level ... applies regardless
of which choice rule matches". moto 5.2.5 (a port of LocalStack's interpreter) evaluates the
state-level Assign only when the Default is taken.

When both exist, the matched rule's value wins for a variable both assign: LocalStack's
AWS-recorded snapshot `test_assign_base.py::TestAssignBase::test_assign_in_choice[CONDITION_TRUE]`
(recorded against AWS 2024-12-27; state and rule both assign `Assignment`) shows the rule's value.
Every Assign of a state reads the variables as they were when the state was entered (AWS's
rule for Assign), so both blocks are evaluated first and bound together.
"""

from __future__ import annotations

import functools
from typing import Any


def _evaluate_bindings(assign_decl: Any, env: Any) -> dict[str, Any]:
    """The values an AssignDecl would bind, evaluated without binding them."""
    bindings: dict[str, Any] = {}
    for declaration_binding in assign_decl.declaration_bindings:
        declaration_binding.eval(env=env)
        bindings.update(env.stack.pop())
    return bindings


def _assign(env: Any, *assign_decls: Any) -> None:
    bindings: dict[str, Any] = {}
    for assign_decl in assign_decls:
        if assign_decl is not None:
            bindings.update(_evaluate_bindings(assign_decl, env))
    for identifier, value in bindings.items():
        env.variable_store.set(variable_identifier=identifier, variable_value=value)


def _matched_rule(state: Any, env: Any) -> Any | None:
    """The first rule whose Condition holds, as moto's StateChoice picks it."""
    for rule in state.choices_decl.rules:
        if rule.comparison is None:
            raise RuntimeError(f"Missing Condition for choice rule '{rule}' in '{state}'.")
        rule.comparison.eval(env)
        if env.stack.pop() is True:
            if not rule.next_stmt:
                raise RuntimeError(
                    f"Missing Next definition for choice rule '{rule}' in '{state}'."
                )
            return rule
    return None


def _eval_state(state: Any, env: Any) -> None:
    rule = _matched_rule(state, env)
    if rule is not None:
        _assign(env, state.assign_decl, rule.assign)
        if rule.output:
            rule.output.eval(env=env)
        env.stack.append(rule.next_stmt.name)
        return
    if state.default_state is None:
        raise RuntimeError(f"No branching option reached in state {state.name}")
    _assign(env, state.assign_decl)
    if state.output:
        state.output.eval(env=env)
    env.stack.append(state.default_state.state_name)


def _eval_state_output(state: Any, env: Any) -> None:
    # Assign and Output were applied with the rule (or Default) that was taken.
    next_state_name: str = env.stack.pop()
    if state._is_language_query_jsonpath():
        if state.output_path:
            state.output_path.eval(env=env)
        else:
            env.states.reset(input_value=env.stack.pop())
    env.next_state_name = next_state_name


@functools.cache
def install_choice_state_assign() -> None:
    """Patch moto's StateChoice: the state's own Assign applies whatever rule matches."""
    from moto.stepfunctions.parser.asl.component.state.choice.state_choice import StateChoice

    StateChoice._eval_state = _eval_state  # type: ignore[method-assign,assignment]
    StateChoice._eval_state_output = _eval_state_output  # type: ignore[method-assign,assignment]
