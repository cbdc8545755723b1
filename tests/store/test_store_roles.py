"""The store's roles: each a small documented protocol, every store implements them all,
and the roles the contract suite did not reach behave alike on every store."""

from __future__ import annotations

import dataclasses
import inspect
import threading
from typing import Any

import pytest
import storekit

from fsm import Effect, MemoryStore, RunState, SQLiteStore, Store
from fsm.store import roles
from fsm.store.people import Refusal

store = storekit.store  # the fixture: each test on every kind of store

ROLES = [roles.RunReads, roles.Runs, roles.Effects, roles.Approvals, roles.Definitions,
         roles.People, roles.Conversations, roles.Desk, roles.Leases, roles.Inbox]


def own_methods(role: type) -> dict[str, Any]:
    return {n: f for n, f in vars(role).items()
            if inspect.isfunction(f) and not n.startswith("__")}


def test_each_role_is_a_small_documented_protocol_of_abstract_methods() -> None:
    for role in ROLES:
        assert getattr(role, "_is_protocol", False), role
        assert role.__doc__ and role.__doc__.strip(), role
        methods = own_methods(role)
        assert 0 < len(methods) <= 10, (role.__name__, sorted(methods))
        for name, f in methods.items():
            assert getattr(f, "__isabstractmethod__", False), (role.__name__, name)


def test_the_store_is_the_union_of_the_roles_and_no_store_lacks_one() -> None:
    union = set().union(*(own_methods(r) for r in ROLES))
    assert union <= set(dir(Store))
    assert all(r in Store.__mro__ for r in ROLES)
    from fsm.store.postgres import PostgresStore

    for cls in (MemoryStore, SQLiteStore, PostgresStore):
        assert not cls.__abstractmethods__, (cls.__name__, cls.__abstractmethods__)

    class Partial(MemoryStore):
        pass

    # A store that leaves a role's method unimplemented cannot be made at all (before,
    # it fell back to a default that raised, or answered nothing, when first called).
    Partial.__abstractmethods__ = frozenset({"handovers"})
    with pytest.raises(TypeError, match="handovers"):
        Partial()


#: Each field of ``store.roles`` and the protocols its object answers.
FIELDS = {"runs": [roles.RunReads, roles.Runs], "effects": [roles.Effects],
          "approvals": [roles.Approvals], "definitions": [roles.Definitions],
          "inbox": [roles.People, roles.Inbox], "conversations": [roles.Conversations],
          "desk": [roles.Desk], "leases": [roles.Leases]}


def test_fields_name_every_role_once() -> None:
    assert [f.name for f in dataclasses.fields(roles.Roles)] == list(FIELDS)
    assert sorted((r for rs in FIELDS.values() for r in rs), key=str) == sorted(ROLES, key=str)


def test_a_sql_store_is_one_database_and_one_object_per_role(store: Store) -> None:
    """Each role is its own object over the store's one database (the memory store is
    every role itself), and each of the store's methods is answered by the role whose
    protocol declares it."""
    from fsm.store.sql import SQLStore, _Via

    parts = {name: getattr(store.roles, name) for name in FIELDS}
    if isinstance(store, MemoryStore):
        assert all(part is store for part in parts.values())
        return
    assert isinstance(store, SQLStore)
    assert len({id(p) for p in parts.values()}) == len(parts)
    assert all(part.db is store.db for part in parts.values())
    for name, protocols in FIELDS.items():
        for protocol in protocols:
            for method in own_methods(protocol):
                via = vars(SQLStore)[method]
                assert isinstance(via, _Via) and via.role == name, (method, name)
                assert callable(getattr(parts[name], method)), (name, method)

    # Rows written through one role are what the store (and every other role) reads.
    parts["runs"].create_run(run())
    store.roles.inbox.add_refusal(Refusal(run_id="r1", approval_id="a1", account="omar",
                                          action="approve", code="stale", reason="no",
                                          at=1000.0))
    assert store.load_run("r1").run_id == "r1"
    assert [r.reason for r in store.refusals("r1")] == ["no"]
    assert store.roles.definitions.definition_column("r1") == "d" * 16


def test_code_that_takes_one_role_takes_any_store_s_object_for_it(store: Store) -> None:
    """A consumer typed with one role works on ``store.roles.<role>`` of every store."""
    from fsm.auditor.beside import refusals
    from fsm.migration import unfinished_writes
    from fsm.store.desk import OPEN
    from fsm.web.desk import queue

    store.create_run(run())
    store.claim_effect(Effect(key="r1:1", run_id="r1", step=1, tool="pay", args={},
                              status="STARTED", started_at=1000.0))
    store.add_refusal(Refusal(run_id="r1", approval_id="a1", account="omar",
                              action="approve", code="stale", reason="no", at=1000.0))
    assert unfinished_writes(store.roles.effects, [store.load_run("r1")]) == {"r1": "pay"}
    assert refusals(store.roles.inbox, "r1") == []  # the chain of one attempt holds
    rows, pager = queue(store.roles.desk, 1000.0, OPEN, 1)
    assert rows == [] and pager.page == 1


def test_a_sql_store_method_read_from_its_class_or_before_its_roles() -> None:
    store = SQLiteStore(":memory:")
    store.create_run(run())
    assert SQLiteStore.load_run(store, "r1").run_id == "r1"
    bare = SQLiteStore.__new__(SQLiteStore)
    with pytest.raises(AttributeError, match=r"SQLiteStore.load_run: the store has no roles"):
        bare.load_run("r1")


def run(run_id: str = "r1") -> RunState:
    return RunState(run_id=run_id, workflow="wf", definition_hash="d" * 16, user="asha",
                    state="s", created_at=1000.0, updated_at=1000.0)


def test_effects_lists_a_runs_rows_in_key_order(store: Store) -> None:
    for run_id in ("r1", "r2"):
        store.create_run(run(run_id))
    for key, run_id in (("r1:3", "r1"), ("r2:1", "r2"), ("r1:1", "r1")):
        store.claim_effect(Effect(key=key, run_id=run_id, step=int(key[-1]), tool="pay",
                                  args={"k": key}, status="STARTED", started_at=1000.0))
    rows = store.effects("r1")
    assert [(e.key, e.args, e.status) for e in rows] == [
        ("r1:1", {"k": "r1:1"}, "STARTED"), ("r1:3", {"k": "r1:3"}, "STARTED")]
    assert store.effects("nobody") == []


def test_a_sql_store_chains_refused_attempts_in_its_run_row(store: Store) -> None:
    store.create_run(run())
    before = store.refusal_head("r1")
    for i in range(2):
        store.add_refusal(Refusal(run_id="r1", approval_id="a1", account="omar",
                                  action="approve", code="stale", reason=f"no {i}",
                                  at=1000.0 + i))
    after = store.refusal_head("r1")
    if isinstance(store, MemoryStore):
        assert before is None and after is None  # kept as objects, which nobody edits
    else:
        assert before is not None and after is not None
        assert after[0] == before[0] + 2 and after[1] != before[1]
    assert [r.reason for r in store.refusals("r1")] == ["no 0", "no 1"]


def test_one_sweeper_at_a_time_and_workers_are_woken_where_the_store_can(
        store: Store) -> None:
    with store.sweep_lock() as first:
        assert first is True
        with store.sweep_lock() as second:
            # One process's stores have one sweeper; PostgreSQL's lock is fleet-wide.
            assert second is isinstance(store, MemoryStore | SQLiteStore)
    wake, stop = threading.Event(), threading.Event()
    try:
        notifies = store.subscribe(wake, stop)
        assert notifies is not isinstance(store, MemoryStore | SQLiteStore)
        if notifies:
            assert wake.wait(5)  # set once listening (anything missed before)
            wake.clear()
            store.create_run(run())  # a new running run: the workers are told
            assert wake.wait(5)
    finally:
        stop.set()
