"""Guards: conditions on workflow events, read by the machine, the model and auditors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fsm.definition.tools import Facts


@dataclass(frozen=True)
class Guard:
    """A condition on an event: ``fn(facts, payload) -> bool``.

    ``description`` is what auditors and the model read ("amount ≤ ₹500"), never the
    source code. ``establishes`` names facts that hold on every path through the
    guarded edge; the verifier reasons with them (e.g. ``"amount_above_limit"``).
    """

    description: str
    fn: Callable[[Facts, dict[str, Any]], bool]
    establishes: tuple[str, ...] = ()
    #: ``reason(facts, payload) -> text | None``: why the guard is not met, for this very
    #: payload, in words the model reads after the refusal ("order #W1 is delivered").
    reason: Callable[[Facts, dict[str, Any]], str | None] | None = None


def guard(description: str, *, establishes: tuple[str, ...] = ()) -> Callable[..., Guard]:
    """Decorator form of :class:`Guard`."""

    def wrap(fn: Callable[[Facts, dict[str, Any]], bool]) -> Guard:
        return Guard(description, fn, establishes)

    return wrap
