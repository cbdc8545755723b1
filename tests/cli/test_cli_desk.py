"""``fsm handovers``: the queue of handed-over runs, taking one, closing it with a note."""

from __future__ import annotations

import json
import sqlite3
from typing import get_args

from cli_inproc import Cli, error_line

from fsm.cli import desk
from fsm.records import OUTCOMES, HandoverCause

LAMP = "Order A-1003: the lamp flickers"   # not eligible: the run is handed over


def test_the_causes_and_outcomes_are_those_of_the_records() -> None:
    assert desk.CAUSES == get_args(HandoverCause) and desk.OUTCOMES == OUTCOMES


def test_a_request_with_brackets_is_shown_as_it_is_never_as_markup(cli: Cli) -> None:
    """Rich reads ``[urgent]`` as a style and ``[/b]`` as closing one it never opened
    (a MarkupError): every table cell is literal text."""
    goal = "Order A-1003 [urgent] broken [/b] lamp"
    assert cli("run", "refund", goal, "--user", "[bold]ravi", "--run-id", "m[1]").code == 5
    queue = cli("handovers")
    assert queue.code == 0 and "Traceback" not in queue.err, queue
    row = next(line for line in queue.out.splitlines() if "m[1]" in line)
    assert [c.strip() for c in row.strip("│ ").split("│")][:5] == [
        "m[1]", "refund", "[bold]ravi", "cannot verify", goal]
    runs = cli("runs")
    assert runs.code == 0 and "│ m[1]   │" in runs.out and "│ [bold]ravi │" in runs.out, runs
    history = cli("history", "m[1]")
    assert history.code == 0 and "history of m[1]: " in history.out, history


def test_the_queue_take_and_close(cli: Cli) -> None:
    for run_id in ("h1", "h2"):
        assert cli("run", "refund", LAMP, "--user", "ravi", "--run-id", run_id).code == 5
    rows = json.loads(cli("handovers", "--json").out)
    assert [(r["run_id"], r["reason"], r["customer"], r["request"], r["taken_by"])
            for r in rows] == [("h2", "cannot verify", "ravi", LAMP, None),
                               ("h1", "cannot verify", "ravi", LAMP, None)]
    assert all(r["age"].endswith("min") for r in rows)
    taken = cli("handovers", "take", "h1", "--by", "sam")
    assert taken.code == 0 and "taken by sam" in taken.out, taken
    error_line(cli("handovers", "take", "h1", "--by", "priya"), 2, "was taken by sam")
    assert [r["run_id"] for r in json.loads(cli("handovers", "--taken-by", "", "--json").out)
            ] == ["h2"]
    assert [r["run_id"] for r in json.loads(cli("handovers", "--taken-by", "sam", "--json")
                                            .out)] == ["h1"]
    error_line(cli("handovers", "close", "h1", "--outcome", "resolved", "--note", " ",
                   "--by", "sam"), 2, "--note must say what was done")
    error_line(cli("handovers", "close", "h1", "--outcome", "fixed", "--note", "x"), 2,
               "unknown outcome 'fixed' (allowed: resolved, resumed, closed)")
    error_line(cli("handovers", "close", "h1", "--outcome", "resumed", "--note", "x", "--by",
                   "sam"), 2, "does not let a run handed over in state 'handed_over' continue")
    error_line(cli("handovers", "--cause", "boredom"), 2, "unknown cause 'boredom'")
    closed = cli("handovers", "close", "h1", "--outcome", "resolved", "--note",
                 "phoned; a new lamp is on its way", "--by", "sam")
    assert closed.code == 0 and "closed (resolved) by sam" in closed.out, closed
    assert [r["run_id"] for r in json.loads(cli("handovers", "--json").out)] == ["h2"]
    everything = json.loads(cli("handovers", "--closed", "--json").out)
    assert [(r["run_id"], r["outcome"], r["note"]) for r in everything] == [
        ("h2", None, None), ("h1", "resolved", "phoned; a new lamp is on its way")]
    assert cli("audit", "h1").code == 0
    with sqlite3.connect("fsm.db") as con:
        kinds = con.execute("SELECT kind, reviewer FROM events WHERE run_id = 'h1' "
                            "ORDER BY seq DESC LIMIT 2").fetchall()
    con.close()
    assert kinds == [("close", "sam"), ("take", "sam")]
    history = cli("history", "h1").out
    assert "resolved: phoned; a new lamp is on its way" in history


def test_a_run_another_person_took_is_taken_over_only_with_a_note(cli: Cli) -> None:
    """Whoever took a run may be away: another person takes it over, saying why, and the
    log keeps whom it was taken from; the audit holds the row to that last take."""
    assert cli("run", "refund", LAMP, "--user", "ravi", "--run-id", "h3").code == 5
    assert cli("handovers", "take", "h3", "--by", "maya").code == 0
    error_line(cli("handovers", "take", "h3", "--by", "sam"), 2,
               "was taken by maya; they close it, or take it over with a note saying why")
    error_line(cli("handovers", "take", "h3", "--by", "sam", "--note", " "), 2,
               "--note must say why you take the run over")
    error_line(cli("handovers", "close", "h3", "--outcome", "closed", "--note", "x", "--by",
                   "sam"), 2, "only they close it, unless it is taken over first with a note")
    over = cli("handovers", "take", "h3", "--by", "sam", "--note", "maya is on leave")
    assert over.code == 0 and "taken by sam" in over.out, over
    assert json.loads(cli("handovers", "--taken-by", "sam", "--json").out)[0]["run_id"] == "h3"
    assert cli("handovers", "close", "h3", "--outcome", "closed", "--note", "refunded by "
               "hand", "--by", "sam").code == 0
    assert cli("audit", "h3").code == 0
    with sqlite3.connect("fsm.db") as con:
        takes = con.execute("SELECT reviewer, detail FROM events WHERE run_id = 'h3' AND "
                            "kind = 'take' ORDER BY seq").fetchall()
    con.close()
    assert [(who, json.loads(d).get("from"), json.loads(d).get("note")) for who, d in takes] \
        == [("maya", None, None), ("sam", "maya", "maya is on leave")]
