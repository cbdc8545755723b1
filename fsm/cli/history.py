"""The rows of ``fsm history``: one per event, in words an operator reads."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from typing import TYPE_CHECKING, Any

from .context import fmt_time

# Annotations only: ``fsm --help`` must not import the records and the spec.
if TYPE_CHECKING:
    from collections.abc import Callable

    from fsm.definition.spec import WorkflowSpec
    from fsm.records import Event

#: Characters of a tool's arguments or result shown in a row.
SHORT = 60


def short(value: Any, width: int = SHORT) -> str:
    """``value`` as compact JSON, cut to ``width`` characters."""
    text = value if isinstance(value, str) else json.dumps(
        value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _args(args: dict[str, Any]) -> str:
    return short(", ".join(f"{k}={short(v, SHORT)}" for k, v in sorted(args.items())))


def verdict(spec: WorkflowSpec, decision: str) -> str:
    """A decision named with the workflow's own event (``denied`` → ``declined``)."""
    names = {"approved": spec.approve_event, "denied": spec.deny_event,
             "expired": spec.expiry_event or "expired"}
    return names.get(decision, decision)


class _Results:
    """The tool messages of the transcript, handed out in log order per tool."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        from fsm.records.transcript import ToolError, ToolResult, read_all

        #: Each tool's results, shortened (an error as ``error: ...``), in order.
        self._by_tool: dict[str, deque[str]] = defaultdict(deque)
        for m in read_all(messages):
            if isinstance(m, ToolError) and isinstance(m.tool, str):
                self._by_tool[m.tool].append(f"error: {short(m.error)}")
            elif isinstance(m, ToolResult) and isinstance(m.tool, str):
                self._by_tool[m.tool].append(short(m.result))

    def next(self, tool: str | None) -> str:
        queue = self._by_tool.get(tool or "")
        return queue.popleft() if queue else ""


def _consumes_result(e: Event) -> bool:
    """Whether the event put one tool message for ``e.tool`` into the transcript."""
    if e.kind in ("tool", "refusal"):
        return e.tool is not None
    if e.kind == "decision" and e.detail.get("decision") == "withdrawn":
        # A call the new version refuses is answered in the transcript; one asked again is not.
        return e.tool is not None and e.detail.get("asked_again") is False
    return e.kind == "decision" and e.tool is not None and \
        e.detail.get("decision") in ("denied", "expired")


def _policy(e: Event) -> str | None:
    """A policy row's detail; ``None`` for a call that cost nothing and says nothing."""
    calls = int(e.detail.get("calls") or 0)
    if e.detail.get("step_used") is False:
        tried = f" after {calls} attempt(s)" if calls else ""
        return f"the model gave no answer{tried}; no step used"
    if calls and not e.tokens and not e.cost_micros:
        return "the model server reported no usage: tokens and cost not counted"
    if e.tokens or e.cost_micros:
        return f"{e.detail.get('input_tokens', 0)} in / {e.detail.get('output_tokens', 0)} out"
    return None


def _detail(spec: WorkflowSpec, e: Event, result: str) -> str:
    """What the history's detail column says of ``e`` (``result``: a tool call's)."""
    told = _DETAILS.get(e.kind)
    said = told(spec, e.detail, result) if told is not None else None
    return (e.reason or "") if said is None else said


def _decision(spec: WorkflowSpec, d: dict[str, Any], result: str) -> str:
    note = d.get("note") or ""
    return f"{verdict(spec, str(d.get('decision', '')))}" + (f": {note}" if note else "")


def _tool(spec: WorkflowSpec, d: dict[str, Any], result: str) -> str:
    args = _args(d["args"]) if isinstance(d.get("args"), dict) else ""
    shown = f"({args})" if args else ""
    if d.get("replayed"):
        shown += " replayed"
    if isinstance(d.get("confirmed"), dict):
        shown += f" confirmed by reply {d['confirmed'].get('reply')}"
    return f"{shown} → {result}" if result else shown


def _budget(spec: WorkflowSpec, d: dict[str, Any], result: str) -> str:
    changes = d.get("changes") or {}
    return ", ".join(f"{k} {v[0]} → {v[1]}" for k, v in sorted(changes.items()))


def _migrated(spec: WorkflowSpec, d: dict[str, Any], result: str) -> str:
    moved = {k: v for k, v in (d.get("map") or {}).items() if k != v}
    return (f"version {d.get('from_version')} → {d.get('to_version')}"
            + (f", {_args(moved)}" if moved else "") + f" (by {d.get('by')})")


def _pause(spec: WorkflowSpec, d: dict[str, Any], result: str) -> str | None:
    """A pause for a person's decision on a call's arguments (others: their reason)."""
    return f"waits for a person ({_args(d['args'])})" if isinstance(d.get("args"), dict) \
        else None


def _close(spec: WorkflowSpec, d: dict[str, Any], result: str) -> str:
    """The desk closed a handover."""
    resumed = f" with {d['event']}" if d.get("event") else ""
    return f"{d.get('outcome')}{resumed}: {d.get('note') or ''}"


def _claim(spec: WorkflowSpec, d: dict[str, Any], result: str) -> str:
    bound = d.get("bound")
    approval = bound.get("approval") if isinstance(bound, dict) else None
    return f"key {d.get('key')}" + (f", bound to approval {approval}" if approval else "")


#: How the detail of an event of each kind is told (the others, and a teller that says
#: ``None``, show the event's reason).
_DETAILS: dict[str, Callable[[WorkflowSpec, dict[str, Any], str], str | None]] = {
    "decision": _decision, "tool": _tool, "budget": _budget, "migrated": _migrated,
    "pause": _pause, "close": _close, "claim": _claim,
}


_CUSTOMER_KINDS = ("ask", "reply", "unanswered")


def _customer(e: Event, said: dict[Any, str]) -> str:
    """An event of a conversation: what the customer was asked, or what they said."""
    d = e.detail
    if e.kind == "ask":
        asked = f"asks the customer: {short(str(d.get('message') or ''))}"
        if isinstance(d.get("args"), dict) and d["args"]:
            asked += f"; to confirm: {short(d['args'])}"
        return asked
    if e.kind == "reply":
        text = said.get(d.get("seq"), "")
        bound = "" if d.get("bound") else " (answers no request: no event)"
        return f"reply {d.get('seq')}: {short(text)!s}{bound}"
    return f"no reply by {fmt_time(d.get('expires_at'))}"


def _subject(spec: WorkflowSpec, e: Event) -> str:
    subject = e.tool or ""
    if e.event:
        subject = f"{subject} {e.event}".strip()
    if e.kind == "stop":
        subject = str(e.detail.get("status", ""))
    return subject


def history_rows(spec: WorkflowSpec, events: list[Event], messages: list[dict[str, Any]],
                 *, verbose: bool = False) -> list[list[Any]]:
    """The table rows of a run's log; policy calls that cost nothing only if ``verbose``."""
    results = _Results(messages)
    said = {m.get("reply"): str(m.get("content", "")) for m in messages
            if m.get("from") == "customer"}
    rows = []
    for e in events:
        result = results.next(e.tool) if _consumes_result(e) else ""
        detail = _told(spec, e, result, said)
        if detail is None and not verbose:
            continue  # a policy call that cost nothing
        move = e.state_before or ""
        if e.state_after and e.state_after != e.state_before:
            move = f"{e.state_before or ''} → {e.state_after}"
        cost = f"{e.cost_micros}µ/{e.tokens}t" if (e.cost_micros or e.tokens) else ""
        rows.append([e.step, fmt_time(e.time), e.kind, move, _subject(spec, e), detail or "",
                     cost, e.reviewer or ""])
    return rows


def _told(spec: WorkflowSpec, e: Event, result: str, said: dict[Any, str]) -> str | None:
    """The detail column of ``e``; ``None`` for a policy call that cost nothing."""
    if e.kind == "stop" and e.reason:
        return e.reason
    if e.kind in _CUSTOMER_KINDS:
        return _customer(e, said)
    if e.kind == "policy":
        return _policy(e)
    if e.kind == "refusal":
        return e.reason or ""
    return _detail(spec, e, result)
