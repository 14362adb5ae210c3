"""The local servers (the local AWS, the local Stripe server) listen on loopback only: they take
fake credentials and answer as AWS or Stripe would, which nothing beyond this machine may reach."""

from __future__ import annotations

from typing import Final

DEFAULT_HOST: Final = "127.0.0.1"


def require_loopback(host: str, server: str) -> None:
    """ValueError unless `host` is a loopback address; `server` names the one refusing."""
    if not host.startswith("127.") and host not in ("localhost", "::1"):
        raise ValueError(f"{server} listens on loopback only, not {host!r}")
