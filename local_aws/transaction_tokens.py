"""DynamoDB's ClientRequestToken contract for TransactWriteItems, on the local clock (moto
ignores the token).

AWS (API reference, TransactWriteItems, `ClientRequestToken`): multiple identical calls with the
same token have the same effect as one call; a token is valid for 10 minutes after the first
request that uses it completes, after which the same token is a new request; the same token
with "a change in other parameters" within those 10 minutes is IdempotentParameterMismatch
(error code `IdempotentParameterMismatchException`, HTTP 400). A token has at most 36
characters.

"The same request" here, following that text: every request parameter other than the token
(TransactItems, ReturnConsumedCapacity, ReturnItemCollectionMetrics) compared by value: the
order of JSON object keys does not matter (AWS ignores it, e.g. the attributes of an Item),
list order and every value do. The window starts when the first request completes and a repeat
does not extend it. A token is scoped to one account and region (one moto backend, so a reset
forgets it).

Where AWS's text is silent (it describes the committed request), this emulator is strict: a
request DynamoDB processed binds its token whether it committed or was cancelled
(TransactionCanceledException); the identical request again within the window gets the same
answer and applies nothing; any other request under that token is the mismatch. A request refused
before it ran (validation, unknown table) binds nothing.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from local_aws.clock import LOCAL_CLOCK
from local_aws.patching import wrap_once

TOKEN_WINDOW_SECONDS = 600.0
MAX_TOKEN_LENGTH = 36
MISMATCH_MESSAGE = (
    "DynamoDB rejected the request because you retried a request with a different payload but "
    "with an idempotent token that was already used."
)
_STORE_ATTRIBUTE = "_saga_transaction_tokens"
_MARK = "_saga_token_contract"
# Check, run and remember as one step: a concurrent same-token request waits, then replays.
_TOKEN_LOCK = threading.RLock()


@dataclass
class RememberedRequest:
    """One token's first processed request: what it asked, when it completed, its answer."""

    token: str
    parameters: dict[str, Any]
    canonical: str
    completed_at: float
    result: Any = None  # the ActionResult of a committed request
    error: Exception | None = None  # the TransactionCanceledException of a cancelled one

    @property
    def committed(self) -> bool:
        return self.error is None


def canonical_request(parameters: dict[str, Any]) -> str:
    """The request's identity for the token: every parameter but the token, key order ignored."""
    identity = {name: value for name, value in parameters.items() if name != "ClientRequestToken"}
    return json.dumps(identity, sort_keys=True, separators=(",", ":"), default=_encode)


def _encode(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):  # binary attribute values (B, BS)
        return {"__bytes__": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    raise TypeError(f"cannot compare a request value of type {type(value).__name__}")


def remembered_requests(backend: Any) -> dict[str, RememberedRequest]:
    """The tokens one moto DynamoDB backend (one account and region) remembers, live ones or not
    yet pruned; kept on the backend so that moto's reset forgets them with everything else."""
    store: dict[str, RememberedRequest] | None = getattr(backend, _STORE_ATTRIBUTE, None)
    if store is None:
        store = {}
        setattr(backend, _STORE_ATTRIBUTE, store)
    return store


def _mismatch() -> Exception:
    from moto.dynamodb.exceptions import ERROR_TYPE_PREFIX, DynamodbException

    return DynamodbException(
        ERROR_TYPE_PREFIX + "IdempotentParameterMismatchException", MISMATCH_MESSAGE
    )


def _too_long(token: str) -> Exception:
    from moto.dynamodb.exceptions import MockValidationException

    return MockValidationException(
        f"1 validation error detected: Value '{token}' at 'clientRequestToken' failed to satisfy "
        f"constraint: Member must have length less than or equal to {MAX_TOKEN_LENGTH}"
    )


def with_token_contract(handler: Any, run: Callable[[], Any]) -> Any:
    """Run one TransactWriteItems (`run`) for moto's DynamoHandler `handler` under the contract."""
    from moto.dynamodb.exceptions import TransactionCanceledException

    parameters: dict[str, Any] = copy.deepcopy(dict(handler.body))
    token = parameters.get("ClientRequestToken")
    if not token:
        return run()
    if len(token) > MAX_TOKEN_LENGTH:
        raise _too_long(token)
    canonical = canonical_request(parameters)
    with _TOKEN_LOCK:
        store = remembered_requests(handler.dynamodb_backend)
        _forget_expired(store, LOCAL_CLOCK.now())
        first = store.get(token)
        if first is not None:
            if first.canonical != canonical:
                raise _mismatch()
            if first.error is not None:
                raise first.error
            return first.result
        try:
            result = run()
        except TransactionCanceledException as cancelled:
            store[token] = RememberedRequest(
                token, parameters, canonical, LOCAL_CLOCK.now(), error=cancelled
            )
            raise
        store[token] = RememberedRequest(token, parameters, canonical, LOCAL_CLOCK.now(), result)
        return result


def _forget_expired(store: dict[str, RememberedRequest], now: float) -> None:
    """Drop the tokens whose window has passed: a request under one of them is a new request."""
    expired = [t for t, first in store.items() if now - first.completed_at >= TOKEN_WINDOW_SECONDS]
    for token in expired:
        del store[token]


def install_transaction_tokens() -> None:
    """Enforce the ClientRequestToken contract on moto's TransactWriteItems (idempotent)."""
    from moto.dynamodb.responses import DynamoHandler

    def wrap(original: Any) -> Any:
        def transact_write_items(self: Any) -> Any:
            return with_token_contract(self, lambda: original(self))

        return transact_write_items

    wrap_once(DynamoHandler, "transact_write_items", _MARK, wrap)
