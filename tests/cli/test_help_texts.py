"""Every sagactl command explains itself to a user: a description, and no internal notes."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from sagactl.cli import build_parser
from sagactl.commands.demo import SCENARIO_ALIASES, SCENARIO_KEYS
from sagactl.paths import PROJECT_ROOT

# Names a user cannot look up: planning notes outside the repository, code identifiers,
# notes on how the code is assembled.
INTERNAL = re.compile(r"design\.md|LOCAL_SUBCOMMANDS|COMMAND_MODULES|\bwire", re.IGNORECASE)


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


COMMANDS = dict(_commands(build_parser(), ("sagactl",)))


def test_the_walk_finds_the_nested_commands() -> None:
    assert {"sagactl local up", "sagactl inventory seed", "sagactl case check"} <= set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_a_description_and_no_internal_names(command: str) -> None:
    parser = COMMANDS[command]
    assert (parser.description or "").strip(), f"`{command} --help` has no description"
    text = parser.format_help()
    leaked = sorted({match.group(0) for match in INTERNAL.finditer(text)})
    assert not leaked, f"`{command} --help` mentions {leaked}:\n{text}"


def test_demo_scenarios_are_named_after_their_example_files() -> None:
    for name in SCENARIO_KEYS:
        assert (PROJECT_ROOT / "examples" / f"{name}.json").is_file(), name
    args = build_parser().parse_args(
        ["local", "demo", "--scenario", "happy", "--scenario", "lost-refund-response"]
    )
    assert args.scenario == ["happy-path", "lost-refund-response"]
    assert set(SCENARIO_ALIASES.values()) <= set(SCENARIO_KEYS)
