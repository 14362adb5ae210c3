"""What the Lambda dependencies layer holds: lambdas/requirements.txt, a lock installed with
`pip install --no-deps` (stacks/layer_bundling.py), and the declared dependencies it leaves out.

No CDK import here: the benchmark reads it too.
"""

from __future__ import annotations

# Declared dependencies the layer leaves out on purpose (lambdas/requirements.txt says why): the
# distribution that declares each, and the one it declares.
LEFT_OUT_OF_LAYER = frozenset({("stripe", "requests")})
