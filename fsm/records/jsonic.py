"""Canonical JSON and the text helpers every layer shares: :func:`canonical`,
:func:`fingerprint`, :func:`new_id`, :func:`utc`, :func:`one_line`."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import json.encoder
import uuid
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _c_encoder(default: Any, sort_keys: bool, allow_nan: bool) -> Any:
    """The C encoder ``json.dumps`` would build, built once (building it for every call
    costs as much as encoding a log row); ``None`` on an interpreter without it. Without
    a circular-reference check, so it can be shared between threads: a circular value
    fails with ``RecursionError``."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    return make(None, default, json.encoder.encode_basestring, None, ":", ",", sort_keys,
                False, allow_nan)


_CANONICAL = _c_encoder(str, True, True)
_STRICT = _c_encoder(_not_json, False, False)


def canonical(value: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 kept."""
    if _CANONICAL is None:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=str)
    return "".join(_CANONICAL(value, 0))


def check_plain_json(value: Any) -> None:
    """Raise ``TypeError``, ``ValueError`` or ``RecursionError`` unless ``value`` is plain
    JSON: dicts, lists, strings (with no lone surrogate: every store writes UTF-8),
    finite numbers, booleans and null."""
    if _STRICT is None:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode()
    else:
        "".join(_STRICT(value, 0)).encode()


def storable(text: str) -> str:
    """``text`` as every store can keep it in a text column: a NUL (PostgreSQL text holds
    none) and a lone surrogate (UTF-8 has none; ``json.loads`` and ``os.fsdecode`` make
    them) written as escapes. For text that workflow code, a model or an exception chose."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode()
    return text


def shown(value: object) -> str:
    """``str(value)`` for a value workflow code returned or raised, as :func:`storable`
    text; one whose ``__str__`` raises is said to be unreadable."""
    try:
        return storable(str(value))
    except Exception as exc:
        return f"<{type(value).__name__} that cannot be shown: {type(exc).__name__}>"


def describe(exc: BaseException) -> str:
    """``TypeName: message`` of an exception from workflow code or a policy (see
    :func:`shown`)."""
    return f"{type(exc).__name__}: {shown(exc)}"


_ANY = TypeAdapter(Any)


def json_value(value: Any) -> Any:
    """``value`` as it reads back from a store: JSON types only, string keys (a tool may
    return ``{9: ..., 10: ...}``, a tuple, a datetime). Recording this, not the raw value,
    keeps the transcript a process holds equal to the one a resumed process reads, and
    the row hashes equal to what the audit computes from the rows."""
    try:
        return _ANY.dump_python(value, mode="json")
    except (ValueError, TypeError):  # a type pydantic cannot serialise: as the store would
        return json.loads(canonical(value))


def text_json(value: Any) -> str:
    """JSON for text a model or a person reads: sorted keys, spaces kept, UTF-8 kept."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def text_hash(text: str) -> str:
    """SHA-256 of ``text`` (a row as stored, an artifact)."""
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value``."""
    return text_hash(canonical(value))


def new_id() -> str:
    """A fresh 12-hex-digit id for runs and approvals (tests patch it)."""
    return uuid.uuid4().hex[:12]


def utc(t: float | None) -> str:
    """A timestamp as ``YYYY-MM-DD HH:MM:SSZ`` (empty for ``None``)."""
    if t is None:
        return ""
    try:
        return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        # Beyond what a date can hold (after the year 9999, nan): the seconds as stored.
        return f"{t!r} s after 1970 (not a date)"


_M = TypeVar("_M", bound=BaseModel)


def built(cls: type[_M], values: dict[str, Any]) -> _M:
    """What ``cls.model_construct(**values)`` makes, in a third of its time, for a model
    the framework builds each step from values it holds in their declared types (the
    view a policy is given). Every field must be given; nothing is validated."""
    if values.keys() != cls.model_fields.keys():
        raise TypeError(f"{cls.__name__} is built from all of its fields, not "
                        f"{sorted(values)}")
    m = cls.__new__(cls)
    object.__setattr__(m, "__dict__", values)
    object.__setattr__(m, "__pydantic_fields_set__", set(values))
    object.__setattr__(m, "__pydantic_extra__", None)
    object.__setattr__(m, "__pydantic_private__", None)
    return m


def one_line(text: str, limit: int = 300) -> str:
    """``text`` as one line of at most ``limit`` characters (a run's reason, a listing
    row): whitespace runs become one space, the rest is cut with "…"."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def link_hash(prev_hash: str, body: dict[str, Any]) -> str:
    """The hash that links a row after ``prev_hash``: SHA-256 over it and ``body``'s
    canonical JSON."""
    return text_hash(prev_hash + canonical(body))


def unreadable(value: Any) -> str | None:
    """Why ``value``, written into a run's snapshot, would not read back (an integer of
    more digits than a JSON reader takes, a value that contains itself); ``None`` when
    it reads back."""
    try:
        json.loads(_ANY.dump_json(value))
    except (ValueError, TypeError, RecursionError) as exc:
        return describe(exc)
    return None
