"""Invariants of conversations with customers, in the vocabulary of
:mod:`fsm.auditor.invariants`: who fires customer events, that a write runs only on the
customer's yes to exactly that call, and that nothing happens after a hand-over.

The runtime binds a write that has ``confirmed_by`` to the proposal the customer
confirmed (its tool and arguments' fingerprint, at the run version they were shown) and
spends the yes on one call; the explorer models that: such a call is possible only while
a yes to its proposal is held, and it uses the yes up. A write without the binding runs
whenever the tables let the model call it, so a yes cannot be proved to cover it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import cast

from fsm.auditor.diagram import CUSTOMER
from fsm.auditor.graph import Move
from fsm.auditor.invariants import Monitored


def _q(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n}`" for n in names)


@dataclass(frozen=True, init=False)
class CustomerOnly(Monitored):
    """Only the customer's reply fires these events: never the model, a person or a tool."""

    events: tuple[str, ...]

    def __init__(self, *events: str) -> None:
        object.__setattr__(self, "events", tuple(events))

    @property
    def title(self) -> str:
        return f"{_q(self.events)} are fired only by the customer's reply"

    def bad(self, m: Hashable, mv: Move) -> str | None:
        if mv.event in self.events and mv.by != CUSTOMER:
            who = (f"the result of `{mv.tool}`" if mv.tool else
                   "a person" if mv.by == "person" else "the model")
            return f"{who} fires `{mv.event}`"
        return None


@dataclass(frozen=True, init=False)
class ConfirmedWrites(Monitored):
    """Each call of these writes (none named: every write tool) runs only after the
    customer's explicit yes to exactly that call, and each yes lets one call run.

    Proved when every such write is bound to the proposal the customer confirms
    (``ToolSpec(confirmed_by=...)``) and the yes can only come from the customer, in a
    state that waits for them on that proposal.
    """

    tools: tuple[str, ...]

    def __init__(self, *tools: str) -> None:
        object.__setattr__(self, "tools", tuple(tools))

    @property
    def title(self) -> str:
        which = _q(self.tools) + (" run" if len(self.tools) > 1 else " runs") \
            if self.tools else "every write runs"
        return f"{which} only after the customer's yes to exactly that call, one call per yes"

    def start(self) -> Hashable:
        return (None, None)  # (the proposal the customer is shown, the proposal confirmed)

    def _covers(self, mv: Move) -> bool:
        return mv.tool is not None and (mv.tool in self.tools if self.tools else mv.write)

    def allows(self, m: Hashable, mv: Move) -> bool:
        # The runtime refuses a bound call unless a yes to its proposal is held.
        _, confirmed = cast(tuple[str | None, str | None], m)
        return mv.tool is None or mv.bound is None or confirmed == mv.bound

    def bad(self, m: Hashable, mv: Move) -> str | None:
        if not self._covers(mv) or mv.bound is not None:
            return None
        _, confirmed = cast(tuple[str | None, str | None], m)
        if confirmed is None:
            return f"`{mv.tool}` runs, and the customer has not confirmed it"
        return (f"`{mv.tool}` runs on a yes it is not bound to (it has no confirmed_by: its "
                "arguments may differ from what the customer confirmed, and the yes is not "
                "used up)")

    def step(self, m: Hashable, mv: Move) -> Hashable:
        shown, confirmed = cast(tuple[str | None, str | None], m)
        if mv.tool is not None and mv.bound is not None:
            confirmed = None  # the call used the yes up
        if mv.confirms:
            confirmed = shown
        if mv.expires:
            confirmed = None
        if mv.shows is not None:  # a new proposal: a yes to an earlier one is dropped
            shown, confirmed = mv.shows or None, None
        return (shown, confirmed)


@dataclass(frozen=True)
class NothingAfter(Monitored):
    """Once ``tool`` has run (or ``event`` has fired), nothing more happens: no tool runs
    and no event fires (e.g. after a hand-over to a person)."""

    tool: str | None = None
    event: str | None = None

    def __post_init__(self) -> None:
        if (self.tool is None) == (self.event is None):
            raise TypeError("NothingAfter takes a tool or an event: NothingAfter(tool=...) "
                            "or NothingAfter(event=...)")

    @property
    def title(self) -> str:
        if self.tool is not None:
            return f"nothing happens after `{self.tool}` runs"
        return f"nothing happens after `{self.event}` fires"

    def start(self) -> Hashable:
        return False

    def bad(self, m: Hashable, mv: Move) -> str | None:
        if not m:
            return None
        what = f"`{mv.tool}` runs" if mv.tool is not None else f"`{mv.event}` fires"
        return f"{what} after `{self.tool or self.event}`"

    def step(self, m: Hashable, mv: Move) -> Hashable:
        return bool(m) or (self.tool is not None and mv.tool == self.tool) or \
            (self.event is not None and mv.event == self.event)
