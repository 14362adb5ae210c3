"""Saga benchmark: counts, not timings, for every example case in the local AWS.

    python -m saga_bench            (or `make bench`)

For each example case it runs the real state machine in the local emulator and reports its
states, state transitions, Lambda invocations, DynamoDB requests and effects, and what a million
such cases cost at list prices with the arithmetic and its assumptions (cases.py, cost.py). Then
each handler's cold start against a bare boto3 handler (coldstart.py): modules imported, and the
time of import plus first clients in fresh interpreters, as a ratio measured in this one run
(the one figure here that is a duration: reported, never asserted).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from local_aws.lambda_runtime import quiet_handlers
from saga_bench.cases import (
    CEILING_SUFFIX,
    format_cases,
    format_costs,
    format_requests,
    measure_cases,
    measure_ceiling_cases,
)
from saga_bench.coldstart import format_cold_starts, measure_cold_starts
from sagactl.paths import PROJECT_ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m saga_bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--runs", type=int, default=9, help="cold-start rounds (fresh interpreters each)"
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=0.05,
        help="scale for the ASL Retry sleeps in the emulator (counts do not depend on it)",
    )
    args = parser.parse_args(argv)

    handler_log = PROJECT_ROOT / ".local" / "bench-handlers.log"
    with quiet_handlers(handler_log):
        cases = measure_cases(args.time_scale)
        # The same paths under a daily refund ceiling (docs/design.md §3.12): what it costs.
        cases += measure_ceiling_cases(args.time_scale)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    cold_starts = measure_cold_starts(args.runs)
    if args.json:
        document = {
            "cases": [{**asdict(c), "cost_per_million_usd": c.cost.per_million()} for c in cases],
            "cold_starts": [asdict(c) for c in cold_starts],
        }
        print(json.dumps(document, indent=2))
        return 0
    print(format_cases(cases))
    print()
    print(format_costs(cases))
    print()
    print(format_requests(next(c for c in cases if c.case == "happy-path")))
    print()
    print(format_requests(next(c for c in cases if c.case == "happy-path" + CEILING_SUFFIX)))
    print()
    print(format_cold_starts(cold_starts, args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
