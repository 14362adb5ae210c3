"""Real downstreams behind the ports (saga.ports): the Stripe payment provider.

Each adapter is imported only by the functions that call it, and only in a deployment that
chose it (`cdk deploy -c payments=stripe`): a sandbox deployment never imports an SDK here.

- stripe_currencies.py  ISO 4217 minor units <-> Stripe's amounts, exact or refused (no SDK)
- stripe_rules.py       what ValidateCase refuses in a Stripe deployment (no SDK)
- stripe_http.py        the SDK's HTTP client that knows whether a request left
- stripe.py             StripePaymentProvider, the PaymentProvider port on the official SDK
"""
