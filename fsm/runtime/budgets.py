"""Raising a run's budgets: an operator's decision, checked here, applied by the engine."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from fsm.errors import InvalidRunState, RunError, validation_summary
from fsm.records import Budgets, RunState

#: Budget fields an operator may raise, with what the run has used of each.
_USED = {
    "max_steps": lambda r: r.used.steps,
    "max_cost_micros": lambda r: r.used.cost_micros,
    "max_tokens": lambda r: r.used.tokens,
    "max_active_seconds": lambda r: r.used.active_seconds,
}


def raised_budgets(run: RunState, limits: dict[str, Any],
                   by: str) -> tuple[Budgets, dict[str, list[Any]]]:
    """The run's budgets with ``limits`` applied, and ``{field: [old, new]}``.

    Refused: an unknown field, an empty ``by``, a run that cannot run again, and a limit
    that is not above what the run has already used (it would stop at once).
    """
    if not by:
        raise RunError(f"run {run.run_id!r}: raising a budget needs the name of who does it",
                       run_id=run.run_id)
    if run.status in ("done", "failed", "handed_over"):
        raise InvalidRunState(
            f"run {run.run_id!r} has finished ({run.status}); its budgets cannot be raised",
            run_id=run.run_id, state=run.state)
    if run.status == "awaiting_approval":
        # A new version of the run would make the approval it waits for stale.
        raise InvalidRunState(
            f"run {run.run_id!r} is waiting for a person; raise its budgets after the "
            "decision", run_id=run.run_id, state=run.state)
    unknown = sorted(set(limits) - set(_USED))
    if unknown or not limits:
        raise RunError(f"run {run.run_id!r}: unknown budget(s) {', '.join(unknown) or 'none'} "
                       f"(allowed: {', '.join(_USED)})", run_id=run.run_id)
    current = run.budgets.model_dump()
    changes: dict[str, list[Any]] = {}
    for name, limit in sorted(limits.items()):
        used = _USED[name](run)
        if limit <= used:
            raise RunError(
                f"run {run.run_id!r}: {name} {limit:g} is not above what the run has used "
                f"({used:g}); give a larger limit", run_id=run.run_id)
        changes[name] = [current[name], limit]
    try:
        budgets = Budgets.model_validate({**current, **limits})
    except ValidationError as exc:
        raise RunError(f"run {run.run_id!r}: {validation_summary(exc, 'budgets')}",
                       run_id=run.run_id) from None
    return budgets, changes
