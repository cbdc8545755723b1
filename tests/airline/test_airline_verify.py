"""``fsm verify airline`` proves the invariants that carry the money over the tables and the
guards' declared facts, and each breaks, with its shortest counterexample, when the table
that carries it is changed. Each test lists the tools of its own airline server."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from airline_env import airline_command

from fsm.auditor.verify import verify
from workflows.airline import airline_server, build
from workflows.airline.workflow import GUARDS, OPTIONS, TOOLS_BY_STATE

YES = "every write runs only after the customer's yes to exactly that call, one call per yes"
CANCEL = "`cancel_reservation` runs only after a guard established `cancellation_eligible`"
CERTIFICATE = "`send_certificate` runs only after a guard established `compensation_eligible`"
CHANGE = ("`update_reservation_flights` runs only after a guard established "
          "`flight_change_allowed`")


def _spec(**changes: Any) -> Any:
    return build(airline_server(airline_command()), **changes)


def test_the_money_invariants_are_proved() -> None:
    report = verify(_spec())
    assert report.ok, report.text()
    titles = {v.invariant.title for v in report.verdicts}
    assert {YES, CANCEL, CERTIFICATE, CHANGE} <= titles
    assert report.states == 15


def _violated(spec: Any) -> dict[str, Any]:
    return {v.invariant.title: v for v in verify(spec).verdicts if not v.proved}


def _with(state: str, tool: str) -> dict[str, Any]:
    return {"tools_by_state": {**TOOLS_BY_STATE, state: [*TOOLS_BY_STATE[state], tool]}}


@pytest.mark.parametrize(("changes", "title", "why", "path"), [
    pytest.param(
        _with("writing", "cancel_reservation"), CANCEL,
        "`cancel_reservation` runs, and no guard established `cancellation_eligible` before",
        ["get_user_details", "propose", "confirmed", "cancel_reservation"],
        id="cancel-without-eligible-condition"),
    pytest.param(
        {"guards": {**GUARDS, "propose_cancel": dataclasses.replace(
            GUARDS["propose_cancel"], establishes=("compensation_eligible",)),
            "propose_certificate": dataclasses.replace(
                GUARDS["propose_certificate"], establishes=("cancellation_eligible",))}},
        CANCEL,
        "`cancel_reservation` runs, and no guard established `cancellation_eligible` before",
        ["get_user_details", "propose_cancel", "confirmed", "cancel_reservation"],
        id="guards-facts-swapped"),
    pytest.param(
        _with("writing_cancel", "send_certificate"), CERTIFICATE,
        "`send_certificate` runs, and no guard established `compensation_eligible` before",
        ["get_user_details", "propose_cancel", "confirmed", "send_certificate"],
        id="certificate-to-ineligible-customer"),
    pytest.param(
        _with("writing", "update_reservation_flights"), CHANGE,
        "`update_reservation_flights` runs, and no guard established "
        "`flight_change_allowed` before",
        ["get_user_details", "propose", "confirmed", "update_reservation_flights"],
        id="flight-change-on-basic-economy"),
])
def test_a_changed_table_breaks_its_money_invariant(changes: dict[str, Any], title: str,
                                                    why: str, path: list[str]) -> None:
    broken = _violated(_spec(**changes))
    assert title in broken, sorted(broken)
    verdict = broken[title]
    assert verdict.why == why
    assert [mv.tool or mv.event for mv in verdict.counterexample] == path


def test_a_write_unbound_from_the_proposal_breaks_no_write_without_a_yes() -> None:
    server = airline_server(airline_command())
    loose = dataclasses.replace(server, options={
        **server.options, "cancel_reservation": {**OPTIONS["cancel_reservation"],
                                                 "confirmed_by": None}})
    verdict = _violated(build(loose))[YES]
    assert verdict.why.startswith("`cancel_reservation` runs on a yes it is not bound to")
    assert [mv.tool or mv.event for mv in verdict.counterexample] == [
        "get_user_details", "propose_cancel", "confirmed", "cancel_reservation"]


def test_the_command_prints_the_counterexample(tmp_path: Any) -> None:
    report = verify(_spec(**_with("writing", "cancel_reservation")))
    text = report.text()
    assert "VIOLATED  cancel_reservation runs only after a guard established " \
           "cancellation_eligible" in text
    assert "shortest counterexample (4 moves):" in text
