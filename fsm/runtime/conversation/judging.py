"""Judging what a customer said and what they confirmed: pure functions that return values.

The gate and the step ask here whether a write is the call the customer confirmed
(:func:`confirmation_problem`), what a proposal becomes once its arguments are checked
(:func:`checked_proposal`), whether a reply answers the request the run waits on
(:func:`is_bound`) and which customer event it fires (:func:`derived_event`). Nothing
here writes; :class:`~fsm.runtime.step.Step` applies the answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from fsm._reach import reach
from fsm.definition.spec import WorkflowSpec
from fsm.definition.tools import ToolSpec
from fsm.errors import validation_summary
from fsm.records import RunState, call_subject, canonical, describe, fingerprint, shown
from fsm.records.conversation import AwaitingCustomer, Confirmation, Reply


def asked_hash(pending: AwaitingCustomer) -> str:
    """The fingerprint of what the customer was shown: a reply is bound to it."""
    return fingerprint(pending.subject())


def waiting_request(run: RunState) -> AwaitingCustomer | None:
    """The request ``run`` waits on for its customer, or ``None``."""
    pending = run.pending
    if run.status == "awaiting_customer" and isinstance(pending, AwaitingCustomer):
        return pending
    return None


def is_bound(reply: Reply, run: RunState) -> bool:
    """Whether ``reply`` answers the request ``run`` waits on now: it arrived while the run
    waited on this very request (its fingerprint, at this run version). Only a bound reply
    fires a customer event; any other is read by the model as what the customer said."""
    pending = waiting_request(run)
    return (pending is not None and reply.asked_hash is not None
            and reply.asked_hash == asked_hash(pending) and reply.run_version == run.version
            and pending.run_version == run.version)


def proposed_call(asked: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The call a proposal shown to the customer describes (``{"tool", "args"}``), or
    ``None`` when what they are asked is not a call."""
    tool, args = asked.get("tool"), asked.get("args")
    if isinstance(tool, str) and isinstance(args, dict):
        return tool, args
    return None


def summary(spec: WorkflowSpec, pending: AwaitingCustomer, facts: dict[str, Any]) -> str:
    """What the customer is asked, in the workflow's words (its presentation's summary,
    as for a call a person approves); ``""`` for a plain question."""
    if not pending.args:
        return ""
    call = proposed_call(pending.args)
    if call is not None:
        return spec.presentation.describe(call[0], call[1], facts)
    return spec.presentation.describe(None, pending.args, facts, pending.events)


def customer_message(spec: WorkflowSpec, said: str, asks: dict[str, Any],
                     facts: dict[str, Any]) -> str:
    """The message a customer is asked with: for a proposal of a call, the workflow's
    rendering of that exact call (its presentation's summary), whatever the model wrote;
    for a plain question, what the model said."""
    call = proposed_call(asks)
    if call is None:
        return said
    return spec.presentation.describe(call[0], call[1], facts)


def _bound_records(spec: WorkflowSpec) -> frozenset[str]:
    """The fact keys some write is ``confirmed_by`` (kept with the spec)."""
    found = spec.cache.get(_bound_records)
    if found is None:
        found = spec.cache[_bound_records] = frozenset(
            t.confirmed_by for t in spec.tools.values() if t.confirmed_by is not None)
    return found  # type: ignore[no-any-return]


def can_propose(spec: WorkflowSpec, state: str, record: str) -> bool:
    """Whether the model can still propose a write confirmed by ``record`` from ``state``:
    through its own events, it reaches an event that records a proposal there."""
    key = (can_propose, state, record)
    found = spec.cache.get(key)
    if found is None:
        def moves(here: str) -> list[tuple[str, str]]:
            return [(spec.events_from(here)[e], e) for e in spec.model_events(here)]

        reached = reach([state], moves)
        found = spec.cache[key] = any(spec.records.get(e) == record
                                      for s in reached for e in spec.model_events(s))
    return bool(found)


def confirmers(spec: WorkflowSpec, record: str) -> list[ToolSpec]:
    """The tools confirmed by the proposal kept under ``record``."""
    return [t for t in spec.tools.values() if t.confirmed_by == record]


def checked_proposal(spec: WorkflowSpec, event: str,
                     payload: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """A proposal as the customer will see it, or why it cannot be proposed.

    An event whose record some write is ``confirmed_by`` proposes that write: its
    ``tool`` must be one of those writes and its ``args`` must be valid arguments of it.
    The arguments are kept as the tool's model reads them back, so that the write the
    customer confirms hashes exactly as the call that will be made. Other events pass.
    """
    record = spec.records.get(event)
    if record is None or record not in _bound_records(spec):
        return payload, None
    tools = confirmers(spec, record)
    names = [t.name for t in tools]
    name = payload.get("tool")
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        return None, (f"bad proposal for event {event!r}: tool {shown(name)!r} is not one the "
                      f"customer can confirm here (allowed: {', '.join(names)})")
    raw = payload.get("args")
    if not isinstance(raw, dict):
        return None, (f"bad proposal for event {event!r}: args must be the JSON object of "
                      f"{name}'s arguments")
    try:
        args = tool.args.model_validate(raw).model_dump(mode="json")
    except ValidationError as exc:
        return None, (f"bad proposal for event {event!r}: arguments of {name!r}: "
                      f"{validation_summary(exc)}")
    return {**payload, "args": args}, None


def confirmation_problem(run: RunState, tool: ToolSpec, args: dict[str, Any]) -> str | None:
    """Why the call ``tool(args)`` is not the one the customer confirmed, or ``None``."""
    record = tool.confirmed_by
    if record is None:
        return None
    c = run.confirmation
    if c is None or c.record != record:
        return (f"the customer has not confirmed this call: propose it ({record}) and wait "
                "for the customer's explicit yes; nothing ran")
    if c.tool != tool.name or c.args_hash != fingerprint(call_subject(tool.name, args)):
        return (f"the customer confirmed {c.tool} {canonical(c.args)}, not this call; "
                "propose this one and ask the customer again; nothing ran")
    return None


def confirmation_of(spec: WorkflowSpec, pending: AwaitingCustomer, event: str,
                    reply: Reply, version: int) -> Confirmation | None:
    """The confirmation a bound reply's event gives: the workflow's confirm event on a
    proposal of a write that is confirmed by it; else ``None``."""
    call = proposed_call(pending.args)
    if event != spec.confirm_event or pending.record is None or call is None:
        return None
    tool, args = call
    if tool not in {t.name for t in confirmers(spec, pending.record)}:
        return None
    return Confirmation(record=pending.record, tool=tool, args=args,
                        args_hash=fingerprint(call_subject(tool, args)), reply=reply.seq,
                        run_version=version)


@dataclass(frozen=True)
class Derived:
    """What the workflow's ``interpret`` hook made of a reply."""

    #: The customer event to fire, or ``None``.
    event: str | None = None
    #: Why the event is not fired (not one that leaves this state), for the log.
    refused: str | None = None
    #: The hook raised or returned something that is not a customer event: the run fails.
    failure: str | None = None


def derived_event(spec: WorkflowSpec, state: str, text: str,
                  asked: dict[str, Any]) -> Derived:
    """The customer event ``text`` fires in ``state`` (given what was ``asked``)."""
    allowed = [e for e in spec.customer_events_from(state) if e != spec.reply_expiry_event]
    if spec.interpret is None or not allowed:
        return Derived()
    try:
        event = spec.interpret(text, dict(asked))
    except Exception as exc:
        return Derived(failure=f"interpret raised {describe(exc)}")
    if event is None:
        return Derived()
    if not isinstance(event, str) or event not in spec.customer_events:
        return Derived(failure=f"interpret returned {shown(event)!r}, not one of the customer "
                               f"events ({', '.join(sorted(spec.customer_events))})")
    if event not in allowed:
        return Derived(refused=f"the reply's event {event!r} does not leave state {state!r} "
                               f"(allowed: {', '.join(allowed)})")
    return Derived(event=event)
