"""sagactl's commands: each module's `register(subparsers)` adds its command's parser (or a few
related commands', `status` and `watch`), each with its handler (see sagactl.cli).

COMMANDS lists them as `sagactl --help` does, with the line it shows for each, so that sagactl
imports the module of the command asked for and no other: a command's module may import what
only it needs (`local` the local AWS and moto, `mcp` the MCP SDK), which an operator's install
may lack (`extra` says which extra of this distribution brings it: pyproject.toml).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    module: str
    summary: str  # its line in `sagactl --help`
    extra: str | None = None


COMMANDS: dict[str, Command] = {
    "local": Command(
        "sagactl.commands.local", "the local AWS (moto) with the stack provisioned", "local"
    ),
    "case": Command("sagactl.commands.case", "write, approve and check case files"),
    "start": Command(
        "sagactl.commands.start",
        "start the saga for an approved case file (once per case and revision)",
    ),
    "status": Command(
        "sagactl.commands.status",
        "the timeline of a case: states, retries, ledger, effects, outcome",
    ),
    "watch": Command(
        "sagactl.commands.status",
        "follow a running case until its execution ends (exit status: how it ended)",
    ),
    "ledger": Command(
        "sagactl.commands.ledger", "ledger records: one action key, or every action of a case"
    ),
    "stuck": Command("sagactl.commands.ledger", "actions IN_PROGRESS past their lease, or UNKNOWN"),
    "keep-open-actions": Command(
        "sagactl.commands.ledger",
        "one-off after upgrading: open ledger actions never expire (removes their TTL)",
    ),
    "redrive": Command(
        "sagactl.commands.redrive",
        "rerun a failed execution from its failed state (refuses when that cannot help)",
    ),
    "sweep": Command(
        "sagactl.commands.sweep",
        "run the stuck-action sweeper now: escalate open actions nobody is finishing",
    ),
    "escalations": Command(
        "sagactl.commands.escalations",
        "the escalation worklist: open cases, show one, resolve one with a decision",
    ),
    "inventory": Command("sagactl.commands.inventory", "show or seed the stock levels"),
    "limits": Command(
        "sagactl.commands.limits", "the daily refund ceilings: each ceiling, used, left"
    ),
    "mcp": Command(
        "sagactl.commands.mcp",
        "serve the agent tools (propose, get, start a replacement) over MCP",
        "mcp",
    ),
}


def summary(name: str) -> str:
    """The line `sagactl --help` shows for the command `name`."""
    return COMMANDS[name].summary
