"""Migrating runs on purpose: the plan is checked whole before anything changes, each run
moves all or nothing with a ``migrated`` event in its chain, and the audit judges each
step against the definition in force at it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deploykit import removed_state, revised, v1, v2
from payoutkit import PAY, SmallAmount, payout
from refund_scripts import actions, small_refund

from fsm import (
    Engine,
    MemoryStore,
    MigrationRefused,
    SQLiteStore,
    Store,
    UsageError,
    WorkflowSpec,
)
from fsm.auditor.audit import audit
from fsm.migration import migrate, plan_migration
from fsm.policy import PolicyUnavailable, View
from fsm.store import open_store
from fsm.testing import ScriptedPolicy
from workflows.refund import clerk
from workflows.refund.shop import AnyShop, PostgresShop, Shop

LARGE = "Order A-1002: my headphones stopped working, I want my money back"
SMALL = "Order A-1001: the kettle arrived broken"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, AnyShop]]:
    store: Store
    shop: AnyShop
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        store, shop = open_store(url), PostgresShop(url).seed_demo()
    elif request.param == "sqlite":
        path = str(tmp_path / "runs.db")
        store, shop = SQLiteStore(path), Shop(path).seed_demo()
    else:
        store, shop = MemoryStore(), Shop().seed_demo()
    yield store, shop
    shop.close()
    store.close()


class Stops:
    """A scripted model that becomes unreachable once its script is used up: the run
    stops as model_unavailable in whatever state the script left it."""

    def __init__(self, steps: list[Any]) -> None:
        self.script = ScriptedPolicy(actions(steps))

    def __call__(self, view: View) -> Any:
        if len(self.script.remaining) == 0 or _used(view) >= len(self.script.actions):
            raise PolicyUnavailable("the model is down")
        return self.script(view)


def _used(view: View) -> int:
    return sum(1 for m in view.messages if m.get("role") == "assistant")


def everything(store: Store, run_id: str) -> dict[str, Any]:
    """All a store holds of a run, to show a refused plan changed nothing."""
    return {"run": store.load_run(run_id).model_dump(), "column": store.definition_column(run_id),
            "events": [e.hash for e in store.events(run_id)],
            "messages": store.messages(run_id),
            "approvals": [a.model_dump() for a in store.approvals(run_id, pending_only=False)]}


def paid(shop: AnyShop) -> list[tuple[str, int]]:
    return sorted((p["order_id"], p["amount_paise"]) for p in shop.ledger())


# -- a run moves to version 2 and continues there ------------------------------------------

def test_a_migrated_run_continues_on_version_two(where: tuple[Store, AnyShop]) -> None:
    store, shop = where
    one, two = v1(shop), v2(shop)
    Engine(one, store, clerk).start(LARGE, user="ravi", run_id="big")
    (asked,) = store.approvals("big")
    dry = migrate(store, two, runs=["big"], to="2", by="ops", dry_run=True)
    assert dry.plan.ok and dry.moved == [] and store.load_run("big").definition_hash == \
        one.definition_hash
    assert dry.plan.lines() == [
        "migrate big: version 1 → 2, awaiting_approval → awaiting_approval",
        "  note: waits for a person again in 'awaiting_approval' (events: approved, "
        f"declined, expired): request {asked.approval_id} is withdrawn and asked again "
        "under version 2"]

    done = migrate(store, two, runs=["big"], to="2", by="ops")
    assert (done.moved, done.left) == (["big"], [])
    run = store.load_run("big")
    assert (run.definition_hash, run.status, run.state) == (
        two.definition_hash, "awaiting_approval", "awaiting_approval")
    assert store.definition_column("big") == two.definition_hash
    old, new = store.approvals("big", pending_only=False)
    assert (old.approval_id, old.decision, old.reviewer) == (asked.approval_id, "withdrawn",
                                                             "ops")
    assert new.decision is None and new.args == asked.args
    assert new.run_version == run.version
    kinds = [(e.kind, e.state_before, e.state_after) for e in store.events("big")][-3:]
    assert kinds == [("decision", "awaiting_approval", "awaiting_approval"),
                     ("migrated", "awaiting_approval", "awaiting_approval"),
                     ("pause", "awaiting_approval", "awaiting_approval")]
    moved = next(e for e in store.events("big") if e.kind == "migrated")
    assert {k: moved.detail[k] for k in ("from_hash", "to_hash", "from_version",
                                         "to_version", "map", "by")} == {
        "from_hash": one.definition_hash, "to_hash": two.definition_hash,
        "from_version": "1", "to_version": "2",
        "map": {"awaiting_approval": "awaiting_approval"}, "by": "ops"}
    assert audit(store, "big").ok, audit(store, "big").problems

    # Code that keeps only version 2 drives it now; the person decides the new request.
    after = Engine(v2(shop, keep_v1=False), store, clerk).decide("big", True, "supervisor")
    assert (after.status, after.state, after.definition_hash) == (
        "done", "done", two.definition_hash)
    assert paid(shop) == [("A-1002", 180_000)]
    assert audit(store, "big").ok, audit(store, "big").problems


def test_runs_are_selected_by_version_and_finished_runs_stay(where: tuple[Store, AnyShop]) -> None:
    store, shop = where
    one, two = v1(shop), v2(shop)
    Engine(one, store, clerk).start(SMALL, user="asha", run_id="finished")
    Engine(one, store, clerk).start(LARGE, user="ravi", run_id="waiting")
    Engine(two, store, clerk).start(SMALL, user="asha", run_id="already", drive=False)
    result = migrate(store, two, from_version="1", to="current", by="ops")
    assert result.moved == ["waiting"]
    assert store.load_run("finished").definition_hash == one.definition_hash
    with pytest.raises(MigrationRefused, match="the run is done: only runs that have not "
                                               "ended move"):
        migrate(store, two, runs=["finished"], by="ops")
    skip = plan_migration(store, two, runs=["already"], by="ops")
    assert skip.ok and skip.lines() == ["skip    already: already on version 2"]
    with pytest.raises(UsageError, match="no version '7' of workflow 'refund' is recorded"):
        migrate(store, two, from_version="7", by="ops")
    with pytest.raises(UsageError, match="keeps no version '9'"):
        migrate(store, two, runs=["waiting"], to="9", by="ops")


# -- bad plans are refused whole, with a line for every problem -----------------------------

def refused(store: Store, spec: WorkflowSpec, run_ids: list[str], **plan: Any) -> list[str]:
    """Migrate, expecting a refusal that changes nothing; the refusal's lines."""
    before = {r: everything(store, r) for r in run_ids}
    with pytest.raises(MigrationRefused) as info:
        migrate(store, spec, runs=run_ids, by="ops", **plan)
    assert {r: everything(store, r) for r in run_ids} == before
    assert str(info.value).splitlines()[0].endswith("; nothing was changed")
    return info.value.lines


def test_a_state_the_target_lacks_is_unmapped(where: tuple[Store, AnyShop]) -> None:
    store, shop = where
    Engine(v1(shop), store, clerk).start(LARGE, user="ravi", run_id="big")
    target = revised(removed_state(shop), version="3", earlier=(v1(shop),))
    lines = refused(store, target, ["big"], to="3")
    assert lines[1] == (
        "  - state 'awaiting_approval' is not mapped: version 3 has no state "
        "'awaiting_approval' (map it with --map awaiting_approval=STATE; states: "
        "collecting, verifying, deciding, refunding, replying, done, handed_over)")


def test_a_waiting_state_mapped_to_a_model_state_is_refused(where: tuple[Store, AnyShop]) -> None:
    store, shop = where
    Engine(v1(shop), store, clerk).start(LARGE, user="ravi", run_id="big")
    lines = refused(store, v2(shop), ["big"], to="2",
                    state_map={"awaiting_approval": "deciding", "verifying": "nowhere"})
    assert lines == [
        "refuse  big: version 1 → 2, awaiting_approval → deciding",
        "  - state 'awaiting_approval' waits for a person, but 'deciding' in version 2 is a "
        "model state: map a waiting state to a state that waits for a person",
        "plan: --map verifying=nowhere: version 2 has no state 'nowhere' (states: "
        "collecting, verifying, deciding, awaiting_approval, refunding, replying, "
        "escalated, done, handed_over)"]


def test_a_map_that_would_break_an_invariant_is_refused(where: tuple[Store, AnyShop]) -> None:
    store, shop = where
    # Decided on nothing yet: the run waits in deciding (the model went away there).
    Engine(v1(shop), store, Stops(small_refund()[:4])).start(SMALL, user="asha", run_id="d")
    Engine(v1(shop), store, clerk).start(LARGE, user="ravi", run_id="fine")
    assert (store.load_run("d").status, store.load_run("d").state) == (
        "model_unavailable", "deciding")
    lines = refused(store, v2(shop), ["d", "fine"], to="2",
                    state_map={"deciding": "refunding"})
    assert lines[0] == "refuse  d: version 1 → 2, deciding → refunding"
    assert lines[1].startswith(
        "  - version 2 breaks its invariant 'refund_item runs only after a person fires "
        "approved, unless a guard established amount_within_limit' on from 'refunding': "
        "refund_item runs, no guard established amount_within_limit, and no person has "
        "fired approved (refunding: the model calls refund_item")
    assert lines[2].startswith("migrate fine:")  # a good run moves only with the rest


def test_facts_the_targets_guards_read_must_exist(where: tuple[Store, AnyShop]) -> None:
    store, shop = where
    # The order was fetched, the policy was not: the run waits in verifying.
    Engine(v1(shop), store, Stops(small_refund()[:2])).start(SMALL, user="asha", run_id="v")
    lines = refused(store, v2(shop), ["v"], to="2", state_map={"verifying": "deciding"})
    assert lines[1:3] == [
        "  - the guard of 'small_refund' in version 2 (amount ≤ ₹500 and ≤ refundable) reads "
        "'policy', which the run lacks, and 'deciding' has no tool that could add it",
        "  - the guard of 'large_refund' in version 2 (amount > ₹500 and ≤ refundable) reads "
        "'policy', which the run lacks, and 'deciding' has no tool that could add it"]
    assert any("every path into refunding passes through verified" in x for x in lines)


# -- a call waiting for approval: asked again, or given back to the model ------------------

@pytest.mark.parametrize("changed, asked_again", [
    pytest.param({"description": "Pay the customer, in paise."}, True, id="description"),
    pytest.param({"args": SmallAmount}, True, id="schema-still-valid"),
])
def test_a_call_waiting_for_approval_is_asked_again(changed: dict[str, Any],
                                                    asked_again: bool) -> None:
    store, out = MemoryStore(), []  # type: ignore[var-annotated]
    one = payout(out, version="1")
    run = Engine(one, store, ScriptedPolicy(PAY)).start("pay 50", run_id="p")
    assert (run.status, run.pending.kind) == ("awaiting_approval", "call")  # type: ignore[union-attr]
    two = payout(out, version="2", earlier=(one,), **changed)
    result = migrate(store, two, runs=["p"], by="ops")
    assert "the call pay waiting for approval is asked for again under version 2" in \
        result.plan.lines()[1]
    moved = store.load_run("p")
    assert (moved.status, moved.pending.tool, moved.pending.args) == (  # type: ignore[union-attr]
        "awaiting_approval", "pay", {"amount": 50})
    done = Engine(two, store, ScriptedPolicy(PAY)).decide("p", True, "sup")
    assert done.status == "done" and out == [("p:2", 50)]
    assert audit(store, "p").ok, audit(store, "p").problems


def test_a_call_the_target_refuses_goes_back_to_the_model() -> None:
    store, out = MemoryStore(), []  # type: ignore[var-annotated]
    one = payout(out, version="1")
    two = payout(out, version="2", earlier=(one,), args=SmallAmount)
    # The waiting call asks for 500 under a schema that takes at most 100.
    big = [PAY[0], {"tool": "pay", "args": {"amount": 500}}]
    Engine(one, store, ScriptedPolicy(big)).start("pay 500", run_id="q")
    result = migrate(store, two, runs=["q"], by="ops")
    assert result.moved == ["q"]
    note = result.plan.lines()[1]
    assert note.startswith("  note: its call pay waiting for approval is refused under "
                           "version 2: its arguments are not valid under the schema of pay")
    run = store.load_run("q")
    assert (run.status, run.pending, run.state) == ("running", None, "paying")
    last = store.messages("q")[-1]
    assert last["role"] == "tool" and last["tool"] == "pay"
    assert last["error"].startswith("withdrawn before anyone decided: the workflow moved to "
                                    "version 2, where its arguments are not valid")
    assert [a.decision for a in store.approvals("q", pending_only=False)] == ["withdrawn"]
    # The model asks again, within the new schema, and a person approves that call.
    again = Engine(two, store, ScriptedPolicy([*big, {"tool": "pay", "args": {"amount": 80}}]))
    assert again.resume("q").status == "awaiting_approval"
    assert again.decide("q", True, "sup").status == "done"
    assert out == [("q:3", 80)]
    assert audit(store, "q").ok, audit(store, "q").problems


# -- per run, all or nothing ------------------------------------------------------------------

def test_a_run_being_driven_is_left_as_it_was(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with SQLiteStore(path) as store, Shop(path).seed_demo() as shop:
        Engine(v1(shop), store, clerk).start(LARGE, user="ravi", run_id="big")
        Engine(v1(shop), store, clerk).start(LARGE, user="ravi", run_id="other")
        store.acquire("big", "elsewhere.example:1:x", 1e12, ttl=60)  # another machine
        before = everything(store, "big")
        result = migrate(store, v2(shop), from_version="1", by="ops")
        assert result.moved == ["other"]
        ((left, why),) = result.left
        assert left == "big" and "is being driven by another process" in why
        assert everything(store, "big") == before


def test_a_run_that_changed_since_the_plan_is_left(tmp_path: Path) -> None:
    from fsm.errors import ConcurrentUpdate
    from fsm.runtime.migrating import move_run

    with SQLiteStore(str(tmp_path / "runs.db")) as store:
        shop = Shop().seed_demo()
        Engine(v1(shop), store, clerk).start(LARGE, user="ravi", run_id="big")
        plan = plan_migration(store, v2(shop), runs=["big"], by="ops")
        (verdict,) = plan.moving
        assert verdict.move is not None
        with pytest.raises(ConcurrentUpdate):
            move_run(store, "big", verdict.move, version=verdict.version - 1,
                     clock=lambda: 1e9)
        assert store.load_run("big").definition_hash == v1().definition_hash
        shop.close()


# -- the audit judges each step by the definition in force at it -----------------------------

ESCALATE = [("get_order", {"order_id": "A-1001"}), ("advance", {"event": "details_complete"}),
            ("advance", {"event": "escalate"}), ("send_reply", {"text": "A person will look."})]


def test_steps_after_a_migration_are_judged_by_the_new_version(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with SQLiteStore(path) as store, Shop(path).seed_demo() as shop:
        Engine(v1(shop), store, Stops(ESCALATE[:2])).start(SMALL, user="asha", run_id="e")
        migrate(store, v2(shop), runs=["e"], by="ops")
        run = Engine(v2(shop), store, ScriptedPolicy(actions(ESCALATE))).resume("e")
        assert (run.status, run.state) == ("done", "done")
        assert audit(store, "e").ok, audit(store, "e").problems
        # Version 2's record altered to read as version 1: escalating is not in its tables.
        db = sqlite3.connect(path)
        body = db.execute("SELECT body FROM definitions WHERE version = '1'").fetchone()[0]
        db.execute("UPDATE definitions SET body = ? WHERE version = '2'", (body,))
        db.commit()
        db.close()
    with SQLiteStore(path) as store:
        problems = audit(store, "e").problems
        escalated = [p for p in problems if "'escalate' moved 'verifying' → 'escalated'" in p]
        assert escalated and "which the tables of version 1 do not have" in escalated[0]


def test_a_run_with_an_unfinished_write_is_refused() -> None:
    from fsm.records import Effect

    store, out = MemoryStore(), []  # type: ignore[var-annotated]
    one = payout(out, version="1")
    Engine(one, store).start("pay", run_id="w", drive=False)
    run = store.load_run("w")
    # A process claimed the next step's write and died before its step committed.
    store.claim_effect(Effect(key=f"w:{run.step + 1}", run_id="w", step=run.step + 1,
                              tool="pay", args={"amount": 5}, status="STARTED",
                              started_at=1.0))
    lines = refused(store, payout(out, version="2", earlier=(one,),
                                  description="Pay, in cents."), ["w"])
    assert lines[1] == ("  - its step 1 claimed a write of pay and never committed (a "
                        "crash): resume it on version 1 first, which finishes that write or "
                        "hands the run over")
