"""``fsm verify retail`` proves the desk's invariants, and each breaks, with its shortest
counterexample, when the table that carries it is changed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fsm.auditor.verify import verify
from workflows.retail import WORKFLOW, build
from workflows.retail.workflow import TOOLS_BY_STATE, TRANSITIONS


def test_every_invariant_of_the_desk_is_proved() -> None:
    report = verify(WORKFLOW)
    assert report.ok, report.text()
    titles = [v.invariant.title for v in report.verdicts]
    assert "every write runs only after the customer's yes to exactly that call, one call " \
           "per yes" in titles
    assert "nothing happens after `transfer_to_human_agents` runs" in titles
    assert "`get_order_details` runs only after `authenticated`" in titles
    assert "`confirmed`, `not_confirmed`, `unanswered`, `asked_for_human` are fired only by " \
           "the customer's reply" in titles


def _violated(spec: Any) -> dict[str, str]:
    report = verify(spec)
    return {v.invariant.title: v.why for v in report.verdicts if not v.proved}


def _unbound(tool: str) -> Any:
    return [dataclasses.replace(t, confirmed_by=None) if t.name == tool else t
            for t in WORKFLOW.tools.values()]


@pytest.mark.parametrize(("changes", "title", "why"), [
    pytest.param(
        {"tools_by_state": {**TOOLS_BY_STATE, "authenticating": [
            *TOOLS_BY_STATE["authenticating"], "get_order_details"]}},
        "`get_order_details` runs only after `authenticated`",
        "`get_order_details` runs, and nobody has fired `authenticated` before",
        id="order-read-before-authentication"),
    pytest.param(
        {"tools_by_state": {**TOOLS_BY_STATE, "serving": [
            *TOOLS_BY_STATE["serving"], "cancel_pending_order"]}},
        "`cancel_pending_order` runs only in `writing`",
        "`cancel_pending_order` runs in `serving`", id="write-while-serving"),
    pytest.param(
        {"tools": _unbound("return_delivered_order_items")},
        "every write runs only after the customer's yes to exactly that call, one call per "
        "yes",
        "`return_delivered_order_items` runs on a yes it is not bound to (it has no "
        "confirmed_by: its arguments may differ from what the customer confirmed, and the "
        "yes is not used up)", id="write-not-bound-to-the-yes"),
    pytest.param(
        {"transitions": {**TRANSITIONS, "serving": {**TRANSITIONS["serving"],
                                                     "transferred": "serving"}}},
        "nothing happens after `transfer_to_human_agents` runs",
        "`get_user_details` runs after `transfer_to_human_agents`", id="transfer-goes-on"),
])
def test_a_changed_table_breaks_its_invariant(changes: dict[str, Any], title: str,
                                              why: str) -> None:
    broken = _violated(build(**changes))
    assert broken.get(title) == why, broken
