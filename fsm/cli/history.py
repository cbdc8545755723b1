"""The rows of ``fsm history``: one per event, in words an operator reads."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from typing import TYPE_CHECKING, Any

from .context import fmt_time

# Annotations only: ``fsm --help`` must not import the records and the spec.
if TYPE_CHECKING:
    from fsm.records import Event
    from fsm.spec import WorkflowSpec

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
        self._by_tool: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        for m in messages:
            if m.get("role") == "tool" and isinstance(m.get("tool"), str):
                self._by_tool[m["tool"]].append(m)

    def next(self, tool: str | None) -> str:
        queue = self._by_tool.get(tool or "")
        if not queue:
            return ""
        msg = queue.popleft()
        if "error" in msg:
            return f"error: {short(msg['error'])}"
        return short(msg.get("result"))


def _consumes_result(e: Event) -> bool:
    """Whether the event put one tool message for ``e.tool`` into the transcript."""
    if e.kind in ("tool", "refusal"):
        return e.tool is not None
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
    d = e.detail
    if e.kind == "decision":
        note = d.get("note") or ""
        return f"{verdict(spec, str(d.get('decision', '')))}" + (f": {note}" if note else "")
    if e.kind == "tool":
        args = _args(d["args"]) if isinstance(d.get("args"), dict) else ""
        shown = f"({args})" if args else ""
        if d.get("replayed"):
            shown += " replayed"
        return f"{shown} → {result}" if result else shown
    if e.kind == "budget":
        changes = d.get("changes") or {}
        return ", ".join(f"{k} {v[0]} → {v[1]}" for k, v in sorted(changes.items()))
    if e.kind == "pause" and isinstance(d.get("args"), dict):
        return f"waits for a person ({_args(d['args'])})"
    return e.reason or ""


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
    rows = []
    for e in events:
        result = results.next(e.tool) if _consumes_result(e) else ""
        if e.kind == "policy":
            detail = _policy(e)
            if detail is None and not verbose:
                continue
        elif e.kind == "refusal":
            detail = e.reason or ""
        else:
            detail = _detail(spec, e, result)
        if e.kind == "stop" and e.reason:
            detail = e.reason
        move = e.state_before or ""
        if e.state_after and e.state_after != e.state_before:
            move = f"{e.state_before or ''} → {e.state_after}"
        cost = f"{e.cost_micros}µ/{e.tokens}t" if (e.cost_micros or e.tokens) else ""
        rows.append([e.step, fmt_time(e.time), e.kind, move, _subject(spec, e), detail or "",
                     cost, e.reviewer or ""])
    return rows
