"""A run's event log as sentences people read, one per event, in the workflow's words.

"the model called `refund_item` for ₹1,800; refused: tool 'refund_item' is not allowed
in state 'verifying'". The hashes and the raw detail stay beside each sentence (the
pages fold them away); the sentence is only a reading of the row, never a record.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from fsm.definition.presentation import PLAIN, Presentation
from fsm.records import Event, utc
from fsm.records.transcript import ToolCall, read
from fsm.store.roles import RunReads

#: A tool call's arguments by step, read when the log does not carry them.
ArgsAt = Callable[[int, str], dict[str, Any] | None]


@dataclass(frozen=True)
class Line:
    """One event of the log, as a sentence, with the row it reads."""

    event: Event
    text: str


def _code(name: str | None) -> str:
    return f"`{name}`" if name else "``"


def _amount(shown: Presentation, tool: str | None, args: dict[str, Any] | None) -> str:
    text = shown.money_text(tool, args) if args else ""
    return f" for {text}" if text else ""


def _call(shown: Presentation, e: Event, args: dict[str, Any] | None) -> str:
    return f"{_code(e.tool)}{_amount(shown, e.tool, args)}"


def _tool(shown: Presentation, e: Event, args_at: ArgsAt) -> str:
    d = e.detail
    args = d.get("args") if isinstance(d.get("args"), dict) else args_at(e.step, e.tool or "")
    if d.get("replayed"):
        return f"the recorded result of {_call(shown, e, args)} was used again (it ran before)"
    who = "a write," if d.get("key") else ""
    said = f"{_call(shown, e, args)} ran" + (f" ({who} key {d['key']})" if who else "")
    return said + (f"; it failed: {d['error']}" if d.get("error") else "")


def _refusal(shown: Presentation, e: Event, args_at: ArgsAt) -> str:
    if e.tool:
        what = f"the model called {_call(shown, e, args_at(e.step, e.tool))}"
    elif e.event:
        what = f"the model fired {_code(e.event)}"
    else:
        what = "the model answered"
    return f"{what}; refused: {e.reason or 'no reason given'}"


def _pause(shown: Presentation, e: Event) -> str:
    found = e.detail.get("args")
    args: dict[str, Any] = found if isinstance(found, dict) else {}
    events = e.detail.get("events") or []
    asks = shown.describe(e.tool, args, {}, events)
    until = utc(e.detail.get("expires_at")) if isinstance(e.detail.get("expires_at"),
                                                        int | float) else ""
    return f"the run waits for a person: {asks}" + (f", until {until}" if until else "")


def _decision(shown: Presentation, e: Event) -> str:
    d = e.detail
    verdict = d.get("decision", "decided")
    if verdict == "expired":
        return "nobody decided in time: the request expired"
    said = f"{e.reviewer or 'a person'} {verdict}"
    amended = d.get("amended")
    if isinstance(amended, dict) and isinstance(amended.get("approved"), dict):
        lower = shown.money_text(e.tool, amended["approved"])
        said += f" {lower}" if lower else " with changed arguments"
    note = d.get("note")
    return said + (f": “{note}”" if note else "")


def _stop(e: Event) -> str:
    status = e.detail.get("status", "")
    reason = f" ({e.reason})" if e.reason else ""
    if status == "done":
        return "the run is done" + reason
    if status == "handed_over":
        return "the run was handed over to a person" + reason
    return f"the run stopped: {status or 'stopped'}{reason}"


def _desk(e: Event) -> str:
    d = e.detail
    if e.kind == "take":
        if d.get("from"):
            return (f"{e.reviewer or 'a person'} took the handed-over run over from "
                    f"{d['from']}: “{d.get('note', '')}”")
        return f"{e.reviewer or 'a person'} took the handed-over run"
    outcome = {"resolved": "resolved it outside fsm", "resumed": "resumed the run",
               "closed": "closed it"}.get(str(d.get("outcome")), f"closed it ({d.get('outcome')})")
    said = f"{e.reviewer or 'a person'} {outcome}"
    if d.get("event"):
        said += f" with {_code(str(d['event']))}"
    return said + (f": “{d['note']}”" if d.get("note") else "")


def sentence(e: Event, shown: Presentation = PLAIN,
             args_at: ArgsAt = lambda step, tool: None) -> str:
    """One event as people read it."""
    if e.kind == "start":
        who = e.detail.get("user")
        return f"the run started in {_code(e.state_after)}" + (f" for {who}" if who else "")
    if e.kind == "policy":
        tokens = f" ({e.tokens} tokens)" if e.tokens else ""
        return f"the model was asked what to do in {_code(e.state_before)}{tokens}"
    if e.kind == "tool":
        return _tool(shown, e, args_at)
    if e.kind == "refusal":
        return _refusal(shown, e, args_at)
    if e.kind == "transition":
        return (f"{_code(e.event)} moved the run from {_code(e.state_before)} to "
                f"{_code(e.state_after)}")
    if e.kind == "pause":
        return _pause(shown, e)
    if e.kind == "decision":
        return _decision(shown, e)
    if e.kind == "stop":
        return _stop(e)
    if e.kind in ("take", "close"):
        return _desk(e)
    return _other(e)


_OTHER = {
    "compaction": "older turns of the conversation were replaced by a summary",
    "resume": "the run was continued after the model was unavailable",
    "takeover": "an operator took the run over from a process that is gone",
    "recover": "after a crash, the step of a claimed write was finished from its claim",
}


def _other(e: Event) -> str:
    if e.kind == "budget":
        by = e.detail.get("by") or e.reviewer or "an operator"
        return f"{by} raised the run's budgets"
    said = _OTHER.get(e.kind, f"{e.kind}")
    names = " ".join(_code(n) for n in (e.tool, e.event) if n)
    return said + (f" ({names})" if names else "") + (f": {e.reason}" if e.reason else "")


def story(store: RunReads, run_id: str, events: list[Event],
          shown: Presentation = PLAIN) -> list[Line]:
    """The run's log as sentences; a refused call's arguments (which its row does not
    keep) are read from the transcript, as the model sent them at that step."""
    messages: list[dict[str, Any]] | None = None

    def args_at(step: int, tool: str) -> dict[str, Any] | None:
        nonlocal messages
        view = store.view_record(run_id, step)
        if view is None:
            return None
        if messages is None:
            messages = store.messages(run_id)
        if view.message_count >= len(messages):
            return None
        sent = read(messages[view.message_count])
        return sent.args if isinstance(sent, ToolCall) and sent.tool == tool \
            and isinstance(sent.args, dict) else None

    return [Line(e, sentence(e, shown, args_at)) for e in events]


def ticks(text: str) -> Markup:
    """A sentence as HTML: escaped, with each `name` in a ``<code>`` element."""
    return Markup(re.sub(r"`([^`]*)`", r"<code>\1</code>", str(escape(text))))
