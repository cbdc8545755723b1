"""The store contract of conversations, on every store: replies are kept in the order
their commits land, never touch the run row, are read once by a step's commit, and a
run's reply token is kept only as its hash."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import storekit

from fsm import ConcurrentUpdate, MemoryStore, RunNotFound, RunState, SQLiteStore, Store
from fsm.errors import StoreError
from fsm.records import Event, StepCommit
from fsm.records.conversation import Reply
from fsm.records.transcript import read_all
from fsm.store import open_store

store = storekit.store  # the fixture: each test on every kind of store


def created(store: Store, run_id: str = "r1", token_hash: str | None = None) -> RunState:
    run = RunState(run_id=run_id, workflow="wf", definition_hash="d" * 16, user="asha",
                   state="talking", created_at=1000.0, updated_at=1000.0, message_count=1)
    first = StepCommit(run=run, expected_version=0,
                       messages=read_all([{"role": "user", "content": "hello"}]),
                       events=[Event(run_id=run_id, step=0, time=1000.0, kind="start")],
                       token_hash=token_hash)
    return store.create_run(run, first)


def reply(run: RunState, text: str, **changes: Any) -> Reply:
    return Reply(run_id=run.run_id, text=text, received_at=1001.0, run_version=run.version,
                 **changes)


def reading(run: RunState, *seqs: int) -> StepCommit:
    new = run.model_copy(update={"message_count": run.message_count + len(seqs),
                                 "updated_at": 1002.0})
    return StepCommit(run=new, expected_version=run.version, replies_read=list(seqs),
                      messages=read_all([{"role": "user", "content": f"r{s}"} for s in seqs]),
                      events=[Event(run_id=run.run_id, step=run.step, time=1002.0,
                                    kind="reply", detail={"seq": s}) for s in seqs])


def test_replies_are_kept_in_order_without_touching_the_run(store: Store) -> None:
    run = created(store)
    first = store.add_reply(reply(run, "A-1001", asked_hash="h" * 64), version=run.version)
    second = store.add_reply(reply(run, "and quickly, please ✓"), version=run.version)
    assert (first.seq, second.seq) == (1, 2)
    assert [(r.seq, r.text, r.asked_hash, r.read_step) for r in store.replies("r1")] == [
        (1, "A-1001", "h" * 64, None), (2, "and quickly, please ✓", None, None)]
    after = store.load_run("r1")
    assert after.version == run.version and store.log_head("r1") == (1, store.log_head("r1")[1])
    assert store.replies("other") == []


def test_a_reply_for_a_run_that_moved_on_or_does_not_exist_is_not_kept(store: Store) -> None:
    run = created(store)
    with pytest.raises(ConcurrentUpdate):
        store.add_reply(reply(run, "late"), version=run.version - 1)
    with pytest.raises(RunNotFound):
        store.add_reply(reply(run, "x").model_copy(update={"run_id": "nope"}), version=1)
    assert store.replies("r1") == []


def test_a_commit_reads_replies_once(store: Store) -> None:
    run = created(store)
    for text in ("one", "two", "three"):
        store.add_reply(reply(run, text), version=run.version)
    run = store.commit(reading(run, 1, 2))
    assert [r.seq for r in store.replies("r1", unread_only=True)] == [3]
    assert [r.read_step for r in store.replies("r1")] == [0, 0, None]
    version, events = run.version, len(store.events("r1"))
    with pytest.raises(StoreError, match="reply 2 of run 'r1' is missing or was read already"):
        store.commit(reading(run, 3, 2))
    # Nothing of the refused commit landed: reply 3 is still unread, the run unchanged.
    assert [r.seq for r in store.replies("r1", unread_only=True)] == [3]
    assert store.load_run("r1").version == version and len(store.events("r1")) == events
    with pytest.raises(StoreError):
        store.commit(reading(run, 9))


def test_replies_sent_at_once_all_arrive_in_the_order_committed(
        store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    run = created(store)
    if isinstance(store, SQLiteStore):
        others: list[Store] = [SQLiteStore(store.path) for _ in range(4)]
    elif isinstance(store, MemoryStore):
        others = [store] * 4
    else:
        others = [open_store(request.getfixturevalue("pg_url")) for _ in range(4)]
    barrier = threading.Barrier(4)
    seqs: dict[str, int] = {}

    def send(s: Store, text: str) -> None:
        barrier.wait()
        seqs[text] = s.add_reply(reply(run, text), version=run.version).seq

    threads = [threading.Thread(target=send, args=(s, f"m{i}")) for i, s in enumerate(others)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seqs.values()) == [1, 2, 3, 4]
    assert {r.text: r.seq for r in store.replies("r1")} == seqs
    for s in others:
        if s is not store:
            s.close()


def test_the_reply_token_is_kept_as_its_hash_with_the_run(store: Store) -> None:
    created(store, "r1", token_hash="f" * 64)
    created(store, "r2")
    assert store.reply_token("r1") == "f" * 64
    assert store.reply_token("r2") is None and store.reply_token("nope") is None
