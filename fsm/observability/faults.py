"""Named fault points: places where a crash test may kill or freeze this process.

The engine's points are its hooks (:class:`~fsm.observability.hooks.Hooks`);
:func:`fault` names the points outside the engine (a lock a store or a workflow waits
on) and asks each :class:`FaultPoints` hook in scope
(:func:`fsm.observability.hooks.scope`) whether to act there::

    before_policy             the policy is about to be asked (hook: before_policy)
    after_claim               a write's key is claimed, the tool not called (before_tool)
    after_tool_before_commit  the tool ran, its result is not committed (after_tool)
    after_commit              a step's commit landed (after_commit)
    migration_locked, sweep_locked, shop_schema_locked   (step 0) a lock is held

The injector crash tests use, :class:`fsm.testing.faults.FaultInjector`, reads
``FSM_FAULT``; this module knows nothing of it, so the store and the workflows can
name their points from down here.
"""

from __future__ import annotations

from fsm.observability.hooks import Hooks, in_scope

__all__ = ["NAME", "FaultPoints", "fault"]

#: The environment variable that names the points where a crash test's injector acts
#: (read by :func:`fsm.testing.faults.from_environ`).
NAME = "FSM_FAULT"


class FaultPoints(Hooks):
    """Hooks that are also asked at the fault points outside the engine: override
    :meth:`point`."""

    def point(self, point: str, step: int) -> None:
        """The process is at fault point ``point`` of step ``step``; a no-op here."""


def fault(point: str, step: int) -> None:
    """A fault point outside the engine (a lock a store or a workflow holds): each
    :class:`FaultPoints` hook in scope (:func:`fsm.observability.hooks.scope`) is told
    ``point`` at ``step`` (the injector crash tests use kills this process there)."""
    for hook in in_scope():
        if isinstance(hook, FaultPoints):
            hook.point(point, step)
