#!/usr/bin/env python3
"""CDK app entry: `cdk synth -c stage=<stage>` (default "dev"); see stacks/app_factory.py."""

from __future__ import annotations

import sys

from stacks.app_factory import build_app
from stacks.config import ConfigError


def main() -> int:
    try:
        saga = build_app()
    except ConfigError as exc:  # a configuration mistake is the user's to fix: no traceback
        print(f"cdk.json context: {exc}", file=sys.stderr)
        return 1
    saga.app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
