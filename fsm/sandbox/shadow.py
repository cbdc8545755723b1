"""``fsm shadow``: recorded conversations of real agents replayed through a workflow's gate.

Each conversation runs on a fresh :class:`~fsm.store.memory.MemoryStore`, with the
workflow's real tables, guards, checks and confirmation binding, and with every tool
replaced by the recorded result of the call it answers: nothing is written anywhere. The
recorded assistant turns are the policy (a tool call is an action, text is a message to
the customer), the recorded user turns are the customer. The gate decides whether each
call, and each event the replay infers, would have been admitted; the replay goes on with
the recorded result either way.

The rules (written for users in ``docs/how-to/shadow.md``):

1. **Events.** A recorded agent never fires the workflow's events. Before a call the state
   does not allow, the replay fires the one model event of the current state whose target
   state allows it and whose guard holds; before a message to the customer, the one that
   leads to a state that speaks to the customer. An event that needs a payload gets it
   from the workflow's prose rules (their ``payload`` method), given the call and what
   the customer said. No such event: the call goes to the gate
   as it is (and is refused). Several: the conversation is *unmappable*.
2. **Confirmations.** A write that needs the customer's confirmation (``confirmed_by``)
   is proposed, with the workflow's proposal event, at the point of the call, with the
   recorded agent's own text as the proposal and the customer's recorded text as the
   answer. The *answer* is the customer's last message before the call, when the agent
   said nothing to the customer in between; the *proposal* is the agent's last message
   before that answer. The write is confirmed only when the answer is an explicit yes
   and the proposal names what the call changes (:mod:`fsm.sandbox.shadow_rules`); a yes
   on a condition makes the conversation unmappable. A workflow whose prose rules say
   ``span = "since_write"`` takes as the proposal every message of the agent since the
   last write up to the answer (the details listed over a negotiation, then a yes). One
   answer may cover several writes, each named in the one proposal: each is proposed and
   confirmed on its own, all citing the same two messages; the same call again on the
   same answer is not covered (one yes runs a call once).
   A workflow whose prose rules say ``greeting = True`` has the agent's opening
   greeting replayed, and the customer's first message given as the reply to it (read
   by the workflow's ``interpret`` like any other); otherwise the opening message is not
   replayed and the customer's first message is the run's goal (which ``interpret`` reads
   too, as every conversation's opening).
3. **The end.** A run that stops (handed over, done) ends the replay: each later call is
   a refusal, since nothing runs after the end, except a repeat of the hand-over that
   ended it (the same tool, into a person's hands already), which is noted. The end of
   the recording ends the run.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fsm.definition.spec import ADVANCE, WorkflowSpec
from fsm.definition.tools import ToolContext, ToolSpec
from fsm.errors import FSMError
from fsm.policy import Action, View
from fsm.records import Budgets, Event, RunState
from fsm.runtime.engine import Engine
from fsm.sandbox.infer import leading_events, proposal_event
from fsm.sandbox.shadow_read import Act, Hear, Recorded, Say
from fsm.sandbox.shadow_rules import PlainRules, ProseRules, Seen, missing
from fsm.store.memory import MemoryStore

__all__ = ["Outcome", "ShadowRefusal", "Verdict", "replay_one", "replay_recorded"]

Verdict = Literal["admitted", "refused", "unmappable", "unreadable"]
_STOPPED = frozenset({"done", "failed", "handed_over", "budget_exhausted"})


@dataclass
class ShadowRefusal:
    """One call or event the gate refused."""

    #: The recorded turn (``turn_idx``) it comes from.
    turn: int
    #: The tool called, or ``advance`` for an event.
    tool: str
    args: dict[str, Any]
    #: The workflow state it was refused in.
    state: str
    #: The rule, in the workflow's words (a table row, a guard's text, a binding).
    rule: str
    #: What the gate said, and what the replay found (the values).
    reason: str

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Outcome:
    """What one recorded conversation came to."""

    source: str
    simulation_id: str
    task_id: str | None
    trial: int | None
    reward: float | None
    verdict: Verdict
    refusals: list[ShadowRefusal] = field(default_factory=list)
    #: Why the conversation is unmappable or unreadable.
    reason: str | None = None
    #: Each admitted write, with the two messages (turns) that confirmed it.
    writes: list[dict[str, Any]] = field(default_factory=list)
    #: Each event the replay fired for the agent, and why.
    inferred: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    state: str | None = None
    #: With ``--live``: the final database beside the expected one
    #: (:mod:`fsm.sandbox.shadow_live`).
    live: dict[str, Any] | None = None

    @property
    def refusal(self) -> ShadowRefusal | None:
        return self.refusals[0] if self.refusals else None

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source, "simulation_id": self.simulation_id,
            "task_id": self.task_id, "trial": self.trial, "reward": self.reward,
            "verdict": self.verdict,
            "refusal": None if self.refusal is None else self.refusal.as_json(),
            "refusals": [r.as_json() for r in self.refusals], "reason": self.reason,
            "writes": self.writes, "inferred": self.inferred, "notes": self.notes,
            "final_state": self.state,
            **({} if self.live is None else {"live": self.live}),
        }


class RecordedError(Exception):
    """The recorded call failed; the message is its recorded error."""


class _Unmappable(Exception):
    """The replay cannot map the recording with confidence; the message says why."""


# -- the stubbed workflow ---------------------------------------------------------------------

class _Slot:
    """The recorded call the next tool run answers with."""

    act: Act | None = None

    def take(self, tool: str) -> Any:
        act, self.act = self.act, None
        if act is None or act.tool != tool:  # pragma: no cover - the replay sets it first
            raise RecordedError(f"no recorded result for {tool}")
        if act.error is not None:
            raise RecordedError(act.error)
        if not act.answered:
            raise RecordedError("the recording has no result for this call")
        return act.result


def _stubbed(spec: WorkflowSpec, slot: _Slot, answer: Callable[[str], str | None]
             ) -> WorkflowSpec:
    def stub(tool: ToolSpec) -> ToolSpec:
        def run(args: Any, ctx: ToolContext) -> Any:
            return slot.take(tool.name)
        return dataclasses.replace(tool, fn=run)

    return _answering(spec, answer, {n: stub(t) for n, t in spec.tools.items()})


def _answering(spec: WorkflowSpec, answer: Callable[[str], str | None],
               tools: dict[str, ToolSpec] | None = None) -> WorkflowSpec:
    """``spec`` reading the customer's answers with ``answer`` (and with ``tools``)."""

    def interpret(text: str, asked: dict[str, Any]) -> str | None:
        if not asked:  # a reply to a plain question: the workflow's own reading of it
            return spec.interpret(text, asked) if spec.interpret is not None else None
        said = answer(text)
        events = [e for e in spec.customer_events if e != spec.confirm_event
                  and e != spec.reply_expiry_event]
        if said == "yes":
            return spec.confirm_event
        return events[0] if said == "no" and len(events) == 1 else None

    copy = spec.model_copy(update={"tools": spec.tools if tools is None else tools,
                                   "interpret": interpret, "resources": {}})
    # model_copy keeps what the original computed once (its view builder holds its real
    # tools): the copy computes its own.
    for name, attr in vars(WorkflowSpec).items():
        if isinstance(attr, functools.cached_property):
            copy.__dict__.pop(name, None)
    return copy


class _Queue:
    """The policy: the replay hands it the next action before each step."""

    def __init__(self) -> None:
        self.next: Action | None = None

    def __call__(self, view: View) -> Action:
        action, self.next = self.next, None
        if action is None:  # pragma: no cover - the replay steps only with an action set
            raise RuntimeError("the shadow replay stepped without an action")
        return action


# -- one conversation -------------------------------------------------------------------------

class _Replay:
    """Drives one recorded conversation through the gate (see the module's docstring)."""

    def __init__(self, spec: WorkflowSpec, rules: ProseRules, rec: Recorded,
                 live: WorkflowSpec | None = None) -> None:
        self.rec = rec
        self.rules = rules
        self.original = spec
        self.slot = _Slot()
        self.queue = _Queue()
        # live: the workflow's own tools run, on the fresh environment ``live`` is built on
        self.spec = _stubbed(spec, self.slot, rules.answer) if live is None else \
            _answering(live, rules.answer)
        self.store = MemoryStore()
        self.engine = Engine(self.spec, self.store, self.queue, max_repeats=None)
        self.run_id = "shadow"
        #: engine step -> (turn, tool, args, what the replay found)
        self.acts: dict[int, tuple[int, str, dict[str, Any], str]] = {}
        self.out = Outcome(rec.source, rec.simulation_id, rec.task_id, rec.trial, rec.reward,
                           "admitted", notes=list(rec.notes))
        self.reads: list[tuple[str, Mapping[str, Any], Any]] = []
        self.last_say: Say | None = None
        self.answer: tuple[Say | None, Hear] | None = None
        self.started = False
        self.ended: list[ShadowRefusal] = []
        #: The customer's messages so far.
        self.heard: list[str] = []
        #: The agent's messages to the customer since the last write (rule 2's span).
        self.said: list[str] = []
        self.wrote = False
        #: The last call replayed (a repeat of the one that ended the run is not refused).
        self.last_act: Act | None = None

    # -- the run ---------------------------------------------------------------------------

    @property
    def run(self) -> RunState:
        return self.store.load_run(self.run_id)

    def go(self) -> Outcome:
        try:
            with self.engine:
                for item in self.rec.items:
                    self._item(item)
        except _Unmappable as exc:
            self.out.verdict, self.out.reason = "unmappable", str(exc)
        self._verdict()
        return self.out

    def _item(self, item: Say | Hear | Act) -> None:
        if not self.started:
            if isinstance(item, Say):
                self.out.notes.append(f"the opening message at turn {item.turn} is not "
                                      "replayed (nothing is asked before the customer speaks)")
                self.last_say = item
                self.said.append(item.text)
                return
            if isinstance(item, Hear) and self.last_say is not None and \
                    getattr(self.rules, "greeting", False):
                self._greeted(self.last_say, item)
                return
            self._start(item.text if isinstance(item, Hear) else "")
            if isinstance(item, Hear):
                self.answer, self.last_say = (self.last_say, item), None
                self.heard.append(item.text)
                return
        if self.run.status in _STOPPED:
            self._after_end(item)
            return
        if isinstance(item, Hear):
            self._hear(item)
        elif isinstance(item, Say):
            self._say(item)
        elif self.spec.tools.get(item.tool) is not None and \
                self.spec.tools[item.tool].confirmed_by is not None:
            self._write(item)
        else:
            self._call(item, why="")

    def _greeted(self, greeting: Say, item: Hear) -> None:
        """The agent's greeting replayed as its first message, and the customer's opening
        as the reply to it (prose rules with ``greeting = True``: the desk reads what the
        customer says first, such as their user id)."""
        self.out.notes.pop()
        self._start("(the conversation opens with the agent's greeting)")
        self._step(greeting.turn, Action(final=greeting.text))
        self._hear(item)

    def _start(self, goal: str) -> None:
        self.engine.start_conversation(goal or "(no opening message)", user="customer",
                                       run_id=self.run_id, drive=False,
                                       budgets=Budgets(max_steps=None))
        self.started = True

    def _step(self, turn: int, action: Action, why: str = "") -> int:
        run = self.run
        if run.status != "running":
            raise _Unmappable(f"turn {turn}: the run is {run.status} in state {run.state!r} "
                              "where the recording acts")
        self.queue.next = action
        step = run.step + 1  # the engine numbers the step it is about to take so
        self.acts[step] = (turn, action.tool or "(message)", dict(action.args), why)
        self.engine.step(self.run_id)
        return step

    def _after_end(self, item: Say | Hear | Act) -> None:
        """A call after the run stopped (rule 3)."""
        if not isinstance(item, Act):
            return
        run = self.run
        last = self.last_act
        if last is not None and last.tool == item.tool and \
                run.state in self.spec.handed_over_states:
            self.out.notes.append(f"the call at turn {item.turn} repeats the hand-over that "
                                  f"ended the run (turn {last.turn}): it changes nothing")
            return
        self.ended.append(ShadowRefusal(
            item.turn, item.tool, dict(item.args), run.state,
            f"TRANSITIONS: {run.state!r} has no way out: nothing runs after the run ends",
            f"{item.tool} called after the run stopped ({run.status} in state "
            f"{run.state!r})"))

    # -- the customer ----------------------------------------------------------------------

    def _hear(self, item: Hear) -> None:
        self.answer = (self.last_say, item)
        self.last_say = None
        self.heard.append(item.text)
        run = self.run
        if run.status != "awaiting_customer":
            self.out.notes.append(f"the customer's message at turn {item.turn} is not given "
                                  f"to the run: it does not wait for the customer (state "
                                  f"{run.state!r})")
            return
        if not item.text.strip():
            self.out.notes.append(f"the customer's message at turn {item.turn} is empty")
            return
        self.engine.reply(self.run_id, item.text, drive=False)

    def _say(self, item: Say) -> None:
        self.last_say = item
        if self.wrote:
            self.said, self.wrote = [], False
        self.said.append(item.text)
        self.answer = None
        if not item.text.strip():
            return
        self._reach(item.turn, lambda s: s in self.spec.asks_customer, "a message to the "
                    "customer")
        self._step(item.turn, Action(final=item.text))

    # -- calls -----------------------------------------------------------------------------

    def _call(self, act: Act, why: str) -> int:
        allowed = self.spec.tools_by_state
        self._reach(act.turn, lambda s: act.tool in allowed.get(s, ()), f"{act.tool}", act)
        self.slot.act = act
        self.last_act = act
        if act.text and not self.wrote:
            self.said.append(act.text)  # said with the call, before any yes to it
        step = self._step(act.turn, Action(tool=act.tool, args=act.args, text=act.text), why)
        self.slot.act = None
        if act.error is None and act.answered and not self._refused_at(step):
            self.reads.append((act.tool, act.args, act.result))
        return step

    def _write(self, act: Act) -> None:
        event = proposal_event(self.spec, act.tool)
        used = self._used_by(act)
        found = self._confirmation(act) if used is None else used
        if event is None or isinstance(found, str):
            self._call(act, why=found if isinstance(found, str) else
                       "no event of the workflow proposes it")
            return
        proposal, answer = found
        self._reach(act.turn, lambda s: event in self.spec.model_events(s), f"{event}")
        self._step(proposal.turn, Action(tool=ADVANCE, text=proposal.text, args={
            **self._payload(event, act), "event": event, "tool": act.tool,
            "args": act.args}))
        self._infer(act.turn, event, f"the proposal at turn {proposal.turn}, answered yes at "
                                     f"turn {answer.turn}, names {act.tool}")
        if self.run.status == "awaiting_customer":
            self.engine.reply(self.run_id, answer.text, drive=False)
        step = self._call(act, why="")
        self.wrote = True
        if not self._refused_at(step):
            self.out.writes.append({"turn": act.turn, "tool": act.tool, "args": act.args,
                                    "proposal_turn": proposal.turn,
                                    "answer_turn": answer.turn,
                                    # admitted, but the recorded call failed in the tools
                                    "error": act.error})

    def _used_by(self, act: Act) -> str | None:
        """Why the customer's answer no longer covers ``act``: the same call already ran on
        it (one yes runs a call once)."""
        turn = self.answer[1].turn if self.answer is not None else None
        done = next((w for w in self.out.writes if w["answer_turn"] == turn
                     and (w["tool"], w["args"]) == (act.tool, act.args)), None)
        if done is None:
            return None
        return (f"the customer's yes at turn {turn} was taken by the same call at turn "
                f"{done['turn']}: one yes runs a call once")

    def _confirmation(self, act: Act) -> tuple[Say, Hear] | str:
        """The proposal and the answer that confirm ``act``, or why there are none."""
        if self.answer is None:
            return ("the agent wrote to the customer after their last message and before "
                    "the call: no answer of the customer covers it")
        proposal, answer = self.answer
        if proposal is None:
            return f"no message of the agent before the customer's message at turn {answer.turn}"
        said = self.rules.answer(answer.text)
        if said == "conditional":
            raise _Unmappable(f"turn {act.turn}: the customer's answer at turn {answer.turn} "
                              "is a yes on a condition; whether it held is not known")
        if said != "yes":
            return (f"the customer's answer at turn {answer.turn} is not an explicit yes "
                    f"(to the agent's message at turn {proposal.turn})")
        text = "\n".join(self.said) if getattr(self.rules, "span", "") == "since_write" \
            else proposal.text
        gaps = missing(text, self.rules.mentions(act.tool, act.args,
                                                          Seen(tuple(self.reads))))
        if gaps:
            return (f"the proposal at turn {proposal.turn} does not name "
                    f"{', '.join(gaps)}")
        return proposal, answer

    # -- inference -------------------------------------------------------------------------

    def _payload(self, event: str, act: Act | None) -> dict[str, Any]:
        """What the workflow's prose rules give an inferred event to carry (its
        ``payload`` method, given the call it leads to and the customer's messages)."""
        give = getattr(self.rules, "payload", None)
        if give is None or act is None:
            return {}
        return dict(give(event, act.tool, act.args, tuple(self.heard)) or {})

    def _reach(self, turn: int, allows: Callable[[str], bool], what: str,
               act: Act | None = None) -> None:
        """Fire the one model event that leads from the current state to one where
        ``allows``, when the current state does not (rule 1)."""
        run = self.run
        if run.status != "running" or allows(run.state):
            return
        options = leading_events(self.spec, run.state, allows, run.facts)
        if len(options) > 1:
            raise _Unmappable(f"turn {turn}: {what} needs one of the events "
                              f"{', '.join(options)} from state {run.state!r}; which one the "
                              "agent meant is not known")
        if options:
            payload = self._payload(options[0], act)
            self._step(turn, Action(tool=ADVANCE, args={"event": options[0], **payload}))
            self._infer(turn, options[0], f"{what} is allowed only after it")

    def _infer(self, turn: int, event: str, why: str) -> None:
        self.out.inferred.append({"turn": turn, "event": event, "why": why})

    def _refused_at(self, step: int) -> bool:
        return any(e.kind == "refusal" and e.step == step
                   for e in self.store.events(self.run_id))

    # -- the verdict -----------------------------------------------------------------------

    def _verdict(self) -> None:
        if not self.started:
            self.out.verdict, self.out.reason = "unmappable", "nothing to replay"
            return
        run = self.run
        self.out.state = run.state
        for ev in self.store.events(self.run_id):
            if ev.kind == "refusal" and ev.step in self.acts:
                self.out.refusals.append(self._refusal(ev))
        self.out.refusals.extend(self.ended)
        if self.out.refusals:
            self.out.verdict, self.out.reason = "refused", None

    def _refusal(self, ev: Event) -> ShadowRefusal:
        turn, tool, args, why = self.acts[ev.step]
        state = ev.state_before or ""
        rule = rule_of(self.original, ev, state, tool, args)
        # What the replay found says more than the gate's "not allowed in this state".
        return ShadowRefusal(turn, tool, args, state, rule, why or ev.reason or "")


def rule_of(spec: WorkflowSpec, ev: Event, state: str, tool: str, args: dict[str, Any]) -> str:
    """The rule a refusal rests on, in the workflow's own words."""
    reason = ev.reason or ""
    if tool == ADVANCE and ev.event is not None:
        guard = spec.guards.get(ev.event)
        if guard is not None and "guard" in reason:
            return f"guard of {ev.event!r}: {guard.description}"
        return f"TRANSITIONS[{state!r}]: {ev.event!r} is not one of its events"
    spec_tool = spec.tools.get(tool)
    if spec_tool is not None and spec_tool.confirmed_by is not None and (
            "not allowed in state" in reason or "confirm" in reason):
        homes = [s for s, tools in spec.tools_by_state.items() if tool in tools]
        return (f"confirmed_by {spec_tool.confirmed_by!r}: a write runs only in "
                f"{', '.join(repr(s) for s in homes)}, on the customer's explicit yes to the "
                "proposal of this exact call")
    if "not allowed in state" in reason or "unknown tool" in reason:
        return f"TOOLS_BY_STATE[{state!r}]: {tool} is not listed"
    if "a final answer is not accepted" in reason:
        return f"{state!r} does not speak to the customer"
    if "bad arguments" in reason:
        return f"the arguments of {tool}"
    if "refused:" in reason:
        return f"the check of {tool}"
    return reason.split(":")[0]


def replay_recorded(spec: WorkflowSpec, conversations: Iterable[Recorded],
                    rules: ProseRules | None = None) -> list[Outcome]:
    """Replay each conversation through ``spec``'s gate (see the module's docstring)."""
    prose = rules if rules is not None else PlainRules(spec)
    return [replay_one(spec, rec, prose) for rec in conversations]


def replay_one(spec: WorkflowSpec, rec: Recorded, rules: ProseRules,
               live: WorkflowSpec | None = None) -> Outcome:
    """Replay one conversation through ``spec``'s gate; with ``live`` (the same workflow
    built on a fresh environment), the calls the gate admits run on it."""
    if rec.unreadable is not None:
        return Outcome(rec.source, rec.simulation_id, rec.task_id, rec.trial, rec.reward,
                       "unreadable", reason=rec.unreadable, notes=list(rec.notes))
    try:
        return _Replay(spec, rules, rec, live).go()
    except FSMError as exc:
        return Outcome(rec.source, rec.simulation_id, rec.task_id, rec.trial, rec.reward,
                       "unmappable", reason=f"the replay stopped: {exc}",
                       notes=list(rec.notes))


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    return fn(), time.perf_counter() - started
