"""The Stripe description the local Stripe server is judged by (local_aws/stripe/openapi/):
its API version is the pinned SDK's, it is what the cut script makes, and the validator built on
it refuses a malformed request and a malformed answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
import stripe

from local_aws.stripe.openapi import (
    SUBSET_PATH,
    MalformedRequest,
    MalformedResponse,
    StripeDescription,
    decode_form,
)
from local_aws.stripe.openapi_cut import NOTHING, cut_sdk, cut_spec

DESCRIPTION = StripeDescription.load()


def test_the_description_speaks_the_pinned_sdks_api_version() -> None:
    assert DESCRIPTION.api_version == stripe._api_version._ApiVersion.CURRENT == "2026-10-28.endive"


def test_the_vendored_subset_is_what_the_cut_makes_from_the_pinned_sdk() -> None:
    """An SDK upgrade without a new cut fails here (openapi/README.md says how to re-cut)."""
    vendored = json.loads(SUBSET_PATH.read_text(encoding="utf-8"))
    assert vendored["info"]["x-cut-from"] == "sdk"
    assert vendored == json.loads(json.dumps(cut_sdk()))


def test_every_served_operation_is_described() -> None:
    served = sorted((op.method, op.path) for op in DESCRIPTION.operations)
    assert served == [
        ("get", "/v1/charges/{charge}"),
        ("get", "/v1/payment_intents/{intent}"),
        ("get", "/v1/refunds"),
        ("get", "/v1/refunds/{refund}"),
        ("post", "/v1/payment_intents"),
        ("post", "/v1/refunds"),
    ]
    assert DESCRIPTION.operation("GET", "/v1/refunds/re_1") is not None
    assert DESCRIPTION.operation("DELETE", "/v1/refunds/re_1") is None
    assert DESCRIPTION.operation("GET", "/v1/customers") is None


def test_form_encoded_deep_objects_decode_as_the_sdk_encodes_them() -> None:
    assert decode_form("a=1&metadata[case_id]=c-1&expand[0]=x&expand[1]=y&m=") == {
        "a": "1",
        "metadata": {"case_id": "c-1"},
        "expand": {"0": "x", "1": "y"},
        "m": "",
    }
    with pytest.raises(MalformedRequest, match="Received a parameter twice: a"):
        decode_form("a=1&a=2")
    with pytest.raises(MalformedRequest, match="Invalid hash: a\\[b\\]"):
        decode_form("a=1&a[b]=2")
    with pytest.raises(MalformedRequest, match="Invalid parameter name"):
        decode_form("a[b=1")


def refund_request(body: str) -> dict[str, Any]:
    found = DESCRIPTION.operation("POST", "/v1/refunds")
    assert found is not None
    operation, path_parameters = found
    return operation.request(path_parameters, "", body)


def test_a_request_is_typed_from_its_description() -> None:
    assert refund_request("payment_intent=pi_1&amount=2000&metadata[case_id]=c&metadata[b]=") == {
        "payment_intent": "pi_1",
        "amount": 2000,
        "metadata": {"case_id": "c", "b": ""},
    }
    assert refund_request("charge=ch_1&metadata=") == {"charge": "ch_1", "metadata": ""}
    found = DESCRIPTION.operation("GET", "/v1/payment_intents/pi_1")
    assert found is not None
    assert found[0].request(found[1], "expand[0]=latest_charge", "") == {
        "expand": ["latest_charge"]
    }


@pytest.mark.parametrize(
    ("body", "message", "param"),
    [
        ("payment_intent=pi_1&amuont=1", "Received unknown parameter: amuont", "amuont"),
        ("payment_intent=pi_1&amount=1.5", "Invalid amount: '1.5' is not of type 'integer'", None),
        ("payment_intent=pi_1&metadata[a][b]=c", "Invalid metadata", "metadata"),
        ("payment_intent=pi_1&reverse_transfer=true", "unknown parameter: reverse_transfer", None),
    ],
)
def test_a_malformed_request_is_refused_naming_what(
    body: str, message: str, param: str | None
) -> None:
    with pytest.raises(MalformedRequest, match=message) as refused:
        refund_request(body)
    if param is not None:
        assert refused.value.param == param


def test_a_get_with_a_body_or_a_post_with_a_query_is_refused() -> None:
    found = DESCRIPTION.operation("GET", "/v1/refunds")
    assert found is not None
    with pytest.raises(MalformedRequest, match="takes no body"):
        found[0].request(found[1], "", "payment_intent=pi_1")
    post = DESCRIPTION.operation("POST", "/v1/refunds")
    assert post is not None
    with pytest.raises(MalformedRequest, match="in the body"):
        post[0].request(post[1], "payment_intent=pi_1", "")


def refund_answer(**changes: Any) -> dict[str, Any]:
    from local_aws.stripe.account import skeleton

    body = skeleton(DESCRIPTION, {"$ref": "#/components/schemas/refund"})
    assert isinstance(body, dict)
    return {**body, "id": "re_1", "amount": 100, "currency": "usd", **changes}


def check_refund_answer(status: int, body: Any) -> None:
    found = DESCRIPTION.operation("GET", "/v1/refunds/re_1")
    assert found is not None
    found[0].check_response(status, body)


def test_a_whole_answer_passes() -> None:
    check_refund_answer(200, refund_answer(status="succeeded", metadata={"case_id": "c"}))
    check_refund_answer(404, {"error": {"type": "invalid_request_error", "message": "No such"}})


@pytest.mark.parametrize(
    ("status", "body", "problem"),
    [
        (200, refund_answer(amount="100"), "amount: '100' is not of type 'integer'"),
        (200, refund_answer(object="charge"), "object: 'charge' is not one of ['refund']"),
        (200, refund_answer(refunded_twice=True), "'refunded_twice' was unexpected"),
        (200, {k: v for k, v in refund_answer().items() if k != "id"}, "'id' is a required"),
        # an expansion the server never makes: the charge is an id there
        (200, refund_answer(charge={"id": "ch_1", "object": "charge"}), "charge: {"),
        (400, {"error": {"message": "no type"}}, "'type' is a required property"),
    ],
)
def test_a_malformed_answer_is_refused_naming_what(
    status: int, body: dict[str, Any], problem: str
) -> None:
    with pytest.raises(MalformedResponse, match=r"GET /v1/refunds/\{refund\}") as refused:
        check_refund_answer(status, body)
    assert problem in str(refused.value)


# --- the cut from a published spec3.json --------------------------------------------------------
def _op(response: str, **extra: Any) -> dict[str, Any]:
    return {
        "responses": {
            "200": {"content": {"application/json": {"schema": {"$ref": response}}}},
            "default": {
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/error"}}}
            },
        },
        **extra,
    }


def _form(*names: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "content": {
                "application/x-www-form-urlencoded": {
                    "encoding": {name: {"style": "deepObject"} for name in names},
                    "schema": {
                        "properties": {name: {"type": "string"} for name in names},
                        "required": ["amount"] if "amount" in names else [],
                        "type": "object",
                    },
                }
            }
        }
    }


def _query(*names: str) -> dict[str, Any]:
    return {"parameters": [{"in": "query", "name": n, "schema": {"type": "string"}} for n in names]}


REF = "#/components/schemas/"
SPEC = {
    "info": {"version": "2099-01-01.test"},
    "paths": {
        "/v1/charges/{charge}": {"get": _op(REF + "charge")},
        "/v1/payment_intents/{intent}": {"get": _op(REF + "payment_intent")},
        "/v1/payment_intents": {"post": _op(REF + "payment_intent", **_form("amount", "shipping"))},
        "/v1/refunds": {
            "get": _op(REF + "refund", **_query("payment_intent", "created")),
            "post": _op(
                REF + "refund", **_form("amount", "payment_intent", "refund_application_fee")
            ),
        },
        "/v1/refunds/{refund}": {"get": _op(REF + "refund")},
    },
    "components": {
        "schemas": {
            "error": {"properties": {"error": {"$ref": REF + "api_errors"}}, "type": "object"},
            "api_errors": {
                "properties": {"payment_method": {"$ref": REF + "payment_method"}},
                "type": "object",
            },
            "payment_method": {"x-resourceId": "payment_method", "type": "object"},
            "refund": {
                "properties": {
                    "charge": {
                        "anyOf": [{"type": "string"}, {"$ref": REF + "charge"}],
                        "x-expansionResources": {"oneOf": [{"$ref": REF + "charge"}]},
                    }
                },
                "x-resourceId": "refund",
                "type": "object",
            },
            "charge": {
                "properties": {"outcome": {"$ref": REF + "charge_outcome"}},
                "x-resourceId": "charge",
                "type": "object",
            },
            "charge_outcome": {"type": "object"},
            "payment_intent": {
                "properties": {
                    "latest_charge": {
                        "anyOf": [{"type": "string"}, {"$ref": REF + "charge"}],
                        "x-expansionResources": {"oneOf": [{"$ref": REF + "charge"}]},
                    },
                    "customer": {
                        "anyOf": [{"type": "string"}, {"$ref": REF + "customer"}],
                        "x-expansionResources": {"oneOf": [{"$ref": REF + "customer"}]},
                    },
                },
                "x-resourceId": "payment_intent",
                "type": "object",
            },
            "customer": {"x-resourceId": "customer", "type": "object"},
            "unused": {"type": "object"},
        }
    },
}


def test_the_cut_from_a_published_spec_closes_its_refs_and_cuts_what_is_not_served() -> None:
    cut = cut_spec(SPEC)
    schemas = cut["components"]["schemas"]

    assert cut["info"]["version"] == "2099-01-01.test"
    assert sorted(schemas) == [
        "api_errors",
        "charge",
        "charge_outcome",
        "error",
        "payment_intent",
        "payment_method",
        "refund",
    ]
    assert schemas["payment_method"] == NOTHING  # a resource the server never serves
    assert schemas["refund"]["properties"]["charge"] == {"anyOf": [{"type": "string"}]}
    assert "$ref" in json.dumps(schemas["payment_intent"]["properties"]["latest_charge"])
    assert schemas["payment_intent"]["properties"]["customer"] == {"anyOf": [{"type": "string"}]}
    refund_body = cut["paths"]["/v1/refunds"]["post"]["requestBody"]["content"][
        "application/x-www-form-urlencoded"
    ]
    assert sorted(refund_body["schema"]["properties"]) == ["amount", "payment_intent"]
    assert refund_body["schema"]["additionalProperties"] is False
    assert sorted(refund_body["encoding"]) == ["amount", "payment_intent"]
    listed = cut["paths"]["/v1/refunds"]["get"]["parameters"]
    assert [p["name"] for p in listed] == ["payment_intent"]
    # and it is a description the validator takes
    description = StripeDescription(cut)
    found = description.operation("POST", "/v1/refunds")
    assert found is not None
    with pytest.raises(MalformedRequest, match="unknown parameter: refund_application_fee"):
        found[0].request(found[1], "", "amount=1&refund_application_fee=true")
