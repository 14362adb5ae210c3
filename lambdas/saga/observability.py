"""Powertools Logger and Metrics, one instance each per Lambda process.

Handlers decorate with `logger.inject_lambda_context` and `metrics.log_metrics`; library code
(the ledger, the tools) only logs and adds metrics, so the same code runs unchanged in pytest and
in the local emulator.

Tracing needs no SDK in the function: Lambda active tracing (stacks/constructs/tools.py) records
each invocation, its initialization and its overhead, and Step Functions tracing joins them into
the execution's trace. The Powertools Tracer is not used: its X-Ray SDK was about 167 ms of a
309 ms handler import; what goes without it is a subsegment per AWS call inside an invocation
(the ledger's records and the execution history say what each delivery did). `make bench`
measures the cold start; tests/unit/test_cold_start.py keeps the SDK out of every handler.

The service name comes from POWERTOOLS_SERVICE_NAME (set per function by the stack) and the
metrics namespace from POWERTOOLS_METRICS_NAMESPACE, defaulting to the product's namespace so
that metrics from every function land together.
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics

DEFAULT_METRICS_NAMESPACE = "ReplacementOrderSaga"

logger = Logger()
metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", DEFAULT_METRICS_NAMESPACE),
)

__all__ = ["DEFAULT_METRICS_NAMESPACE", "logger", "metrics"]
