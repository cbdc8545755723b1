"""The deployment's signing key: what makes the log witness anything.

A plain hash chain can be extended by anyone who can write the database. Every commit
of a run therefore signs the run's new log head (Ed25519, through ``cryptography``) with
a key kept outside the database, and the run row keeps the signature beside the head.
A row is witnessed when a signed head covers it: the chain from it to the head is
intact, and the head's signature verifies with a public key of the keyring.

The key file (JSON, owner-only) holds the current private key, and the public keys and
MAC secrets of every earlier one, so that rows signed before a rotation still verify::

    {"format": "fsm-keys/1", "current": KEY_ID, "private": HEX,
     "public": {KEY_ID: HEX, ...}, "macs": {KEY_ID: HEX, ...}}

Signing costs: an Ed25519 signature takes tens of microseconds, as much as the rest of a
step's bookkeeping. A commit that leaves its run stopped or waiting (for a person, for
the customer) signs with Ed25519, which the public key verifies; a commit between (the
run goes on at once) authenticates its head with an HMAC-SHA256 under a secret derived
from the same private key, which only the key file's holder can check, and which the
next stop or pause replaces with a signature. Both are out of reach of a writer who has
the database and not the key file.

A key id is the first 16 hex digits of the SHA-256 of the raw public key. What is signed
is :func:`head_message`: the run, the number of events, the head, and the *gaps*: ranges
of events that no signed commit wrote. A commit that finds its run's head unsigned (rows
appended behind fsm's back) does not vouch for them: it adds them to the gaps, and
every later signature carries them, so the audit names them for ever. The run row keeps
:class:`Signature` as text, ``KEY_ID:COUNT:GAPS:HEX`` (gaps as ``START-END`` ranges,
end excluded, joined by ``;``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fsm.errors import SigningKeyError

KEY_FORMAT = "fsm-keys/1"
#: How a MAC's text begins (see :meth:`Keys.sign`).
MAC = "mac="
#: The end of the reason a MAC cannot be checked with public keys alone.
UNCHECKED = "(the run has not stopped or paused since)"
GENESIS_HEAD = "0" * 64

Gaps = tuple[tuple[int, int], ...]


def gaps_text(gaps: Gaps) -> str:
    return ";".join(f"{a}-{b}" for a, b in gaps)


def head_message(run_id: str, count: int, head: str, gaps: Gaps = ()) -> bytes:
    """The bytes a run's log head is signed as: the run, the number of events, the head,
    and the ranges of events no signed commit wrote."""
    return f"fsm-head/1\n{run_id}\n{count}\n{head}\n{gaps_text(gaps)}".encode()


@dataclass(frozen=True)
class Signature:
    """A signed head as the run row keeps it."""

    key: str
    count: int
    gaps: Gaps
    sig: str

    def text(self) -> str:
        return f"{self.key}:{self.count}:{gaps_text(self.gaps)}:{self.sig}"

    @classmethod
    def parse(cls, text: str | None) -> Signature | None:
        """``None`` for no signature, or text that is not one."""
        try:
            key, count, gaps, sig = (text or "").split(":")
            ranges = tuple((int(a), int(b)) for a, b in
                           (g.split("-") for g in gaps.split(";") if g))
            return cls(key, int(count), ranges, sig)
        except ValueError:
            return None

    def covers(self, seq: int) -> bool:
        """Whether event ``seq`` is below the signed head and in no gap."""
        return seq < self.count and not any(a <= seq < b for a, b in self.gaps)


def key_id(public: bytes) -> str:
    """The id of a raw 32-byte public key."""
    return hashlib.sha256(public).hexdigest()[:16]


def _raw(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


@dataclass
class Keys:
    """A signing key (``None``: verify only), the keyring of public keys by id, and the
    secrets of the MACs (see :meth:`sign`) by key id."""

    private: Ed25519PrivateKey | None
    public: dict[str, bytes] = field(default_factory=dict)
    #: The file the keys were read from (``None``: held in memory only).
    path: str | None = None
    #: key id → the secret of its MACs (derived from its private key; kept after a rotation).
    macs: dict[str, bytes] = field(default_factory=dict)
    #: When the first key of the file was made (seconds since 1970): a run whose log
    #: ends before it and has no signature was written before the database signed heads.
    since: float | None = None

    def __post_init__(self) -> None:
        self.current: str | None = None
        if self.private is not None:
            raw = _raw(self.private.public_key())
            self.current = key_id(raw)
            self.public.setdefault(self.current, raw)
            self.macs.setdefault(self.current, hashlib.sha256(
                b"fsm-mac/1" + self.private.private_bytes_raw()).digest())
        self._verifiers = {k: Ed25519PublicKey.from_public_bytes(v)
                           for k, v in self.public.items()}
        # The current key's MAC with its key already absorbed: copied for each head.
        self._mac = hmac.new(self.macs.get(self.current or "", b""), digestmod=hashlib.sha256)

    # -- making, reading and writing ------------------------------------------------------

    @classmethod
    def generate(cls, path: str | None = None) -> Keys:
        """A new key; held in memory, or written to ``path`` (which must not exist)."""
        keys = cls(Ed25519PrivateKey.generate(), path=path, since=time.time())
        if path is not None:
            keys._write(new=True)
        return keys

    @classmethod
    def load(cls, path: str) -> Keys:
        """The keys in the file at ``path``; one line naming the problem when unusable."""
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("format") != KEY_FORMAT:
                raise ValueError(f"not a key file of format {KEY_FORMAT}")
            public = {str(k): bytes.fromhex(v) for k, v in data["public"].items()}
            macs = {str(k): bytes.fromhex(v) for k, v in (data.get("macs") or {}).items()}
            private = None
            if data.get("private"):
                private = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(data["private"]))
        except FileNotFoundError:
            raise SigningKeyError(f"no signing key file at {path!r}") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SigningKeyError(f"the signing key file {path!r} cannot be read ({exc})"
                                  ) from None
        since = data.get("since")
        keys = cls(private, public, path, macs,
                   float(since) if isinstance(since, int | float) else None)
        if private is not None and keys.current != data.get("current"):
            raise SigningKeyError(f"the signing key file {path!r} is damaged (its current "
                                  "key id does not match its private key)")
        return keys

    def _write(self, *, new: bool) -> None:
        assert self.path is not None and self.private is not None
        data = {"format": KEY_FORMAT, "current": self.current,
                "private": self.private.private_bytes_raw().hex(),
                "public": {k: v.hex() for k, v in self.public.items()},
                "macs": {k: v.hex() for k, v in self.macs.items()}, "since": self.since}
        # Written whole to a file of its own, then put in place: a new key file appears
        # whole or not at all (os.link refuses to replace one another process made).
        tmp = f"{self.path}.{os.getpid()}.{secrets.token_hex(4)}.new"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            if new:
                os.link(tmp, self.path)
            else:
                os.replace(tmp, self.path)
        except FileExistsError:
            raise SigningKeyError(f"{self.path!r} exists already; it was left as it is"
                                  ) from None
        except OSError as exc:
            raise SigningKeyError(f"cannot write the signing key file {self.path!r}: {exc}"
                                  ) from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def rotate(self) -> Keys:
        """A new current key; the old public keys and MAC secrets stay in the keyring
        (and the file), so that what they signed still verifies."""
        if self.private is None:
            raise SigningKeyError(f"no private signing key{self._where()}: nothing to rotate")
        keys = Keys(Ed25519PrivateKey.generate(), dict(self.public), self.path,
                    dict(self.macs), self.since)
        if keys.path is not None:
            keys._write(new=False)
        return keys

    # -- signing and verifying ------------------------------------------------------------

    def sign(self, run_id: str, count: int, head: str, gaps: Gaps = (), *,
             public: bool = True) -> str:
        """The text of the current key's signature of a run's log head: Ed25519
        (``public``), which the public key verifies; else an HMAC-SHA256 under a secret
        derived from the private key, twenty times cheaper, which only the key file's
        holder verifies (a run's heads between its stops and pauses)."""
        if self.private is None or self.current is None:
            raise SigningKeyError(f"no private signing key{self._where()}: nothing was written")
        message = head_message(run_id, count, head, gaps)
        if public:
            sig = self.private.sign(message).hex()
        else:
            mac = self._mac.copy()
            mac.update(message)
            sig = MAC + mac.hexdigest()
        return Signature(self.current, count, gaps, sig).text()

    def check(self, run_id: str, count: int, head: str, text: str | None
              ) -> Signature | str:
        """The signature ``text`` when it signs this head with a key of the keyring, else
        why not (one phrase)."""
        s = Signature.parse(text)
        if s is None:
            return "no signature" if not text else "a signature that cannot be read"
        if s.count != count:
            return f"the signature is of {s.count} events, the log has {count}"
        message = head_message(run_id, count, head, s.gaps)
        if s.sig.startswith(MAC):
            secret = self.macs.get(s.key)
            if secret is None:
                return (f"it is a MAC of key {s.key}, which only its key file can check "
                        f"{UNCHECKED}")
            good = hmac.new(secret, message, hashlib.sha256).hexdigest()
            return s if hmac.compare_digest(good, s.sig[len(MAC):]) else \
                "its MAC does not verify with the key it names"
        verifier = self._verifiers.get(s.key)
        if verifier is None:
            return f"it is signed with key {s.key}, which is not in the keyring{self._where()}"
        try:
            verifier.verify(bytes.fromhex(s.sig), message)
        except (InvalidSignature, ValueError):
            return "its signature does not verify with the key it names"
        return s

    def extend(self, run_id: str, base: tuple[int, str, str | None], count: int, head: str,
               *, trusted: bool, hash_at: Callable[[int], str | None],
               public: bool = True) -> str:
        """The signature of a run's new head (``count`` events up to ``head``), which a
        commit wrote after ``base`` (the run row's count, head and signature as read);
        ``public``: see :meth:`sign`.

        ``trusted``: ``base`` is what this store signed (its own last commit), else it is
        verified. Events of ``base`` that no signature covers (appended behind fsm's back)
        become a gap, from the last count whose head its signature does sign (``hash_at``
        gives an event's hash), or from 0 when nothing does."""
        return self.sign(run_id, count, head,
                         self._gaps(run_id, base, trusted=trusted, hash_at=hash_at),
                         public=public)

    def _gaps(self, run_id: str, base: tuple[int, str, str | None], *, trusted: bool,
              hash_at: Callable[[int], str | None]) -> Gaps:
        base_count, base_head, text = base
        if base_count == 0 and base_head == GENESIS_HEAD:
            return ()
        if trusted and text is not None:
            parts = text.split(":")
            if len(parts) == 4 and not parts[2]:
                return ()  # the common case, read without building a Signature
        old = Signature.parse(text)
        if trusted and old is not None:
            return old.gaps
        checked = self.check(run_id, base_count, base_head, text)
        if isinstance(checked, Signature):
            return checked.gaps
        if old is not None and 0 < old.count < base_count:
            at = hash_at(old.count - 1)
            earlier = self.check(run_id, old.count, at, text) if at else None
            if isinstance(earlier, Signature):
                return (*earlier.gaps, (old.count, base_count))
        return ((0, base_count),)

    def public_lines(self) -> list[str]:
        """``KEY_ID HEX`` of each public key, the current one first."""
        order = sorted(self.public, key=lambda k: k != self.current)
        return [f"{k} {self.public[k].hex()}" for k in order]

    def _where(self) -> str:
        return f" ({self.path})" if self.path else ""


def default_key_file(database: str) -> str:
    """Where a PostgreSQL database's key file is when no ``FSM_KEY_FILE`` names one: a
    file named after the database (its name and schema, however it is reached) in
    ``~/.config/fsm/keys`` of this machine; a fleet on several machines names one file in
    ``FSM_KEY_FILE``."""
    folder = os.path.expanduser(os.path.join("~", ".config", "fsm", "keys"))
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, hashlib.sha256(database.encode()).hexdigest()[:24] + ".key")


def verify_keys(path: str | None) -> Keys:
    """The keys in ``path`` for a reader; an empty keyring when there is no such file
    (then nothing verifies, and the audit says so)."""
    if path is None or not os.path.exists(path):
        return Keys(None, path=path)
    return Keys.load(path)


def for_database(path: str | None, *, signed: str | None, where: str) -> Keys:
    """The keys of a database at ``where`` kept in the file ``path`` (``None``: in memory).
    ``signed``: the signature of one of its signed runs (``None``: it holds none).

    A missing file is made (owner-only) while the database holds no signed run; a
    database that holds signed runs and whose key file is missing, or holds another
    key, is refused in one line.
    """
    if path is None:
        return Keys.generate()
    if os.path.exists(path):
        keys = Keys.load(path)
        if keys.private is None:
            raise SigningKeyError(f"the key file {path!r} holds no private key: it can "
                                  "verify, not sign; nothing was written")
        kid = (signed or "").partition(":")[0]
        if signed is not None and kid not in keys.public:
            raise SigningKeyError(f"database {where} is signed with key {kid}, which the key "
                                  f"file {path!r} does not hold: the wrong key file; nothing "
                                  "was written")
        return keys
    if signed is None:
        try:
            return Keys.generate(path)
        except SigningKeyError:
            if os.path.exists(path):  # another process opening the new database made it
                return Keys.load(path)
            raise
    raise SigningKeyError(f"database {where} holds signed runs, but its signing key file "
                          f"{path!r} is missing; restore the key file (or name it in "
                          "FSM_KEY_FILE): no new key is made for signed runs")
