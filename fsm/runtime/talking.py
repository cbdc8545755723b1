"""What a step writes when its run talks with its customer: the wait for a reply, the
reply read, the expiry, and the confirmation a write spends.

:class:`CustomerSteps` is part of :class:`~fsm.runtime.step.Step` (the one writer of a
run during a step); the judging is in :mod:`fsm.runtime.customer`.
"""

from __future__ import annotations

from typing import Any

from fsm.customer import AwaitingCustomer, Confirmation, Reply
from fsm.records import Effect, EventKind, RunState, Status, storable, text_hash
from fsm.runtime.context import StepContext
from fsm.runtime.customer import (
    Derived,
    asked_hash,
    confirmation_of,
    confirmation_problem,
    derived_event,
    is_bound,
    waiting_request,
)
from fsm.tools import ToolSpec
from fsm.transcript import CustomerReply, Message, RuntimeNote


class CustomerSteps:
    """The conversation part of a step."""

    ctx: StepContext
    run: RunState
    step: int
    expected_version: int
    replies_read: list[int]

    # -- provided by the step -------------------------------------------------------------

    def _set(self, **changes: Any) -> None:
        raise NotImplementedError

    def event(self, kind: EventKind, **fields: Any) -> None:
        raise NotImplementedError

    def message(self, msg: Message) -> None:
        raise NotImplementedError

    def stop(self, status: Status, reason: str | None) -> None:
        raise NotImplementedError

    def fire(self, event: str, payload: dict[str, Any], *, by_model: bool) -> bool:
        raise NotImplementedError

    def tool_result(self, tool: str, *, result: Any = None, error: str | None = None,
                    text: str | None = None) -> None:
        raise NotImplementedError

    # -- the customer ---------------------------------------------------------------------

    def wait_for_customer(self, message: str, *, args: dict[str, Any] | None = None,
                          record: str | None = None) -> None:
        """Wait for the customer's reply to ``message`` (and to the proposal ``args``)."""
        spec = self.ctx.spec
        ttl = spec.reply_ttl_seconds
        pending = AwaitingCustomer(
            message=storable(message), args=args or {}, record=record,
            events=spec.customer_events_from(self.run.state), step=self.step,
            run_version=self.expected_version + 1,
            expires_at=None if ttl is None else self.ctx.clock() + ttl)
        self._set(status="awaiting_customer", pending=pending)
        self.event("ask", detail={"message": pending.message, "args": pending.args,
                                  "record": record, "events": pending.events,
                                  "asked": asked_hash(pending),
                                  "expires_at": pending.expires_at})

    def read_reply(self, reply: Reply) -> None:
        """Give the customer's reply to the run: a user message the model reads, an event
        in the log, and, when it answers the request the run waits on, the customer event
        the workflow derives from it."""
        spec = self.ctx.spec
        waiting = waiting_request(self.run)
        bound = waiting is not None and is_bound(reply, self.run)
        derived = (derived_event(spec, self.run.state, reply.text, waiting.args)
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
        self.message(CustomerReply.make(content=reply.text, reply=reply.seq)
                     if derived.event is None else
                     CustomerReply.make(content=reply.text, reply=reply.seq, event=derived.event))
        self.replies_read.append(reply.seq)
        self.event("reply", event=derived.event, detail=detail)
        if waiting is not None:
            self._set(status="running", pending=None)
        self._after_reply(waiting, derived, confirmation)

    def read_opening(self, text: str) -> bool:
        """Read the customer's opening message as a reply to a plain question: when the
        workflow's ``interpret`` makes an event of it that leaves the initial state, log it
        (``opening``) and fire it. Whether it fired."""
        derived = derived_event(self.ctx.spec, self.run.state, text, {})
        if derived.failure is not None:
            self.stop("failed", derived.failure)
            return True
        if derived.event is None:
            return False
        self.event("opening", event=derived.event,
                   detail={"sha256": text_hash(text), "chars": len(text)})
        return self.fire(derived.event, {}, by_model=False)

    def _after_reply(self, waiting: AwaitingCustomer | None, derived: Derived,
                     confirmation: Confirmation | None) -> None:
        if derived.failure is not None:
            self.stop("failed", derived.failure)
            return
        if derived.refused is not None:
            self.event("refusal", reason=derived.refused)
        if derived.event is not None:
            if confirmation is not None:
                self._set(confirmation=confirmation)
            if self.fire(derived.event, {}, by_model=False):
                return
            self._set(confirmation=None)  # a guard refused: nothing was confirmed
        if waiting is not None and self.ctx.spec.waits_for_customer(self.run.state):
            # No event: the run still waits, and asks again at its new version (a later
            # reply answers the request as shown now).
            self.wait_for_customer(waiting.message, args=waiting.args, record=waiting.record)

    def unanswered(self) -> None:
        """The customer did not reply in time: fire the workflow's expiry event."""
        pending = self.run.pending
        assert isinstance(pending, AwaitingCustomer)
        event = self.ctx.spec.reply_expiry_event
        self._set(status="running", pending=None, confirmation=None)
        self.message(RuntimeNote.make(content="(the customer did not reply in time)"))
        self.event("unanswered", event=event,
                   detail={"asked": asked_hash(pending), "expires_at": pending.expires_at})
        if event is None or not self.fire(event, {}, by_model=False):
            self.stop("handed_over", "the customer did not reply in time")

    def _use_confirmation(self, tool: ToolSpec, args: dict[str, Any],
                          existing: Effect | None) -> tuple[dict[str, Any], bool]:
        """Spend the customer's confirmation on this call: ``({"confirmed": ...}, False)``
        for the log; ``({}, True)`` when the call is not the one confirmed (refused, and
        nothing runs). A call claimed before a crash was checked when it was claimed."""
        c = self.run.confirmation
        if existing is None:
            problem = confirmation_problem(self.run, tool, args)
            if problem is not None:
                reason = f"{tool.name!r} refused: {problem}"
                self.tool_result(tool.name, error=reason)
                self.event("refusal", tool=tool.name, reason=reason)
                return {}, True
        if c is None:
            return {}, False
        self._set(confirmation=None)  # used once
        return {"confirmed": {"reply": c.reply, "hash": c.args_hash}}, False
