"""The gate: every action is checked against the tables before anything runs.

The result is a decision object; refusals carry the observation the model reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from fsm.policy import Action
from fsm.records import RunState, fingerprint
from fsm.spec import ADVANCE, WorkflowSpec
from fsm.tools import ToolSpec

#: How many recent calls in the current state are remembered for repeat detection.
RECENT_WINDOW = 20


@dataclass(frozen=True)
class Refuse:
    reason: str
    tool: str | None = None
    event: str | None = None
    #: Set when the refusal also ends the run (e.g. a repetition loop).
    fail: str | None = None


@dataclass(frozen=True)
class Finish:
    text: str


@dataclass(frozen=True)
class Fire:
    event: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Call:
    tool: str
    args: BaseModel


@dataclass(frozen=True)
class Pause:
    tool: str
    args: BaseModel


Decision = Refuse | Finish | Fire | Call | Pause


def _listing(names: Any) -> str:
    return ", ".join(names) or "none"


def _proceed(spec: WorkflowSpec, state: str) -> str:
    """How to move on from ``state``, for a model that answered in text."""
    tools, events = spec.allowed_tools(state), spec.model_events(state)
    ways = [_either(tools)] if tools else []
    if events:
        ways.append(f"{ADVANCE} with event {_either(events)}")
    if not ways:
        return "Nothing can be called in this state."
    return f"Reply with one tool call: {', or '.join(ways)}."


def _either(names: Any) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def validation_summary(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(arguments)"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


class Gate:
    def __init__(self, spec: WorkflowSpec, *, max_repeats: int | None, plain_errors: bool) -> None:
        self.spec = spec
        self.max_repeats = max_repeats
        self.plain_errors = plain_errors
        #: A workflow without events (such as an Agent's) has no ``advance`` tool at all.
        self.has_events = any(spec.transitions.values())

    def check(self, run: RunState, action: Action) -> Decision:
        if action.problem is not None:
            return Refuse(action.problem, tool=action.tool)
        if action.final is not None:
            if run.state in self.spec.finish_states:
                return Finish(action.final)
            return Refuse(
                f"a final answer is not accepted in state {run.state!r}: the workflow "
                f"finishes through its events. {_proceed(self.spec, run.state)}"
            )
        assert action.tool is not None
        if action.tool == ADVANCE and self.has_events:
            return self._event(run, action.args)
        return self._tool(run, action.tool, action.args)

    def _event(self, run: RunState, args: dict[str, Any]) -> Decision:
        state = run.state
        allowed = self.spec.model_events(state)
        event = args.get("event")
        payload = {k: v for k, v in args.items() if k != "event"}
        if not isinstance(event, str):
            return Refuse(f"advance needs an 'event' argument (allowed: {_listing(allowed)})",
                          tool=ADVANCE)
        if event in self.spec.human_events:
            return Refuse(f"event {event!r} can only be fired by a person, not by the model "
                          f"(allowed: {_listing(allowed)})", tool=ADVANCE, event=event)
        if event in self.spec.tool_events:
            return Refuse(f"event {event!r} is fired by the tool that reports it, not by the "
                          f"model (allowed: {_listing(allowed)})", tool=ADVANCE, event=event)
        if event not in self.spec.machine.triggers(state):
            return Refuse(f"event {event!r} is not allowed in state {state!r} "
                          f"(allowed: {_listing(allowed)})", tool=ADVANCE, event=event)
        model = self.spec.payloads.get(event)
        if model is not None:
            try:
                payload = model.model_validate(payload).model_dump(mode="json")
            except ValidationError as exc:
                return Refuse(f"bad payload for event {event!r}: {validation_summary(exc)}",
                              tool=ADVANCE, event=event)
        elif payload:
            return Refuse(f"event {event!r} takes no payload (got: {_listing(sorted(payload))})",
                          tool=ADVANCE, event=event)
        # The guard is the machine's condition; fire() reports a guard refusal.
        return Fire(event, payload)

    def _tool(self, run: RunState, name: str, raw_args: Any) -> Decision:
        state = run.state
        allowed = self.spec.allowed_tools(state)
        tool = self.spec.tools.get(name)
        if tool is None:
            if self.plain_errors:
                return Refuse(f"unknown tool {name}", tool=name)
            return Refuse(f"unknown tool {name!r} (allowed in state {state!r}: "
                          f"{_listing(allowed)})", tool=name)
        if name not in allowed:
            return Refuse(f"tool {name!r} is not allowed in state {state!r} "
                          f"(allowed: {_listing(allowed)})", tool=name)
        try:
            args = tool.args.model_validate(raw_args if isinstance(raw_args, dict) else {})
            if not isinstance(raw_args, dict):
                raise ValueError("arguments must be a JSON object")
        except ValidationError as exc:
            return Refuse(f"bad arguments for {name!r}: {validation_summary(exc)}", tool=name)
        except ValueError as exc:
            return Refuse(f"bad arguments for {name!r}: {exc}", tool=name)
        return self._rules(run, tool, args)

    def _rules(self, run: RunState, tool: ToolSpec, args: BaseModel) -> Decision:
        """The tool's own check, repeat detection, then its approval rule.

        The check and the approval rule are the workflow author's code run on model
        input; if one raises, the call is refused (nothing runs) with the error.
        """
        name = tool.name
        try:
            problem = tool.check(args, run.facts) if tool.check is not None else None
        except Exception as exc:
            problem = f"its check raised {type(exc).__name__}: {exc}"
        if problem:
            return Refuse(f"{name!r} refused: {problem}", tool=name)
        repeat = self._repeat(run, name, args.model_dump(mode="json"))
        if repeat is not None:
            return repeat
        try:
            pause = tool.needs_approval(args, run.facts)
        except Exception as exc:
            return Refuse(f"{name!r} refused: its approval rule raised "
                          f"{type(exc).__name__}: {exc}", tool=name)
        return Pause(name, args) if pause else Call(name, args)

    def _repeat(self, run: RunState, name: str, args: dict[str, Any]) -> Refuse | None:
        if self.max_repeats is None:
            return None
        fp = fingerprint({"tool": name, "args": args})
        if fp not in run.recent_calls:
            run.repeat_refusals = 0
            return None
        run.repeat_refusals += 1
        fail = None
        if run.repeat_refusals >= self.max_repeats:
            fail = f"repetition loop: {name} repeated with the same arguments"
        return Refuse(
            f"repeated call: {name!r} was already called with these arguments in state "
            f"{run.state!r}; use its result above or take another action", tool=name, fail=fail,
        )

    def remember_call(self, run: RunState, name: str, args: dict[str, Any]) -> None:
        if self.max_repeats is None:
            return
        fp = fingerprint({"tool": name, "args": args})
        run.recent_calls = (run.recent_calls + [fp])[-RECENT_WINDOW:]
