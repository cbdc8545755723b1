"""What a conversation with a customer keeps: the request a run waits on, the customer's
replies, and a confirmation bound to the proposal it answers.

A run talks with its customer in two ways. In a state of ``asks_customer`` the model's
plain text is a message to the customer, and the run waits for the answer. In a state
whose every way out is a customer event the run waits on the record of the event that
entered it (a proposal such as ``{"tool": "cancel_order", "args": {...}}``), and the
workflow's ``interpret`` hook turns the reply into one of those events. Either way the
run waits as ``awaiting_customer`` with an :class:`AwaitingCustomer` request.

Replies are kept as :class:`Reply` rows the moment they arrive, in the order their
commits land, whether or not the run can read them yet (it may be in the middle of a
step, or its process may have died); the run reads them in that order, each as an event
in its hash-chained log and a user message the model reads.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from fsm._names import is_blank

#: The longest reply a customer may send, in characters.
REPLY_MAX = 4000


class AwaitingCustomer(BaseModel):
    """The run waits for its customer's reply; nothing runs until it arrives or expires."""

    kind: Literal["customer"] = "customer"
    #: What the run said to the customer (the model's message; ``""`` when it said nothing).
    message: str = ""
    #: What the customer is asked to confirm: the record of the event that entered a state
    #: that waits for the customer (``{}`` for a plain question).
    args: dict[str, Any] = {}
    #: The fact key that record is kept under (``None`` for a plain question).
    record: str | None = None
    #: The customer events a reply may fire from here.
    events: list[str] = []
    #: The step at which the customer was asked.
    step: int
    #: The run version the request was made at: a reply is bound to it.
    run_version: int
    #: When the wait ends without a reply (``None``: it never does).
    expires_at: float | None = None

    @property
    def tool(self) -> None:
        """No call waits for approval here (the shape other pending requests share)."""
        return None

    @property
    def approval_id(self) -> None:
        """No person's approval is asked for here."""
        return None

    def subject(self) -> dict[str, Any]:
        """What the customer was shown; its fingerprint binds a reply to this request."""
        return {"kind": "customer", "message": self.message, "args": self.args,
                "record": self.record, "events": self.events, "version": self.run_version}


class Reply(BaseModel):
    """One message from the customer, kept from the moment it arrives."""

    run_id: str
    #: Position among the run's replies, from 1: the order their commits landed in.
    seq: int = 0
    text: str
    received_at: float
    #: The fingerprint of the request the run waited on when the reply arrived; ``None``
    #: when it waited on none (the run was in the middle of a step): such a reply is read
    #: by the model but fires no customer event.
    asked_hash: str | None = None
    #: The run's version when the reply arrived.
    run_version: int
    #: The step whose commit gave the reply to the run (``None``: not read yet).
    read_step: int | None = None


class Confirmation(BaseModel):
    """A customer's yes to one proposal: one write of exactly that call may use it, once."""

    model_config = ConfigDict(frozen=True)

    #: The fact key of the proposal confirmed (a tool's ``confirmed_by``).
    record: str
    tool: str
    args: dict[str, Any]
    #: ``fingerprint(call_subject(tool, args))``: what the write's call must hash to.
    args_hash: str
    #: The ``seq`` of the reply that confirmed it.
    reply: int
    #: The run version of the request the customer confirmed.
    run_version: int


def new_token() -> str:
    """A fresh reply token: 256 random bits, URL-safe text."""
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What a store keeps of a reply token: its SHA-256 (the token itself is never kept)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_matches(token: str, stored_hash: str | None) -> bool:
    """Whether ``token`` is the one whose hash is stored, compared in constant time."""
    if stored_hash is None:
        return False
    return hmac.compare_digest(token_hash(token), stored_hash)


def reply_problem(text: Any) -> tuple[str, str] | None:
    """``(code, what is wrong)`` with a reply's text, or ``None`` when it can be kept: it
    must be text, not empty or blank (zero-width characters alone are blank, as in a
    note), at most :data:`REPLY_MAX` characters, with no NUL
    and nothing that is not Unicode text (a lone surrogate)."""
    if not isinstance(text, str):
        return "not_text", f"a reply must be text, not {type(text).__name__}"
    if not text.strip():
        return "empty", "the reply is empty: write what the customer says"
    if is_blank(text):
        return "empty", ("the reply shows nothing (spaces and invisible characters alone are "
                         "no reply): write what the customer says")
    if len(text) > REPLY_MAX:
        return "too_long", (f"the reply has {len(text)} characters; at most {REPLY_MAX} "
                            "are allowed")
    if "\x00" in text:
        return "nul", "the reply contains a NUL character (\\x00), which no reply may contain"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "not_text", "the reply is not valid Unicode text (it holds a lone surrogate)"
    return None
