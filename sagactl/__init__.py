"""sagactl: the operator's CLI of the replacement-order saga (sagactl.cli; docs/architecture.md).

The modules that moved out of it in 0.2.0 still import by their old paths until 0.3.0
(sagactl.old_paths).
"""

from sagactl import old_paths

old_paths.install()
