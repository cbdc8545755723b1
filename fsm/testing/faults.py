"""The fault injector: ``FSM_FAULT=<point>@<step>`` kills the process right there.

Crash tests set the variable, let the process die with SIGKILL at an exact place,
then resume the run in a new process and check the ledger and the log.
``<point>@<step>:stop`` freezes the process there instead (SIGSTOP), as a debugger or
a paused machine would, holding whatever it holds; SIGCONT lets it go on. Several
points are separated by commas; ``*`` for the step matches every step. The points are
listed in :mod:`fsm.observability.faults`.

The entry point (the ``fsm`` command) reads the variable once and scopes the injector
around the command: ``with fsm.observability.hooks.scope(from_environ(os.environ)): ...``.
The injector is an engine hook for the points of a step, and a
:class:`~fsm.observability.faults.FaultPoints` for those
:func:`~fsm.observability.faults.fault` names outside the engine.
"""

from __future__ import annotations

import os
import signal
import warnings
from collections.abc import Mapping

from fsm.errors import UsageError
from fsm.observability.faults import NAME, FaultPoints
from fsm.observability.hooks import (
    CommitInfo,
    PolicyCallInfo,
    ToolCallInfo,
    ToolResultInfo,
    adopt,
    in_scope,
)

__all__ = ["NAME", "FaultInjector", "from_environ", "install"]


class FaultInjector(FaultPoints):
    """Kills (or freezes) this process at the named points of the named steps."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        #: (point, step or "" / "*" for any, how) for each comma-separated item.
        self.points: list[tuple[str, str, str]] = []
        for item in spec.split(","):
            if not item.strip():
                continue
            name, _, at = item.strip().partition("@")
            at, _, how = at.partition(":")
            if how not in ("", "stop"):
                raise UsageError(f"{NAME}={spec!r}: {item!r} ends in {how!r}; allowed: "
                                 "POINT@STEP (SIGKILL) or POINT@STEP:stop (SIGSTOP)")
            self.points.append((name, at, how))
        self._names = frozenset(p[0] for p in self.points)

    def __repr__(self) -> str:
        return f"FaultInjector({self.spec!r})"

    def point(self, point: str, step: int) -> None:
        """Kill this process with SIGKILL (or stop it) if ``point`` at ``step`` is named."""
        if point not in self._names:
            return
        for name, at, how in self.points:
            if name == point and (at in ("", "*") or at == str(step)):
                os.kill(os.getpid(), signal.SIGSTOP if how == "stop" else signal.SIGKILL)

    def before_policy(self, call: PolicyCallInfo) -> None:
        self.point("before_policy", call.step)

    def before_tool(self, call: ToolCallInfo) -> None:
        if call.claimed:
            self.point("after_claim", call.step)

    def after_tool(self, result: ToolResultInfo) -> None:
        self.point("after_tool_before_commit", result.step)

    def after_commit(self, commit: CommitInfo) -> None:
        if not commit.initial:
            self.point("after_commit", commit.step)


def from_environ(environ: Mapping[str, str]) -> FaultInjector | None:
    """The injector ``FSM_FAULT`` in ``environ`` asks for, or ``None`` when it is unset."""
    spec = environ.get(NAME, "")
    return FaultInjector(spec) if spec.strip() else None


def install(injector: FaultInjector | None) -> None:
    """Deprecated: scope the injector where engines are made
    (``with fsm.observability.hooks.scope(injector): ...``). Makes ``injector`` the fault
    points in scope for the rest of this thread or task (``None``: none), in place of the
    one put there before."""
    warnings.warn("fsm.testing.faults.install is deprecated; scope the injector where "
                  "engines are made: with fsm.observability.hooks.scope(injector): ...",
                  DeprecationWarning, stacklevel=2)
    kept = [h for h in in_scope() if not isinstance(h, FaultInjector)]
    adopt([*kept, *([injector] if injector is not None else [])])
