"""Events inferred for an agent that speaks plain tool calling (``--infer-events``).

A model taught nothing of a workflow's events sees every tool of the workflow and calls
them as it would anywhere. :class:`InferEvents` wraps its policy and fires, for it, the
events the tables need, by the rules ``fsm shadow`` reads recorded agents with:

- a call the current state does not allow: the one model event of the state whose target
  state allows it is fired first, then the call is made;
- a write that needs the customer's confirmation (``confirmed_by``): the workflow's
  proposal event is fired with the exact call, the customer is asked, and the call is made
  once their reply confirmed it (after a no, the model is asked again);
- text when the state does not speak to the customer: the one model event that leads to
  a state that does is fired first.

When no event, or more than one, would do, the action goes to the gate as it is: the gate
refuses it and the model reads why. Nothing here gets past the gate: the events are fired
through it, guards and bindings included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fsm.definition.spec import ADVANCE, WorkflowSpec
from fsm.policy import NO_USAGE, Action, PolicyFn, View
from fsm.runtime.engine import usable

__all__ = ["InferEvents", "leading_events", "proposal_event"]


def leading_events(spec: WorkflowSpec, state: str, allows: Callable[[str], bool],
                   facts: Mapping[str, Any] | None = None) -> list[str]:
    """The model events of ``state`` whose target state ``allows``; given ``facts``, only
    those whose guard holds (a guard that cannot be judged without a payload does not)."""
    ways = spec.events_from(state)
    found = [e for e in spec.model_events(state) if allows(ways[e])]
    if facts is None:
        return found
    return [e for e in found if _guard_holds(spec, e, facts)]


def _guard_holds(spec: WorkflowSpec, event: str, facts: Mapping[str, Any]) -> bool:
    guard = spec.guards.get(event)
    if guard is None:
        return True
    try:
        return bool(guard.fn(facts, {}))
    except Exception:  # noqa: BLE001 - a guard that needs a payload: not this one
        return False


def proposal_event(spec: WorkflowSpec, tool: str) -> str | None:
    """The event that proposes ``tool`` to the customer (its ``confirmed_by`` record's
    event), or ``None`` when the tool needs no confirmation."""
    record = spec.tools[tool].confirmed_by if tool in spec.tools else None
    if record is None:
        return None
    events = [e for e, r in spec.records.items() if r == record]
    leads = [e for e in events if _confirms_into(spec, e, tool)]
    return next(iter(leads or events), None)


def _confirms_into(spec: WorkflowSpec, event: str, tool: str) -> bool:
    """Whether ``event``, then the customer's yes, leads to a state that allows ``tool``
    (a workflow with several proposal events: the one for this tool)."""
    for state in spec.transitions:
        asking = spec.events_from(state).get(event)
        writing = spec.events_from(asking).get(spec.confirm_event) if asking else None
        if writing is not None and tool in spec.allowed_tools(writing):
            return True
    return False


class InferEvents:
    """``policy``, which speaks plain tool calling, driving ``spec`` (see the module's
    docstring)."""

    def __init__(self, spec: WorkflowSpec, policy: PolicyFn) -> None:
        self.spec = spec
        self.policy = policy
        #: The model's action held back while an inferred event is fired first.
        self.pending: Action | None = None
        self._tools = [t.schema() for t in spec.tools.values()]

    def __call__(self, view: View) -> Action:
        pending, self.pending = self.pending, None
        if pending is not None and self._allowed(pending, view.state):
            return pending
        action = usable(self.policy(self.plain(view)))
        return self._mapped(view.state, action)

    def plain(self, view: View) -> View:
        """What the model sees: every tool of the workflow and the conversation, without
        the events fired for it."""
        messages = [m for m in view.messages if m.get("tool") != ADVANCE]
        return view.model_copy(update={"tools": self._tools, "events": [],
                                       "messages": messages, "instructions": "",
                                       "final_allowed": True})

    def _allowed(self, action: Action, state: str) -> bool:
        if action.final is not None:
            return state in self.spec.asks_customer
        return action.tool in self.spec.allowed_tools(state)

    def _mapped(self, state: str, action: Action) -> Action:
        if action.problem is not None or action.tool == ADVANCE or \
                self._allowed(action, state):
            return action
        if action.tool is not None:
            propose = proposal_event(self.spec, action.tool)
            if propose is not None and propose in self.spec.model_events(state):
                return self._before(action, Action(tool=ADVANCE, text=action.text, args={
                    "event": propose, "tool": action.tool, "args": action.args}))
        options = leading_events(self.spec, state, lambda s: self._allowed(action, s))
        if len(options) != 1:
            return action  # the gate refuses it, and the model reads why
        return self._before(action, Action(tool=ADVANCE, args={"event": options[0]}))

    def _before(self, action: Action, event: Action) -> Action:
        """Fire ``event`` now (it carries the model's usage) and ``action`` next."""
        self.pending = action.model_copy(update={"usage": NO_USAGE, "text": None})
        return event.model_copy(update={"usage": action.usage})


def inferring(spec: WorkflowSpec, maker: Callable[[Any], PolicyFn]
              ) -> Callable[[Any], PolicyFn]:
    """``maker`` (a case -> policy factory, as :func:`fsm.sandbox.evaluate.evaluate` takes)
    with each policy wrapped in :class:`InferEvents`."""
    return lambda case: InferEvents(spec, maker(case))
