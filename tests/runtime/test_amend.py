"""A reviewer may approve a lower amount than asked, never a higher one.

The approval is bound to the edited arguments, the log records both the request and
the edit, the model is told, and the money moved equals the approved amount.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fsm import ApprovalRefused, Engine, SQLiteStore
from fsm.auditor.audit import audit
from fsm.cli import app
from workflows.refund import Shop, build, clerk

LARGE = "Order A-1002: the headphones stopped working"


@pytest.fixture
def paused(tmp_path: Path) -> str:
    """A large refund of ₹1,800 for ravi, waiting for a supervisor."""
    db = str(tmp_path / "runs.db")
    with SQLiteStore(db) as store, Shop(db) as shop:
        run = Engine(build(shop.seed_demo()), store, clerk).start(
            LARGE, user="ravi", run_id="big",
            meta={"workflow_ref": "refund", "policy": "default"})
        assert run.status == "awaiting_approval"
    return db


def test_a_lower_amount_is_paid_and_logged(paused: str) -> None:
    result = CliRunner().invoke(app, ["approve", "big", "--reviewer", "priya", "--note",
                                      "partly used", "--set", "amount_paise=1,200",
                                      "--db", paused])
    assert result.exit_code == 0, result.output
    with SQLiteStore(paused) as store, Shop(paused) as shop:
        run = store.load_run("big")
        assert run.status == "done"
        assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [
            ("A-1002", 120_000)]
        (a,) = store.approvals("big", pending_only=False)
        assert a.args == {"item_id": "headphones-1", "amount_paise": 180_000}
        assert a.approved_args == {"item_id": "headphones-1", "amount_paise": 120_000}
        (decision,) = [e for e in store.events("big") if e.kind == "decision"]
        assert decision.detail["amended"] == {
            "asked": {"item_id": "headphones-1", "amount_paise": 180_000},
            "approved": {"item_id": "headphones-1", "amount_paise": 120_000}}
        told = [m for m in store.messages("big") if m.get("approved")]
        assert len(told) == 1 and "amount_paise 180000 → 120000" in told[0]["content"]
        assert "₹1,200" in shop.outbox()[0]["text"]
        assert audit(store, "big").ok, audit(store, "big").problems


@pytest.mark.parametrize(("changes", "why"), [
    ({"amount_paise": 250_000}, "the amount may only be lowered"),
    ({"amount_paise": 0}, "the amount may only be lowered"),
    ({"amount_paise": "12000"}, "must be a whole number"),
    ({"item_id": "lamp-1"}, "only amount_paise may be changed"),
])
def test_a_higher_or_other_change_is_refused_and_nothing_moves(
        paused: str, changes: dict[str, object], why: str) -> None:
    with SQLiteStore(paused) as store, Shop(paused) as shop:
        before = len(store.events("big"))
        engine = Engine(build(shop), store, clerk)
        with pytest.raises(ApprovalRefused, match=why):
            engine.decide("big", True, "priya", "ok", amend=changes)
        assert store.load_run("big").status == "awaiting_approval"
        assert len(store.events("big")) == before and shop.ledger() == []
        with pytest.raises(ApprovalRefused, match="only an approval can change"):
            engine.decide("big", False, "priya", "no", amend={"amount_paise": 1})


def test_a_changed_approved_amount_in_the_row_pays_nothing(paused: str) -> None:
    import sqlite3

    with SQLiteStore(paused) as store, Shop(paused) as shop:
        engine = Engine(build(shop), store, clerk)
        run = engine.decide("big", True, "priya", "ok", amend={"amount_paise": 120_000},
                            drive=False)
        assert run.status == "running"
        con = sqlite3.connect(paused)
        con.execute("UPDATE approvals SET approved_args = ? WHERE run_id = 'big'",
                    (json.dumps({"item_id": "headphones-1", "amount_paise": 170_000}),))
        con.commit()
        con.close()
        run = Engine(build(shop), store, clerk).resume("big")
        assert run.status == "handed_over" and shop.ledger() == []
        assert any("decision on approval" in p for p in audit(store, "big").problems)


def test_an_approved_call_runs_with_the_lowered_arguments(tmp_path: Path) -> None:
    from typing import Any

    from pydantic import BaseModel

    from fsm import ToolContext, ToolSpec, define_workflow
    from fsm.testing import ScriptedPolicy

    class Wire(BaseModel):
        to: str
        cents: int

    sent: list[dict[str, Any]] = []

    def wire(args: Wire, ctx: ToolContext) -> dict[str, Any]:
        sent.append(args.model_dump())
        return {"status": "sent"}

    def lower(tool: str | None, args: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
        if changes.get("cents", 0) > args["cents"]:
            raise ValueError("only lower")
        return {**args, **changes}

    spec = define_workflow(
        "wire", transitions={"drafting": {"sent": "done"}}, terminal={"done"},
        tools_by_state={"drafting": ["wire"]}, initial="drafting", amend=lower,
        tools=[ToolSpec("wire", wire, "Send a wire.", Wire, write=True, retry_safe=True,
                        approval=True, emits=lambda r: "sent", emits_events=("sent",))])
    with SQLiteStore(str(tmp_path / "w.db")) as store:
        engine = Engine(spec, store, ScriptedPolicy([{"tool": "wire",
                                                      "args": {"to": "ACME", "cents": 900}}]))
        assert engine.start("pay", user="omar", run_id="w").status == "awaiting_approval"
        with pytest.raises(ApprovalRefused, match="only lower"):
            engine.decide("w", True, "priya", "", amend={"cents": 1_000})
        run = engine.decide("w", True, "priya", "invoice says 600", amend={"cents": 600})
        assert (run.status, sent) == ("done", [{"to": "ACME", "cents": 600}])
        assert [e.detail["args"] for e in store.events("w") if e.kind == "tool"] == [
            {"to": "ACME", "cents": 600}]
        assert audit(store, "w").ok, audit(store, "w").problems
