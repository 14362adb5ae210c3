"""sagactl command groups; each module exposes `register(subparsers)` (see sagactl.cli)."""
