"""saga.signatures against `cryptography` (the reference here): every signature it makes
verifies, every tampered message, signature or key does not, and malformed input is refused."""

from __future__ import annotations

import hashlib

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, encode_dss_signature
from hypothesis import given, settings
from hypothesis import strategies as st

from saga.signatures import InvalidPublicKey, load_public_key, verify

ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551

scalars = st.integers(min_value=1, max_value=ORDER - 1)


def key_pair(scalar: int) -> tuple[ec.EllipticCurvePrivateKey, bytes]:
    private = ec.derive_private_key(scalar, ec.SECP256R1())
    der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, der


def sign(private: ec.EllipticCurvePrivateKey, message: bytes) -> bytes:
    return private.sign(message, ec.ECDSA(hashes.SHA256()))


@settings(max_examples=60, deadline=None)
@given(scalar=scalars, other=scalars, message=st.binary(max_size=300), flip=st.integers(0, 10**6))
def test_agrees_with_cryptography(scalar: int, other: int, message: bytes, flip: int) -> None:
    private, der = key_pair(scalar)
    public = load_public_key(der)
    signature = sign(private, message)

    assert verify(public, message, signature)
    tampered_message = bytearray(message or b"\x00")
    tampered_message[flip % len(tampered_message)] ^= 1 << (flip % 8)
    assert not verify(public, bytes(tampered_message), signature)
    tampered_signature = bytearray(signature)
    tampered_signature[flip % len(signature)] ^= 1 << (flip % 8)
    assert not verify(public, message, bytes(tampered_signature))
    if other != scalar:
        assert not verify(load_public_key(key_pair(other)[1]), message, signature)


def test_a_known_signature_of_a_fixed_key() -> None:
    private, der = key_pair(0x1234567890ABCDEF)
    digest_signature = sign(private, b"approved")
    assert verify(load_public_key(der), b"approved", digest_signature)
    assert not verify(load_public_key(der), b"approvedX", digest_signature)


@pytest.mark.parametrize(
    "signature",
    [
        b"",
        b"\x30\x00",
        encode_dss_signature(0, 1),  # r out of range
        encode_dss_signature(1, ORDER),  # s out of range
        b"\x30\x06\x02\x01\x01\x02\x01\x01\x00",  # trailing byte
        b"\x30\x07\x02\x02\x00\x01\x02\x01\x01",  # non-minimal integer
        b"\x30\x06\x02\x01\x81\x02\x01\x01",  # negative integer
        b"\x31\x06\x02\x01\x01\x02\x01\x01",  # not a SEQUENCE
    ],
)
def test_malformed_signatures_are_invalid_not_errors(signature: bytes) -> None:
    _, der = key_pair(7)
    assert verify(load_public_key(der), b"m", signature) is False


def test_public_keys_off_the_curve_or_in_another_format_are_refused() -> None:
    _, der = key_pair(99)
    off_curve = der[:-1] + bytes([der[-1] ^ 1])
    with pytest.raises(InvalidPublicKey, match="not on the P-256 curve"):
        load_public_key(off_curve)
    with pytest.raises(InvalidPublicKey, match="not a DER-encoded"):
        load_public_key(der[:-1])
    p384 = (
        ec.derive_private_key(5, ec.SECP384R1())
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(InvalidPublicKey):
        load_public_key(p384)


def test_the_hash_is_sha256_of_the_raw_message() -> None:
    """KMS signs a RAW message with ECDSA_SHA_256: the signature is over SHA-256(message)."""
    private, der = key_pair(31337)
    message = b'{"case_id":"case-1"}'
    prehashed = private.sign(hashlib.sha256(message).digest(), ec.ECDSA(Prehashed(hashes.SHA256())))
    assert verify(load_public_key(der), message, prehashed)
