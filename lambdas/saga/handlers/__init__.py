"""Thin Lambda handlers: decorators, parse, wire, call saga.tools, return.

Importing this package starts a handler's cold start: the cyclic collector pauses until the
handler's first invocation (saga/coldstart.py, in a Lambda runtime only).
"""

from saga.coldstart import pause_collection

pause_collection()
