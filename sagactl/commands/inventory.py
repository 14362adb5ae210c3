"""`sagactl inventory show | seed`: the stock levels the saga reserves from.

A fresh deployment has an empty inventory table, so every case would end OUT_OF_STOCK: `seed`
sets stock levels (the sandbox defaults, or `--sku SKU=N` pairs). The local AWS seeds the
defaults itself. Seeding sets the level; it does not add to it, so running it twice is harmless.

While a case under way holds a reservation of a SKU, seeding that SKU is refused (exit 3,
nothing changed): its release would give the stock back on top of the level set, so the level
would end above the one asked for. `--force` sets it anyway and says how much may come back.
"""

from __future__ import annotations

import argparse

from saga.sandbox.inventory import DEFAULT_STOCK
from sagactl.commands import summary
from sagactl.commands.common import (
    Subparsers,
    add_aws_command_arguments,
    add_command,
    resolve_target,
)
from sagactl.commands.render import emit_json
from sagactl.errors import Refused, UsageError
from sagactl.operations.records import set_stock, stock_held_under_way, stock_levels
from sagactl.views.untrusted import visible


def parse_stock(pairs: list[str] | None) -> dict[str, int]:
    """`SKU=N` pairs into a mapping; no pairs means the sandbox defaults."""
    if not pairs:
        return dict(DEFAULT_STOCK)
    stock: dict[str, int] = {}
    for pair in pairs:
        sku, sep, level = pair.partition("=")
        if not sep or not sku.strip():
            raise UsageError(f"--sku expects SKU=N, got {pair!r}")
        try:
            available = int(level)
        except ValueError:
            raise UsageError(f"--sku {sku}: stock must be a whole number, got {level!r}") from None
        if available < 0:
            raise UsageError(f"--sku {sku}: stock cannot be negative, got {available}")
        stock[sku.strip()] = available
    return stock


def command_show(args: argparse.Namespace) -> int:
    levels = stock_levels(resolve_target(args))
    if args.json:
        emit_json({"inventory": levels})
    elif not levels:
        print("the inventory is empty: `sagactl inventory seed` sets stock levels")
    else:
        for sku, available in levels.items():
            print(visible(f"  {sku:<24} {available:>6} available"))
    return 0


def _held_text(cases: dict[str, int]) -> str:
    units = sum(cases.values())
    return f"{units} unit(s) held by {len(cases)} case(s) under way: {', '.join(sorted(cases))}"


def command_seed(args: argparse.Namespace) -> int:
    stock = parse_stock(args.sku)
    target = resolve_target(args)
    held = stock_held_under_way(target, stock)
    if held and not args.force:
        lines = [f"  {sku}: {_held_text(cases)}" for sku, cases in sorted(held.items())]
        raise Refused(
            "not seeded: reservations of cases under way hold stock, and their release would "
            "give it back on top of the level you set:",
            *lines,
            "seed once those cases have finished, or pass --force to set it anyway",
        )
    set_stock(target, stock)
    if args.json:
        units = {sku: sum(cases.values()) for sku, cases in held.items()}
        emit_json({"seeded": stock, "held_under_way": units})
        return 0
    for sku, available in stock.items():
        more = f" ({_held_text(held[sku])}: a release adds it back)" if sku in held else ""
        print(f"  {sku:<24} set to {available}{more}")
    return 0


def register(subparsers: Subparsers) -> None:
    inventory = add_command(subparsers, "inventory", summary("inventory"), doc=__doc__)
    actions = inventory.add_subparsers(dest="inventory_command", metavar="SUBCOMMAND")
    actions.required = True

    show = add_command(
        actions,
        "show",
        "stock level per SKU",
        handler=command_show,
        description="Print the available stock of every SKU in the stack's inventory table "
        "(InventoryTableName), read consistently. Reserving a case's SKU takes from it; "
        "releasing a reservation gives it back.",
    )
    add_aws_command_arguments(show)

    seed = add_command(
        actions,
        "seed",
        "set stock levels (default: the sandbox's SKUs)",
        handler=command_seed,
        description="Set the available stock of SKUs in the stack's inventory table: the "
        "sandbox defaults, or the --sku SKU=N pairs given. It sets the level, it does not add "
        "to it, so running it twice is harmless. A new deployment needs it once, or every case "
        "ends ESCALATED as OUT_OF_STOCK; `sagactl local up` seeds the defaults itself. A SKU "
        "that a case under way holds reserved is refused (exit 3, nothing set): its release "
        "would add the stock back on top of the new level; --force sets it anyway.",
    )
    seed.add_argument(
        "--sku",
        action="append",
        metavar="SKU=N",
        help="stock level of one SKU, repeatable (default: "
        + ", ".join(f"{s}={n}" for s, n in DEFAULT_STOCK.items())
        + ")",
    )
    seed.add_argument(
        "--force",
        action="store_true",
        help="set the levels even while cases under way hold some of that stock",
    )
    add_aws_command_arguments(seed)
