#!/usr/bin/env python3
"""CDK app entry: `cdk synth -c stage=<stage>` (default "dev"); see stacks/app_factory.py."""

from __future__ import annotations

from stacks.app_factory import build_app


def main() -> None:
    build_app().app.synth()


if __name__ == "__main__":
    main()
