"""Downstream interfaces the tools code against (PaymentProvider, Carrier) and their errors.

`saga.adapters.payments` and `saga.adapters.carrier` hold the Protocols and the sandbox
implementations; a real provider implements the same Protocol. Import the submodules directly.
"""
