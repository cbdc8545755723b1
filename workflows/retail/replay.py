"""Replaying τ²-bench's retail tasks through the desk: a scripted desk and customer.

:func:`plan` turns a task's reference actions into what a desk that keeps the policy
does: the same calls in the same order, plus what the policy requires and the references
often skip — authentication before the first read of the customer's data (by name and
zip, from the customer's own record), a read of each order before a write to it, the
customer's profile before a refund to a gift card, the offer of a human agent the customer
takes before a transfer — and each write proposed first.
:class:`Desk` is a policy that carries out such a plan (or any list of :class:`Move`),
one action per step; :class:`Customer` answers each proposal with an explicit yes when
it is one it wants, and no otherwise, and each thing the desk says with its line.

:func:`expected_hash` is τ²-bench's expected database for the task: its reference actions
applied directly to a fresh database by the same tool functions, failed calls changing
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fsm import Action
from workflows.retail.data import RetailData
from workflows.retail.database import MemoryRetail
from workflows.retail.operations import WRITES
from workflows.scripted import ScriptedDesk

Kind = Literal["call", "write", "event", "say"]
#: The reads that need an authenticated customer, and those that find one.
FINDS = ("find_user_id_by_email", "find_user_id_by_name_zip")
#: Tools that work before authentication.
BEFORE_AUTH = frozenset({*FINDS, "transfer_to_human_agents"})


@dataclass(frozen=True)
class Move:
    """One thing the scripted desk does."""

    kind: Kind
    #: The tool (``call``, ``write``), the event (``event``), or what is said (``say``:
    #: ``args`` holds the desk's ``text`` and the customer's ``reply``).
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    #: Why the desk does this although the reference does not (``None``: the reference
    #: does it): ``"authentication"``, ``"read before write"``, ``"gift cards"``.
    inserted: str | None = None
    #: The reference action it carries out (``action_id``), if any.
    action: str | None = None
    #: For a write: the arguments it calls with once confirmed (``None``: those it
    #: proposed); a different value is a write the customer did not confirm.
    call_args: dict[str, Any] | None = None


def reference(task: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The task's reference actions (``[]`` when it has none)."""
    return list(task["evaluation_criteria"].get("actions") or [])


def expected_db(task: Mapping[str, Any], *, data: RetailData | None = None,
                upstream_price_bug: bool = False) -> MemoryRetail:
    """A fresh database (of ``data``; default: the pinned one) with the task's reference
    actions applied by the tool functions."""
    db = MemoryRetail(data=data, upstream_price_bug=upstream_price_bug)
    apply(db, reference(task))
    return db


def expected_hash(task: Mapping[str, Any], data: RetailData | None = None) -> str:
    return expected_db(task, data=data).hash()


def apply(db: MemoryRetail, actions: Sequence[Mapping[str, Any]]) -> list[str | None]:
    """Run ``actions`` directly on ``db``: each one's error, or ``None``."""
    errors: list[str | None] = []
    for a in actions:
        try:
            db.call(a["name"], a["arguments"])
            errors.append(None)
        except ValueError as exc:
            errors.append(str(exc))
    return errors


def customer_of(task: Mapping[str, Any], db: MemoryRetail) -> str | None:
    """The task's customer: the user its reference finds, or whose orders it touches."""
    scratch = MemoryRetail(data=db.data)
    for a in reference(task):
        args = a["arguments"]
        if a["name"] in FINDS:
            try:
                return str(scratch.call(a["name"], args))
            except ValueError:
                continue
        if "user_id" in args:
            return str(args["user_id"])
        if "order_id" in args:
            try:
                return str(db.call("get_order_details", {"order_id": args["order_id"]})
                           ["user_id"])
            except ValueError:
                continue
    return None


def identify(db: MemoryRetail, user_id: str) -> Move:
    """Authentication by name and zip, from the customer's own record."""
    user = db.call("get_user_details", {"user_id": user_id})
    return Move("call", "find_user_id_by_name_zip",
                {"first_name": user["name"]["first_name"],
                 "last_name": user["name"]["last_name"], "zip": user["address"]["zip"]},
                inserted="authentication")


#: What the desk says before a transfer, and the customer's answer: a transfer is theirs to
#: ask for (:func:`workflows.retail.rules.transfer_problem`).
OFFER_HUMAN = Move("say", "offer a human agent", {
    "text": "I cannot do that here. Would you like me to transfer you to a human agent?",
    "reply": "Yes, please transfer me to a human agent."}, inserted="the customer's ask")


def plan(task: Mapping[str, Any], data: RetailData | None = None) -> list[Move]:
    """What a policy-keeping desk does for ``task`` on the database ``data`` (default: the
    pinned one; see the module's docstring)."""
    scratch = MemoryRetail(data=data)  # the reference applied as the plan goes
    user = customer_of(task, scratch)
    moves: list[Move] = []
    authenticated, read, profile = False, set(), False
    for a in reference(task):
        name, args = a["name"], dict(a["arguments"])
        if name == "transfer_to_human_agents":
            moves.append(OFFER_HUMAN)
        if name in FINDS:
            moves.append(Move("call", name, args, action=a["action_id"]))
            authenticated = authenticated or apply(scratch, [a]) == [None]
            continue
        if not authenticated and name not in BEFORE_AUTH and user is not None:
            moves.append(identify(scratch, user))
            authenticated = True
        if name in WRITES:
            order = args.get("order_id")
            if order is not None and order not in read:
                moves.append(Move("call", "get_order_details", {"order_id": order},
                                  inserted="read before write"))
                read.add(order)
            if _needs_profile(scratch, name, args) and not profile:
                moves.append(Move("call", "get_user_details", {"user_id": user},
                                  inserted="gift cards"))
                profile = True
            moves.append(Move("write", name, args, action=a["action_id"]))
        else:
            moves.append(Move("call", name, args, action=a["action_id"]))
            if name == "get_order_details":
                read.add(args.get("order_id"))
            profile = profile or name == "get_user_details"
        apply(scratch, [a])
    return moves


def _needs_profile(db: MemoryRetail, tool: str, args: Mapping[str, Any]) -> bool:
    """A return refunded to another method than the one that paid: the desk must know the
    customer's gift cards."""
    if tool != "return_delivered_order_items":
        return False
    try:
        order = db.call("get_order_details", {"order_id": args["order_id"]})
    except ValueError:
        return False
    history = order["payment_history"]
    return bool(history) and args.get("payment_method_id") != history[0]["payment_method_id"]


def describe(tool: str, args: Mapping[str, Any]) -> str:
    """The proposal in words, as the desk lists it before asking for a yes."""
    what = ", ".join(f"{k} {v!r}" for k, v in args.items())
    return (f"I am about to run {tool} with {what}. Please confirm: yes to go ahead, no to "
            "stop.")


# -- the scripted desk ------------------------------------------------------------------------

#: The states where a conversation has ended.
ENDED = frozenset({"transferred_to_human", "done", "abandoned"})


class Desk(ScriptedDesk):
    """The retail desk's scripted policy: a write is proposed with ``propose``, listing it
    to the customer, and runs in ``writing``."""

    ENDED = ENDED

    def proposal(self, move: Any) -> Action:
        return Action(tool="advance", text=describe(move.name, move.args),
                      args={"event": "propose", "tool": move.name, "args": move.args})


# -- the scripted customer --------------------------------------------------------------------

class Customer:
    """Answers each proposal shown: ``yes`` when it is one of ``wanted`` (tool and
    arguments), ``no`` otherwise; each thing the desk says that is a ``say`` of ``wanted``
    with its reply; ``answer`` overrides that (e.g. always ``yes``)."""

    def __init__(self, wanted: Sequence[Move] = (),
                 answer: Callable[[dict[str, Any]], str] | None = None) -> None:
        self.wanted = [{"tool": m.name, "args": m.args} for m in wanted if m.kind == "write"]
        self.lines = {m.args["text"]: m.args["reply"] for m in wanted if m.kind == "say"}
        self.answer = answer
        self.asked: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> str:
        shown = dict(getattr(request, "args", {}) or {})
        self.asked.append(shown)
        if self.answer is not None:
            return self.answer(shown)
        line = self.lines.get(getattr(request, "message", None) or "")
        if not shown and line is not None:
            return line
        return "yes" if shown in self.wanted else "no, that is not what I asked for"

