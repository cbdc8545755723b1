"""How an engine drives runs: one frozen value, given when the engine is made.

``Engine(spec, store, policy, config=EngineConfig(lease_seconds=10, owner="worker-1"))``.
Nothing of it changes afterwards; an engine that should drive differently is a new
engine. (Setting ``lease_seconds``, ``step_timeout``, ``owner``, ``budgets`` or ``retry``
on an engine still works for one release, with a :class:`DeprecationWarning`.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fsm.records import Budgets
from fsm.runtime.retry import Retry

__all__ = ["EngineConfig"]


@dataclass(frozen=True)
class EngineConfig:
    """What an engine drives its runs with."""

    #: The budgets a run gets when its start names none.
    budgets: Budgets = field(default_factory=Budgets)
    #: Characters of a tool result the model reads; a longer one is kept whole as an
    #: artifact and the model reads an excerpt.
    result_cap: int = 8000
    #: The same call repeated this many times in one state is refused (``None``: never).
    max_repeats: int | None = 3
    #: How runs the infrastructure failed are tried again, and when they are handed over.
    retry: Retry = field(default_factory=Retry)
    #: Seconds a run's lease lasts without a heartbeat (see :mod:`fsm.runtime.leases`).
    lease_seconds: float = 30.0
    #: Seconds a step may last before the engine gives the run's lease back instead of
    #: renewing it (``None``: no limit): a run stuck on something that never answers is
    #: left to another process, and the stuck step can no longer commit or write.
    step_timeout: float | None = None
    #: The lease owner the engine drives runs as (``None``: a new one of this process).
    owner: str | None = None

    def __post_init__(self) -> None:
        if not _positive(self.lease_seconds):
            raise ValueError(f"lease_seconds must be a positive number of seconds, not "
                             f"{self.lease_seconds!r}")
        if self.step_timeout is not None and not _positive(self.step_timeout):
            raise ValueError(f"step_timeout must be a positive number of seconds or None, "
                             f"not {self.step_timeout!r}")
        if isinstance(self.result_cap, bool) or not isinstance(self.result_cap, int) \
                or self.result_cap < 1:
            raise ValueError(f"result_cap must be a positive whole number of characters, "
                             f"not {self.result_cap!r}")
        if self.max_repeats is not None and (isinstance(self.max_repeats, bool) or
                                             not isinstance(self.max_repeats, int)
                                             or self.max_repeats < 1):
            raise ValueError(f"max_repeats must be a whole number of 1 or more, or None, "
                             f"not {self.max_repeats!r}")
        if self.owner is not None and (not isinstance(self.owner, str) or not self.owner):
            raise ValueError(f"owner must be a non-empty string or None, not {self.owner!r}")


def _positive(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)
