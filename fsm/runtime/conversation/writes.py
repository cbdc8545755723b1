"""What a step writes when its run talks with its customer: the wait for a reply, the
reply read, the expiry, and the confirmation a write spends.

These are functions over a step (:class:`~fsm.runtime.step.Step`, the one writer of a run
during a step), which they reach through :class:`StepWriter`; the judging is in
:mod:`fsm.runtime.conversation.judging`.
"""

from __future__ import annotations

from typing import Any, Protocol

from fsm.definition.tools import ToolSpec
from fsm.records import Effect, EventKind, RunState, Status, storable, text_hash
from fsm.records.conversation import AwaitingCustomer, Confirmation, Reply
from fsm.records.transcript import CustomerReply, Message, RuntimeNote
from fsm.runtime.context import StepContext
from fsm.runtime.conversation.judging import (
    Derived,
    asked_hash,
    confirmation_of,
    confirmation_problem,
    derived_event,
    is_bound,
    waiting_request,
)


class StepWriter(Protocol):
    """What the conversation's writes use of a step."""

    ctx: StepContext
    run: RunState
    step: int
    expected_version: int
    replies_read: list[int]

    def event(self, kind: EventKind, **fields: Any) -> None: ...

    def message(self, msg: Message) -> None: ...

    def stop(self, status: Status, reason: str | None, *, error: str | None = None) -> None: ...

    def fire(self, event: str, payload: dict[str, Any], *, by_model: bool) -> bool: ...

    def tool_result(self, tool: str, *, result: Any = None, error: str | None = None,
                    text: str | None = None) -> None: ...


def wait_for_customer(step: StepWriter, message: str, *, args: dict[str, Any] | None = None,
                      record: str | None = None) -> None:
    """Wait for the customer's reply to ``message`` (and to the proposal ``args``)."""
    spec = step.ctx.spec
    ttl = spec.reply_ttl_seconds
    pending = AwaitingCustomer(
        message=storable(message), args=args or {}, record=record,
        events=spec.customer_events_from(step.run.state), step=step.step,
        run_version=step.expected_version + 1,
        expires_at=None if ttl is None else step.ctx.clock() + ttl)
    step.run.status = "awaiting_customer"
    step.run.pending = pending
    step.event("ask", detail={"message": pending.message, "args": pending.args,
                              "record": record, "events": pending.events,
                              "asked": asked_hash(pending),
                              "expires_at": pending.expires_at})


def read_reply(step: StepWriter, reply: Reply) -> None:
    """Give the customer's reply to the run: a user message the model reads, an event
    in the log, and, when it answers the request the run waits on, the customer event
    the workflow derives from it."""
    spec = step.ctx.spec
    waiting = waiting_request(step.run)
    bound = waiting is not None and is_bound(reply, step.run)
    derived = (derived_event(spec, step.run.state, reply.text, waiting.args)
               if bound and waiting is not None else Derived())
    detail: dict[str, Any] = {
        "seq": reply.seq, "sha256": text_hash(reply.text), "chars": len(reply.text),
        "received_at": reply.received_at, "bound": bound, "asked": reply.asked_hash}
    confirmation = None
    if derived.event is not None and waiting is not None:
        confirmation = confirmation_of(spec, waiting, derived.event, reply,
                                       waiting.run_version)
        detail["event"] = derived.event
        if confirmation is not None:
            detail["confirms"] = {"tool": confirmation.tool, "args": confirmation.args,
                                  "hash": confirmation.args_hash}
    step.message(CustomerReply.make(content=reply.text, reply=reply.seq)
                 if derived.event is None else
                 CustomerReply.make(content=reply.text, reply=reply.seq, event=derived.event))
    step.replies_read.append(reply.seq)
    step.event("reply", event=derived.event, detail=detail)
    if waiting is not None:
        step.run.status = "running"
        step.run.pending = None
    _after_reply(step, waiting, derived, confirmation)


def read_opening(step: StepWriter, text: str) -> bool:
    """Read the customer's opening message as a reply to a plain question: when the
    workflow's ``interpret`` makes an event of it that leaves the initial state, log it
    (``opening``) and fire it. Whether it fired."""
    derived = derived_event(step.ctx.spec, step.run.state, text, {})
    if derived.failure is not None:
        step.stop("failed", derived.failure)
        return True
    if derived.event is None:
        return False
    step.event("opening", event=derived.event,
               detail={"sha256": text_hash(text), "chars": len(text)})
    return step.fire(derived.event, {}, by_model=False)


def _after_reply(step: StepWriter, waiting: AwaitingCustomer | None, derived: Derived,
                 confirmation: Confirmation | None) -> None:
    if derived.failure is not None:
        step.stop("failed", derived.failure)
        return
    if derived.refused is not None:
        step.event("refusal", reason=derived.refused)
    if derived.event is not None:
        if confirmation is not None:
            step.run.confirmation = confirmation
        if step.fire(derived.event, {}, by_model=False):
            return
        step.run.confirmation = None  # a guard refused: nothing was confirmed
    if waiting is not None and step.ctx.spec.waits_for_customer(step.run.state):
        # No event: the run still waits, and asks again at its new version (a later
        # reply answers the request as shown now).
        wait_for_customer(step, waiting.message, args=waiting.args, record=waiting.record)


def unanswered(step: StepWriter) -> None:
    """The customer did not reply in time: fire the workflow's expiry event."""
    pending = step.run.pending
    assert isinstance(pending, AwaitingCustomer)
    event = step.ctx.spec.reply_expiry_event
    step.run.status = "running"
    step.run.pending = None
    step.run.confirmation = None
    step.message(RuntimeNote.make(content="(the customer did not reply in time)"))
    step.event("unanswered", event=event,
               detail={"asked": asked_hash(pending), "expires_at": pending.expires_at})
    if event is None or not step.fire(event, {}, by_model=False):
        step.stop("handed_over", "the customer did not reply in time")


def use_confirmation(step: StepWriter, tool: ToolSpec, args: dict[str, Any],
                     existing: Effect | None) -> tuple[dict[str, Any], bool]:
    """Spend the customer's confirmation on this call: ``({"confirmed": ...}, False)``
    for the log; ``({}, True)`` when the call is not the one confirmed (refused, and
    nothing runs). A call claimed before a crash was checked when it was claimed."""
    c = step.run.confirmation
    if existing is None:
        problem = confirmation_problem(step.run, tool, args)
        if problem is not None:
            reason = f"{tool.name!r} refused: {problem}"
            step.tool_result(tool.name, error=reason)
            step.event("refusal", tool=tool.name, reason=reason)
            return {}, True
    if c is None:
        return {}, False
    step.run.confirmation = None  # used once
    return {"confirmed": {"reply": c.reply, "hash": c.args_hash}}, False
