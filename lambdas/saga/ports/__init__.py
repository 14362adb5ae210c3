"""The ports: what the tools need from each downstream, and nothing about how it is reached.

| port              | its downstream                                | a repeat is safe by          |
|-------------------|-----------------------------------------------|------------------------------|
| `PaymentProvider` | a provider that honours an idempotency key    | the key, then a lookup       |
| `Carrier`         | no idempotency; lookup by business reference  | the lookup before a re-send  |
| `Inventory`       | stock and reservations tables in this account | the ledger's own transaction |

One module per port (payments.py, carrier.py, inventory.py) and the errors a remote call can
end in (errors.py), so a function imports only the ports it uses. The sandbox (saga.sandbox)
implements each port with switchable faults; a real provider or carrier implements the same
Protocol (see `PaymentProvider` for a sketch of Stripe's).

What a call to a remote downstream can end in, as its adapter reports it (the tools map these to
saga.errors, design.md §4; on a lookup every one of them means "no answer": only a returned list
is evidence):

| error                     | the caller knows                              | tool maps it to     |
|---------------------------|-----------------------------------------------|---------------------|
| `DownstreamRejected`      | a permanent no; nothing was done              | the business failure|
| `DownstreamNotDispatched` | nothing was done; repeating is safe           | `TransientError`    |
| `DownstreamConflict`      | a request with the same key is in flight and  | `OutcomeUnknown`    |
|                           | may still commit (HTTP 409 "in progress")     |                     |
| `DownstreamTimeout`       | the call may or may not have taken effect     | `OutcomeUnknown`    |
| `DownstreamUnavailable`   | no answer at all; a lookup cannot tell        | `OutcomeUnknown`    |
| `DownstreamKeyMismatch`   | same idempotency key, other parameters        | `OutcomeUnknown`    |

The inventory is not remote: its writes commit in the ledger's own transaction (design.md §3.9),
so its port answers in the workflow's errors directly (the ledger records a refusal); only its
lookups, like every port's, raise a DownstreamError when they cannot answer.
"""
