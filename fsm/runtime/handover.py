"""Why a run was handed over, read from its log: the same words for every workflow.

The log says what happened just before the run stopped as ``handed_over``: which event
entered the hand-over state and who fired it (the model through ``advance``, a tool's
result, a person's decision or an expiry), or why the runtime stopped the run itself (a
write in doubt, an approved request that changed). :func:`cause_of` maps that to a
:data:`~fsm.records.HandoverCause` and a plain sentence; the workflow's own names (its
events and tools) appear only as the details of that sentence.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from fsm.records import Event, HandoverCause

_RAN_BUT = re.compile(r"^(\S+) ran \((.*?)\), but ")


def _words(name: str) -> str:
    """An event's name as words: ``cannot_verify`` → ``cannot verify``."""
    return re.sub(r"[_\-.]+", " ", name).strip() or name


def _is_handover_stop(e: Event) -> bool:
    return e.kind == "stop" and e.detail.get("status") == "handed_over"


def _wrote(e: Event, writes: Collection[str]) -> bool:
    """A call of a write tool that ran (not one replayed from its record)."""
    return e.kind == "tool" and e.tool in writes and not e.detail.get("replayed")


def _entered(events: list[Event], at: int, stop: Event,
             writes: Collection[str]) -> tuple[HandoverCause, str]:
    """The cause of a hand-over state entered by the transition before ``at``."""
    i = next((j for j in range(at - 1, -1, -1) if events[j].kind == "transition"), None)
    if i is None:
        return "other", stop.reason or "handed over"
    move, event = events[i], events[i].event or "?"
    before = events[i - 1] if i else move
    if before.kind == "decision":
        return _decided(before)
    if before.kind == "tool" and before.step == move.step:
        return _after_tool(events[:i - 1], before, event, writes)
    return "model_event", _words(event)


def _decided(decision: Event) -> tuple[HandoverCause, str]:
    """A person's decision (or an expiry) fired the event."""
    if decision.detail.get("decision") == "expired":
        return "expired", "expired: nobody decided in time"
    who = decision.reviewer or "a person"
    return "person", f"a person's decision: {who} {decision.detail.get('decision', 'decided')}"


def _after_tool(earlier: list[Event], call: Event, event: str,
                writes: Collection[str]) -> tuple[HandoverCause, str]:
    """A tool's result fired ``event``: a transfer, or a failed write (after others that
    succeeded in ``earlier``, or not)."""
    tool = call.tool or "?"
    if not _wrote(call, writes):
        return "transferred", f"transferred by the model ({tool})"
    done = [e.tool or "?" for e in earlier if _wrote(e, writes) and not e.detail.get("error")]
    if done:
        return "partial_write", (f"a write that failed after another succeeded: {tool} "
                                 f"failed ({event}) after {', '.join(dict.fromkeys(done))} "
                                 "succeeded")
    return "write_failed", f"a write failed: {tool} ({event})"


def cause_of(events: list[Event], writes: Collection[str]) -> tuple[HandoverCause, str]:
    """Why the run whose log is ``events`` was last handed over: a cause and a sentence
    (``("model_event", "cannot verify")``, ``("in_doubt", "in doubt after a write: ...")``).
    ``writes`` names the workflow's write tools (those with effect rows)."""
    at = next((i for i in range(len(events) - 1, -1, -1) if _is_handover_stop(events[i])),
              None)
    if at is None:
        return "other", "handed over"
    stop = events[at]
    reason = stop.reason or ""
    if reason.startswith("in doubt:"):
        what = reason.removeprefix("in doubt:").strip()
        return "in_doubt", (f"in doubt after a write: {what} may or may not have happened "
                            "(its result was never recorded)")
    ran = _RAN_BUT.match(reason)
    if ran:
        return "in_doubt", (f"in doubt after a write: {ran.group(1)} ran ({ran.group(2)}) but "
                            "its result could not be recorded")
    if "is not witnessed by the log" in reason or reason.startswith("the claimed call "):
        return "unwitnessed", f"a claimed write was refused: {reason}"
    if reason.startswith("the infrastructure failed "):
        return "unavailable", reason
    if reason == "approval expired":
        return "expired", "expired: nobody decided in time"
    if reason.startswith("reached "):
        return _entered(events, at, stop, writes)
    if "approv" in reason:
        return "changed", f"what a person approved changed before it ran: {reason}"
    return "other", reason or "handed over"
