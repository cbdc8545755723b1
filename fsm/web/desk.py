"""The handover queue in the inbox: what its pages show, and taking and closing a run.

A signed-in approver takes a handed-over run (it is then shown as theirs to everyone) and
closes it with an outcome and a note, through the same ``Engine.take_handover`` and
``Engine.close_handover`` as ``fsm handovers``. Auditors read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fsm.definition.presentation import PLAIN
from fsm.errors import DefinitionChanged, HandoverRefused, InboxRefused, RunLocked
from fsm.records import OUTCOMES, Handover, RunState
from fsm.runtime.compaction import Compactor
from fsm.runtime.desk import resume_events
from fsm.runtime.engine import Engine
from fsm.store.base import Store
from fsm.store.desk import Queue
from fsm.store.people import Account
from fsm.store.roles import Desk, Handovers
from fsm.web.decisions import Workflows, iso, own_version
from fsm.web.forms import clip
from fsm.web.pages import Diagrams, Pager, age
from fsm.web.story import Line, story

#: What each outcome means, as the close form offers it.
OUTCOME_WORDS = {"resolved": "resolved outside fsm", "resumed": "resumed: the run continues",
                 "closed": "closed: nothing more is done"}
#: The reasons, as the queue's filter offers them.
CAUSE_WORDS = {
    "model_event": "the model could not go on", "transferred": "transferred by the model",
    "in_doubt": "in doubt after a write", "expired": "expired",
    "write_failed": "a write failed", "partial_write": "a write failed after another succeeded",
    "person": "a person's decision", "changed": "the approved request changed",
    "other": "other",
    "unwitnessed": "a claimed write the log does not witness",
    "unavailable": "the infrastructure failed too many tries",
}


@dataclass
class QueueRow:
    handover: Handover
    age: str
    handed: str


def queue(store: Desk, now: float, q: Queue, page: int) -> tuple[list[QueueRow], Pager]:
    """One page of the handover queue, newest first."""
    pager = Pager(page, store.count_handovers(q))
    found = store.handovers(q, limit=pager.size, offset=pager.offset)
    return [QueueRow(h, age(now - h.handed_at), iso(h.handed_at)) for h in found], pager


@dataclass
class HandoverPage:
    handover: Handover
    run: RunState
    age: str
    handed: str
    #: Events a person may resume the run with (none: it cannot be resumed).
    resume: list[str]
    story: list[Line] = field(default_factory=list)
    svg: str = ""
    #: Every handover of the run, oldest first.
    history: list[Handover] = field(default_factory=list)


def handover_page(store: Handovers, workflows: Workflows, diagrams: Diagrams, handover_id: str,
                  now: float) -> HandoverPage | None:
    row = store.handover(handover_id)
    if row is None:
        return None
    run = store.load_run(row.run_id)
    family = workflows.spec(store, run)
    spec = own_version(family, run) if family is not None else None
    events = store.events(run.run_id)
    resumable = resume_events(spec, run.state) if spec is not None and \
        run.status == "handed_over" else []
    return HandoverPage(
        handover=row, run=run, age=age(now - row.handed_at), handed=iso(row.handed_at),
        resume=resumable, story=story(store, run.run_id, events,
                                      spec.presentation if spec else PLAIN),
        svg=diagrams.svg(spec, run.run_id, events), history=store.run_handovers(run.run_id))


_ERRORS: dict[str, int] = {"note": 400, "outcome": 400, "event": 400, "person": 400}


def _may_act(account: Account, action: str, outcome: str) -> None:
    if account.role != "approver":
        raise InboxRefused("role", f"{account.name} is an {account.role}: auditors read, they "
                           "do not take or close runs", 403)
    if action not in ("take", "close"):
        raise InboxRefused("action", f"unknown action {clip(repr(action))} (allowed: take, "
                           "close)", 400)
    if action == "close" and outcome not in OUTCOMES:
        raise InboxRefused("outcome", f"unknown outcome {clip(repr(outcome))} (allowed: "
                           f"{', '.join(OUTCOMES)})", 400)


def act(store: Store, workflows: Workflows, account: Account, handover_id: str, action: str,
        outcome: str, note: str, event: str, *, clock: Callable[[], float]) -> RunState:
    """Take or close the handover as ``account``; refusals are :class:`InboxRefused`."""
    _may_act(account, action, outcome)
    row = store.handover(handover_id)
    if row is None:
        raise InboxRefused("missing", f"no handover {clip(repr(handover_id))}", 404)
    latest = store.run_handovers(row.run_id)[-1]
    if latest.handover_id != row.handover_id:
        raise InboxRefused("stale", "this handover is over: the run was handed over again "
                           "since; open its newest handover")
    run = store.load_run(row.run_id)
    spec = workflows.spec(store, run)
    if spec is None:
        raise InboxRefused("definition", f"{workflows.unloadable(run)}: nothing was changed")
    policy = workflows.policy(spec, run, store.events(run.run_id))
    engine = Engine(spec, store, policy, clock=clock, compactor=Compactor(),
                    hooks=workflows.hooks)
    try:
        if action == "take":
            return engine.take_handover(run.run_id, account.name, note=note or None)
        return engine.close_handover(run.run_id, account.name, outcome, note,
                                     event=event or None)
    except HandoverRefused as exc:
        raise InboxRefused(exc.code, f"{exc}", _ERRORS.get(exc.code, 409)) from None
    except RunLocked:
        raise InboxRefused("busy", "another change of this run is being recorded right now; "
                           "nothing was changed by you; reload the page") from None
    except DefinitionChanged as exc:
        raise InboxRefused("definition", str(exc)) from None
