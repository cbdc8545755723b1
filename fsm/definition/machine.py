"""The workflow spec compiled into a ``transitions`` machine.

The machine, not a dict lookup, decides whether an event may fire. One machine is
built per workflow (:func:`machine_for`) with one permanent model object; each fire
sets that object's state under a lock and triggers the event. Its errors are
translated here, at the one boundary, into :class:`TransitionRefused`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from transitions import EventData, Machine, MachineError

from fsm.definition.guards import Guard
from fsm.definition.spec import WorkflowSpec
from fsm.errors import TransitionRefused, WorkflowCodeError
from fsm.records import describe, shown


class _Token:
    """The model object ``transitions`` moves between states."""

    state: str


class WorkflowMachine:
    def __init__(self, spec: WorkflowSpec) -> None:
        self.spec = spec
        self._lock = threading.Lock()
        rows = []
        for src, events in spec.transitions.items():
            for event, dst in events.items():
                row: dict[str, Any] = {"trigger": event, "source": src, "dest": dst}
                g = spec.guards.get(event)
                if g is not None:
                    row["conditions"] = [self._condition(g.fn)]
                rows.append(row)
        self._machine = Machine(
            model=None, states=list(spec.states), transitions=rows, initial=spec.initial,
            auto_transitions=False, send_event=True,
        )
        # One model for the machine's lifetime: adding and removing a model per fire
        # costs more than the rest of the transition.
        self._token = _Token()
        self._machine.add_model(self._token, initial=spec.initial)

    @staticmethod
    def _condition(fn: Any) -> Any:
        def check(ev: EventData) -> bool:
            return bool(fn(ev.kwargs["facts"], ev.kwargs["payload"]))

        return check

    def triggers(self, state: str) -> list[str]:
        """Events the machine accepts from ``state`` (before guards)."""
        return list(self._machine.get_triggers(state))

    def fire(
        self, state: str, event: str, facts: Mapping[str, Any], payload: dict[str, Any],
        *, run_id: str | None = None,
    ) -> str:
        """Return the next state, or raise :class:`TransitionRefused` with the reason
        (:class:`WorkflowCodeError` when the guard raised)."""
        if event not in self._machine.events:
            raise TransitionRefused(
                f"event {event!r} does not exist in workflow {self.spec.name!r}",
                run_id=run_id, state=state, event=event,
            )
        token = self._token
        with self._lock:
            self._machine.set_state(state, model=token)
            try:
                moved = self._machine.events[event].trigger(token, facts=facts, payload=payload)
            except MachineError:
                allowed = ", ".join(self.triggers(state)) or "none"
                raise TransitionRefused(
                    f"event {event!r} is not allowed in state {state!r} (allowed: {allowed})",
                    run_id=run_id, state=state, event=event,
                ) from None
            except Exception as exc:  # a guard that raised: a bug in the workflow's code
                g = self.spec.guards[event]
                raise WorkflowCodeError(
                    f"the guard of {event!r}",
                    f"event {event!r} in state {state!r}: its guard ({g.description}) "
                    f"raised {describe(exc)}", run_id=run_id, state=state, event=event,
                ) from exc
            after = token.state
        if not moved:
            g = self.spec.guards[event]
            raise TransitionRefused(
                f"event {event!r} refused in state {state!r}: guard not met ({g.description})"
                + _why(g, facts, payload), run_id=run_id, state=state, event=event,
            )
        return after


def _why(g: Guard, facts: Mapping[str, Any], payload: dict[str, Any]) -> str:
    """``": <the guard's reason>"`` when its ``reason`` hook says one, else ``""``."""
    if g.reason is None:
        return ""
    try:
        why = g.reason(facts, payload)
    except Exception as exc:  # the workflow's code: the refusal stands, with what it raised
        return f": its reason raised {describe(exc)}"
    return f": {shown(why)}" if why else ""


def machine_for(spec: WorkflowSpec) -> WorkflowMachine:
    """The compiled machine of ``spec``, built on first use and kept in ``spec.cache``."""
    machine = spec.cache.get(WorkflowMachine)
    if machine is None:
        machine = spec.cache.setdefault(WorkflowMachine, WorkflowMachine(spec))
    return machine
