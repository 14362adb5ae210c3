"""ECDSA P-256 / SHA-256 signature VERIFICATION, as KMS signs with ECC_NIST_P256 + ECDSA_SHA_256.

Why not a library: every tool verifies the approval on its first invocation, so whatever this
imports is cold-start time of every function. Measured here: `cryptography`'s hazmat modules
about 110 ms, `ecdsa` (python-ecdsa) about 40 ms, against a bare boto3 handler's ~190 ms; this
module imports nothing beyond the standard library. It only verifies: the inputs (the message,
the signature, the public key) are public, so there is no secret to leak through timing, and it
never signs (signing happens in KMS). The tests check it against `cryptography` on random keys
and messages and against signatures made by KMS (moto), valid and tampered.

The checks are FIPS 186-4 §6.4.2: the public key is an uncompressed point on the curve (not the
point at infinity), 1 <= r, s < n, and R = (e·s⁻¹)·G + (r·s⁻¹)·Q has x ≡ r (mod n).
"""

from __future__ import annotations

import hashlib

# NIST P-256 (secp256r1), SEC 2 §2.4.2.
_P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
_A = _P - 3
_B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_G = (
    0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
    0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5,
)
# SubjectPublicKeyInfo of an uncompressed P-256 point (what KMS GetPublicKey returns, DER):
# SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING { 0x04 || X || Y } }.
_SPKI_PREFIX = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200")

Point = tuple[int, int]
_Jacobian = tuple[int, int, int]  # (X, Y, Z) with x = X/Z², y = Y/Z³; Z = 0 is infinity


class InvalidPublicKey(ValueError):
    """Not a DER P-256 public key (SubjectPublicKeyInfo), or not a point of the curve."""


def load_public_key(der: bytes) -> Point:
    """The curve point of a DER SubjectPublicKeyInfo (KMS GetPublicKey's `PublicKey`)."""
    if len(der) != len(_SPKI_PREFIX) + 65 or not der.startswith(_SPKI_PREFIX):
        raise InvalidPublicKey("not a DER-encoded uncompressed P-256 public key")
    point = der[len(_SPKI_PREFIX) :]
    if point[0] != 0x04:
        raise InvalidPublicKey("not an uncompressed point")
    x, y = int.from_bytes(point[1:33], "big"), int.from_bytes(point[33:], "big")
    if not (x < _P and y < _P) or (y * y - (x * x * x + _A * x + _B)) % _P != 0:
        raise InvalidPublicKey("the point is not on the P-256 curve")
    return x, y


def verify(public_key: Point, message: bytes, signature: bytes) -> bool:
    """True iff `signature` (DER, as KMS returns it) is an ECDSA_SHA_256 signature of `message`
    by the private key of `public_key`. Malformed input is simply not a valid signature."""
    parsed = _decode_der_signature(signature)
    if parsed is None:
        return False
    r, s = parsed
    if not (0 < r < _N and 0 < s < _N):
        return False
    e = int.from_bytes(hashlib.sha256(message).digest(), "big")  # 256 bits: no truncation
    w = pow(s, -1, _N)
    total = _add(
        _multiply(_to_jacobian(_G), e * w % _N), _multiply(_to_jacobian(public_key), r * w % _N)
    )
    affine = _to_affine(total)
    return affine is not None and affine[0] % _N == r


def _decode_der_signature(der: bytes) -> tuple[int, int] | None:
    """(r, s) of `SEQUENCE { INTEGER r, INTEGER s }` in strict DER; None if it is not that."""
    if len(der) < 8 or der[0] != 0x30 or der[1] != len(der) - 2 or der[1] >= 0x80:
        return None
    values: list[int] = []
    index = 2
    for _ in range(2):
        if index + 2 > len(der) or der[index] != 0x02:
            return None
        length = der[index + 1]
        start, end = index + 2, index + 2 + length
        if length == 0 or length > 33 or end > len(der):
            return None
        body = der[start:end]
        if body[0] & 0x80:  # negative
            return None
        if length > 1 and body[0] == 0 and not body[1] & 0x80:  # not minimal
            return None
        values.append(int.from_bytes(body, "big"))
        index = end
    if index != len(der):
        return None
    return values[0], values[1]


def _to_jacobian(point: Point) -> _Jacobian:
    return point[0], point[1], 1


def _to_affine(point: _Jacobian) -> Point | None:
    x, y, z = point
    if z == 0:
        return None
    z_inverse = pow(z, -1, _P)
    z2 = z_inverse * z_inverse % _P
    return x * z2 % _P, y * z2 * z_inverse % _P


def _double(point: _Jacobian) -> _Jacobian:
    x, y, z = point
    if z == 0 or y == 0:
        return 0, 1, 0
    # a = -3: M = 3(X - Z²)(X + Z²)
    z2 = z * z % _P
    m = 3 * (x - z2) * (x + z2) % _P
    y2 = y * y % _P
    s = 4 * x * y2 % _P
    x3 = (m * m - 2 * s) % _P
    y3 = (m * (s - x3) - 8 * y2 * y2) % _P
    z3 = 2 * y * z % _P
    return x3, y3, z3


def _add(first: _Jacobian, second: _Jacobian) -> _Jacobian:
    x1, y1, z1 = first
    x2, y2, z2 = second
    if z1 == 0:
        return second
    if z2 == 0:
        return first
    z1z1, z2z2 = z1 * z1 % _P, z2 * z2 % _P
    u1, u2 = x1 * z2z2 % _P, x2 * z1z1 % _P
    s1, s2 = y1 * z2 * z2z2 % _P, y2 * z1 * z1z1 % _P
    if u1 == u2:
        return _double(first) if s1 == s2 else (0, 1, 0)
    h, r = (u2 - u1) % _P, (s2 - s1) % _P
    h2 = h * h % _P
    h3 = h * h2 % _P
    u1h2 = u1 * h2 % _P
    x3 = (r * r - h3 - 2 * u1h2) % _P
    y3 = (r * (u1h2 - x3) - s1 * h3) % _P
    z3 = h * z1 * z2 % _P
    return x3, y3, z3


def _multiply(point: _Jacobian, scalar: int) -> _Jacobian:
    result: _Jacobian = (0, 1, 0)
    for bit in bin(scalar)[2:]:
        result = _double(result)
        if bit == "1":
            result = _add(result, point)
    return result
