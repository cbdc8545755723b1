"""An approval is bound to the money end to end.

Someone with write access changes what a run holds after a person approved it (the
refund decision in the run snapshot, the arguments of an approved call, the approval
row itself). The write never runs with the changed values: the run is handed over,
nothing is paid, and the model is never told the changed amount.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from fsm import Engine, SQLiteStore, ToolContext, ToolSpec, define_workflow
from fsm.testing import ScriptedPolicy
from workflows.refund import Shop, build, clerk

LARGE = "Order A-1002: the headphones stopped working, I want a refund"


def _edit_snapshot(db: str, run_id: str, edit: Any) -> None:
    con = sqlite3.connect(db)
    try:
        (raw,) = con.execute("SELECT snapshot FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        snap = json.loads(raw)
        edit(snap)
        con.execute("UPDATE runs SET snapshot = ? WHERE run_id = ?", (json.dumps(snap), run_id))
        con.commit()
    finally:
        con.close()


def _transcript_text(store: SQLiteStore, run_id: str) -> str:
    return json.dumps(store.messages(run_id), ensure_ascii=False)


def test_a_decision_changed_after_the_approval_pays_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    store, shop = SQLiteStore(db), Shop(db).seed_demo()
    engine = Engine(build(shop), store, clerk)
    run = engine.start(LARGE, user="ravi", run_id="big")
    assert run.status == "awaiting_approval"
    (approval,) = store.approvals("big")
    assert approval.args == {"item_id": "headphones-1", "amount_paise": 180_000}

    def raise_amount(snap: dict[str, Any]) -> None:
        snap["facts"]["decision"]["amount_paise"] = 999_999

    _edit_snapshot(db, "big", raise_amount)
    run = Engine(build(shop), store, clerk).decide("big", True, "priya", "receipt checked")

    assert run.status == "handed_over"
    assert "differs from what approval" in (run.reason or "")
    assert shop.ledger() == [] and shop.calls("refund") == []
    assert "999999" not in _transcript_text(store, "big")
    assert [e.kind for e in store.events("big")][-1] == "stop"
    store.close()
    shop.close()


def test_an_untouched_approval_still_pays_the_approved_amount(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    store, shop = SQLiteStore(db), Shop(db).seed_demo()
    engine = Engine(build(shop), store, clerk)
    engine.start(LARGE, user="ravi", run_id="big")
    run = engine.decide("big", True, "priya", "receipt checked")
    assert run.status == "done"
    assert [(p["order_id"], p["amount_paise"]) for p in shop.ledger()] == [("A-1002", 180_000)]
    store.close()
    shop.close()


class WireArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: str
    cents: int


def _wire_workflow(sent: list[dict[str, Any]]) -> Any:
    def wire(args: WireArgs, ctx: ToolContext) -> dict[str, Any]:
        sent.append(args.model_dump())
        return {"status": "sent"}

    return define_workflow(
        "wire", transitions={"drafting": {"sent": "done"}}, terminal={"done"},
        tools_by_state={"drafting": ["wire"]}, initial="drafting",
        tools=[ToolSpec("wire", wire, "Send a wire.", WireArgs, write=True, retry_safe=True,
                        approval=True, emits=lambda r: "sent", emits_events=("sent",))],
    )


def _approved_but_not_run(db: str, sent: list[dict[str, Any]]) -> SQLiteStore:
    store = SQLiteStore(db)
    policy = ScriptedPolicy([{"tool": "wire", "args": {"to": "ACME", "cents": 5_000}}])
    engine = Engine(_wire_workflow(sent), store, policy)
    assert engine.start("pay ACME", user="omar", run_id="w").status == "awaiting_approval"
    run = engine.decide("w", True, "priya", "invoice checked", drive=False)
    assert run.status == "running" and run.pending is not None
    assert run.pending.kind == "approved"
    return store


def test_an_approved_call_whose_arguments_changed_is_handed_over(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    sent: list[dict[str, Any]] = []
    store = _approved_but_not_run(db, sent)

    def redirect(snap: dict[str, Any]) -> None:
        snap["pending"]["args"] = {"to": "MALLORY", "cents": 5_000_000}

    _edit_snapshot(db, "w", redirect)
    run = Engine(_wire_workflow(sent), store, ScriptedPolicy([])).resume("w")
    assert run.status == "handed_over"
    assert "arguments changed after the decision" in (run.reason or "")
    assert sent == [] and store.effects("w") == []
    assert "MALLORY" not in json.dumps([m for m in store.messages("w")
                                        if m.get("role") == "tool"])
    store.close()


def test_an_approval_row_changed_after_the_decision_is_handed_over(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    sent: list[dict[str, Any]] = []
    store = _approved_but_not_run(db, sent)
    con = sqlite3.connect(db)
    con.execute("UPDATE approvals SET args = ? WHERE run_id = 'w'",
                (json.dumps({"to": "MALLORY", "cents": 5_000_000}),))
    con.commit()
    con.close()
    run = Engine(_wire_workflow(sent), store, ScriptedPolicy([])).resume("w")
    assert run.status == "handed_over" and sent == []
    store.close()


def test_the_approved_call_runs_once_when_nothing_changed(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    sent: list[dict[str, Any]] = []
    store = _approved_but_not_run(db, sent)
    run = Engine(_wire_workflow(sent), store, ScriptedPolicy([])).resume("w")
    assert (run.status, sent) == ("done", [{"to": "ACME", "cents": 5_000}])
    store.close()
