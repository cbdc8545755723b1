"""Forks: a new run from what another had committed at a step, never paying twice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fsm import Engine, MemoryStore, WorkflowSpec
from fsm.auditor.audit import audit
from fsm.errors import ForkRefused, RunNotFound
from fsm.records import utc
from fsm.store import SQLiteStore
from workflows.refund import Shop
from workflows.refund.clerk import clerk

KETTLE = "Order A-1001: the kettle arrived broken"
HEADPHONES = "Order A-1002: my headphones stopped working"


def _paid(make_engine: Callable[..., Engine]) -> Engine:
    engine = make_engine(clerk)
    assert engine.start(KETTLE, user="asha", run_id="p").status == "done"
    return engine


def test_a_fork_of_a_paid_refund_never_pays_again_and_its_audit_links_to_the_parent(
        make_engine: Callable[..., Engine], store: MemoryStore, shop: Shop) -> None:
    engine = _paid(make_engine)
    assert [r["idempotency_key"] for r in shop.ledger()] == ["p:6"]
    parent_events = store.events("p")
    fork = engine.fork("p", at=6, new_run_id="f")
    assert (fork.status, fork.state, fork.step) == ("running", "replying", 6)
    assert fork.facts == store.load_run("p").facts
    assert store.messages("f") == store.messages("p")[:fork.message_count]
    start = store.events("f")[0]
    origin = start.detail["forked_from"]
    last_of_6 = [e for e in parent_events if e.step <= 6][-1]
    assert origin == {"run_id": "p", "step": 6, "seq": last_of_6.seq, "hash": last_of_6.hash}
    assert [c["key"] for c in start.detail["carried"]] == ["p:6"]
    done = engine.resume("f")
    assert done.status == "done"
    # The fork replied under its own key; the refund was not made again.
    assert [e.key for e in store.effects("f")] == ["f:7"]
    assert [r["idempotency_key"] for r in shop.ledger()] == ["p:6"]
    report = audit(store, "f")
    assert report.ok, report.problems
    assert store.forks_of("p") == ["f"] and store.forks_of("f") == []


def test_a_fork_from_before_the_payment_does_not_pay_the_item_twice(
        make_engine: Callable[..., Engine], store: MemoryStore, shop: Shop) -> None:
    engine = _paid(make_engine)
    engine.fork("p", at=5, new_run_id="early")
    run = engine.resume("early")
    # The fork's own key, and the shop refuses an item refunded already.
    assert store.effect("early:6") is not None
    assert [r["idempotency_key"] for r in shop.ledger()] == ["p:6"]
    assert run.status == "handed_over" and audit(store, "early").ok


def test_an_approval_pending_at_the_step_is_requested_again_never_inherited(
        make_engine: Callable[..., Engine], store: MemoryStore, shop: Shop) -> None:
    engine = make_engine(clerk)
    assert engine.start(HEADPHONES, user="ravi", run_id="big").status == "awaiting_approval"
    engine.decide("big", True, reviewer="priya", note="receipt checked")
    assert [r["idempotency_key"] for r in shop.ledger()] == ["big:6"]
    fork = engine.fork("big", at=5, new_run_id="again")
    assert fork.status == "awaiting_approval" and fork.pending is not None
    theirs = store.approvals("big", pending_only=False)
    mine = store.approvals("again", pending_only=False)
    assert len(mine) == 1 and mine[0].decision is None
    assert mine[0].approval_id != theirs[0].approval_id
    assert "approved by priya" not in str(store.messages("again"))
    engine.decide("again", False, reviewer="priya", note="not twice")
    assert engine.resume("again").status == "done"
    assert [r["idempotency_key"] for r in shop.ledger()] == ["big:6"]
    assert audit(store, "again").ok


@pytest.mark.parametrize("at", [-1, 8, 99])
def test_a_step_the_run_did_not_commit_is_refused_and_nothing_is_made(
        make_engine: Callable[..., Engine], store: MemoryStore, at: int) -> None:
    engine = _paid(make_engine)
    with pytest.raises(ForkRefused, match=f"at step {at}: it committed steps 0 to 7"):
        engine.fork("p", at=at)
    assert [r.run_id for r in store.list_runs()] == ["p"]


def test_other_forks_that_cannot_be_made(make_engine: Callable[..., Engine],
                                         store: MemoryStore) -> None:
    engine = _paid(make_engine)
    with pytest.raises(ForkRefused, match="it had stopped there \\(done\\)"):
        engine.fork("p", at=7)
    with pytest.raises(RunNotFound):
        engine.fork("nope", at=1)
    with pytest.raises(ForkRefused, match="a run of that id exists"):
        engine.fork("p", at=3, new_run_id="p")
    assert [r.run_id for r in store.list_runs()] == ["p"]


def test_a_changed_parent_log_breaks_the_forks_link(spec: WorkflowSpec, tmp_path: Path) -> None:
    with SQLiteStore(str(tmp_path / "s.db")) as store:
        engine = Engine(spec, store, clerk)
        engine.start(KETTLE, user="asha", run_id="p")
        fork = engine.fork("p", at=3, new_run_id="f")
        assert fork.forked_from is not None and audit(store, "f").ok
        assert store.forks_of("p") == ["f"]
        store.db.connection.execute(
            "UPDATE events SET reason = 'edited' WHERE run_id = 'p' AND seq = ?",
            (fork.forked_from.seq,))
        problems = audit(store, "f").problems
        assert any("forked from run 'p' at step 3: the parent's log is broken" in p
                   for p in problems), problems


def test_a_conversation_forked_while_it_waits_for_its_customer_asks_again(
        tmp_path: Path) -> None:
    from workflows.retail import data
    from workflows.retail.evals import goal
    from workflows.retail.replay import Customer, plan
    from workflows.retail.runner import Bench

    task = next(t for t in data.tasks() if str(t["id"]) == "16")
    moves = plan(task)
    with Bench(str(tmp_path / "retail.db")) as bench:
        bench.run(goal(task), moves, Customer(moves), run_id="c")
        store = bench.store
        asked = next(e for e in store.events("c") if e.kind == "ask")
        engine = Engine(bench.spec, store, None, resources=bench.resources)
        fork = engine.fork("c", at=asked.step, new_run_id="c2")
        assert fork.status == "awaiting_customer" and fork.state == asked.state_after
        mine = [e.kind for e in store.events("c2")]
        assert mine == ["start", "ask"] and store.replies("c2") == []
        assert audit(store, "c2").ok, audit(store, "c2").problems
        assert engine.reply("c2", "yes").state == "writing"


def test_a_fork_of_a_fork_audits_through_both_links(make_engine: Callable[..., Engine],
                                                    store: MemoryStore, shop: Shop) -> None:
    engine = _paid(make_engine)
    engine.fork("p", at=4, new_run_id="f1")
    assert engine.resume("f1").status == "handed_over"  # the shop: refunded already
    engine.fork("f1", at=5, new_run_id="f2")
    assert store.load_run("f2").forked_from.run_id == "f1"  # type: ignore[union-attr]
    assert engine.resume("f2").status == "handed_over"
    for run_id in ("f1", "f2"):
        assert audit(store, run_id).ok, audit(store, run_id).problems
    assert [r["idempotency_key"] for r in shop.ledger()] == ["p:6"]


def _prune_regardless_of_forks(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch,
                              status: str = "budget_exhausted") -> None:
    """Prune the runs that finished so, as an fsm from before parents were kept for their
    forks did."""
    from fsm.store import prune

    where = prune._where
    with monkeypatch.context() as patch:
        patch.setattr(prune, "_where", lambda cut, mark, now, t="runs", forks=True:
                      where(cut, mark, now, t, forks=False))
        prune.prune(store, before=9e9, statuses=(status,), by="ops", now=9e9)


def test_a_fork_of_a_pruned_parent_is_checked_against_its_tombstone_where_it_can_be(
        spec: WorkflowSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fsm.records import Budgets

    with SQLiteStore(str(tmp_path / "s.db")) as store:
        engine = Engine(spec, store, clerk)
        stopped = engine.start(KETTLE, user="asha", run_id="p", budgets=Budgets(max_steps=3))
        assert (stopped.status, stopped.step) == ("budget_exhausted", 3)
        engine.fork("p", at=3, new_run_id="last")  # at the parent's very last event
        engine.fork("p", at=2, new_run_id="early")
        _prune_regardless_of_forks(store, monkeypatch)
        assert store.tombstone("p") is not None
        last = audit(store, "last")
        assert last.ok and last.link.state == "tombstone" and last.warnings == []
        early = audit(store, "early")
        assert early.ok and early.link.state == "unverifiable", early.problems
        assert early.warnings == [
            f"parent p was pruned on {utc(9e9)} by ops; the link to it cannot be verified "
            "(its tombstone keeps the head of its whole log, seq 7, not of seq 4): only this "
            "run's own part of the log is audited"]
        # A link the tombstone contradicts is broken, not unverifiable.
        store.db.connection.execute("UPDATE tombstones SET head = ? WHERE run_id = 'p'",
                                    ("f" * 64,))
        problems = audit(store, "last").problems
        assert problems and "its tombstone's head is ffff" in problems[0], problems
        store.db.connection.execute("UPDATE tombstones SET log_count = 3 WHERE run_id = 'p'")
        problems = audit(store, "early").problems
        assert problems and "its tombstone records 3 events, so no event seq 4" in problems[0]


def test_the_own_part_of_a_fork_of_a_pruned_parent_is_counted_from_its_start(
        spec: WorkflowSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fsm.auditor.audit import _own_part

    with SQLiteStore(str(tmp_path / "s.db")) as store:
        engine = Engine(spec, store, clerk)
        engine.start(HEADPHONES, user="ravi", run_id="big")
        assert engine.decide("big", True, reviewer="priya", note="ok").status == "done"
        fork = engine.fork("big", at=3, new_run_id="f")
        assert store.events("f")[0].detail["used_at_fork"] == {"steps": 3, "cost_micros": 0}
        assert engine.resume("f").status == "awaiting_approval"
        _prune_regardless_of_forks(store, monkeypatch, "done")
        report = audit(store, "f")
        assert report.ok and report.link.state == "unverifiable", report.problems
        run, events = store.load_run("f"), store.events("f")
        assert _own_part(run, events) == []
        more = run.model_copy(update={"used": run.used.model_copy(update={"steps": 9})})
        assert _own_part(more, events) == [
            f"the log has {run.used.steps - fork.step} policy calls but the run counts "
            f"{9 - fork.step} steps"]
