"""The airline desk against the real airline MCP server (a fresh process per test, behind
the recording proxy): a task replayed through the desk ends where the reference actions
applied directly leave a fresh server; every generated violation is refused before it
crosses the wire; without the guard, the same violation reaches the server and the
proxy's record shows it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from airline_env import airline_command

from workflows.airline import data
from workflows.airline.replay import (
    Customer,
    Session,
    expected_state,
    plan,
    touched,
)
from workflows.airline.violations import CLASSES, attempts, judge
from workflows.airline.workflow import GUARDS, WRITES


def _task(task_id: str) -> dict:  # type: ignore[type-arg]
    airline_command()  # the server's environment exists
    return next(t for t in data.tasks() if t["id"] == task_id)


def test_a_task_replayed_through_the_desk_ends_where_the_reference_leaves_the_server(
        tmp_path: Path) -> None:
    task = _task("7")  # a change of flights, then two cancellations
    moves = plan(task)
    with Session(tmp_path / "desk") as session:
        report = session.run("task 7", moves, Customer(moves))
        got = session.snapshot(*touched(task))
    expected, errors = expected_state(task)
    assert errors == [None] * len(errors)
    assert got == expected
    assert report.run.state == "done" and report.refusals() == []
    # Each reference write crossed the wire once, as the customer confirmed it.
    writes = [m for m in moves if m.kind == "write"]
    assert [(c["tool"], c["args"]) for c in report.writes_sent()] == \
        [(m.name, m.args) for m in writes]
    # The customer was shown fsm's rendering of each call, not the desk's words.
    assert report.confirmations[0].startswith(
        f"Change reservation {writes[0].args['reservation_id']} to flights ")
    assert [c.split(" (")[0] for c in report.confirmations[1:]] == [
        f"Cancel reservation {w.args['reservation_id']}" for w in writes[1:]]
    assert all("Here is what I will do" not in c for c in report.confirmations)
    assert got["reservations"][writes[1].args["reservation_id"]]["status"] == "cancelled"


def test_every_violation_of_a_task_is_refused_for_its_rule_before_the_server(
        tmp_path: Path) -> None:
    task = _task("8")  # a booking: every class applies
    tries = attempts(task)
    assert {a.cls for a in tries} >= set(CLASSES) - {"cancel_ineligible"}
    with Session(tmp_path / "v") as session:
        rows = [judge(session, a, f"v{i}") for i, a in enumerate(tries)]
        wire = session_wire(session)
    for row in rows:
        assert row["refused"] and row["own_rule"], row
        assert row["reached_server"] == 0, row
    assert [c for c in wire if c["tool"] in WRITES] == []
    assert {r["refused_by"] for r in rows} == {"tables", "check", "guard", "confirmation"}


def session_wire(session: Session) -> list[dict]:  # type: ignore[type-arg]
    from workflows.airline.proxy import calls

    return calls(session.log)


def test_without_the_guard_an_ineligible_cancellation_reaches_the_server(
        tmp_path: Path) -> None:
    """The evidence can fail: with the cancellation guard always met, the ineligible
    cancellation is proposed, confirmed and sent, and the proxy's record shows it (the
    write's own gate check is lifted too)."""
    task = _task("7")
    [attempt] = attempts(task, ["cancel_ineligible"])
    loose = {"guards": {**GUARDS, "propose_cancel": dataclasses.replace(
        GUARDS["propose_cancel"], fn=lambda f, p: True, reason=None)}}
    with Session(tmp_path / "loose", spec_changes=loose,
                 options={"cancel_reservation": {"check": None}}) as session:
        assert session.spec.tools["cancel_reservation"].check is None
        row = judge(session, attempt, "v0")
        wire = session_wire(session)
    assert not row["refused"] and row["reached_server"] == 1
    rid = attempt.last.args["reservation_id"]
    assert {"tool": "cancel_reservation", "args": {"reservation_id": rid}} in wire


def test_a_cancellation_reason_comes_from_the_tasks_own_words() -> None:
    from workflows.airline.replay import reason_of

    reasons = {t["id"]: reason_of(t) for t in (_task(i) for i in ("7", "19", "39", "42"))}
    # 7: "You are sick."; 19: "as you feel unwell"; 39: giving up a seat; 42: a mix-up.
    assert reasons == {"7": "health", "19": "health", "39": "other", "42": "other"}


def test_a_list_answer_of_the_server_is_read_as_a_list() -> None:
    """FastMCP of mcp<2 sends a list as one text block per item: fsm's client reads the
    blocks back as the list (a one-stop search's pairs of flights arrive flattened, one
    leg after the other)."""
    from fsm.adapters.mcp import McpServer

    source = McpServer("airline", command=airline_command(), timeout=60.0)
    try:
        result = source.call("search_onestop_flight", {"origin": "JFK", "destination": "SFO",
                                                       "date": "2024-05-20"})
    finally:
        source.close()
    assert not result.is_error
    legs = result.value
    assert isinstance(legs, list) and len(legs) > 1 and len(legs) % 2 == 0
    assert all(isinstance(leg, dict) for leg in legs)
    assert {a["origin"] for a in legs[::2]} == {"JFK"}
    assert {b["destination"] for b in legs[1::2]} == {"SFO"}


def test_a_user_id_in_the_opening_message_is_the_customers_first_answer(
        tmp_path: Path) -> None:
    """The policy: "The user must provide their user id". A customer who gives it in their
    opening message has given it: the desk may read the reservation they name."""
    airline_command()
    with Session(tmp_path / "desk") as session:
        report = session.run("Hi, I'm mia_li_3668 and I need to change a flight", [],
                             Customer([]))
        plain = session.run("Hi, I need to change a flight", [], Customer([]), run_id="r2")
    moved = [(e.kind, e.event, e.state_after) for e in report.events
             if e.event == "user_id_given"]
    assert moved == [("opening", "user_id_given", "identifying"),
                     ("transition", "user_id_given", "user_id_known")]
    assert report.run.state == "done"
    assert not [e for e in plain.events if e.kind == "opening"]
