"""Replaying a run's recorded path against a candidate definition, running nothing.

Temporal's replayer runs new workflow code against recorded histories before a release;
here the history is a run's log and transcript, and the code is a candidate definition's
tables, schemas, guards and hooks. The replay walks the run's log in order, from its
start (or its last migration) on:

- each state the run was in must exist in the candidate;
- each tool that ran must exist, be allowed in its state, and take its recorded arguments
  under the candidate's schema; its recorded result goes through the candidate's
  ``remember`` hook, so the facts grow as the candidate would have kept them;
- each event that moved the machine must be a row of the candidate's tables from that
  state to that state, fired by the same party, with a payload its schema takes and a
  guard that passes on the facts and payload of that moment.

Nothing runs: tools are not called, the policy is not asked, nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from pydantic import ValidationError

from fsm.definition.spec import ADVANCE, WorkflowSpec
from fsm.errors import validation_summary
from fsm.records import Event, describe
from fsm.store.roles import Effects, RunReads


@dataclass
class _Transcript:
    """The recorded results of calls and the payloads of fired events, in order."""

    results: list[dict[str, Any]]
    fired: list[tuple[str, dict[str, Any]]]
    at_result: int = 0
    at_fired: int = 0

    @classmethod
    def of(cls, messages: list[dict[str, Any]]) -> _Transcript:
        results = [m for m in messages if m.get("role") == "tool"
                   and m.get("tool") != ADVANCE and "result" in m]
        fired = []
        for call, answer in zip(messages, messages[1:], strict=False):
            if call.get("role") == "assistant" and call.get("tool") == ADVANCE \
                    and answer.get("tool") == ADVANCE and "result" in answer:
                args = dict(call.get("args") or {})
                fired.append((str(args.pop("event", "")), args))
        return cls(results, fired)

    def result(self, tool: str) -> Any:
        for i in range(self.at_result, len(self.results)):
            if self.results[i].get("tool") == tool:
                self.at_result = i + 1
                return self.results[i]["result"]
        return None

    def payload(self, event: str) -> dict[str, Any]:
        for i in range(self.at_fired, len(self.fired)):
            if self.fired[i][0] == event:
                self.at_fired = i + 1
                return self.fired[i][1]
        return {}



class Replayed(RunReads, Effects, Protocol):
    """What a replay reads: the run's log and transcript, its effects and artifacts."""


@dataclass
class _Replay:
    spec: WorkflowSpec
    store: Replayed
    names: Mapping[str, str]
    transcript: _Transcript
    facts: dict[str, Any] = field(default_factory=dict)
    tool: Event | None = None
    decided: int | None = None
    #: (step, event) of the last customer's reply (or expiry) that fired an event.
    replied: tuple[int, str] | None = None

    def state(self, name: str | None) -> str:
        return self.names.get(name or "", name or "")


def since_last_migration(events: list[Event]) -> list[Event]:
    """The part of a run's log on its current definition's lineage: all of it, or what
    follows its last migration (earlier steps lived on other definitions)."""
    last = max((i for i, e in enumerate(events) if e.kind == "migrated"), default=None)
    return events if last is None else events[last:]


def replay(spec: WorkflowSpec, store: Replayed, run_id: str,
           state_map: Mapping[str, str] | None = None) -> list[str]:
    """Every step of run ``run_id``'s recorded path that ``spec`` would refuse, one line
    each (states renamed by ``state_map`` first)."""
    events = since_last_migration(store.events(run_id))
    r = _Replay(spec, store, dict(state_map or {}), _Transcript.of(store.messages(run_id)))
    out: list[str] = []
    for e in events:
        out += list(_judge(r, e))
    return out


def _judge(r: _Replay, e: Event) -> Iterator[str]:
    where = f"step {e.step}"
    if e.kind in ("start", "migrated"):
        state = r.state(e.state_after)
        if state not in r.spec.states:
            yield f"{where}: the run starts in {state!r}, which the candidate does not have"
        elif e.kind == "start" and state != r.spec.initial:
            yield (f"{where}: the run started in {state!r}; the candidate starts runs in "
                   f"{r.spec.initial!r}")
    elif e.kind == "decision":
        r.decided = e.step
    elif e.kind in ("reply", "unanswered", "opening") and e.event:
        r.replied = (e.step, e.event)
    elif e.kind == "tool" and e.tool:
        yield from _call(r, e, where)
    elif e.kind == "transition" and e.event:
        yield from _transition(r, e, where)


def _call(r: _Replay, e: Event, where: str) -> Iterator[str]:
    state, tool = r.state(e.state_before), r.spec.tools.get(e.tool or "")
    r.tool = e
    if tool is None:
        yield (f"{where}: the run called {e.tool!r}, which the candidate does not have "
               f"(its tools: {', '.join(sorted(r.spec.tools)) or 'none'})")
        return
    if tool.name not in r.spec.allowed_tools(state):
        yield (f"{where}: the run called {tool.name!r} in {state!r}, where the candidate "
               f"allows {', '.join(r.spec.allowed_tools(state)) or 'no tool'}")
    raw = e.detail.get("args")
    if raw is None and e.detail.get("key"):
        effect = r.store.effect(str(e.detail["key"]))
        raw = effect.args if effect is not None else None
    if raw is None:
        return
    try:
        args = tool.args.model_validate(raw)
    except ValidationError as exc:
        yield (f"{where}: the candidate's schema of {tool.name} refuses the recorded "
               f"arguments {json.dumps(raw, ensure_ascii=False, sort_keys=True)}: "
               f"{validation_summary(exc)}")
        return
    if e.detail.get("error") or tool.remember is None:
        return
    result = _result(r, e, tool.name, tool.write)
    try:
        r.facts = {**r.facts, **tool.remember(args, result, MappingProxyType(r.facts))}
    except Exception as exc:  # noqa: BLE001 - the candidate's hook, on a recorded result
        yield f"{where}: the candidate's remember hook of {tool.name} raised {describe(exc)}"


def _result(r: _Replay, e: Event, tool: str, write: bool) -> Any:
    """The call's recorded result: its effect row for a write, else the transcript (a
    long result from the artifact it was kept in)."""
    result = r.transcript.result(tool)
    key = e.detail.get("key")
    if write and key:
        effect = r.store.effect(str(key))
        if effect is not None and effect.status == "DONE":
            return effect.result
    if isinstance(result, dict) and str(result.get("artifact", "")).startswith("artifact:"):
        text = r.store.artifact(str(result["artifact"]).removeprefix("artifact:"))
        if text is not None:
            return json.loads(text)
    return result


def _not_theirs(spec: WorkflowSpec, event: str, by_person: bool,
                by_customer: bool) -> str | None:
    """Who fired ``event``, when the candidate does not let them; else ``None``."""
    if by_person != (event in spec.human_events):
        return "a person" if by_person else "the model or a tool"
    if by_customer != (event in spec.customer_events):
        return "the customer's reply" if by_customer else "the model or a tool"
    return None


def _transition(r: _Replay, e: Event, where: str) -> Iterator[str]:
    spec, event = r.spec, e.event or ""
    before, after = r.state(e.state_before), r.state(e.state_after)
    tool, r.tool = r.tool, None
    fired_by_tool = tool is not None and tool.step == e.step and tool.tool in spec.tools \
        and event in spec.tools[tool.tool or ""].emits_events
    by_person = r.decided == e.step
    by_customer = r.replied == (e.step, event)
    payload = {} if fired_by_tool or by_person or by_customer else \
        r.transcript.payload(event)
    if spec.events_from(before).get(event) != after:
        target = spec.events_from(before).get(event)
        yield (f"{where}: {event!r} moved the run {before!r} → {after!r}; the candidate's "
               + (f"tables send it to {target!r}" if target else
                  f"tables have no {event!r} from {before!r}"))
        return
    who = _not_theirs(spec, event, by_person, by_customer)
    if who is not None:
        yield f"{where}: {who} fired {event!r}; in the candidate it is not theirs to fire"
    model = spec.payloads.get(event)
    if model is not None and not by_person and not by_customer and not fired_by_tool:
        try:
            payload = model.model_validate(payload).model_dump(mode="json")
        except ValidationError as exc:
            yield (f"{where}: the candidate's payload schema of {event!r} refuses the "
                   f"recorded payload: {validation_summary(exc)}")
            return
    guard = spec.guards.get(event)
    if guard is not None:
        try:
            passed = bool(guard.fn(MappingProxyType(r.facts), payload))
        except Exception as exc:  # noqa: BLE001 - the candidate's guard
            passed, why = False, f"raised {describe(exc)}"
        else:
            why = "does not pass"
        if not passed:
            yield (f"{where}: the candidate's guard of {event!r} ({guard.description}) {why} "
                   f"on what the run had then")
    if event in spec.records:
        r.facts = {**r.facts, spec.records[event]: payload}
