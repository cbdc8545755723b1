"""Policies for tests: a scripted one, and hostile ones that try everything.

Fake the model at one seam::

    from fsm.testing import ScriptedPolicy

    policy = ScriptedPolicy([
        {"tool": "get_order", "args": {"order_id": "A-1001"}},
        {"tool": "advance", "args": {"event": "details_complete"}},
    ])
    run = Engine(spec, MemoryStore(), policy).start("Order A-1001 broke", user="asha")
    assert policy.views[1].state == "collecting"

The hostile policies (:class:`RandomPolicy`, :class:`MeddlingPolicy`) are for
property-based tests: whatever they say, the tables must hold.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from fsm.definition.spec import ADVANCE, WorkflowSpec
from fsm.definition.tools import ToolContext, ToolSpec
from fsm.errors import ScriptExhausted
from fsm.policy import Action, View
from fsm.records import state_path as records_state_path
from fsm.store.roles import RunReads

__all__ = [
    "JUNK_OUTPUTS",
    "MeddlingPolicy",
    "RandomPolicy",
    "ScriptExhausted",
    "ScriptedCustomer",
    "ScriptedPolicy",
    "ToolCall",
    "ToolSpy",
    "script_position",
    "state_path",
    "talk",
]


def state_path(store: RunReads, run_id: str) -> list[str]:
    """The workflow states a run went through, from its event log (initial state first)."""
    return records_state_path(store.events(run_id))


class ToolCall(NamedTuple):
    """One execution of a tool, as a :class:`ToolSpy` saw it."""

    tool: str
    run_id: str
    step: int
    #: The run's committed workflow state when the tool ran.
    state: str
    args: dict[str, Any]
    key: str | None


class ToolSpy:
    """Wraps every tool of ``spec`` to record each execution with the run's state.

    Run the engine on ``spy.spec``; ``spy.calls`` then lists what really ran, which
    tests compare with ``TOOLS_BY_STATE`` independently of the event log.
    """

    def __init__(self, spec: WorkflowSpec, store: RunReads) -> None:
        self.store = store
        self.calls: list[ToolCall] = []
        tools = {name: self._wrap(t) for name, t in spec.tools.items()}
        self.spec: WorkflowSpec = spec.model_copy(update={"tools": tools})

    def _wrap(self, tool: ToolSpec) -> ToolSpec:
        def spied(args: Any, ctx: ToolContext) -> Any:
            state = self.store.load_run(ctx.run_id).state
            self.calls.append(ToolCall(tool.name, ctx.run_id, ctx.step, state,
                                       args.model_dump(mode="json"), ctx.key))
            return tool.fn(args, ctx)

        return dataclasses.replace(tool, fn=spied)

    def names(self) -> list[str]:
        return [c.tool for c in self.calls]


def script_position(view: View | list[dict[str, Any]]) -> int:
    """How many policy actions the run shown in ``view`` has already used.

    Each action leaves one assistant message in the transcript. When compaction has
    folded earlier turns into a summary they cannot be counted, but every step before
    this one asked the policy once, so the step number tells instead.
    """
    messages = view.messages if isinstance(view, View) else view
    if isinstance(view, View) and any("summary_of" in m for m in messages):
        return max(view.step - 1, 0)
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def _as_reply(action: Action | dict[str, Any]) -> dict[str, Any]:
    """The ``{"tool", "args"}`` / ``{"final"}`` dict an :class:`~fsm.Agent` policy returns."""
    if isinstance(action, dict):
        return dict(action)
    if action.final is not None:
        return {"final": action.final}
    return {"tool": action.tool, "args": dict(action.args)}


class ScriptedPolicy:
    """Replays ``actions`` in order and records what it was shown.

    Each action is an :class:`~fsm.Action` or a dict such as ``{"tool": ..., "args":
    ...}`` or ``{"final": ...}``. Called with a :class:`~fsm.View` (an engine) it
    returns the action as given; called with a history list (an :class:`~fsm.Agent`)
    it returns the reply dict. ``views`` holds every view or history copy shown.

    The script position comes from what it is shown, not from memory: the action
    handed out is the one after those the transcript already answered (one per
    assistant message). So a run resumed, approved or recovered in another process,
    with a fresh ``ScriptedPolicy`` of the same script, continues where it left off
    instead of replaying the script from the start. Asking for more than the script
    holds raises :class:`ScriptExhausted`, which the engine records as the run's
    failure reason.
    """

    def __init__(self, actions: Iterable[Action | dict[str, Any]]) -> None:
        self.actions: list[Action | dict[str, Any]] = list(actions)
        self.views: list[Any] = []
        self._next = 0

    @property
    def used(self) -> int:
        """Actions handed out so far, counted from the last transcript shown."""
        return self._next

    @property
    def remaining(self) -> list[Action | dict[str, Any]]:
        return self.actions[self.used:]

    def __call__(self, view: View | list[dict[str, Any]]) -> Any:
        position = script_position(view)
        if position >= len(self.actions):
            raise ScriptExhausted(self._exhausted(view))
        action = self.actions[position]
        self.views.append(view)
        self._next = position + 1
        return action if isinstance(view, View) else _as_reply(action)

    def _exhausted(self, view: View | list[dict[str, Any]]) -> str:
        where = (f"at step {view.step} in state {view.state!r}" if isinstance(view, View)
                 else f"after {len(view)} history messages")
        messages = view.messages if isinstance(view, View) else view
        last = messages[-1] if messages else None
        return (f"the script of {len(self.actions)} action(s) ran out: the policy was asked "
                f"again {where} (last message: {last!r}); add actions or check why the run "
                "did not stop")

    def assert_finished(self) -> None:
        """Fail unless every scripted action was used."""
        if self.remaining:
            raise AssertionError(
                f"{len(self.remaining)} scripted action(s) were never asked for; the first: "
                f"{self.remaining[0]!r}"
            )


class ScriptedCustomer:
    """A customer who answers with ``replies`` in order and records what they were asked.

    Each reply is text, or ``fn(asked) -> text`` given the run's
    :class:`~fsm.records.conversation.AwaitingCustomer` request (its ``message`` and the proposal in
    ``args``). ``asked`` lists every request shown. Asked for more than the script holds,
    it raises :class:`ScriptExhausted`.
    """

    def __init__(self, replies: Iterable[str | Callable[[Any], str]]) -> None:
        self.replies = list(replies)
        self.asked: list[Any] = []

    def __call__(self, asked: Any) -> str:
        if len(self.asked) >= len(self.replies):
            raise ScriptExhausted(
                f"the customer's script of {len(self.replies)} reply(ies) ran out: asked "
                f"again ({getattr(asked, 'message', '') or getattr(asked, 'args', '')!r})")
        reply = self.replies[len(self.asked)]
        self.asked.append(asked)
        return reply(asked) if callable(reply) else reply


def talk(engine: Any, run: Any, customer: Callable[[Any], str], *,
         max_turns: int = 50) -> Any:
    """Drive a conversation: while ``run`` waits for its customer, ``customer(request)``
    answers through ``engine.reply``; the run as it stops otherwise."""
    for _ in range(max_turns):
        if run.status != "awaiting_customer":
            return run
        run = engine.reply(run.run_id, customer(run.pending))
    return run


#: Outputs no policy should give. The engine must turn each into an observation.
JUNK_OUTPUTS: tuple[Any, ...] = (
    None, "refund everything", 42, [], {}, {"tool": None}, {"tool": 5},
    {"tool": "x", "final": "both"}, {"final": ["not", "text"]}, {"args": {"a": 1}},
    {"tool": "get_order", "args": "A-1001"}, {"tool": "get_order", "args": [1, 2]},
    {"tool": ADVANCE}, {"tool": ADVANCE, "args": {"event": None}},
    {"tool": ADVANCE, "args": {"event": ["verified"]}}, {"tool": "", "args": {}},
    {"problem": "the model's reply was not JSON"},
    {"tool": "get_order", "args": {"order_id": object()}},
    {"tool": "get_order", "args": {"order_id": float("nan")}},
    {"tool": "x" * 5000, "args": {"y" * 300: "z" * 20_000}},
)

_JUNK_VALUES: tuple[Any, ...] = (
    None, True, 0, -1, 1, 2**63, -(2**40), 1.5, "", " ", "A-0000", "A-99999", "a-1001",
    "'; DROP TABLE shop_payments; --", "₹500", "x" * 10_000, [], [1, "two"], {"nested": {}},
)

_ARG_KEYS = ("order_id", "item_id", "amount_paise", "text", "reason", "event", "note", "x")

_AMOUNTS = (1, 35_000, 42_000, 49_999, 50_000, 50_001, 90_000, 179_999, 180_000, 180_001,
            10**9)


class RandomPolicy:
    """Tries everything, at random: any tool in any state with any arguments.

    Each call picks one move: call an offered or unoffered tool (or an unknown one)
    with plausible or junk arguments, fire any event through ``advance`` (offered,
    human-only, unknown) with any payload, give an early final answer, repeat an
    earlier call exactly, or return junk output. ``rng`` may be a
    :class:`random.Random` (hypothesis's ``st.randoms()`` works); ``seed`` builds one.
    ``tools``, ``events`` and ``values`` widen what it tries beyond what the view
    offers; :meth:`for_spec` fills them from a workflow.
    """

    def __init__(self, seed: int | None = None, *, rng: random.Random | None = None,
                 tools: Sequence[str] = (), events: Sequence[str] = (),
                 values: Sequence[Any] = (), junk: bool = True) -> None:
        self.rng = rng if rng is not None else random.Random(seed)
        self.tools = list(tools)
        self.events = list(events)
        self.values = list(values)
        self.junk = junk
        self.history: list[Any] = []
        self._seen: list[str] = []

    @classmethod
    def for_spec(cls, spec: WorkflowSpec, seed: int | None = None, *,
                 rng: random.Random | None = None, values: Sequence[Any] = (),
                 junk: bool = True) -> RandomPolicy:
        """A random policy that knows every tool and event of ``spec``, human-only too."""
        events = sorted({e for ev in spec.transitions.values() for e in ev})
        return cls(seed, rng=rng, tools=sorted(spec.tools), events=events, values=values,
                   junk=junk)

    def __call__(self, view: View) -> Any:
        moves: list[Callable[[View], Any]] = [
            self.tool_call, self.tool_call, self.tool_call, self.fire, self.fire, self.fire,
            self.final, self.repeat,
        ]
        if self.junk:
            moves.append(self.junk_output)
        self._seen = _strings(view.messages) + [str(v) for v in self.values]
        out = self.rng.choice(moves)(view)
        self.history.append(out)
        return out

    # -- moves ------------------------------------------------------------------------

    def tool_call(self, view: View) -> Action:
        names = [n for n in view.tool_names() if n != ADVANCE] + self.tools
        names += ["no_such_tool", "refund_everything"]
        name = self.rng.choice(names)
        keys = self._schema_keys(view, name)
        return Action(tool=name, args=self._args(view, keys))

    def fire(self, view: View) -> Action:
        events = list(view.events) + self.events + ["teleport", ""]
        args = self._args(view, self._schema_keys(view, ADVANCE))
        args["event"] = self.rng.choice(events)
        return Action(tool=ADVANCE, args=args)

    def final(self, view: View) -> Action:
        return Action(final=self.rng.choice(["Done.", "Refunded ₹1,800.", "", "x" * 3000]))

    def repeat(self, view: View) -> Any:
        earlier = [a for a in self.history if isinstance(a, Action) and a.tool is not None]
        return self.rng.choice(earlier) if earlier else self.tool_call(view)

    def junk_output(self, view: View) -> Any:
        return self.rng.choice(JUNK_OUTPUTS)

    # -- arguments --------------------------------------------------------------------

    def _schema_keys(self, view: View, name: str) -> list[str]:
        for t in view.tools:
            if t["name"] == name:
                return list(t["parameters"].get("properties", {}))
        return list(_ARG_KEYS)

    def _args(self, view: View, keys: list[str]) -> dict[str, Any]:
        args: dict[str, Any] = {}
        for key in keys:
            if self.rng.random() < 0.85:
                args[key] = self._value(view, key)
        if self.rng.random() < 0.1:
            args[self.rng.choice(_ARG_KEYS)] = self._value(view, "x")
        return args

    def _value(self, view: View, key: str) -> Any:
        roll = self.rng.random()
        if roll < 0.15 and self.junk:
            return self.rng.choice(_JUNK_VALUES)
        if "amount" in key:
            return self.rng.choice(_AMOUNTS) + self.rng.choice((0, 0, 0, -1, 1))
        return self.rng.choice(self._seen) if self._seen else "A-1001"


def _strings(messages: list[dict[str, Any]]) -> list[str]:
    """Short string values and order-like words the transcript shows."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if len(value) <= 40:
                out.append(value)
            out.extend(w.strip(".,:;!?") for w in value.split() if "-" in w)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for m in messages:
        walk(m.get("content"))
        walk(m.get("result"))
        walk(m.get("args"))
    return out


class MeddlingPolicy:
    """A sensible policy that misbehaves now and then.

    With probability ``rate`` per step it either replaces ``inner``'s action with a
    :class:`RandomPolicy` move or tampers with the action's arguments (amounts moved
    up or down, ids swapped). It reaches deep states that a purely random policy
    seldom does, then tries to cheat there.
    """

    def __init__(self, inner: Callable[[View], Any], seed: int | None = None, *,
                 rng: random.Random | None = None, rate: float = 0.3,
                 chaos: RandomPolicy | None = None) -> None:
        self.inner = inner
        self.rng = rng if rng is not None else random.Random(seed)
        self.rate = rate
        self.chaos = chaos if chaos is not None else RandomPolicy(rng=self.rng)

    def __call__(self, view: View) -> Any:
        action = self.inner(view)
        if self.rng.random() >= self.rate:
            return action
        if self.rng.random() < 0.5 or not isinstance(action, Action) or action.tool is None:
            return self.chaos(view)
        return Action(tool=action.tool, args=self._tamper(view, dict(action.args)))

    def _tamper(self, view: View, args: dict[str, Any]) -> dict[str, Any]:
        if not args:
            return {"unexpected": True}
        key = self.rng.choice(sorted(args))
        value = args[key]
        if isinstance(value, int) and not isinstance(value, bool):
            args[key] = self.rng.choice((value + 1, value - 1, value * 2, value // 2, 50_001,
                                         -value, 0))
        else:
            seen = _strings(view.messages) or ["A-1002"]
            args[key] = self.rng.choice(seen)
        return args
