"""Approvals of a large refund, with an injected clock: expiry, and every decision that
must be refused — each refused with its own error, nothing paid, nothing logged."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fsm import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalRefused,
    ApprovalStale,
    Engine,
    NothingPending,
    SQLiteStore,
)
from fsm.auditor.audit import audit
from fsm.records import StepCommit
from fsm.runtime import review
from workflows.refund import Shop, build, clerk

TTL = 72 * 3600
LARGE = "Order A-1002: my headphones stopped working, I want my money back"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Desk:
    """One process's view of the database: its own store, shop and engine."""

    store: SQLiteStore
    shop: Shop
    engine: Engine


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "runs.db")


@pytest.fixture
def clock() -> Clock:
    return Clock()


def desk(db: str, clock: Clock) -> Desk:
    store, shop = SQLiteStore(db), Shop(db).seed_demo()
    return Desk(store, shop, Engine(build(shop), store, clerk, clock=clock))


@pytest.fixture
def paused(db: str, clock: Clock) -> Iterator[Desk]:
    """A large refund (₹1,800 for ravi) waiting for a supervisor."""
    d = desk(db, clock)
    run = d.engine.start(LARGE, user="ravi", run_id="big")
    assert (run.status, run.state) == ("awaiting_approval", "awaiting_approval")
    (a,) = d.store.approvals("big")
    assert (a.expires_at - a.requested_at, a.args) == (
        TTL, {"item_id": "headphones-1", "amount_paise": 180_000})
    yield d
    d.store.close()


def nothing_paid(d: Desk) -> bool:
    return d.shop.ledger() == [] and d.shop.calls("refund") == []


def assert_refused_untouched(d: Desk, before_events: int, *, tampered: bool = False) -> None:
    """A refused decision pays nothing, logs nothing and leaves the approval pending; the
    audit passes, or (``tampered``) names the snapshot that was changed behind fsm's back."""
    run = d.store.load_run("big")
    assert (run.status, run.state) == ("awaiting_approval", "awaiting_approval")
    assert [a.run_id for a in d.store.approvals()] == ["big"]
    assert len(d.store.events("big")) == before_events
    assert nothing_paid(d)
    problems = audit(d.store, "big").problems
    if tampered:
        assert len(problems) == 1 and "the run row's snapshot differs" in problems[0]
    else:
        assert problems == []


# -- expiry ---------------------------------------------------------------------------------

def test_nothing_expires_before_the_deadline(paused: Desk, clock: Clock) -> None:
    clock.advance(TTL - 1)
    before = len(paused.store.events("big"))
    assert paused.engine.resume("big").status == "awaiting_approval"
    assert paused.engine.sweep() == []
    assert_refused_untouched(paused, before)


def test_an_expired_approval_hands_the_run_over_on_the_next_touch(
    paused: Desk, clock: Clock,
) -> None:
    clock.advance(TTL)
    run = paused.engine.resume("big")
    assert (run.status, run.state) == ("handed_over", "handed_over")
    (a,) = paused.store.approvals("big", pending_only=False)
    assert (a.decision, a.reviewer, a.decided_at) == ("expired", None, clock.now)
    tail = [(e.kind, e.event, e.state_after) for e in paused.store.events("big")][-3:]
    assert tail == [("decision", None, "awaiting_approval"),
                    ("transition", "expired", "handed_over"), ("stop", None, "handed_over")]
    assert nothing_paid(paused)
    assert audit(paused.store, "big").ok


def test_sweep_expires_due_approvals_from_another_engine(
    paused: Desk, db: str, clock: Clock,
) -> None:
    sweeper = desk(db, clock)
    assert sweeper.engine.sweep() == []
    clock.advance(TTL + 60)
    assert sweeper.engine.sweep() == ["big"]
    assert sweeper.engine.sweep() == []
    run = paused.store.load_run("big")
    assert (run.status, run.state) == ("handed_over", "handed_over")
    assert paused.store.approvals() == []
    assert nothing_paid(paused)


def test_a_late_approval_is_refused_as_expired_and_hands_over(
    paused: Desk, clock: Clock,
) -> None:
    clock.advance(TTL + 1)
    with pytest.raises(ApprovalExpired, match="'big': approval .* expired at .*now handed_over"):
        paused.engine.decide("big", True, "priya", "ok")
    run = paused.store.load_run("big")
    assert (run.status, run.state) == ("handed_over", "handed_over")
    assert [a.decision for a in paused.store.approvals("big", pending_only=False)] == ["expired"]
    assert nothing_paid(paused)


def test_an_approval_after_the_sweep_is_refused(paused: Desk, clock: Clock) -> None:
    clock.advance(TTL + 1)
    paused.engine.sweep()
    with pytest.raises((ApprovalExpired, NothingPending), match="handed.over"):
        paused.engine.decide("big", True, "priya", "ok")
    assert nothing_paid(paused)


# -- refused decisions ----------------------------------------------------------------------

@pytest.mark.parametrize(("reviewer", "message"), [
    ("", "a decision needs a reviewer name"),
    ("   ", "a decision needs a reviewer name"),
    ("ravi", "'ravi' started this run and cannot decide on it"),
    (" ravi ", "'ravi' started this run and cannot decide on it"),
    ("RAVI", "'RAVI' started this run and cannot decide on it"),
    ("Ｒａｖｉ", "started this run and cannot decide on it"),
])
def test_an_empty_reviewer_or_the_runs_own_user_is_refused(
    paused: Desk, reviewer: str, message: str,
) -> None:
    before = len(paused.store.events("big"))
    with pytest.raises(ApprovalRefused, match=message):
        paused.engine.decide("big", True, reviewer, "looks fine")
    assert_refused_untouched(paused, before)


def test_an_approval_for_an_older_run_version_is_stale(paused: Desk) -> None:
    run = paused.store.load_run("big")
    # Another writer touched the run after the approval was requested.
    paused.store.commit(StepCommit(run=run, expected_version=run.version))
    before = len(paused.store.events("big"))
    stale = f"requested at run version {run.version} .* at version {run.version + 1}"
    with pytest.raises(ApprovalStale, match=stale):
        paused.engine.decide("big", True, "priya", "ok")
    assert_refused_untouched(paused, before)


def test_an_approval_of_changed_arguments_is_stale(paused: Desk) -> None:
    # The pending request now asks for more than was put up for approval.
    row = paused.store.db.read("SELECT snapshot FROM runs WHERE run_id = 'big'")[0][0]
    snap = json.loads(row)
    snap["pending"]["args"]["amount_paise"] = 900_000
    paused.store.db.connection.execute("UPDATE runs SET snapshot = ? WHERE run_id = 'big'",
                             (json.dumps(snap),))
    before = len(paused.store.events("big"))
    with pytest.raises(ApprovalStale, match="for request .* with request"):
        paused.engine.decide("big", True, "priya", "ok")
    assert_refused_untouched(paused, before, tampered=True)


def test_a_second_decision_is_refused(paused: Desk, db: str, clock: Clock) -> None:
    stale = paused.store.load_run("big")  # what a second reviewer loaded before the first decided
    run = paused.engine.decide("big", False, "priya", "no receipt")
    assert (run.status, run.state) == ("done", "done")
    events = len(paused.store.events("big"))
    other = desk(db, clock)
    with pytest.raises(NothingPending, match="not waiting for a decision"):
        other.engine.decide("big", True, "omar", "fine by me")
    with pytest.raises(ApprovalAlreadyDecided, match="already denied by priya"):
        review.review(other.engine.spec, stale, review.pending_approval(other.store, stale),
                      approved=True, reviewer="omar", note="fine by me", now=clock.now)
    assert len(paused.store.events("big")) == events
    (a,) = paused.store.approvals("big", pending_only=False)
    assert (a.decision, a.reviewer, a.note) == ("denied", "priya", "no receipt")
    assert nothing_paid(paused)
    assert "cannot refund" in paused.shop.outbox()[0]["text"]


# -- the happy path, from another process's engine ------------------------------------------

def test_a_large_refund_approved_by_another_engine_is_paid_once(
    paused: Desk, db: str, clock: Clock,
) -> None:
    clock.advance(3600)
    supervisor = desk(db, clock)
    run = supervisor.engine.decide("big", True, "priya", "receipt checked")
    assert (run.status, run.state) == ("done", "done")
    ledger = paused.shop.ledger()
    assert [(p["order_id"], p["item_id"], p["amount_paise"], p["idempotency_key"])
            for p in ledger] == [("A-1002", "headphones-1", 180_000, "big:6")]
    assert len(paused.shop.calls("refund")) == 1
    (a,) = paused.store.approvals("big", pending_only=False)
    assert (a.decision, a.reviewer, a.decided_at) == ("approved", "priya", clock.now)
    decisions = [e for e in paused.store.events("big") if e.kind == "decision"]
    assert [(d.reviewer, d.detail["decision"]) for d in decisions] == [("priya", "approved")]
    assert audit(paused.store, "big").ok


def test_sweep_skips_a_run_another_process_drives_and_expires_the_rest(
        clock: Clock, paused: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    import fsm.store.lease as lease_mod

    other = paused.engine.start(LARGE, user="ravi", run_id="big2")
    assert other.status == "awaiting_approval"
    paused.store.acquire("big", "elsewhere:1:held", clock())
    # The owner on "elsewhere" counts as alive: its lease is not free.
    monkeypatch.setattr(lease_mod, "lease_is_free", lambda owner: owner != "elsewhere:1:held")
    clock.advance(TTL + 1)
    swept = paused.engine.sweep()
    assert swept == ["big2"] and (swept.failed, swept.damaged) == ([], [])
    assert [run for run, _ in swept.skipped] == ["big"]
    assert "being driven by another process" in swept.skipped[0][1]
    assert paused.store.load_run("big").status == "awaiting_approval"
    assert paused.store.load_run("big2").status == "handed_over"
    assert paused.shop.ledger() == []
