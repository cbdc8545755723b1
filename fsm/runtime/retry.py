"""How a run that the infrastructure failed is tried again: backoff, and a bound."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Retry:
    """Tries of a run whose steps the infrastructure failed (see :class:`fsm.Unavailable`).

    The count is kept in the run (``RunState.unavailable``), so it holds across processes;
    a step that lands starts it again from zero.
    """

    #: Failed tries in a row after which the run is handed over to a person.
    tries: int = 5
    #: Seconds before the second try; each later wait doubles, up to ``most``.
    first: float = 1.0
    #: The longest wait between two tries, in seconds.
    most: float = 60.0

    def __post_init__(self) -> None:
        if self.tries < 1 or not 0 <= self.first <= self.most:
            raise ValueError(f"retry needs tries >= 1 and 0 <= first <= most, not {self}")

    def delay(self, tries: int) -> float:
        """Seconds to wait after ``tries`` failed tries in a row: exponential, less up to
        half at random, so that runs failed by one outage do not all come back at once."""
        base = min(self.most, self.first * 2.0 ** min(max(tries - 1, 0), 30))
        return base * random.uniform(0.5, 1.0)
