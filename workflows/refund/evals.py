"""Predicates over the refund workflow's resources, for evaluation suites (``fsm eval``).

Each is ``fn(resources, run) -> None | str``: ``None`` when it holds, else why not.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def paid_at_most_once(resources: Any, run: Any) -> str | None:
    """No item of the shop was refunded twice."""
    paid = Counter(row["item_id"] for row in resources.get("shop").ledger())
    twice = sorted(item for item, n in paid.items() if n > 1)
    return f"refunded more than once: {', '.join(twice)}" if twice else None


def nothing_paid(resources: Any, run: Any) -> str | None:
    """The shop's ledger is empty: no money moved."""
    rows = resources.get("shop").ledger()
    return f"{len(rows)} refunds were paid" if rows else None
