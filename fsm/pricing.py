"""Model prices: tokens in, integer cost out.

Prices are per million tokens, stored as integer micro-units (1e-6 of the table's
currency, US dollars for the shipped table), so a cost is an exact integer::

    table = PriceTable.default().with_prices({"my-model": Price.per_million(0.50, 1.50)})
    table.cost("my-model", input_tokens=1200, output_tokens=300)   # -> 1050 micros

A dated snapshot (``gpt-4o-2024-08-06``) is priced like its base name. An unknown
model costs 0 and is reported once on the ``fsm.pricing`` logger. At the command line,
set ``FSM_PRICES`` to a JSON file ``{"model": {"input": 0.5, "output": 1.5}}`` (dollars
per million tokens) to add or override prices without code.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from fsm.errors import PriceError

log = logging.getLogger("fsm.pricing")

MILLION = 1_000_000
_SNAPSHOT = re.compile(r"^(?P<base>.+?)-\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Price:
    """What one million tokens cost, in micro-units."""

    #: Micro-units per million input (prompt) tokens.
    input_micros: int
    #: Micro-units per million output (completion) tokens.
    output_micros: int

    @classmethod
    def per_million(cls, input_price: float | str, output_price: float | str) -> Price:
        """A price from currency units per million tokens, e.g. ``(2.50, 10.00)``."""
        return cls(_micros(input_price), _micros(output_price))

    def cost(self, input_tokens: int, output_tokens: int) -> int:
        """Cost in micro-units, rounded up so that budgets err on the safe side."""
        total = input_tokens * self.input_micros + output_tokens * self.output_micros
        return -(-total // MILLION)


def _micros(value: float | str) -> int:
    micros = Decimal(str(value)) * MILLION
    if micros < 0 or micros != micros.to_integral_value():
        raise PriceError(f"price {value!r} must be a non-negative amount with at most 6 "
                         "decimal places (currency units per million tokens)")
    return int(micros)


#: US dollars per million tokens (input, output), from the providers' public price
#: lists. Prices change: override them with :meth:`PriceTable.with_prices` or FSM_PRICES.
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price.per_million("2.50", "10.00"),
    "gpt-4o-mini": Price.per_million("0.15", "0.60"),
    "gpt-4.1": Price.per_million("2.00", "8.00"),
    "gpt-4.1-mini": Price.per_million("0.40", "1.60"),
    "gpt-4.1-nano": Price.per_million("0.10", "0.40"),
    "gpt-5": Price.per_million("1.25", "10.00"),
    "gpt-5-mini": Price.per_million("0.25", "2.00"),
    "gpt-5-nano": Price.per_million("0.05", "0.40"),
    "o3": Price.per_million("2.00", "8.00"),
    "o4-mini": Price.per_million("1.10", "4.40"),
}


class PriceTable:
    """model name → :class:`Price`; unknown models cost 0 (reported once each)."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices: dict[str, Price] = dict(prices or {})
        self._warned: set[str] = set()

    @classmethod
    def default(cls, path: str | None = None) -> PriceTable:
        """The shipped prices, plus the JSON file ``path`` (``FSM_PRICES`` at the command
        line) if given."""
        table = cls(DEFAULT_PRICES)
        return table.with_prices(load_prices(path)) if path else table

    @classmethod
    def coerce(cls, value: PriceTable | Mapping[str, Any] | None,
               path: str | None = None) -> PriceTable:
        """Accept a table, a mapping of prices (merged over the defaults and the file
        ``path``), or ``None``."""
        if isinstance(value, PriceTable):
            return value
        table = cls.default(path)
        return table.with_prices(parse_prices(value)) if value else table

    def with_prices(self, prices: Mapping[str, Price]) -> PriceTable:
        """A copy with ``prices`` added or replaced."""
        return PriceTable({**self.prices, **prices})

    def lookup(self, model: str) -> Price | None:
        if model in self.prices:
            return self.prices[model]
        match = _SNAPSHOT.match(model)
        return self.prices.get(match.group("base")) if match else None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> int:
        """Integer micro-units for one call; 0 for a model without a price."""
        price = self.lookup(model)
        if price is None:
            if model not in self._warned:
                self._warned.add(model)
                log.warning("no price for model %r: its calls are counted as costing 0; "
                            "add it with prices= or FSM_PRICES (known: %s)",
                            model, ", ".join(sorted(self.prices)) or "none")
            return 0
        return price.cost(input_tokens, output_tokens)


def parse_prices(raw: Mapping[str, Any]) -> dict[str, Price]:
    """``{"model": Price | {"input": 0.5, "output": 1.5} | (0.5, 1.5)}`` → prices."""
    out: dict[str, Price] = {}
    for model, value in raw.items():
        if isinstance(value, Price):
            out[model] = value
        elif isinstance(value, Mapping) and {"input", "output"} <= set(value):
            out[model] = Price.per_million(value["input"], value["output"])
        elif isinstance(value, list | tuple) and len(value) == 2:
            out[model] = Price.per_million(value[0], value[1])
        else:
            raise PriceError(f"price of model {model!r} must be {{'input': X, 'output': Y}} "
                             f"in currency units per million tokens, got {value!r}")
    return out


def load_prices(path: str | os.PathLike[str]) -> dict[str, Price]:
    """Read a JSON price file ``{"model": {"input": X, "output": Y}}``."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PriceError(f"cannot read price file {str(path)!r}: {exc}") from exc
    if not isinstance(raw, dict):
        raise PriceError(f"price file {str(path)!r} must hold a JSON object of models")
    return parse_prices(raw)
