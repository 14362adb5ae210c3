"""Powertools Logger, Tracer and Metrics, one instance each per Lambda process.

Handlers decorate with `logger.inject_lambda_context`, `tracer.capture_lambda_handler` and
`metrics.log_metrics`; library code (the ledger, the tools) only logs and adds metrics, so the
same code runs unchanged in pytest and in the local emulator, where tracing switches itself off.

The service name comes from POWERTOOLS_SERVICE_NAME (set per function by the stack) and the
metrics namespace from POWERTOOLS_METRICS_NAMESPACE, defaulting to the product's namespace so
that metrics from every function land together.
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer

DEFAULT_METRICS_NAMESPACE = "ReplacementOrderSaga"

logger = Logger()
tracer = Tracer()
metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", DEFAULT_METRICS_NAMESPACE),
)

__all__ = ["DEFAULT_METRICS_NAMESPACE", "logger", "metrics", "tracer"]
