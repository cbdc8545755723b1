"""Webhook signatures as the Standard Webhooks specification (1.0) makes them.

A delivery carries three headers:

- ``webhook-id``: the message's id, the same on every retry (a receiver that has seen an
  id drops the message);
- ``webhook-timestamp``: when this attempt was made, in whole Unix seconds;
- ``webhook-signature``: ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``, one per
  secret, separated by spaces (while a secret is being replaced, both sign).

The secret is ``whsec_`` followed by the base64 of 24 to 64 random bytes; the HMAC key is
those bytes. Because the timestamp is signed, a receiver that refuses a timestamp far
from its own clock (five minutes, say) cannot be fed a captured delivery later; because
the id is signed and the same on every retry, it cannot be fed one twice.

``python -m fsm.web.webhooks`` prints a new secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping

from fsm.errors import NotifyError

PREFIX = "whsec_"
#: The sizes of key the specification allows (24 to 64 bytes).
KEY_BYTES = (24, 64)
#: How far a receiver lets a delivery's timestamp be from its clock by default (seconds).
TOLERANCE = 300


def new_secret(size: int = 32) -> str:
    """A new random secret in the specification's form (``whsec_`` and base64)."""
    return PREFIX + base64.b64encode(secrets.token_bytes(size)).decode()


def secret_key(secret: str, setting: str = "FSM_NOTIFY_SECRET") -> bytes:
    """The HMAC key of ``secret`` (``whsec_`` and base64), or :class:`NotifyError` saying
    what is wrong with it (without showing it: it is a secret)."""
    how = "make one with: python -m fsm.web.webhooks"
    if not secret.startswith(PREFIX):
        raise NotifyError(f"{setting}: a webhook secret is {PREFIX} followed by base64 "
                          f"(Standard Webhooks); this one does not start with {PREFIX}; {how}")
    try:
        key = base64.b64decode(secret[len(PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        raise NotifyError(f"{setting}: the part of a webhook secret after {PREFIX} must be "
                          f"base64, and this one is not; {how}") from None
    low, high = KEY_BYTES
    if not low <= len(key) <= high:
        raise NotifyError(f"{setting}: a webhook secret must hold {low} to {high} random "
                          f"bytes, and this one holds {len(key)}; {how}")
    return key


def secret_keys(setting: str, name: str = "FSM_NOTIFY_SECRET") -> list[bytes]:
    """The keys of every secret in ``setting`` (separated by spaces or commas: the first
    is the new one while an old one is being retired; all of them sign)."""
    return [secret_key(s, name) for s in setting.replace(",", " ").split()]


def signed_content(msg_id: str, timestamp: int, body: bytes) -> bytes:
    return f"{msg_id}.{timestamp}.".encode() + body


def signature(keys: list[bytes], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header: ``v1,<base64>`` under each key, space-separated."""
    content = signed_content(msg_id, timestamp, body)
    return " ".join("v1," + base64.b64encode(hmac.new(key, content, hashlib.sha256).digest())
                    .decode() for key in keys)


def headers(keys: list[bytes], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers of one delivery attempt."""
    if "." in msg_id:
        raise ValueError(f"a webhook id may not contain '.': {msg_id!r}")
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": signature(keys, msg_id, timestamp, body)}


def verify(secret: str, received: Mapping[str, str], body: bytes, *, now: float,
           tolerance: float = TOLERANCE) -> str | None:
    """Why the delivery with ``received`` headers (names in any case) and raw ``body`` must
    be refused, or ``None`` when it is authentic and fresh: what a receiver checks."""
    lower = {k.lower(): v for k, v in received.items()}
    msg_id, stamp, signatures = (lower.get(h) for h in
                                 ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not msg_id or not stamp or not signatures:
        return "a webhook-id, webhook-timestamp or webhook-signature header is missing"
    try:
        timestamp = int(stamp)
    except ValueError:
        return f"webhook-timestamp {stamp!r} is not whole Unix seconds"
    if abs(now - timestamp) > tolerance:
        return (f"webhook-timestamp {timestamp} is {abs(now - timestamp):.0f}s from this "
                f"clock (at most {tolerance:g}s): an old delivery replayed, or a clock off")
    expected = signature([secret_key(secret)], msg_id, timestamp, body).removeprefix("v1,")
    for candidate in signatures.split():
        version, _, value = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), expected.encode()):
            return None
    return "no v1 signature in webhook-signature matches: a changed body, id or timestamp, " \
           "or another secret"


if __name__ == "__main__":
    print(new_secret())
