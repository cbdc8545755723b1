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
        for name, ok, allowed in (
            ("lease_seconds", _seconds(self.lease_seconds), "a positive number of seconds"),
            ("step_timeout", self.step_timeout is None or _seconds(self.step_timeout),
             "a positive number of seconds or None"),
            ("result_cap", _whole(self.result_cap), "a positive whole number of characters"),
            ("max_repeats", self.max_repeats is None or _whole(self.max_repeats),
             "a whole number of 1 or more, or None"),
            ("owner", self.owner is None or (isinstance(self.owner, str) and self.owner != ""),
             "a non-empty string or None"),
        ):
            if not ok:
                raise ValueError(f"{name} must be {allowed}, not {getattr(self, name)!r}")


def _seconds(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
