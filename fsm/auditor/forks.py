"""The link of a forked run to its parent, as ``fsm audit`` checks it.

A fork's start event records its parent, the step it was forked at, and the seq and
hash of the parent's last event of that step (see :mod:`fsm.runtime.forking`). The audit
checks that the parent's log still holds that event with that hash, and that the chain
up to it is intact; the parent's log up to there is then the first part of the fork's
history, which the counts and the tables are checked over.

A prune never deletes a run while a fork of it is not pruned (:mod:`fsm.store.prune`),
but a parent may have gone before that rule (or while the fork was being made). Its
tombstone keeps only the head of its whole log and the number of its events, so:

- a fork made at the parent's very last event is checked against the tombstone's head;
- a link to an event the tombstone says the parent never had, or to the last event with
  another hash, is broken (a problem);
- any other link cannot be verified: that is a warning, not a failure, and the fork's own
  part of the log is audited alone (its steps and cost from the counts its start event
  recorded at the fork, when it recorded them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from fsm.errors import RunNotFound
from fsm.records import Event, utc, verify_chain
from fsm.runtime.recording import ANSWERS
from fsm.store.roles import Desk, RunReads

__all__ = ["Link", "lineage"]

#: ``verified``: against the parent's log; ``tombstone``: against the head a pruned
#: parent's tombstone keeps; ``unverifiable``: the parent (or an ancestor) was pruned and
#: its tombstone cannot tell; ``broken``: the link does not hold (see ``problems``).
LinkState = Literal["verified", "tombstone", "unverifiable", "broken"]


@dataclass
class Link:
    """What the audit found of a fork's link to its parent (``origin`` ``None``: the run
    is no fork)."""

    #: The fork's start event's record of its parent: run_id, step, seq, hash.
    origin: dict[str, Any] | None = None
    state: LinkState = "verified"
    #: The parents' events the fork's history begins with, oldest ancestor first.
    before: list[Event] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: What could not be checked (a pruned parent), wrong with nothing found.
    warnings: list[str] = field(default_factory=list)
    #: When the parent was pruned, if it was.
    parent_pruned_at: float | None = None

    @property
    def partial(self) -> bool:
        """The parents' part of the history is gone (an ancestor was pruned): the counts
        and the first state cannot be checked over the whole history."""
        return self.origin is not None and self.state in ("tombstone", "unverifiable")

    def as_json(self) -> dict[str, Any] | None:
        if self.origin is None:
            return None
        return {**self.origin, "link": self.state, "parent_pruned_at": self.parent_pruned_at}


def _origin(events: list[Event]) -> dict[str, Any] | None:
    if not events or events[0].kind != "start":
        return None
    found = events[0].detail.get("forked_from")
    return found if isinstance(found, dict) else None


class Lineage(RunReads, Desk, Protocol):
    """What a fork's link is checked against: the parent's log, or its tombstone."""


def lineage(store: Lineage, events: list[Event], depth: int = 0) -> Link:
    """The link of the run of ``events`` to its parent, checked, and the parents' events
    its history begins with (none for a run that is no fork)."""
    origin = _origin(events)
    if origin is None:
        return Link()
    link = Link(origin=dict(origin))
    parent, step = str(origin.get("run_id")), origin.get("step")
    seq, head = origin.get("seq"), origin.get("hash")
    where = f"event seq 0: forked from run {parent!r} at step {step}"
    if depth > 100:
        return _broken(link, f"{where}: forks nest more than 100 deep")
    try:
        theirs = store.events(parent)
    except RunNotFound:
        return _pruned(store, link, parent, seq, head, where)
    if not isinstance(seq, int) or not 0 <= seq < len(theirs):
        return _broken(link, f"{where}: the parent's log has no event seq {seq}")
    prefix = theirs[:seq + 1]
    broken = verify_chain(prefix)
    if broken is not None:
        return _broken(link, f"{where}: the parent's log is broken: {broken}")
    if prefix[-1].hash != head:
        return _broken(link, f"{where}: the parent's event seq {seq} has hash "
                             f"{prefix[-1].hash}, the fork recorded {head} (the parent's log "
                             "was changed)")
    after = theirs[seq + 1] if seq + 1 < len(theirs) else None
    if prefix[-1].step != step or (after is not None and after.step == step
                                   and after.kind not in ANSWERS):
        return _broken(link, f"{where}: the parent's event seq {seq} is not its last of "
                             f"step {step}")
    up = lineage(store, theirs, depth + 1)
    link.before = up.before + prefix[1 if up.origin is not None else 0:]
    link.problems = up.problems
    link.warnings = [f"its parent {parent!r}: {w}" for w in up.warnings]
    if up.origin is not None:
        link.state = up.state  # the lineage is as good as its weakest link
    return link


def _broken(link: Link, problem: str) -> Link:
    link.state = "broken"
    link.problems.append(problem)
    return link


def _pruned(store: Desk, link: Link, parent: str, seq: Any, head: Any, where: str) -> Link:
    """The link of a fork whose parent the store holds only a tombstone of (or nothing)."""
    stone = store.tombstone(parent)
    if stone is None:
        return _broken(link, f"{where}, which the store does not have (no run and no "
                             "tombstone of one)")
    link.parent_pruned_at = stone.pruned_at
    when = f"was pruned on {utc(stone.pruned_at)} by {stone.pruned_by}"
    if not isinstance(seq, int) or not 0 <= seq < stone.log_count:
        return _broken(link, f"{where}: the parent {when}, and its tombstone records "
                             f"{stone.log_count} events, so no event seq {seq}")
    if seq == stone.log_count - 1:
        if head != stone.head:
            return _broken(link, f"{where}: the parent {when}; its tombstone's head is "
                                 f"{stone.head}, the fork recorded {head} at its last event")
        link.state = "tombstone"
        return link
    link.state = "unverifiable"
    link.warnings.append(f"parent {parent} {when}; the link to it cannot be verified (its "
                         f"tombstone keeps the head of its whole log, seq "
                         f"{stone.log_count - 1}, not of seq {seq}): only this run's own "
                         "part of the log is audited")
    return link
