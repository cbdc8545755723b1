"""The gate: every action is checked against the tables before anything runs.

:func:`check` is pure: it reads the run and returns a decision, and the
:class:`~fsm.runtime.step.Step` applies it. Refusals carry the observation the model
reads; tool decisions carry the repeat counter the step records.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ValidationError

from fsm.definition.spec import ADVANCE, WorkflowSpec
from fsm.definition.tools import ToolSpec
from fsm.errors import validation_summary
from fsm.policy import Action
from fsm.records import RunState, fingerprint, shown
from fsm.runtime.context import StepContext
from fsm.runtime.conversation.judging import can_propose, checked_proposal, confirmation_problem

#: How many recent calls in the current state are remembered for repeat detection.
RECENT_WINDOW = 20
#: How many times a call that failed (the tool raised) may be made with the same
#: arguments in one state: a transient error is retried, a broken call is not looped on.
MAX_FAILED_CALLS = 3
#: The mark of a failed call in the recent-calls window.
FAILED = "failed:"
#: How many times in a row the policy may give the same unusable output: it is a loop
#: (a policy that returns ``None``, a model stuck on one malformed answer), not a slip.
MAX_UNUSABLE = 3
#: The mark of an unusable output in the recent-calls window.
UNUSABLE = "unusable:"


@dataclass(frozen=True)
class Refuse:
    reason: str
    tool: str | None = None
    event: str | None = None
    #: Set when the refusal also ends the run (e.g. a repetition loop).
    fail: str | None = None
    #: The repeated-call counter to record, when this refusal is a repetition.
    repeat_refusals: int | None = None
    #: Set when the refusal hands the run over: nothing the model can do gets past it.
    hand_over: str | None = None
    #: A mark for the recent-calls window (an unusable output, counted in a row).
    remember: str | None = None


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
    #: A call that passed the repeat check resets the counter.
    repeat_refusals: int | None = None


@dataclass(frozen=True)
class Pause:
    tool: str
    args: BaseModel
    repeat_refusals: int | None = None


@dataclass(frozen=True)
class Broken:
    """The workflow's own code raised on this call (its check or approval rule): a bug,
    which fails the run; nothing runs."""

    tool: str
    #: Which code raised, e.g. ``"the check of 'pay'"``.
    where: str
    error: Exception


@dataclass(frozen=True)
class AskCustomer:
    """The model's text is a message to the customer: the run waits for the reply."""

    text: str


Decision = Refuse | Finish | Fire | Call | Pause | Broken | AskCustomer


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


def check(ctx: StepContext, run: RunState, action: Action) -> Decision:
    """What to do with ``action`` in ``run``'s current state. Changes nothing."""
    spec = ctx.spec
    if action.problem is not None:
        return _unusable(run, action.problem, action.tool)
    if action.final is not None:
        if run.state in spec.asks_customer:
            return _ask(spec, run.state, action.final)
        if run.state in spec.finish_states:
            return Finish(action.final)
        return Refuse(
            f"a final answer is not accepted in state {run.state!r}: the workflow "
            f"finishes through its events. {_proceed(spec, run.state)}"
        )
    assert action.tool is not None
    if action.tool == ADVANCE and ctx.has_events:
        return _event(spec, run.state, action.args)
    return _tool(ctx, run, action.tool, action.args)


def _unusable(run: RunState, problem: str, tool: str | None) -> Refuse:
    """Unusable output is an observation for the model; the same one
    :data:`MAX_UNUSABLE` times in a row fails the run, naming it."""
    mark = UNUSABLE + fingerprint(problem)
    earlier = run.recent_calls[-(MAX_UNUSABLE - 1):]
    if earlier == [mark] * (MAX_UNUSABLE - 1):
        return Refuse(problem, tool=tool, fail=f"the policy gave the same unusable output "
                                               f"{MAX_UNUSABLE} times in a row: {problem}")
    return Refuse(problem, tool=tool, remember=mark)


def _ask(spec: WorkflowSpec, state: str, text: str) -> Decision:
    if not text.strip():
        return Refuse(f"a message to the customer must say something. To ask the customer, "
                      f"write the question as text; otherwise: {_proceed(spec, state)}")
    return AskCustomer(text)


def _event(spec: WorkflowSpec, state: str, args: dict[str, Any]) -> Decision:
    allowed = spec.model_events(state)
    event = args.get("event")
    payload = {k: v for k, v in args.items() if k != "event"}
    if not isinstance(event, str):
        return Refuse(f"advance needs an 'event' argument (allowed: {_listing(allowed)})",
                      tool=ADVANCE)
    if event in spec.human_events:
        return Refuse(f"event {event!r} can only be fired by a person, not by the model "
                      f"(allowed: {_listing(allowed)})", tool=ADVANCE, event=event)
    if event in spec.tool_events:
        return Refuse(f"event {event!r} is fired by the tool that reports it, not by the "
                      f"model (allowed: {_listing(allowed)})", tool=ADVANCE, event=event)
    if event in spec.customer_events:
        return Refuse(f"event {event!r} is fired only by the customer's reply, not by the "
                      f"model (allowed: {_listing(allowed)})", tool=ADVANCE, event=event)
    if event not in allowed:
        return Refuse(f"event {event!r} is not allowed in state {state!r} "
                      f"(allowed: {_listing(allowed)})", tool=ADVANCE, event=event)
    model = spec.payloads.get(event)
    if model is not None:
        try:
            payload = model.model_validate(payload).model_dump(mode="json")
        except ValidationError as exc:
            return Refuse(f"bad payload for event {event!r}: {validation_summary(exc)}",
                          tool=ADVANCE, event=event)
    elif payload:
        return Refuse(f"event {event!r} takes no payload (got: {_listing(sorted(payload))})",
                      tool=ADVANCE, event=event)
    checked, problem = checked_proposal(spec, event, payload)
    if checked is None:
        return Refuse(str(problem), tool=ADVANCE, event=event)
    payload = checked
    # The guard is the machine's condition; firing reports a guard refusal.
    return Fire(event, payload)


def _tool(ctx: StepContext, run: RunState, name: str, raw_args: Any) -> Decision:
    spec = ctx.spec
    state = run.state
    allowed = spec.allowed_tools(state)
    tool = spec.tools.get(name)
    if tool is None:
        if ctx.plain_errors:
            return Refuse(f"unknown tool {name}", tool=name)
        return Refuse(f"unknown tool {name!r} (allowed in state {state!r}: "
                      f"{_listing(allowed)})", tool=name)
    if name not in allowed:
        return Refuse(f"tool {name!r} is not allowed in state {state!r} "
                      f"(allowed: {_listing(allowed)})", tool=name)
    if not isinstance(raw_args, dict):
        return Refuse(f"bad arguments for {name!r}: arguments must be a JSON object", tool=name)
    try:
        args = tool.args.model_validate(raw_args)
    except ValidationError as exc:
        return Refuse(f"bad arguments for {name!r}: {validation_summary(exc)}", tool=name)
    return _rules(ctx, run, tool, args)


def _rules(ctx: StepContext, run: RunState, tool: ToolSpec, args: BaseModel) -> Decision:
    """The tool's own check, repeat detection, then its approval rule.

    The check and the approval rule are the workflow author's code; if one raises, that
    is a bug in it, not an answer for the model: :class:`Broken` (nothing runs, the run
    fails).
    """
    name = tool.name
    if tool.confirmed_by is not None:
        unconfirmed = confirmation_problem(run, tool, args.model_dump(mode="json"))
        if unconfirmed is not None:
            return _unconfirmed(ctx.spec, run, tool, unconfirmed)
    facts = MappingProxyType(run.facts)  # the workflow's code reads facts, never writes them
    try:
        problem = tool.check(args, facts) if tool.check is not None else None
    except Exception as exc:
        return Broken(name, f"the check of {name!r}", exc)
    if problem:
        return Refuse(f"{name!r} refused: {shown(problem)}", tool=name)
    counter: int | None = None
    if ctx.max_repeats is not None:
        said = call_fingerprint(name, args.model_dump(mode="json"))
        if said in run.recent_calls:
            return _repeated(run, name, ctx.max_repeats)
        if run.recent_calls.count(FAILED + said) >= MAX_FAILED_CALLS:
            return _repeated(run, name, ctx.max_repeats, failed=MAX_FAILED_CALLS)
        counter = 0
    try:
        pause = tool.needs_approval(args, facts)
    except Exception as exc:
        return Broken(name, f"the approval rule of {name!r}", exc)
    return Pause(name, args, counter) if pause else Call(name, args, counter)


def _unconfirmed(spec: WorkflowSpec, run: RunState, tool: ToolSpec, problem: str) -> Refuse:
    """A write the customer did not confirm: the model reads why, and makes the call
    confirmed or proposes this one. Where there is no yes left (it was spent on a call
    that failed) and no proposal can be made from here, nothing the model does can get
    one, so the run is handed over."""
    reason = f"{tool.name!r} refused: {problem}"
    assert tool.confirmed_by is not None
    unspent = run.confirmation is not None and run.confirmation.record == tool.confirmed_by
    if unspent or can_propose(spec, run.state, tool.confirmed_by):
        return Refuse(reason, tool=tool.name)  # the confirmed call can still be made
    return Refuse(reason, tool=tool.name, hand_over=(
        f"{tool.name} needs the customer's yes to this call, and none can be asked from "
        f"state {run.state!r} (a yes is spent on the call it confirmed); a person takes "
        "over"))


def _repeated(run: RunState, name: str, max_repeats: int, *, failed: int = 0) -> Refuse:
    count = run.repeat_refusals + 1
    fail = None
    if count >= max_repeats:
        fail = f"repetition loop: {name} repeated with the same arguments"
    said = (f"{name!r} failed {failed} times with these arguments in state {run.state!r}; "
            "take another action" if failed else
            f"{name!r} was already called with these arguments in state {run.state!r}; use "
            "its result above or take another action")
    return Refuse(f"repeated call: {said}", tool=name, fail=fail, repeat_refusals=count)


def call_fingerprint(name: str, args: dict[str, Any]) -> str:
    return fingerprint({"tool": name, "args": args})


def remembered(recent: list[str], name: str, args: dict[str, Any], *,
               failed: bool = False) -> list[str]:
    """The recent-calls window after a call of ``name`` with ``args``: a call that
    succeeded is not made again; one that failed may be, up to :data:`MAX_FAILED_CALLS`
    times in all."""
    said = (FAILED if failed else "") + call_fingerprint(name, args)
    return (recent + [said])[-RECENT_WINDOW:]
