"""--infer-events: a policy that speaks plain tool calling drives the retail desk; the
events it never fires are fired for it, through the gate (asserted on the retail rows and
the run's log)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli_inproc import Cli

from fsm import Engine, MemoryStore, View
from fsm.sandbox.infer import InferEvents
from fsm.testing import ScriptedCustomer, talk
from workflows.retail import build
from workflows.retail.database import MemoryRetail

EMAIL, USER, PENDING = "olivia.ito5204@example.com", "olivia_ito_3591", "#W5442520"
CANCEL = {"order_id": PENDING, "reason": "no longer needed"}


class Plain:
    """A model taught no events: plain tool calls and text, in order; keeps each view."""

    def __init__(self, actions: list[dict[str, Any]]) -> None:
        self.actions = list(actions)
        self.views: list[View] = []

    def __call__(self, view: View) -> dict[str, Any]:
        self.views.append(view)
        return self.actions.pop(0) if self.actions else {"final": "Anything else?"}


def _talk(actions: list[dict[str, Any]], replies: list[str]) -> Any:
    db, store = MemoryRetail(), MemoryStore()
    model, customer = Plain(actions), ScriptedCustomer(replies)
    with Engine(build(db), store, InferEvents(build(db), model)) as engine:
        run = talk(engine, engine.start_conversation("cancel my order", user="o").run,
                   customer, max_turns=len(replies))
    return db, store, model, customer, run


PLAIN = [{"tool": "find_user_id_by_email", "args": {"email": EMAIL}},
         {"tool": "get_order_details", "args": {"order_id": PENDING}},
         {"tool": "cancel_pending_order", "args": CANCEL, "text": "Cancel it? yes/no"},
         {"final": "It is cancelled."}]


def test_a_plain_write_is_proposed_confirmed_and_made_once() -> None:
    db, store, model, customer, run = _talk(PLAIN, ["yes"])
    assert db.call("get_order_details", {"order_id": PENDING})["status"] == "cancelled"
    assert [w["tool"] for w in db.writes()] == ["cancel_pending_order"]
    assert customer.asked[0].args == {"tool": "cancel_pending_order", "args": CANCEL}
    fired = [(e.kind, e.event) for e in store.events(run.run_id) if e.event]
    assert ("transition", "propose") in fired and ("reply", "confirmed") in fired
    # The model saw every tool, no advance, and none of the events fired for it.
    assert "cancel_pending_order" in model.views[0].tool_names()
    assert all("advance" not in v.tool_names() and v.events == [] for v in model.views)
    assert all(m.get("tool") != "advance" for v in model.views for m in v.messages)
    assert (run.status, run.state) == ("awaiting_customer", "serving")
    assert [e for e in store.events(run.run_id) if e.kind == "refusal"] == []


def test_after_a_no_nothing_is_written_and_the_model_is_asked_again() -> None:
    db, store, model, customer, run = _talk(PLAIN, ["no, keep it"])
    assert db.writes() == [] and run.state == "serving"
    assert db.call("get_order_details", {"order_id": PENDING})["status"] == "pending"
    assert model.views[-1].messages[-1]["content"] == "no, keep it"


def test_a_write_before_authentication_is_still_refused() -> None:
    db, store, model, customer, run = _talk(
        [{"tool": "cancel_pending_order", "args": CANCEL}], ["hello?"])
    assert db.writes() == []
    [refusal] = [e for e in store.events(run.run_id) if e.kind == "refusal"]
    assert refusal.tool == "cancel_pending_order" and "authenticating" in refusal.reason


_POLICY = f"""
ACTIONS = {PLAIN!r}


def policy():
    actions = [dict(a) for a in ACTIONS]
    return lambda view: actions.pop(0) if actions else {{"final": "Anything else?"}}
"""
_SUITE = """\
workflow: retail
cases:
  - name: a plain cancel
    goal: "I no longer need order #W5442520"
    user: olivia
    replies: ["yes"]
    expect:
      writes:
        - tool: cancel_pending_order
          args: {order_id: "#W5442520", reason: no longer needed}
      refusals: 0
"""


def test_fsm_eval_infers_events_for_a_plain_policy(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "plain_desk.py").write_text(_POLICY)
    (tmp_path / "suite.yaml").write_text(_SUITE)
    plain = cli("eval", "suite.yaml", "--policy", "plain_desk:policy", "--json")
    assert plain.code == 1  # without inference the gate refuses the plain write
    inferred = cli("eval", "suite.yaml", "--policy", "plain_desk:policy", "--infer-events",
                   "--json")
    assert inferred.code == 0, inferred.out
    assert '"pass^1 under policy": 1.0' in inferred.out
    assert "(events inferred)" in inferred.out
