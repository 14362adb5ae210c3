"""Replacement-order saga: Lambda tools, the action ledger and the sandbox downstreams.

This package is the Lambda asset root's only package: the import path `saga.*` is the same in
pytest, in sagactl and in the Lambda runtime.
"""
