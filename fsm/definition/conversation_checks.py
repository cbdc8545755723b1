"""The definition checks of conversations with customers (part of :mod:`fsm.definition.checks`).

Each check lists every offender: customer events that do not exist or that someone else
fires, states that ask the customer where no model writes, states that wait for the
customer but have tools or no ``interpret`` hook, an expiry that some waiting state
cannot take, and writes bound to a confirmation that nothing can ask for.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from pydantic import BaseModel

from fsm.definition.tools import ToolSpec


class Check(Protocol):
    """What these checks read of :class:`fsm.definition.checks.Check`."""

    #: The tables (:class:`fsm.definition.checks.Tables`).
    t: Any
    tools: dict[str, ToolSpec]
    payloads: dict[str, type[BaseModel]]
    interpret: Any
    states: tuple[str, ...]
    terminal: frozenset[str]
    events: set[str]


def quoted(items: Iterable[str]) -> str:
    """``items`` sorted, each in quotes (as :func:`fsm.definition.checks.quoted` writes them)."""
    return ", ".join(repr(i) for i in sorted(items))


def conversation_problems(c: Check) -> list[str]:
    """Every problem of the workflow's conversation settings (none if it has none)."""
    t = c.t
    bound = any(tool.confirmed_by is not None for tool in c.tools.values())
    if not (t.customer_events or t.asks_customer or bound or c.interpret is not None
            or t.reply_ttl_seconds is not None or t.reply_expiry_event is not None):
        return []
    out: list[str] = []
    for check in (_names, _asking, _waiting, _interpret, _expiry, _confirmations):
        out.extend(check(c))
    return out


def _waits(c: Check, state: str) -> bool:
    events = c.t.transitions.get(state, {})
    return (bool(events) and state not in c.t.finish_states
            and all(e in c.t.customer_events for e in events))


def _talks(c: Check, state: str) -> bool:
    return state in c.t.asks_customer or _waits(c, state)


def _names(c: Check) -> list[str]:
    t = c.t
    out = []
    unknown = t.customer_events - c.events
    if unknown:
        out.append(f"customer events for events that do not exist: {quoted(unknown)}")
    both = t.customer_events & t.human_events
    if both:
        out.append(f"events both human-only and customer events (a person or the "
                   f"customer fires each, not both): {quoted(both)}")
    emitted = {f"{tool.name} → {e}" for tool in c.tools.values() for e in tool.emits_events
               if e in t.customer_events}
    if emitted:
        out.append(f"tools emit customer events, which only a customer's reply fires: "
                   f"{quoted(emitted)}")
    return out


def _asking(c: Check) -> list[str]:
    t = c.t
    out = []
    for label, bad in (
        ("are not states of the machine", t.asks_customer - set(c.states)),
        ("are terminal, where the run has ended", t.asks_customer & c.terminal),
        ("are finish states, where the model's text is its final answer",
         t.asks_customer & t.finish_states),
        ("wait for a person, where the model does not write",
         {s for s in t.asks_customer if t.transitions.get(s)
          and all(e in t.human_events for e in t.transitions[s])}),
        ("wait for the customer's reply, where no model writes",
         {s for s in t.asks_customer if _waits(c, s)}),
    ):
        if bad:
            out.append(f"asks_customer names states that {label}: {quoted(bad)}")
    return out


def _waiting(c: Check) -> list[str]:
    t = c.t
    out = []
    for state, events in t.transitions.items():
        mine = [e for e in events if e in t.customer_events]
        if not mine:
            continue
        people = [e for e in events if e in t.human_events]
        if people:
            out.append(f"state {state!r} has customer events ({quoted(mine)}) and human-only "
                       f"events ({quoted(people)}): a run waits for the customer or for a "
                       "person, not both")
        elif _waits(c, state):
            tools = t.tools_by_state.get(state)
            if tools:
                out.append(f"state {state!r} waits for the customer, so its tools can never "
                           f"be called: {quoted(tools)}")
        elif state not in t.asks_customer:
            out.append(f"customer events ({quoted(mine)}) leave state {state!r}, where the "
                       "customer is never asked: list it in asks_customer, or make every "
                       f"way out of {state!r} a customer event")
    return out


def _interpret(c: Check) -> list[str]:
    t = c.t
    if c.interpret is not None and not callable(c.interpret):
        return [f"interpret is a {type(c.interpret).__name__}, not a function "
                "(give fn(text, asked) -> event or None)"]
    deciding = sorted(s for s, events in t.transitions.items()
                      if _talks(c, s) and any(e in t.customer_events
                                              and e != t.reply_expiry_event for e in events))
    if deciding and c.interpret is None:
        return [f"states {quoted(deciding)} are left by a customer's reply, but no interpret "
                "hook says which event a reply fires: give interpret=fn(text, asked) -> "
                "event or None"]
    if c.interpret is not None and not t.customer_events:
        return ["interpret is given, but the workflow has no customer_events for it to fire"]
    return []


def _expiry(c: Check) -> list[str]:
    t = c.t
    ttl, event = t.reply_ttl_seconds, t.reply_expiry_event
    if ttl is not None and event is None:
        return ["reply_ttl_seconds needs reply_expiry_event: the customer event fired when "
                "the customer does not reply in time"]
    if event is None:
        return []
    if ttl is None:
        return [f"reply_expiry_event {event!r} needs reply_ttl_seconds: how long the run "
                "waits for the customer"]
    if event not in t.customer_events:
        return [f"reply_expiry_event {event!r} must be one of the customer events "
                f"(customer events: {quoted(t.customer_events) or 'none'})"]
    missing = sorted(s for s in c.states if _talks(c, s) and event not in
                     t.transitions.get(s, {}))
    if missing:
        return [f"these states wait for the customer but have no {event!r} way out for "
                f"when the wait expires: {quoted(missing)}"]
    return []


def _confirmations(c: Check) -> list[str]:
    t = c.t
    bound = {tool.name: tool.confirmed_by for tool in c.tools.values()
             if tool.confirmed_by is not None}
    if not bound:
        return []
    out = []
    reads = sorted(name for name in bound if not c.tools[name].write)
    if reads:
        out.append(f"tools with confirmed_by are not writes (only a write needs the "
                   f"customer's yes): {quoted(reads)}")
    if t.confirm_event not in t.customer_events:
        out.append(f"confirm_event {t.confirm_event!r} is not a customer event of this "
                   f"workflow (customer events: {quoted(t.customer_events) or 'none'})")
    for name, key in sorted(bound.items()):
        recording = [e for e, k in t.records.items() if k == key]
        if not recording:
            out.append(f"tool {name!r} is confirmed_by {key!r}, which no event records "
                       "(records= maps the proposing event to it)")
        for event in recording:
            out.extend(_proposal(c, name, key, event))
    return out


def _proposal(c: Check, tool: str, key: str, event: str) -> list[str]:
    """The event that records a proposal must carry a tool and arguments, and ask the
    customer: enter a state that waits for the customer."""
    out = []
    model = c.payloads.get(event)
    fields = set(getattr(model, "model_fields", {}) or {})
    if not {"tool", "args"} <= fields:
        out.append(f"event {event!r} records {key!r}, the proposal tool {tool!r} is "
                   "confirmed by, so its payload model must have the fields tool and args")
    targets = sorted({dst for events in c.t.transitions.values()
                      for e, dst in events.items() if e == event})
    strays = [dst for dst in targets if not _waits(c, dst)]
    if strays:
        out.append(f"event {event!r} records {key!r}, the proposal tool {tool!r} is "
                   f"confirmed by, but enters {quoted(strays)}, which do not wait for the "
                   "customer: the customer would never be asked")
    return out
