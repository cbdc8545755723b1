"""``fsm shadow --workflow retail --live``: each recorded conversation runs on a fresh
copy of the retail database, and its final database is compared with τ²-bench's expected
one for its task.

The copy is :class:`~workflows.retail.memory.MemoryRetail`, fresh from the pinned data,
and the desk is :func:`~workflows.retail.workflow.build` on it: the calls the gate admits
run through the desk's own tools. The expected database is the one ``bench/taubench.py``
compares with: the task's reference actions applied to a fresh database by the same tool
functions (as :func:`~workflows.retail.replay.expected_db` does), the actions being those
of τ²-bench's own action checks in the record, else its task's (:func:`expected_of`).
Both are compared as stored, money in cents, by τ²-bench's hash; what differs is listed
field by field.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from fsm.definition.spec import WorkflowSpec
from fsm.sandbox.shadow_live import LiveResult
from fsm.sandbox.shadow_read import Recorded
from workflows.retail import data
from workflows.retail.base import RetailDatabase
from workflows.retail.memory import MemoryRetail
from workflows.retail.replay import apply, reference
from workflows.retail.workflow import build

__all__ = ["LIVE", "RetailCopy", "RetailLive", "differences", "expected_of"]

#: At most this many differences are listed per conversation.
MAX_DIFFERENCES = 20


@lru_cache(maxsize=1)
def _tasks() -> dict[str, dict[str, Any]]:
    return {str(t["id"]): t for t in data.tasks()}


@lru_cache(maxsize=256)
def _applied(actions: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """The hash and rows of a fresh database with ``actions`` (JSON) applied."""
    db = MemoryRetail()
    apply(db, json.loads(actions))
    return db.hash(), db.rows()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _diff(path: str, final: Any, wanted: Any, out: list[str]) -> None:
    if isinstance(final, dict) and isinstance(wanted, dict):
        for key in sorted({*final, *wanted}, key=str):
            _diff(f"{path}.{key}", final.get(key, "(absent)"), wanted.get(key, "(absent)"),
                  out)
    elif isinstance(final, list) and isinstance(wanted, list) and len(final) == len(wanted):
        for i, (f, w) in enumerate(zip(final, wanted, strict=True)):
            _diff(f"{path}[{i}]", f, w, out)
    elif final != wanted:
        out.append(f"{path}: {_short(final)}, expected {_short(wanted)}")


def differences(final: dict[str, dict[str, Any]], wanted: dict[str, dict[str, Any]]
                ) -> list[str]:
    """What differs between two databases' documents (money in cents), one line each:
    ``orders['#W1'].status: 'cancelled', expected 'pending'``."""
    out: list[str] = []
    for table in sorted({*final, *wanted}):
        mine, theirs = final.get(table, {}), wanted.get(table, {})
        for key in sorted({*mine, *theirs}):
            _diff(f"{table}[{key!r}]", mine.get(key, "(absent)"), theirs.get(key, "(absent)"),
                  out)
    return out


def expected_of(rec: Recorded) -> tuple[list[dict[str, Any]] | None, str]:
    """The reference actions whose database ``rec``'s final one is compared with, and what
    they are.

    They are the actions of τ²-bench's own action checks when the record has them: what
    the conversation was scored against (some results files label a simulation with
    another task than the one it was scored against, and a task's version may differ from
    the pinned one); else the reference actions of the simulation's task."""
    checked = [dict(a) for a in rec.checked_actions]
    if not checked:
        task = _tasks().get(str(rec.task_id))
        if task is None:
            return None, f"no τ²-bench retail task {rec.task_id!r} and no action checks"
        return reference(task), f"the reference actions of task {rec.task_id}"
    ids = {a["action_id"] for a in checked}
    owners = sorted({tid for tid, t in _tasks().items() for a in reference(t)
                     if a.get("action_id") in ids}, key=int)
    what = f"the {len(checked)} reference actions of τ²-bench's own action checks"
    if owners != [rec.task_id]:
        what += (f" (those of task {', '.join(owners) or 'none pinned'}; the simulation "
                 f"says task {rec.task_id})")
    extra = sorted(i for i in ids if all(a.get("action_id") != i for t in owners
                                         for a in reference(_tasks()[t])))
    if extra:
        what += f"; {', '.join(str(i) for i in extra)} not in the pinned task"
    return checked, what


class RetailCopy:
    """A fresh retail database and the desk on it, for one conversation."""

    def __init__(self, rec: Recorded) -> None:
        self.actions, self.expected = expected_of(rec)
        self.db: RetailDatabase = MemoryRetail()
        self.spec: WorkflowSpec = build(self.db)

    def compare(self) -> LiveResult:
        writes = [{"tool": w["tool"], "args": w["args"]} for w in self.db.writes()]
        if self.actions is None:
            return LiveResult(None, f"{self.expected}: nothing to compare with",
                              writes_run=writes)
        what = f"τ²-bench's expected database: {self.expected}, applied to a fresh one"
        wanted_hash, wanted = _applied(json.dumps(self.actions, sort_keys=True))
        if self.db.hash() == wanted_hash:
            return LiveResult(True, what, writes_run=writes)
        diff = differences(self.db.rows(), wanted)
        if len(diff) > MAX_DIFFERENCES:
            diff = [*diff[:MAX_DIFFERENCES], f"... and {len(diff) - MAX_DIFFERENCES} more"]
        return LiveResult(False, what, diff, writes)


class RetailLive:
    """The retail desk's live environment for ``fsm shadow --live``."""

    summary = ("Each conversation ran on a fresh copy of the retail database, through the "
               "desk's own tools; its final database is compared, in cents, with τ²-bench's "
               "expected one for its task (the task's reference actions applied to a fresh "
               "database by the same tool functions; the actions are those of τ²-bench's "
               "own action checks in the record, when it has them).")

    def fresh(self, rec: Recorded) -> RetailCopy:
        return RetailCopy(rec)


#: What ``fsm shadow --workflow retail --live`` runs on.
LIVE = RetailLive()
