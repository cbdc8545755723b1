"""The standard-library Ed25519 verifier the bundle checker uses agrees with
``cryptography`` and with the test vectors of RFC 8032 (section 7.1)."""

from __future__ import annotations

import random

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fsm import ed25519

#: RFC 8032, section 7.1: TEST 1, 2 and 3 (secret key, public key, message, signature).
RFC_8032 = [
    pytest.param(
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc6"
        "1e39701cf9b46bd25bf5f0595bbe24655141438e7a100b", id="test-1"),
    pytest.param(
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e45"
        "8f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00", id="test-2"),
    pytest.param(
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae"
        "67f760984dc6594a7c15e9716ed28dc027beceea1ec40a", id="test-3"),
]


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC_8032)
def test_the_rfc_8032_vectors_verify(secret: str, public: str, message: str,
                                     signature: str) -> None:
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(secret))
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert raw.hex() == public
    assert key.sign(bytes.fromhex(message)).hex() == signature
    pub, msg, sig = bytes.fromhex(public), bytes.fromhex(message), bytes.fromhex(signature)
    assert ed25519.verify(pub, msg, sig)
    assert not ed25519.verify(pub, msg + b"x", sig)
    assert not ed25519.verify(pub, msg, sig[:-1] + bytes([sig[-1] ^ 1]))


def test_it_agrees_with_cryptography_on_random_keys_and_messages() -> None:
    rng = random.Random(30)
    for _ in range(12):
        key = Ed25519PrivateKey.generate()
        public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        message = rng.randbytes(rng.randrange(0, 200))
        signature = key.sign(message)
        assert ed25519.verify(public, message, signature)
        other = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw,
                                                                       PublicFormat.Raw)
        assert not ed25519.verify(other, message, signature)
        flipped = bytearray(signature)
        flipped[rng.randrange(64)] ^= 1 << rng.randrange(8)
        assert not ed25519.verify(public, message, bytes(flipped))
        assert not ed25519.verify(public, message + b"!", signature)


def test_malformed_keys_and_signatures_do_not_verify() -> None:
    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    signature = key.sign(b"m")
    assert not ed25519.verify(public[:31], b"m", signature)
    assert not ed25519.verify(public, b"m", signature[:63])
    too_big = signature[:32] + (2**253).to_bytes(32, "little")  # s beyond the group order
    assert not ed25519.verify(public, b"m", too_big)
    assert not ed25519.verify(b"\xff" * 32, b"m", signature)
