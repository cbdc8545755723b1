"""How a workflow's requests are shown to people, in the workflow's own words.

The framework knows no workflow's vocabulary: it does not know that an argument is
an amount of money, or in which currency. A workflow that wants amounts shown (and
release limits checked) says so with a :class:`Presentation`::

    Presentation(
        summary=lambda tool, args, facts: f"refund {rupees(args['amount_paise'])}",
        amount=lambda tool, args: args.get("amount_paise"),
        money=rupees,
    )
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fsm.records import canonical

#: ``(tool or None, arguments) -> value``: what a paused run asks, in a workflow's terms.
Reader = Callable[[str | None, dict[str, Any]], Any]
#: ``(tool or None, arguments, run facts) -> one line``.
Summary = Callable[[str | None, dict[str, Any], Mapping[str, Any]], str]


def waits_for(tool: str | None, events: Sequence[str] = ()) -> str:
    """What a pause waits for, as people read it: the tool a person must approve, or the
    events a person may fire (``approved / declined / expired``)."""
    return tool or " / ".join(events) or "decision"


def _plain_summary(tool: str | None, args: dict[str, Any],
                   facts: Mapping[str, Any] | None = None, events: Sequence[str] = ()) -> str:
    what = waits_for(tool, events)
    return f"{what} {canonical(args)}" if args else what


def _no_amount(tool: str | None, args: dict[str, Any]) -> int | None:
    return None


@dataclass(frozen=True)
class Presentation:
    """What people read about a pending request."""

    #: ``(tool, args, facts) -> one line`` (for a waiting state, ``tool`` is ``None`` and
    #: ``args`` is what is asked). Default: the tool and its arguments as JSON.
    summary: Summary = _plain_summary
    #: ``(tool, args) -> amount in minor units, or None``: what release limits compare.
    amount: Reader = _no_amount
    #: ``minor units -> text``, e.g. ``"₹1,800"``. Default: the plain integer.
    money: Callable[[int], str] = str
    #: The argument that holds the amount, which the inbox offers to lower where the
    #: workflow's ``amend`` hook allows it (e.g. ``"amount_paise"``).
    amount_field: str | None = None

    def describe(self, tool: str | None, args: dict[str, Any],
                 facts: Mapping[str, Any] | None = None, events: Sequence[str] = ()) -> str:
        """The request's summary (``events``: those a waiting state's person may fire);
        without a summary function, or when it raises, the plain one: what the pause
        waits for and the arguments as JSON."""
        if self.summary is not _plain_summary:
            try:
                return str(self.summary(tool, args, facts or {}))
            except Exception:
                pass
        return _plain_summary(tool, args, events=events)

    def amount_of(self, tool: str | None, args: dict[str, Any]) -> int | None:
        """The request's amount in minor units, or ``None`` when it has none."""
        try:
            value = self.amount(tool, args)
        except Exception:
            return None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def money_text(self, tool: str | None, args: dict[str, Any]) -> str:
        """The request's amount as text, or ``""`` when it has none."""
        amount = self.amount_of(tool, args)
        return "" if amount is None else self.money(amount)


PLAIN = Presentation()
