"""The desk: what a step writes when a run is handed over, taken, or closed.

A run handed over opens a :class:`~fsm.records.Handover` (its row and its notification
land with the step that stopped it). A person then takes it (``take`` in the log; it is
assigned to them) and closes it with an outcome and a note (``close``):

- ``resolved``: the customer was helped outside fsm;
- ``closed``: nothing more is done;
- ``resumed``: the run continues. A workflow allows this by giving a hand-over state
  events that only a person fires (``"handed_over": {"retry": "collecting"}`` with
  ``retry`` among ``human_events``); resuming fires the one the person chose, with the
  workflow's guards, and the model reads the note. The verifier and the diagrams see
  those events as any other, so what it proves holds for resumed runs too. A run handed
  over in another state (a write in doubt, an expired request) cannot be resumed.
"""

from __future__ import annotations

from typing import Any, Protocol

from fsm.definition.spec import WorkflowSpec
from fsm.errors import HandoverRefused
from fsm.records import OUTCOMES, Event, Handover, RunState, new_id, storable
from fsm.runtime.context import StepContext
from fsm.runtime.handover import cause_of


class Step(Protocol):
    """What the desk asks of the step that writes it (:class:`fsm.runtime.step.Step`)."""

    ctx: StepContext
    run: RunState
    events: list[Event]
    handover: Handover | None

    def event(self, kind: Any, **fields: Any) -> None: ...

    def resume_from_desk(self, person: str, note: str, event: str) -> None: ...

#: Characters of the customer's request a handover row keeps.
REQUEST_CHARS = 300
#: The longest note a person may give (characters), as for a decision.
NOTE_CHARS = 4000


def opened(spec: WorkflowSpec, run: RunState, log: list[Event], new: list[Event],
           first_message: dict[str, Any] | None) -> Handover:
    """The handover of a run this step hands over. ``log`` is what the run logged
    before, ``new`` this step's events: the last of its ``stop`` events is marked with the
    handover's id and cause, so the log names the row."""
    writes = {t.name for t in spec.tools.values() if t.write}
    cause, reason = cause_of(log + new, writes)
    stop = next(e for e in reversed(new) if e.kind == "stop")
    handover_id = new_id()
    stop.detail = {**stop.detail, "handover_id": handover_id, "cause": cause}
    content = (first_message or {}).get("content")
    request = content if isinstance(content, str) else ""
    if len(request) > REQUEST_CHARS:
        request = request[:REQUEST_CHARS - 1].rstrip() + "…"
    return Handover(handover_id=handover_id, run_id=run.run_id, workflow=run.workflow,
                    user=run.user, request=request, state=run.state, handed_at=stop.time,
                    cause=cause, reason=reason)


def request_subject(spec: WorkflowSpec, run: RunState, tool: str | None,
                    args: dict[str, Any] | None) -> str | None:
    """What a request (a pause, or a write that ran) is about, in the workflow's words."""
    if args is None:
        return None
    return spec.presentation.subject_of(tool, args, run.facts)


def _open(run: RunState, row: Handover | None) -> Handover:
    if row is None or run.status != "handed_over":
        raise HandoverRefused(run.run_id, "open", f"run {run.run_id!r} waits at no desk (it "
                              f"is {run.status}); only a handed-over run can be taken or "
                              "closed")
    if row.closed_at is not None:
        raise HandoverRefused(run.run_id, "closed", f"the handover of run {run.run_id!r} was "
                              f"already closed ({row.outcome}) by {row.closed_by}; nothing "
                              "was changed")
    return row


def take(s: Step, row: Handover | None, person: str, note: str | None = None) -> Handover:
    """Assign the handover to ``person`` (logged as ``take``). A handover another person
    took is taken over only with a ``note`` saying why (they are away, say), which the
    log keeps with whom it was taken from."""
    row = _open(s.run, row)
    run_id = s.run.run_id
    if not person.strip():
        raise HandoverRefused(run_id, "person", "name who takes the run")
    detail: dict[str, Any] = {"handover_id": row.handover_id}
    if row.taken_by is not None and row.taken_by != person:
        if note is None or not note.strip():
            raise HandoverRefused(run_id, "taken", f"run {run_id!r} was taken by "
                                  f"{row.taken_by}; they close it, or take it over with a "
                                  "note saying why (nothing was changed)")
        _note_fits(run_id, note)
        detail.update({"from": row.taken_by, "note": storable(note.strip())})
    s.event("take", reviewer=person, detail=detail)
    s.handover = row.model_copy(update={"taken_by": person, "taken_at": s.events[-1].time})
    return s.handover


def _note_fits(run_id: str, note: str) -> None:
    if len(note) > NOTE_CHARS:
        raise HandoverRefused(run_id, "note", f"the note has {len(note)} characters; at most "
                              f"{NOTE_CHARS} are allowed")


def resume_events(spec: WorkflowSpec, state: str) -> list[str]:
    """The events a person may fire to resume a run handed over in ``state``."""
    if state not in spec.handed_over_states:
        return []
    return [e for e in spec.events_from(state) if e in spec.human_events]


def _check_close(s: Step, row: Handover, person: str, outcome: str, note: str,
                 event: str | None) -> str | None:
    run_id = s.run.run_id
    if outcome not in OUTCOMES:
        raise HandoverRefused(run_id, "outcome", f"unknown outcome {outcome!r} (allowed: "
                              f"{', '.join(OUTCOMES)})")
    if not note.strip():
        raise HandoverRefused(run_id, "note", "closing a handover needs a note saying what "
                              "was done")
    _note_fits(run_id, note)
    if row.taken_by is not None and row.taken_by != person:
        raise HandoverRefused(run_id, "taken", f"run {run_id!r} was taken by {row.taken_by}; "
                              "only they close it, unless it is taken over first with a "
                              "note (nothing was changed)")
    if outcome != "resumed":
        if event is not None:
            raise HandoverRefused(run_id, "event", "an event is given only to resume a run")
        return None
    allowed = resume_events(s.ctx.spec, s.run.state)
    if not allowed:
        raise HandoverRefused(run_id, "resume", f"workflow {s.ctx.spec.name!r} does not let a "
                              f"run handed over in state {s.run.state!r} continue (no event a "
                              "person fires leaves it); close it as resolved or closed")
    chosen = event or (allowed[0] if len(allowed) == 1 else None)
    if chosen not in allowed:
        raise HandoverRefused(run_id, "event", f"resume with one of: {', '.join(allowed)}"
                              + (f" (not {event!r})" if event else ""))
    return chosen


def close(s: Step, row: Handover | None, person: str, outcome: str, note: str,
          event: str | None = None) -> Handover:
    """Close the handover with ``outcome`` and ``note`` (logged as ``close``; an untaken
    one is taken first). ``resumed`` fires ``event`` and makes the run runnable."""
    row = _open(s.run, row)
    chosen = _check_close(s, row, person, outcome, note, event)
    if row.taken_by is None:
        row = take(s, row, person)
    detail: dict[str, Any] = {"handover_id": row.handover_id, "outcome": outcome,
                              "note": note.strip()}
    if chosen is not None:
        detail["event"] = chosen
    s.event("close", reviewer=person, detail=detail)
    s.handover = row.model_copy(update={"outcome": outcome, "note": note.strip(),
                                        "closed_by": person, "closed_at": s.events[-1].time})
    if chosen is not None:
        s.resume_from_desk(person, note.strip(), chosen)
    return s.handover
