"""Sessions, CSRF tokens, the sign-in throttle and the security headers.

A session is a signed cookie (itsdangerous) holding the account name, a CSRF token
and the time it was issued; it is HttpOnly, SameSite=Strict, Secure over HTTPS, and
expires. Every form carries the session's CSRF token; every POST checks it. The
sign-in form, used before there is a session, carries the token of a short-lived
signed cookie of its own.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

SESSION_COOKIE = "fsm_session"
LOGIN_COOKIE = "fsm_login"
#: How long a session lasts (seconds).
SESSION_SECONDS = 8 * 3600
LOGIN_SECONDS = 1800

#: Content-Security-Policy: no scripts at all, styles from our own stylesheet, no framing.
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@dataclass(frozen=True)
class Session:
    name: str
    csrf: str
    issued: float


class Sessions:
    """Issue and read signed session cookies."""

    def __init__(self, secret: str, *, max_age: int = SESSION_SECONDS, secure: bool = False,
                 clock: Any = time.time) -> None:
        self._signer = URLSafeTimedSerializer(secret, salt="fsm-session")
        self._login = URLSafeTimedSerializer(secret, salt="fsm-login")
        self.max_age = max_age
        self.secure = secure
        self.clock = clock

    def issue(self, name: str) -> tuple[str, Session]:
        s = Session(name=name, csrf=secrets.token_urlsafe(32), issued=self.clock())
        return self._signer.dumps({"n": s.name, "c": s.csrf, "t": s.issued}), s

    def read(self, cookie: str | None) -> Session | None:
        if not cookie:
            return None
        try:
            data = self._signer.loads(cookie, max_age=self.max_age)
            return Session(name=str(data["n"]), csrf=str(data["c"]), issued=float(data["t"]))
        except (BadSignature, KeyError, TypeError, ValueError):
            return None

    def login_token(self) -> tuple[str, str]:
        """(cookie value, form token) for the sign-in form."""
        token = secrets.token_urlsafe(32)
        return self._login.dumps(token), token

    def login_token_ok(self, cookie: str | None, form_token: str | None) -> bool:
        if not cookie or not form_token:
            return False
        try:
            expected = self._login.loads(cookie, max_age=LOGIN_SECONDS)
        except BadSignature:
            return False
        return same(str(expected), form_token)

    def cookie_options(self, max_age: int) -> dict[str, Any]:
        return {"max_age": max_age, "httponly": True, "samesite": "strict",
                "secure": self.secure, "path": "/"}


def same(a: str | None, b: str | None) -> bool:
    """Constant-time comparison of two tokens."""
    if not a or not b:
        return False
    return hmac.compare_digest(a.encode(), b.encode())


@dataclass
class Throttle:
    """At most ``attempts`` failed sign-ins per name, and ``per_address`` per client
    address, in any ``window`` seconds. An attempt counts as failed from the moment it
    arrives until its password proves right.

    Its memory is bounded: a name or address is forgotten once its last failure is
    ``window`` seconds old, and at most ``capacity`` of them are remembered at once (past
    that, the one whose last failure is oldest is forgotten first). Attempts with ever new
    names therefore cost a bounded table, not memory without end; each address still
    counts its own attempts, so filling the table takes many addresses.
    """

    attempts: int = 5
    per_address: int = 20
    window: float = 300.0
    clock: Any = time.time
    capacity: int = 10_000
    #: key → times of its recent failures, the key whose last failure is oldest first.
    _failures: OrderedDict[str, list[float]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __len__(self) -> int:
        """How many names and addresses it remembers now."""
        with self._lock:
            return len(self._failures)

    def _recent(self, key: str, now: float) -> list[float]:
        """``key``'s failures within the window (a key with none is forgotten)."""
        times = self._failures.get(key)
        if times is None:
            return []
        fresh = [t for t in times if t > now - self.window]
        if fresh:
            self._failures[key] = fresh
        else:
            del self._failures[key]
        return fresh

    def _count(self, key: str, now: float) -> None:
        self._failures.setdefault(key, []).append(now)
        self._failures.move_to_end(key)

    def _forget_old(self, now: float) -> None:
        """Forget keys whose last failure left the window, oldest first; then the oldest
        ones past ``capacity``."""
        while self._failures:
            key, times = next(iter(self._failures.items()))
            if times and times[-1] > now - self.window:
                break
            del self._failures[key]
        while len(self._failures) > self.capacity:
            self._failures.popitem(last=False)

    def attempt(self, name: str, remote: str) -> float:
        """Count a sign-in attempt before its password is checked, and return 0; or, when
        the name or the address has no attempt left, count nothing and return the seconds
        until it has one. The check and the count are one step, so attempts sent at the
        same moment are counted one by one."""
        now = self.clock()
        limits = ((f"n:{name.casefold()}", self.attempts), (f"a:{remote}", self.per_address))
        with self._lock:
            waits = [q[0] + self.window - now for key, limit in limits
                     if len(q := self._recent(key, now)) >= limit]
            if waits:
                return max(waits)
            for key, _ in limits:
                self._count(key, now)
            self._forget_old(now)
        return 0.0

    def succeeded(self, name: str, remote: str) -> None:
        """A correct password: its attempt was no failure, and the name starts afresh."""
        with self._lock:
            self._failures.pop(f"n:{name.casefold()}", None)
            address = self._failures.get(f"a:{remote}")
            if address:
                address.pop()
                if not address:
                    del self._failures[f"a:{remote}"]
