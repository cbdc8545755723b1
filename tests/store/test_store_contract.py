"""One contract for every store: whatever the backend, the engine sees the same behaviour.

Every test runs against each store through the ``store`` fixture (in-memory, SQLite
and PostgreSQL), in the style of Burr's persistence suite.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import storekit

from fsm import (
    Approval,
    ApprovalAlreadyDecided,
    ConcurrentUpdate,
    Effect,
    Event,
    LeaseLost,
    RunError,
    RunLocked,
    RunNotFound,
    RunState,
    Store,
    StoreError,
    ViewRecord,
)
from fsm.records import GENESIS, ApprovalDecision, Compaction, StepCommit, fingerprint, verify_chain
from fsm.records.transcript import ToolCall, UserMessage, read_all

store = storekit.store  # the fixture: each test on every kind of store

# -- building blocks ----------------------------------------------------------------------

def new_run(run_id: str = "r1", **changes: Any) -> RunState:
    base = RunState(run_id=run_id, workflow="wf", definition_hash="d" * 16, user="asha",
                    state="collecting", created_at=1000.0, updated_at=1000.0)
    return base.model_copy(update=changes)


def decision_of(verdict: Any, reviewer: str | None, note: str | None,
                at: float) -> ApprovalDecision:
    return ApprovalDecision(approval_id="a1", decision=verdict, reviewer=reviewer, note=note,
                            time=at)


def ev(run: RunState, kind: str, step: int, **fields: Any) -> Event:
    return Event(run_id=run.run_id, step=step, time=1000.0 + step, kind=kind,
                 state_before=run.state, state_after=run.state, **fields)


def step_commit(run: RunState, step: int, *, messages: int = 2, **extra: Any) -> StepCommit:
    """A step of ``run`` as the engine would write it: messages, a view, two events."""
    msgs = [{"role": "assistant", "tool": "t", "args": {"step": step, "i": i}}
            for i in range(messages)]
    view = ViewRecord(step=step, state=run.state, tools=["t"], events=["go"],
                      message_count=run.message_count)
    new = run.model_copy(update={
        "step": step, "message_count": run.message_count + len(msgs),
        "updated_at": 1000.0 + step,
    })
    return StepCommit(run=new, expected_version=run.version, messages=read_all(msgs), view=view,
                      events=[ev(run, "policy", step, cost_micros=5),
                              ev(run, "tool", step, tool="t", detail={"n": step})],
                      **extra)


def created(store: Store, run_id: str = "r1") -> RunState:
    run = new_run(run_id)
    first = StepCommit(run=run.model_copy(update={"message_count": 1}), expected_version=0,
                       messages=[UserMessage.make(content="hello")],
                       events=[ev(run, "start", 0)])
    return store.create_run(run, first)


def effect(key: str = "r1:1", run_id: str = "r1", step: int = 1) -> Effect:
    return Effect(key=key, run_id=run_id, step=step, tool="pay", args={"amount_paise": 100},
                  status="STARTED", started_at=1001.0)


def approval(run: RunState, approval_id: str = "a1", *, expires_at: float = 5000.0) -> Approval:
    args = {"amount_paise": 180_000}
    return Approval(approval_id=approval_id, run_id=run.run_id, step=run.step, tool="pay",
                    args=args, args_hash=fingerprint(args), run_version=run.version + 1,
                    requested_at=1000.0, expires_at=expires_at)


def snapshot(store: Store, run_id: str = "r1") -> dict[str, Any]:
    """Everything a store holds about a run, to compare before and after a failed commit."""
    return {
        "run": store.load_run(run_id).model_dump(),
        "messages": store.messages(run_id),
        "view": store.view_record(run_id),
        "events": [e.model_dump() for e in store.events(run_id)],
        "head": store.log_head(run_id),
        "effect": store.effect(f"{run_id}:1"),
        "approvals": [a.model_dump() for a in store.approvals(run_id, pending_only=False)],
        "artifact": store.artifact("f" * 64),
    }


# -- runs -----------------------------------------------------------------------------------

def test_create_load_and_list_runs(store: Store) -> None:
    r1 = created(store, "r1")
    r2 = store.create_run(new_run("r2", status="awaiting_approval"))
    assert (r1.version, r2.version) == (1, 1)
    loaded = store.load_run("r1")
    assert loaded == r1
    assert loaded.model_dump() == new_run("r1", version=1, message_count=1).model_dump()
    assert sorted(r.run_id for r in store.list_runs()) == ["r1", "r2"]
    assert [r.run_id for r in store.list_runs("awaiting_approval")] == ["r2"]
    assert store.list_runs("done") == []


def test_creating_a_run_twice_is_refused_and_changes_nothing(store: Store) -> None:
    created(store)
    before = snapshot(store)
    with pytest.raises(RunError, match="'r1' already exists"):
        store.create_run(new_run("r1", state="elsewhere"))
    assert snapshot(store) == before


def test_unknown_run_is_not_found_everywhere(store: Store) -> None:
    for read in (store.load_run, store.messages, store.view_record, store.events,
                 store.log_head):
        with pytest.raises(RunNotFound, match="run 'nope' not found"):
            read("nope")  # type: ignore[operator]
    with pytest.raises(RunNotFound):
        store.commit(StepCommit(run=new_run("nope"), expected_version=1))
    with pytest.raises(RunNotFound):
        store.acquire("nope", "someone", 0.0)


def test_commit_increments_the_version_and_stores_the_snapshot(store: Store) -> None:
    run = created(store)
    after = store.commit(step_commit(run, 1))
    assert after.version == 2
    loaded = store.load_run("r1")
    assert loaded == after
    assert (loaded.step, loaded.message_count, loaded.updated_at) == (1, 3, 1001.0)


def test_the_snapshot_is_kept_as_the_commit_wrote_it(store: Store) -> None:
    """The audit hashes the stored snapshot text: it must be the commit's own text (the
    one whose hash a step's last event records)."""
    run = created(store)
    c = step_commit(run, 1)
    c.run.facts = {"m": {"b": 1, "a": [1.5, None]}, "note": "é"}
    store.commit(c)
    assert store.snapshot_text("r1") == c.snapshot
    with pytest.raises(RunNotFound):
        store.snapshot_text("nope")


def test_the_run_rows_columns_follow_its_snapshot(store: Store) -> None:
    """What the queue and the listings filter on (the row's status and workflow) says what
    the snapshot says after every commit."""
    run = created(store)
    assert store.run_columns("r1") == (run.status, run.workflow)
    for i, status in enumerate(("running", "awaiting_approval", "awaiting_approval", "done"),
                               start=1):
        c = step_commit(run, i)
        c.run.status = status  # type: ignore[assignment]
        run = store.commit(c)
        assert store.run_columns("r1") == (status, run.workflow)
    with pytest.raises(RunNotFound):
        store.run_columns("nope")


# -- atomicity and optimistic concurrency ---------------------------------------------------

def test_stale_commit_raises_concurrent_update_naming_run_and_versions(store: Store) -> None:
    run = created(store)
    store.commit(step_commit(run, 1))  # now at version 2; ``run`` is stale
    with pytest.raises(ConcurrentUpdate) as info:
        store.commit(step_commit(run, 1))
    err = info.value
    assert (err.run_id, err.expected, err.found) == ("r1", 1, 2)
    assert "run 'r1'" in str(err) and "expected version 1, found 2" in str(err)


def test_a_stale_commit_writes_nothing(store: Store) -> None:
    run = created(store)
    assert store.claim_effect(effect()) is None
    current = store.commit(step_commit(run, 1))
    before = snapshot(store)
    stale = step_commit(run, 2, messages=3, effects_done={"r1:1": ({"paid": True}, None)},
                        new_approval=approval(run), artifacts={"f" * 64: "big"})
    with pytest.raises(ConcurrentUpdate):
        store.commit(stale)
    assert snapshot(store) == before
    assert store.load_run("r1").version == current.version
    assert store.effect("r1:1").status == "STARTED"  # type: ignore[union-attr]


def test_a_commit_deciding_a_decided_approval_writes_nothing(store: Store) -> None:
    run = created(store)
    run = store.commit(step_commit(run, 1, new_approval=approval(run)))
    run = store.commit(step_commit(run, 2, decision=decision_of("approved", "priya", "ok", 1002.0)))
    assert store.claim_effect(effect("r1:3", step=3)) is None
    before = snapshot(store)
    before_effect = store.effect("r1:3")
    second = step_commit(run, 3, effects_done={"r1:3": ({"paid": True}, None)},
                         decision=decision_of("denied", "omar", "no", 1003.0),
                         artifacts={"f" * 64: "big"})
    with pytest.raises(ApprovalAlreadyDecided, match="a1 of run 'r1' was already approved by"):
        store.commit(second)
    assert snapshot(store) == before
    assert store.effect("r1:3") == before_effect
    decided = store.approvals("r1", pending_only=False)[0]
    assert (decided.decision, decided.reviewer, decided.note) == ("approved", "priya", "ok")


# -- transcript, views, log ------------------------------------------------------------------

def test_messages_are_appended_and_read_by_range(store: Store) -> None:
    run = created(store)
    run = store.commit(step_commit(run, 1, messages=2))
    run = store.commit(step_commit(run, 2, messages=3))
    everything = store.messages("r1")
    assert len(everything) == run.message_count == 6
    assert everything[0] == {"role": "user", "content": "hello"}
    assert [m["args"]["step"] for m in everything[1:]] == [1, 1, 2, 2, 2]
    assert store.messages("r1", 1, 3) == everything[1:3]
    assert store.messages("r1", 3) == everything[3:]
    assert store.messages("r1", 0, 0) == []
    assert store.messages("r1", 6) == []


def test_messages_keep_unicode_and_nested_json(store: Store) -> None:
    run = created(store)
    msg = {"role": "tool", "tool": "t", "result": {"text": "₹350 — done", "n": [1, {"x": None}]}}
    new = run.model_copy(update={"message_count": 2})
    store.commit(StepCommit(run=new, expected_version=1, messages=read_all([msg])))
    assert store.messages("r1", 1) == [msg]


def test_view_records_are_kept_per_step(store: Store) -> None:
    run = created(store)
    assert store.view_record("r1") is None
    run = store.commit(step_commit(run, 1))
    compacted = step_commit(run, 2)
    assert compacted.view is not None
    compacted.view.compaction = Compaction(upto=2, summary="earlier steps")
    run = store.commit(compacted)
    first, second = store.view_record("r1", 1), store.view_record("r1", 2)
    assert first is not None and second is not None
    assert (first.step, first.message_count, first.compaction) == (1, 1, None)
    assert (second.step, second.message_count) == (2, 3)
    assert second.compaction == Compaction(upto=2, summary="earlier steps")
    assert store.view_record("r1") == second
    assert store.view_record("r1", 7) is None


def test_the_hash_chain_continues_across_commits(store: Store) -> None:
    run = created(store)
    for step in (1, 2, 3):
        run = store.commit(step_commit(run, step))
    run = store.commit(StepCommit(run=run, expected_version=run.version))  # no events
    events = store.events("r1")
    assert [e.seq for e in events] == list(range(7))
    assert [e.kind for e in events] == ["start"] + ["policy", "tool"] * 3
    assert events[0].prev_hash == GENESIS
    for prev, cur in zip(events, events[1:], strict=False):
        assert cur.prev_hash == prev.hash
    assert all(e.hash == e.compute_hash() for e in events)
    assert verify_chain(events) is None
    assert events[2].detail == {"n": 1} and events[1].cost_micros == 5
    assert store.log_head("r1") == (7, events[-1].hash)


def test_each_run_has_its_own_chain(store: Store) -> None:
    a, b = created(store, "ra"), created(store, "rb")
    store.commit(step_commit(a, 1))
    store.commit(step_commit(b, 1))
    for run_id in ("ra", "rb"):
        events = store.events(run_id)
        assert {e.run_id for e in events} == {run_id}
        assert [e.seq for e in events] == [0, 1, 2] and verify_chain(events) is None


def test_log_head_of_a_run_without_events(store: Store) -> None:
    store.create_run(new_run("quiet"))
    assert store.log_head("quiet") == (0, GENESIS)
    assert store.events("quiet") == []


# -- effects ---------------------------------------------------------------------------------

def test_the_first_claim_wins_and_the_second_sees_the_row(store: Store) -> None:
    created(store)
    assert store.claim_effect(effect()) is None
    again = effect().model_copy(update={"args": {"amount_paise": 999}, "started_at": 2000.0})
    existing = store.claim_effect(again)
    assert existing is not None
    assert (existing.status, existing.args, existing.started_at) == (
        "STARTED", {"amount_paise": 100}, 1001.0)
    assert store.effect("r1:1") == existing
    assert store.effect("r1:2") is None


def test_a_claim_with_its_event_is_logged_with_the_row_and_moves_the_version(
        store: Store) -> None:
    run = created(store)
    claim = ev(run, "claim", 1, tool="pay",
               detail={"key": "r1:1", "args_hash": fingerprint({"amount_paise": 100})})
    assert store.claim_effect(effect(), owner=None, version=run.version, claim=claim) is None
    events = store.events("r1")
    assert [e.kind for e in events] == ["start", "claim"] and verify_chain(events) is None
    row = store.effect("r1:1")
    assert row is not None and row.claim == events[-1].hash
    assert store.log_head("r1") == (2, events[-1].hash)
    assert store.load_run("r1").version == run.version + 1
    # The key claimed before: the row is returned, and nothing is logged or moved.
    again = store.claim_effect(effect(), claim=claim.model_copy(update={"step": 9}))
    assert again == row
    assert len(store.events("r1")) == 2 and store.load_run("r1").version == run.version + 1
    # The step's commit goes on from the claim: the log stays one chain.
    after = store.commit(step_commit(run.model_copy(update={"version": run.version + 1}), 1,
                                     effects_done={"r1:1": ({"ok": True}, None)}))
    assert after.version == run.version + 2
    events = store.events("r1")
    assert [e.kind for e in events] == ["start", "claim", "policy", "tool"]
    assert verify_chain(events) is None and store.log_head("r1")[1] == events[-1].hash


def test_a_claim_at_a_stale_version_logs_and_claims_nothing(store: Store) -> None:
    run = created(store)
    claim = ev(run, "claim", 1, tool="pay", detail={"key": "r1:1"})
    with pytest.raises(ConcurrentUpdate):
        store.claim_effect(effect(), version=run.version - 1, claim=claim)
    assert store.effect("r1:1") is None and len(store.events("r1")) == 1


def test_a_commit_marks_effects_done_with_result_or_error(store: Store) -> None:
    run = created(store)
    store.claim_effect(effect("r1:1"))
    store.claim_effect(effect("r1:2", step=2))
    store.commit(step_commit(run, 1, effects_done={
        "r1:1": ({"status": "ok", "amount_paise": 100}, None),
        "r1:2": (None, "ValueError: amount must be positive"),
    }))
    ok, failed = store.effect("r1:1"), store.effect("r1:2")
    assert ok is not None and failed is not None
    assert (ok.status, ok.result, ok.error, ok.finished_at) == (
        "DONE", {"status": "ok", "amount_paise": 100}, None, 1001.0)
    assert (failed.status, failed.result, failed.error) == (
        "DONE", None, "ValueError: amount must be positive")
    replay = store.claim_effect(effect("r1:1"))
    assert replay is not None and replay.status == "DONE" and replay.result == ok.result


# -- approvals and artifacts -----------------------------------------------------------------

def test_approvals_pending_then_decided(store: Store) -> None:
    run = created(store)
    other = created(store, "r2")
    run = store.commit(step_commit(run, 1, new_approval=approval(run, "a1")))
    store.commit(step_commit(other, 1, new_approval=approval(other, "a2", expires_at=6000.0)))
    assert [a.approval_id for a in store.approvals()] == ["a1", "a2"]
    pending = store.approvals("r1")
    assert [a.approval_id for a in pending] == ["a1"]
    a1 = pending[0]
    assert (a1.tool, a1.args, a1.run_version, a1.expires_at, a1.decision) == (
        "pay", {"amount_paise": 180_000}, 2, 5000.0, None)
    assert a1.args_hash == fingerprint({"amount_paise": 180_000})
    store.commit(step_commit(run, 2, decision=decision_of("denied", "omar", "too much", 1500.0)))
    assert store.approvals("r1") == []
    assert [a.approval_id for a in store.approvals()] == ["a2"]
    decided = store.approvals("r1", pending_only=False)
    assert [(a.decision, a.reviewer, a.note, a.decided_at) for a in decided] == [
        ("denied", "omar", "too much", 1500.0)]


def test_an_expiry_is_a_decision_without_reviewer(store: Store) -> None:
    run = created(store)
    run = store.commit(step_commit(run, 1, new_approval=approval(run)))
    store.commit(step_commit(run, 1, decision=decision_of("expired", None, None, 5001.0)))
    (a,) = store.approvals("r1", pending_only=False)
    assert (a.decision, a.reviewer, a.decided_at) == ("expired", None, 5001.0)


def test_artifacts_by_content_hash(store: Store) -> None:
    run = created(store)
    big = "x" * 20_000
    sha = "a" * 64
    store.commit(step_commit(run, 1, artifacts={sha: big}))
    assert store.artifact(sha) == big
    assert store.artifact("b" * 64) is None


# -- leases ----------------------------------------------------------------------------------

def _owner(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:test"


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_lease_held_by_a_live_process_locks_the_run(store: Store, live_pid: int) -> None:
    created(store)
    holder = _owner(live_pid)
    store.acquire("r1", holder, 1000.0)
    store.acquire("r1", holder, 1001.0)  # the holder may take it again
    with pytest.raises(RunLocked) as info:
        store.acquire("r1", _owner(os.getpid()), 1002.0)
    assert info.value.owner == holder and info.value.run_id == "r1"
    assert "being driven by another process" in str(info.value) and holder in str(info.value)


def test_a_lease_held_by_a_dead_process_is_taken_over(store: Store, dead_pid: int) -> None:
    created(store)
    store.acquire("r1", _owner(dead_pid), 1000.0)
    me = _owner(os.getpid())
    store.acquire("r1", me, 1001.0)
    with pytest.raises(RunLocked):  # now ours: another engine in this process waits
        store.acquire("r1", f"{socket.gethostname()}:{os.getpid()}:other", 1002.0)


def test_release_frees_only_the_owners_lease(store: Store, live_pid: int) -> None:
    created(store)
    holder = _owner(live_pid)
    store.acquire("r1", holder, 1000.0)
    store.release("r1", _owner(os.getpid()))  # not the holder: no effect
    with pytest.raises(RunLocked):
        store.acquire("r1", _owner(os.getpid()), 1001.0)
    store.release("r1", holder)
    store.acquire("r1", _owner(os.getpid()), 1002.0)


def test_a_lease_on_another_host_is_respected(store: Store) -> None:
    created(store)
    store.acquire("r1", "elsewhere.example:1:x", 1000.0)
    with pytest.raises(RunLocked):
        store.acquire("r1", _owner(os.getpid()), 1001.0)


def test_leases_do_not_change_the_run_or_its_log(store: Store) -> None:
    run = created(store)
    before = snapshot(store)
    store.acquire("r1", _owner(os.getpid()), 1000.0)
    store.release("r1", _owner(os.getpid()))
    assert snapshot(store) == before
    assert store.commit(step_commit(run, 1)).version == 2


# -- leases that expire, and the fence -------------------------------------------------------

ELSEWHERE = "elsewhere.example:1:a"
OTHER = "other.example:2:b"


def test_an_expired_lease_may_be_taken_by_anyone(store: Store) -> None:
    created(store)
    assert store.acquire("r1", ELSEWHERE, 1000.0, ttl=30.0) is None
    lease = store.lease("r1")
    assert lease is not None and (lease.owner, lease.until) == (ELSEWHERE, 1030.0)
    with pytest.raises(RunLocked):
        store.acquire("r1", OTHER, 1029.9, ttl=30.0)
    assert store.acquire("r1", OTHER, 1030.0, ttl=30.0) == ELSEWHERE
    assert store.lease("r1") == type(lease)(OTHER, 1060.0)


def test_a_heartbeat_renews_only_the_holders_lease(store: Store) -> None:
    created(store)
    store.acquire("r1", ELSEWHERE, 1000.0, ttl=30.0)
    assert store.renew("r1", ELSEWHERE, 1020.0, 30.0) is True
    with pytest.raises(RunLocked):
        store.acquire("r1", OTHER, 1040.0, ttl=30.0)  # renewed until 1050
    assert store.renew("r1", OTHER, 1041.0, 30.0) is False
    store.acquire("r1", OTHER, 1050.0, ttl=30.0)
    assert store.renew("r1", ELSEWHERE, 1051.0, 30.0) is False  # lost: cannot renew back
    lease = store.lease("r1")
    assert lease is not None and lease.owner == OTHER
    store.release("r1", OTHER)
    assert store.lease("r1") is None


def test_a_commit_by_a_writer_that_lost_its_lease_is_refused_and_writes_nothing(
        store: Store) -> None:
    run = created(store)
    store.acquire("r1", ELSEWHERE, 1000.0, ttl=30.0)
    ok = step_commit(run, 1)
    ok.owner = ELSEWHERE
    run = store.commit(ok)
    store.acquire("r1", OTHER, 1031.0, ttl=30.0)  # expired, taken over
    before = snapshot(store)
    stale = step_commit(run, 2, new_approval=approval(run))
    stale.owner = ELSEWHERE
    with pytest.raises(LeaseLost) as info:
        store.commit(stale)
    assert (info.value.run_id, info.value.owner, info.value.holder) == ("r1", ELSEWHERE, OTHER)
    assert "lease of elsewhere.example:1:a was lost (now held by other.example:2:b)" in str(
        info.value)
    assert snapshot(store) == before
    store.release("r1", OTHER)
    with pytest.raises(LeaseLost, match="now held by nobody"):
        store.commit(stale)
    assert snapshot(store) == before


def test_an_effect_claim_checks_the_lease_and_the_version(store: Store) -> None:
    run = created(store)
    store.acquire("r1", ELSEWHERE, 1000.0, ttl=30.0)
    with pytest.raises(ConcurrentUpdate):
        store.claim_effect(effect(), owner=ELSEWHERE, version=run.version + 1)
    store.acquire("r1", OTHER, 1031.0, ttl=30.0)
    with pytest.raises(LeaseLost):
        store.claim_effect(effect(), owner=ELSEWHERE, version=run.version)
    assert store.effect("r1:1") is None  # nothing claimed: the tool must not run
    assert store.claim_effect(effect(), owner=OTHER, version=run.version) is None
    assert store.effect("r1:1") is not None


W1, W2 = "w1.example:1:w", "w2.example:2:w"


def test_claim_runnable_takes_each_free_running_run_once(store: Store) -> None:
    created(store, "r1")
    created(store, "r2")
    store.create_run(new_run("paused", status="awaiting_approval"))
    store.create_run(new_run("other-wf", workflow="elsewhere"))
    created(store, "held")
    store.acquire("held", ELSEWHERE, 1000.0, ttl=30.0)
    first = store.claim_runnable(W1, 1010.0, 30.0, workflows=["wf"], limit=10)
    assert sorted(c.run_id for c in first) == ["r1", "r2"]
    assert {c.workflow for c in first} == {"wf"} and {c.previous for c in first} == {None}
    assert store.claim_runnable(W2, 1011.0, 30.0, workflows=["wf"], limit=10) == []
    later = store.claim_runnable(W2, 1040.5, 30.0, workflows=["wf"], limit=1)
    assert len(later) == 1 and later[0].previous in (W1, ELSEWHERE)
    lease = store.lease(later[0].run_id)
    assert lease is not None and (lease.owner, lease.until) == (W2, 1070.5)


def test_the_inbox_pages_read_the_same_from_every_store(store: Store) -> None:
    """Waiting approvals newest first and by workflow, and runs pages: each store answers
    the same (the SQL stores with their own queries)."""
    for i, workflow in enumerate(["wf", "desk", "wf"]):
        run = store.create_run(new_run(f"w{i}", workflow=workflow, created_at=1000.0 + i))
        paused = run.model_copy(update={"status": "awaiting_approval", "step": 1})
        ask = approval(run, f"a{i}").model_copy(update={"requested_at": 2000.0 + i})
        store.commit(StepCommit(run=paused, expected_version=run.version, new_approval=ask))
    store.create_run(new_run("done", status="done", created_at=1100.0))
    assert [a.approval_id for a, _ in store.waiting()] == ["a2", "a1", "a0"]
    assert [(a.approval_id, r.run_id, r.status) for a, r in store.waiting("wf", offset=1)] == \
        [("a0", "w0", "awaiting_approval")]
    assert (store.count_waiting(), store.count_waiting("desk")) == (3, 1)
    assert [r.run_id for r in store.runs_page()] == ["done", "w2", "w1", "w0"]
    assert [r.run_id for r in store.runs_page("awaiting_approval", "wf", limit=1,
                                              offset=1)] == ["w0"]
    assert (store.count_runs(), store.count_runs("awaiting_approval", "wf")) == (4, 2)
    assert store.workflow_names() == ["desk", "wf"]


def test_a_claim_passes_over_the_runs_it_is_told_to_exclude(store: Store) -> None:
    """A worker excludes the runs still in flight on its threads (a step that never
    returned gave its lease back): another worker takes them, this one never again."""
    for run_id in ("given-back", "other"):
        created(store, run_id)
    got = store.claim_runnable(W1, 1010.0, 30.0, limit=10, exclude={"given-back"})
    assert [c.run_id for c in got] == ["other"] and store.lease("given-back") is None
    assert [c.run_id for c in store.claim_runnable(W2, 1011.0, 30.0, limit=10)] == \
        ["given-back"]


def test_a_claim_for_one_workflow_is_not_crowded_out_by_others(store: Store) -> None:
    for i in range(25):  # older runnable runs of another workflow than the worker's
        store.create_run(new_run(f"other-{i}", workflow="elsewhere"))
    created(store, "mine")
    got = store.claim_runnable(W1, 1010.0, 30.0, workflows=["wf"], limit=1)
    assert [c.run_id for c in got] == ["mine"]
    assert store.lease("other-0") is None


def test_nul_characters_and_unicode_read_back_exactly(store: Store) -> None:
    """A model may put U+0000 anywhere; PostgreSQL's JSONB cannot hold it, the store must."""
    odd = "a\x00b ₹350 \\u0000 \u2028"
    run = created(store)
    with_odd = run.model_copy(update={"answer": odd, "facts": {"note": odd}})
    c = step_commit(with_odd, 1, messages=1, new_approval=approval(run).model_copy(
        update={"args": {"text": odd}}))
    c.messages[0] = ToolCall.make(tool="t", args={"step": 1, "i": 0, "text": odd})
    c.events[1].detail["text"] = odd
    store.claim_effect(effect().model_copy(update={"args": {"text": odd}}))
    c.effects_done["r1:1"] = ({"echo": odd}, None)
    after = store.commit(c)
    loaded = store.load_run("r1")
    assert loaded == after and loaded.answer == odd and loaded.facts == {"note": odd}
    assert store.messages("r1", 1)[0]["args"]["text"] == odd
    assert store.events("r1")[-1].detail == {"n": 1, "text": odd}
    assert verify_chain(store.events("r1")) is None
    e = store.effect("r1:1")
    assert e is not None and e.args == {"text": odd} and e.result == {"echo": odd}
    assert store.approvals("r1")[0].args == {"text": odd}

# -- what the approval inbox keeps beside the runs ----------------------------------------

def test_accounts_are_added_once_changed_and_listed(store: Store) -> None:
    from fsm.store.people import Account

    a = Account(name="priya", role="approver", password_hash="h1", limit=500_000,
                created_at=1.0, updated_at=1.0)
    store.add_account(a)
    with pytest.raises(StoreError, match="already exists"):
        store.add_account(a)
    store.save_account(a.model_copy(update={"disabled": True, "password_hash": "h2",
                                            "updated_at": 2.0}))
    got = store.account("priya")
    assert got is not None and (got.disabled, got.password_hash, got.limit) == (True, "h2",
                                                                               500_000)
    assert store.account("nobody") is None
    with pytest.raises(StoreError, match="no account"):
        store.save_account(a.model_copy(update={"name": "nobody"}))
    # A change saved from a row read before another change landed is refused whole.
    with pytest.raises(StoreError, match="changed while this change was being made"):
        store.save_account(a.model_copy(update={"password_hash": "old", "updated_at": 3.0}),
                           was=1.0)
    store.save_account(got.model_copy(update={"limit": 9, "updated_at": 3.0}), was=2.0)
    got = store.account("priya")
    assert got is not None and (got.password_hash, got.limit, got.updated_at) == ("h2", 9, 3.0)
    store.add_account(Account(name="ana", role="auditor", password_hash="h"))
    assert [x.name for x in store.accounts()] == ["ana", "priya"]


def test_a_pause_and_an_expiry_write_their_notifications_in_the_same_commit(
        store: Store) -> None:
    from fsm.store.people import Refusal

    run = created(store)
    run = store.commit(step_commit(run, 1, new_approval=approval(run, "a1")))
    (waiting,) = store.notifications(approval_ids=["a1"])
    assert (waiting.key, waiting.kind, waiting.status) == ("a1:waiting", "waiting", "pending")
    assert [n.key for n in store.due_notifications(now=10_000.0)] == ["a1:waiting"]
    store.save_notification(waiting.model_copy(update={"status": "delivered", "attempts": 1,
                                                        "delivered_at": 1002.0}))
    assert store.due_notifications(now=10_000.0) == []
    store.commit(step_commit(run, 2, decision=decision_of("expired", None, None, 5001.0)))
    assert [(n.key, n.status) for n in store.notifications(run_id="r1")] == [
        ("a1:waiting", "delivered"), ("a1:expired", "pending")]
    assert store.notifications(approval_ids=[]) == []
    store.add_refusal(Refusal(run_id="r1", approval_id="a1", account="omar", action="approve",
                              code="stale", reason="the run moved on", at=1003.0,
                              remote="127.0.0.1"))
    (refused,) = store.refusals("r1")
    assert (refused.account, refused.code, refused.remote) == ("omar", "stale", "127.0.0.1")
    assert store.approval("a1") is not None and store.approval("zz") is None
