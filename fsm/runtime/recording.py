"""A stored run's recording, and a policy driven against it in memory.

A :class:`Recording` is what a run's store kept of it: its goal, the action of each of
its steps (the assistant messages of its transcript, in order), the result of every tool
call, the decisions people made and the replies its customer sent. A :class:`Sandbox`
drives a policy on a copy of the run's workflow whose tools never touch anything:

- a read-only call whose tool and arguments were recorded gets the recorded result (or
  error); any other read-only call gets "not in the recording" (or, with
  ``live_reads``, runs against the workflow's resources);
- a write never runs: the attempt is kept (:attr:`Sandbox.writes`) with its arguments,
  and answered with the recorded result of the same call when there is one, else with an
  error that says it was not run.

The run's decisions and replies are given back in order when the sandboxed run waits for
them. Everything is written to a :class:`~fsm.store.memory.MemoryStore`; the run's own
store is only read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fsm.definition.spec import WorkflowSpec
from fsm.definition.tools import Resources, ToolContext, ToolSpec
from fsm.errors import ForkRefused
from fsm.policy import Action, PolicyFn, View
from fsm.records import (
    Approval,
    Budgets,
    CallAwaitingApproval,
    Event,
    EventAwaitingPerson,
    RunState,
    canonical,
    start_detail,
)
from fsm.store.memory import MemoryStore
from fsm.store.roles import RunReads

__all__ = ["NOT_RECORDED", "Recording", "Sandbox", "WriteAttempt", "call_key", "cut"]

#: What a read-only call the recording does not hold is answered with.
NOT_RECORDED = "not in the recording: this call was not made by the recorded run"
#: Event kinds that record an answer from outside the run (a person, the customer).
ANSWERS = ("decision", "reply", "unanswered")


def call_key(tool: str, args: dict[str, Any]) -> str:
    """The key a recorded call is found by: its tool and its arguments' canonical JSON."""
    return f"{tool}:{canonical(args)}"


def cut(events: list[Event], step: int) -> int:
    """How many of a run's events it had committed at ``step``: those of steps up to
    ``step``, without an answer (a decision, a reply) given while it waited at ``step``
    nor anything after one — a fork or replay asks again rather than inherit it."""
    n = 0
    for e in events:
        if e.step > step or (e.step == step and e.kind in ANSWERS):
            break
        n += 1
    return n


class NotRecorded(Exception):  # noqa: N818 - the model reads its name
    """A call the sandbox does not run."""


@dataclass
class WriteAttempt:
    """One write the sandboxed policy got past the tables and guards (``allowed``), or
    that they refused."""

    step: int
    tool: str
    args: dict[str, Any]
    allowed: bool
    #: Why it was refused (tables, guard, check), or what answered it in the sandbox.
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Recording:
    """What a store kept of one run (see the module's docstring)."""

    run: RunState
    events: list[Event]
    messages: list[dict[str, Any]]
    #: call_key -> recorded outcomes, in order: ``("result", value)`` or ``("error", text)``.
    calls: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    approvals: list[Approval] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, store: Any, run_id: str) -> Recording:
        """The recording of run ``run_id`` in ``store`` (read only)."""
        run = store.load_run(run_id)
        rec = cls(run=run, events=store.events(run_id), messages=store.messages(run_id))
        rec.calls = _calls(store, rec.messages)
        for e in store.effects(run_id):
            if e.status == "DONE":
                outcome = ("error", e.error) if e.error else ("result", e.result)
                rec.calls.setdefault(call_key(e.tool, e.args), []).insert(0, outcome)
        rec.approvals = sorted(store.approvals(run_id, pending_only=False),
                               key=lambda a: (a.requested_at, a.approval_id))
        rec.replies = [r.text for r in store.replies(run_id)]
        return rec

    @property
    def goal(self) -> str:
        first = self.messages[0] if self.messages else {}
        return str(first.get("content", ""))

    def actions(self) -> list[dict[str, Any]]:
        """The action of each step, in order (the assistant messages)."""
        return [m for m in self.messages if m.get("role") == "assistant"]

    def start(self) -> dict[str, Any]:
        return start_detail(self.events)

    def head_at(self, step: int) -> tuple[int, str]:
        """(seq, hash) of the run's last event committed at ``step`` (see :func:`cut`)."""
        n = cut(self.events, step)
        last = self.events[n - 1]
        return last.seq, last.hash


def _calls(store: RunReads, messages: list[dict[str, Any]]) -> dict[str, list[tuple[str, Any]]]:
    out: dict[str, list[tuple[str, Any]]] = {}
    for call, answer in zip(messages, messages[1:], strict=False):
        if call.get("role") != "assistant" or not call.get("tool") \
                or answer.get("role") != "tool" or answer.get("tool") != call.get("tool"):
            continue
        if "error" in answer:
            outcome: tuple[str, Any] = ("error", answer["error"])
        else:
            outcome = ("result", _whole(store, answer.get("result")))
        out.setdefault(call_key(str(call["tool"]), dict(call.get("args") or {})),
                       []).append(outcome)
    return out


def _whole(store: RunReads, result: Any) -> Any:
    """A result as the tool returned it: a capped one read back from its artifact."""
    if isinstance(result, dict) and str(result.get("artifact", "")).startswith("artifact:"):
        text = store.artifact(str(result["artifact"]).removeprefix("artifact:"))
        if text is not None:
            return json.loads(text)
    return result


def _raised(text: str) -> Exception:
    """An exception that reads back as the recorded error ``"TypeName: message"``."""
    name, _, message = str(text).partition(": ")
    kind = type(name if name.isidentifier() else "RecordedError", (Exception,), {})
    return kind(message if name.isidentifier() else text)


class RecordedPolicy:
    """The recorded run's actions, one per step, up to step ``upto`` (then ``then``)."""

    def __init__(self, recording: Recording, upto: int | None = None,
                 then: PolicyFn | None = None) -> None:
        self.actions = recording.actions()
        self.upto = len(self.actions) if upto is None else upto
        self.then = then

    def __call__(self, view: View) -> Any:
        i = view.step - 1
        if i < self.upto and i < len(self.actions):
            m = self.actions[i]
            if "final" in m:
                return Action(final=str(m["final"]))
            if "tool" in m:
                return Action(tool=str(m["tool"]), args=dict(m.get("args") or {}),
                              text=m.get("text"))
            return Action(text=str(m.get("content", "")), final=str(m.get("content", "")))
        if self.then is None:
            raise ForkRefused(f"the recording of run {view.run_id!r} has no action for step "
                              f"{view.step}", run_id=view.run_id)
        return self.then(view)


class Sandbox:
    """A copy of ``spec`` whose tools answer from ``recording``, on a memory store."""

    def __init__(self, spec: WorkflowSpec, recording: Recording, *,
                 live_reads: Resources | None = None) -> None:
        self.recording = recording
        self.live = live_reads
        self.writes: list[WriteAttempt] = []
        #: Read-only calls the recording did not hold: (step, tool, args).
        self.unrecorded: list[tuple[int, str, dict[str, Any]]] = []
        self._used: dict[str, int] = {}
        tools = {name: dataclasses.replace(t, fn=self._tool(t)) for name, t in spec.tools.items()}
        copy = spec.model_copy(update={"tools": tools})
        # What the original computed once (its kept versions, its compiled machine) still
        # names its own tools: the copy computes its own.
        for cached in ("versions", "cache"):
            copy.__dict__.pop(cached, None)
        self.spec: WorkflowSpec = copy
        self.store = MemoryStore()
        #: No resource opens in the sandbox (live reads get the caller's own).
        self.resources = Resources({}, "")

    def _tool(self, tool: ToolSpec) -> Callable[[Any, ToolContext], Any]:
        def answered(args: Any, ctx: ToolContext) -> Any:
            plain = args.model_dump(mode="json")
            found = self._recorded(tool.name, plain)
            if tool.write:
                self.writes.append(WriteAttempt(
                    ctx.step, tool.name, plain, True,
                    "recorded result" if found is not None else "not run: not in the recording"))
            if found is None:
                if tool.write:
                    raise NotRecorded("the sandbox does not run writes, and the recorded run "
                                      "made no such call")
                if self.live is not None:
                    return tool.fn(args, dataclasses.replace(ctx, resources=self.live))
                self.unrecorded.append((ctx.step, tool.name, plain))
                raise NotRecorded(NOT_RECORDED)
            kind, value = found
            if kind == "error":
                raise _raised(str(value))
            return value

        return answered

    def _recorded(self, tool: str, args: dict[str, Any]) -> tuple[str, Any] | None:
        key = call_key(tool, args)
        outcomes = self.recording.calls.get(key)
        if not outcomes:
            return None
        i = self._used.get(key, 0)
        self._used[key] = i + 1
        return outcomes[min(i, len(outcomes) - 1)]

    def answer(self, engine: Any, run: RunState, *, upto: int | None = None) -> RunState:
        """Give the sandboxed run the recorded decisions and replies it waits for, until
        it waits for one the recording does not have (or one at step ``upto``)."""
        approvals = list(self.recording.approvals)
        replies = list(self.recording.replies)
        for _ in range(1000):
            if upto is not None and run.step >= upto:
                return run
            if run.status == "awaiting_approval" and isinstance(
                    run.pending, CallAwaitingApproval | EventAwaitingPerson):
                found = _matching(approvals, run.pending)
                if found is None:
                    return run
                approvals.remove(found)
                run = engine.decide(run.run_id, found.decision == "approved",
                                    reviewer=found.reviewer or "recorded",
                                    note=found.note or "",
                                    amend=found.approved_args
                                    if found.approved_args not in (None, found.args) else None)
            elif run.status == "awaiting_customer" and replies:
                run = engine.reply(run.run_id, replies.pop(0))
            else:
                return run
        return run


def _matching(approvals: list[Approval],
              pending: CallAwaitingApproval | EventAwaitingPerson) -> Approval | None:
    """The first recorded, decided approval of the same call (or the same person's wait)."""
    for a in approvals:
        if a.decision not in ("approved", "denied"):
            continue
        if a.tool == pending.tool and a.args == pending.args:
            return a
    return None


def sandbox_budgets(run: RunState, upto: int | None) -> Budgets:
    """The run's budgets, stopped after step ``upto`` when given."""
    if upto is None:
        return run.budgets
    return run.budgets.model_copy(update={"max_steps": upto})
