"""Policy output that must not raise out of the engine: absurd usage, usage or
arguments of the wrong shape. Driven through Engine + SQLiteStore; the assertions
are on the database rows and the event log."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from refund_scripts import actions, small_refund

from fsm import Action, Budgets, Engine, SQLiteStore, Usage, WorkflowSpec
from fsm.policy import MAX_COUNT, as_action
from fsm.testing import ScriptedPolicy
from workflows.refund import Shop

GOAL = "Order A-1001: the kettle arrived broken, please refund it"
GET_ORDER = {"tool": "get_order", "args": {"order_id": "A-1001"}}


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_absurd_usage_is_clamped_logged_and_counted(
        tmp_path: Path, spec: WorkflowSpec, shop: Shop,
        caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "u.db"
    script = [
        {**GET_ORDER, "usage": {"cost_micros": 10**30, "input_tokens": 10**40,
                                "output_tokens": -5}},
        *actions(small_refund())[1:],
    ]
    store = SQLiteStore(str(db))
    try:
        with caplog.at_level(logging.WARNING, logger="fsm.policy"):
            run = Engine(spec, store, ScriptedPolicy(script),
                         budgets=Budgets(max_cost_micros=10**6)).start(GOAL, user="asha",
                                                                        run_id="r1")
    finally:
        store.close()
    # The clamped cost exhausts the budget at the next step instead of crashing the store.
    assert run.status == "budget_exhausted"
    assert run.used.cost_micros == MAX_COUNT and run.used.input_tokens == MAX_COUNT
    assert run.used.output_tokens == 0
    rows = _rows(db, "SELECT kind, cost_micros, tokens, detail, reason FROM events "
                     "WHERE run_id = 'r1' ORDER BY seq")
    policy = [r for r in rows if r[0] == "policy"]
    assert [(r[1], r[2]) for r in policy] == [(MAX_COUNT, MAX_COUNT)]
    assert json.loads(policy[0][3])["usage_clamped"] is True
    assert rows[-1][0] == "stop" and "cost (micros) budget exhausted" in rows[-1][4]
    assert [kind for kind, *_ in rows].count("tool") == 1  # get_order ran; nothing else
    assert shop.ledger() == []
    logged = [r.getMessage() for r in caplog.records if r.name == "fsm.policy"]
    assert len(logged) == 3
    assert "output_tokens=-5 is out of range: counted as 0" in logged[1]
    assert "cost_micros=1000000000000000000000000000000 is out of range" in logged[2]


BAD_SHAPES = [
    pytest.param({**GET_ORDER, "usage": "lots"}, "usage: Input should be a valid dictionary",
                 id="usage-text"),
    pytest.param({**GET_ORDER, "usage": {"cost_micros": "1e999"}}, "usage.cost_micros",
                 id="usage-count-text"),
    pytest.param({**GET_ORDER, "usage": {"input_tokens": float("inf")}},
                 "usage.input_tokens", id="usage-infinite"),
    pytest.param(Action.model_construct(tool="get_order", args={"order_id": "A-1001"},
                                        usage="lots", final=None, problem=None, text=None),
                 "usage: Input should be a valid dictionary", id="constructed-usage"),
    pytest.param(Action.model_construct(tool="get_order", args="A-1001",
                                        usage=Usage(), final=None, problem=None, text=None),
                 "args: Input should be a valid dictionary", id="constructed-args"),
    pytest.param(Action.model_construct(tool="get_order", args={"order_id": "A-1001"},
                                        usage=Usage.model_construct(cost_micros=10**30),
                                        final="both", problem=None, text=None),
                 "either a tool call or a final answer", id="constructed-both"),
    pytest.param({"tool": "get_order", "args": {1: "A-1001"}}, "args.1.[key]",
                 id="args-key-not-text"),
]


@pytest.mark.parametrize(("output", "problem"), BAD_SHAPES)
def test_output_of_the_wrong_shape_is_refused_as_an_observation(
        tmp_path: Path, spec: WorkflowSpec, shop: Shop, output: Any, problem: str) -> None:
    db = tmp_path / "s.db"
    store = SQLiteStore(str(db))
    try:
        run = Engine(spec, store, ScriptedPolicy([output, *actions(small_refund())])).start(
            GOAL, user="asha", run_id="r1")
        refusals = [e for e in store.events("r1") if e.kind == "refusal"]
        told = store.messages("r1")[2]
    finally:
        store.close()
    assert run.status == "done" and [r["amount_paise"] for r in shop.ledger()] == [35_000]
    assert len(refusals) == 1 and refusals[0].step == 1
    assert refusals[0].reason is not None and problem in refusals[0].reason
    assert refusals[0].reason.startswith("unusable policy output: ")
    assert problem in (told.get("error") or told.get("content") or "")


def test_a_constructed_action_is_validated_again() -> None:
    clamped = as_action(Action.model_construct(
        tool="get_order", args={}, final=None, problem=None, text=None,
        usage=Usage.model_construct(cost_micros=10**30, input_tokens=-1)))
    assert (clamped.usage.cost_micros, clamped.usage.input_tokens) == (MAX_COUNT, 0)
    assert clamped.usage.clamped and clamped.usage.notes() == {"usage_clamped": True}
    assert Usage(cost_micros=MAX_COUNT).clamped is False
    assert Usage(cost_micros=2.0e3).cost_micros == 2000
    total = Usage(cost_micros=MAX_COUNT) + Usage(cost_micros=1, reported=False)
    assert (total.cost_micros, total.clamped, total.reported) == (MAX_COUNT, True, False)
    assert total.notes() == {"usage_reported": False, "usage_clamped": True}
