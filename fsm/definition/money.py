"""Money as people write it, and as the framework keeps it (integer minor units).

A workflow says which currency its amounts are in with a :class:`Currency` in its
:class:`~fsm.definition.presentation.Presentation`. People then read and type amounts in major
units, as they would on a price tag: ``"1,200"`` or ``"₹1,200.50"``; the framework keeps
and compares integers of the minor unit (120000 and 120050 paise)::

    RUPEES = Currency(symbol="₹", digits=2, minor="paise", major="rupees")
    RUPEES.parse("1,200")      # 120000
    RUPEES.format(120050)      # "₹1,200.50"

Anything that is not exactly one amount is refused with :class:`~fsm.errors.AmountError`,
whose message names the accepted form: a sign, an exponent, a second decimal point, more
decimals than the currency has, or another currency's symbol.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from fsm.errors import AmountError

#: Digits alone, or grouped by commas in thousands (``1,200``, ``1,200,000``) or in the
#: Indian way, lakhs and crores (``12,00,000``, ``1,20,00,000``). Any other grouping
#: (``12,00``, ``1,200,00``) is refused: it could mean an amount a hundred times off.
_WHOLE = r"(?:\d{1,3}(?:,\d{3})+|\d{1,2}(?:,\d{2})+,\d{3}|\d+)"
#: The most digits an amount may have: what a 64-bit integer of minor units holds.
MAX_DIGITS = 18


def _shown(text: str, size: int = 40) -> str:
    return repr(text if len(text) <= size else text[:size] + "…")


@dataclass(frozen=True)
class Currency:
    """The currency of a workflow's amounts."""

    #: What amounts are written with, e.g. ``"₹"`` (empty: none).
    symbol: str = ""
    #: Digits of the minor unit: 2 for paise and cents, 0 for a currency without one.
    digits: int = 2
    #: The minor unit's name, e.g. ``"paise"``, ``"cents"``.
    minor: str = "minor units"
    #: The major unit's name, e.g. ``"rupees"`` (empty: the symbol stands for it).
    major: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.digits <= 6:
            raise ValueError(f"a currency has 0 to 6 minor-unit digits, not {self.digits}")

    @property
    def unit(self) -> str:
        """How the major unit is named in help texts: ``"₹ (rupees)"``."""
        if self.symbol and self.major:
            return f"{self.symbol} ({self.major})"
        return self.symbol or self.major or "whole units"

    def format(self, minor: int) -> str:
        """``120050`` → ``"₹1,200.50"``; whole amounts have no decimals (``"₹1,200"``)."""
        sign = "-" if minor < 0 else ""
        whole, rest = divmod(abs(minor), 10 ** self.digits)
        text = f"{whole:,}"
        if rest:
            text += f".{rest:0{self.digits}d}"
        return f"{sign}{self.symbol}{text}"

    def accepted(self) -> str:
        """The accepted form, for messages and help: what to type and an example."""
        decimals = (f", with at most {self.digits} decimal"
                    f"{'s' if self.digits > 1 else ''}" if self.digits else ", no decimals")
        examples = "1,200" + (f" or 1200.{'5'.ljust(self.digits, '0')}" if self.digits
                              else " or 1200")
        symbol = f" (the {self.symbol} may be written before it)" if self.symbol else ""
        return (f"one amount in {self.unit}, e.g. {examples}{decimals}{symbol}; "
                "no sign, no exponent")

    def parse(self, text: str, what: str = "the amount") -> int:
        """The minor units ``text`` means (``"1,200.5"`` → 120050 for two digits), or
        :class:`~fsm.errors.AmountError` naming ``what`` and the accepted form."""
        body = text.strip()
        if self.symbol and body.startswith(self.symbol):
            body = body[len(self.symbol):].lstrip()
        other = sorted({c for c in body if unicodedata.category(c) == "Sc"})
        if other:
            raise AmountError(f"{what} is in {self.unit}, not in another currency "
                              f"({''.join(other)}): give {self.accepted()}; not "
                              f"{_shown(text)}")
        digits = self.digits
        pattern = _WHOLE + (r"(?:\.(\d+))?" if digits else "")
        match = re.fullmatch(pattern, body, flags=re.ASCII)
        if match is None:
            grouped = re.fullmatch(r"[\d,]*\d,\d+(?:\.\d*)?", body, flags=re.ASCII)
            hint = (" (commas group thousands, 1,200,000, or lakhs, 12,00,000)"
                    if grouped else "")
            raise AmountError(f"{what} must be {self.accepted()}{hint}; not {_shown(text)}")
        whole = body.split(".")[0].replace(",", "")
        fraction = match.group(1) if digits else None
        if fraction is not None and len(fraction) > digits:
            raise AmountError(f"{what} has {len(fraction)} decimals, but amounts in "
                              f"{self.unit} have at most {digits}: give {self.accepted()}; "
                              f"not {_shown(text)}")
        if len(whole.lstrip("0")) + digits > MAX_DIGITS:
            raise AmountError(f"{what} is too large (at most {MAX_DIGITS - digits} digits "
                              f"before the decimal point); not {_shown(text)}")
        return int(whole) * 10 ** digits + int((fraction or "").ljust(digits, "0") or "0")


#: Amounts of a workflow that names no currency: whole numbers, as typed.
WHOLE = Currency(symbol="", digits=0, minor="units", major="")
