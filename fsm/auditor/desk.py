"""The desk's rows agree with the log: every handover, every take and every close."""

from __future__ import annotations

from typing import Any

from fsm.records import Effect, Event, Handover
from fsm.runtime.handover import cause_of


def _stops(events: list[Event]) -> dict[str, tuple[int, Event]]:
    return {str(e.detail["handover_id"]): (i, e) for i, e in enumerate(events)
            if e.kind == "stop" and e.detail.get("handover_id")}


def _last(events: list[Event], kind: str) -> dict[str, Event]:
    out: dict[str, Event] = {}
    for e in events:
        if e.kind == kind and e.detail.get("handover_id"):
            out[str(e.detail["handover_id"])] = e
    return out


def _row_vs_stop(row: Handover, at: int, stop: Event, events: list[Event],
                 writes: set[str]) -> list[str]:
    out = []
    cause, reason = cause_of(events[:at + 1], writes)
    logged = (stop.run_id, stop.time, stop.state_after, stop.detail.get("cause"))
    if (row.run_id, row.handed_at, row.state, row.cause) != logged or \
            (row.cause, row.reason) != (cause, reason):
        out.append(f"handover {row.handover_id}: its row (run, time, state, cause or reason) "
                   f"differs from what event seq {stop.seq} logged")
    return out


def _row_vs_desk(row: Handover, take: Event | None, close: Event | None) -> list[str]:
    out = []
    taken: tuple[Any, ...] = (take.reviewer, take.time) if take else (None, None)
    if (row.taken_by, row.taken_at) != taken:
        out.append(f"handover {row.handover_id}: the row says taken by {row.taken_by}, the "
                   f"log {'by ' + str(take.reviewer) if take else 'that nobody took it'}")
    closed: tuple[Any, ...] = (None, None, None, None)
    if close is not None:
        closed = (close.detail.get("outcome"), close.detail.get("note"), close.reviewer,
                  close.time)
    if (row.outcome, row.note, row.closed_by, row.closed_at) != closed:
        out.append(f"handover {row.handover_id}: the row's outcome, note or closer differs "
                   "from the log's " + (f"close (event seq {close.seq})" if close else
                                        "(which has not closed it)"))
    return out


def handover_problems(rows: list[Handover], events: list[Event],
                      effects: list[Effect]) -> list[str]:
    """Every handover row matches the stop that opened it, and its last take and close.
    (The write tools are those with effect rows: every write that ran has one.)"""
    writes = {e.tool for e in effects}
    stops, takes, closes = _stops(events), _last(events, "take"), _last(events, "close")
    out: list[str] = []
    for row in rows:
        found = stops.get(row.handover_id)
        if found is None:
            out.append(f"handover {row.handover_id} has a row but the log never handed the "
                       "run over with it")
            continue
        out += _row_vs_stop(row, found[0], found[1], events, writes)
        out += _row_vs_desk(row, takes.get(row.handover_id), closes.get(row.handover_id))
    known = {r.handover_id for r in rows}
    out += [f"event seq {e.seq}: the run was handed over (handover {hid}) but the desk has "
            "no row for it" for hid, (_, e) in stops.items() if hid not in known]
    for kind, logged in (("take", takes), ("close", closes)):
        out += [f"event seq {e.seq}: a {kind} of handover {hid}, which the log never opened"
                for hid, e in logged.items() if hid not in stops]
    return out
