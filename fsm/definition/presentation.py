"""How a workflow's requests are shown to people, in the workflow's own words.

The framework knows no workflow's vocabulary: it does not know that an argument is
an amount of money, or in which currency. A workflow that wants amounts shown (and
release limits checked) says so with a :class:`Presentation`::

    Presentation(
        summary=lambda tool, args, facts: f"refund {rupees(args['amount_paise'])}",
        amount=lambda tool, args: args.get("amount_paise"),
        currency=Currency(symbol="₹", digits=2, minor="paise", major="rupees"),
        subject=lambda tool, args, facts: f"order {facts['order']['order_id']}",
    )

With a ``currency``, people type amounts in major units (``"1,200"`` is ₹1,200) wherever
they give one: a lower amount on the approval page, ``fsm approve --set``, a release
limit. ``subject`` names what a request is about, so that the inbox can show the other
requests about the same thing (a second refund of the same order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fsm.definition.money import WHOLE, Currency
from fsm.records import canonical

#: ``(tool or None, arguments) -> value``: what a paused run asks, in a workflow's terms.
Reader = Callable[[str | None, dict[str, Any]], Any]
#: ``(tool or None, arguments, run facts) -> one line``.
Summary = Callable[[str | None, dict[str, Any], Mapping[str, Any]], str]
#: ``(tool or None, arguments, run facts) -> what the request is about, or None``.
Subject = Callable[[str | None, dict[str, Any], Mapping[str, Any]], str | None]


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


def _no_subject(tool: str | None, args: dict[str, Any],
                facts: Mapping[str, Any]) -> str | None:
    return None


@dataclass(frozen=True)
class Presentation:
    """What people read about a pending request."""

    #: ``(tool, args, facts) -> one line`` (for a waiting state, ``tool`` is ``None`` and
    #: ``args`` is what is asked). Default: the tool and its arguments as JSON.
    summary: Summary = _plain_summary
    #: ``(tool, args) -> amount in minor units, or None``: what release limits compare.
    amount: Reader = _no_amount
    #: ``minor units -> text``, e.g. ``"₹1,800"``. Default: the currency's own format
    #: (without a currency, the plain integer).
    money: Callable[[int], str] | None = None
    #: The argument that holds the amount, which the inbox offers to lower where the
    #: workflow's ``amend`` hook allows it (e.g. ``"amount_paise"``).
    amount_field: str | None = None
    #: The currency of the amounts: people type and read them in its major units.
    #: ``None``: amounts are whole numbers, typed as they are kept.
    currency: Currency | None = None
    #: ``(tool, args, facts) -> what the request is about`` (e.g. ``"order A-1002"``), or
    #: ``None``: requests about the same subject are shown beside one another.
    subject: Subject = _no_subject
    #: write tool → what its call did, in the past tense (``{"refund_item": "refunded"}``),
    #: for the lines that tell of earlier requests; default ``"paid"``.
    written: Mapping[str, str] = field(default_factory=dict)

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

    def probe(self, tool: str | None, args: dict[str, Any], facts: Mapping[str, Any]) -> None:
        """Call the workflow's functions on a request as people will read it, letting what
        they raise through: the runtime calls this when a run starts to wait, so that a
        bug in them fails the run instead of hiding its amount (and release limit)."""
        if self.summary is not _plain_summary:
            str(self.summary(tool, args, facts))
        value = self.amount(tool, args)
        if isinstance(value, int) and not isinstance(value, bool):
            self.show_money(value)

    @property
    def reads_amounts(self) -> bool:
        """The workflow says how to read a request's amount (so release limits apply)."""
        return self.amount is not _no_amount

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
        return "" if amount is None else self.show_money(amount)

    @property
    def unit(self) -> Currency:
        """The currency amounts are typed in (whole numbers when the workflow names none)."""
        return self.currency or WHOLE

    def show_money(self, minor: int) -> str:
        """An amount in minor units as people read it (``120000`` → ``"₹1,200"``)."""
        if self.money is not None:
            return str(self.money(minor))
        return self.unit.format(minor) if self.currency else str(minor)

    def parse_money(self, text: str, what: str = "the amount") -> int:
        """The minor units a person's ``text`` means, in this workflow's currency
        (``"1,200"`` → 120000 for ₹); :class:`~fsm.errors.AmountError` names ``what`` and
        the accepted form when ``text`` is not exactly one amount."""
        return self.unit.parse(text, what)

    def subject_of(self, tool: str | None, args: dict[str, Any],
                   facts: Mapping[str, Any] | None = None) -> str | None:
        """What the request is about, or ``None`` (also when the hook raises)."""
        try:
            found = self.subject(tool, args, facts or {})
        except Exception:
            return None
        return found.strip() or None if isinstance(found, str) else None

    def written_verb(self, tool: str) -> str:
        """What a done call of ``tool`` did, in the past tense."""
        return self.written.get(tool, "paid")


PLAIN = Presentation()
