"""Replaying τ³-bench's airline tasks through the desk: a scripted desk and customer, each
run on a fresh airline server (a new process: the server keeps one database per process),
reached through the recording proxy (:mod:`workflows.airline.proxy`).

:func:`plan` turns a task's reference actions into what a policy-keeping desk does: the
customer's profile first (``get_user_details`` with the user id they give), a read of each
reservation before a write to it, the status of its segments on or before today before a
cancellation or a cabin change, a search for each flight a booking or a change flies, and
each write proposed first (with the customer's reason for a cancellation, from the task's
own words). :class:`Desk` carries out such a plan; :class:`Customer` says yes to each
proposal it wants and no to any other.

:func:`expected_state` is τ²-bench's expected end state for the task: its reference
actions applied directly (no fsm) to a fresh server of the same package, failed calls
changing nothing. The state compared (:func:`snapshot`) is what the server's read tools
show of every user, reservation and flight-date the task touches, money in cents.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fsm import Action, Engine, WorkflowSpec
from fsm.records import Event, RunState
from fsm.runtime.conversation.judging import summary as asked_summary
from fsm.store import open_store
from workflows.airline import data, rules
from workflows.airline.proxy import calls
from workflows.airline.workflow import WRITES, airline_server, build, server_command
from workflows.scripted import ScriptedDesk

Kind = Literal["call", "write", "event"]
#: The proposal event of each write.
EVENT_OF = {"book_reservation": "propose", "update_reservation_baggages": "propose",
            "update_reservation_passengers": "propose",
            "update_reservation_flights": "propose_change",
            "cancel_reservation": "propose_cancel", "send_certificate": "propose_certificate"}
ENDED = frozenset({"transferred_to_human", "done", "abandoned"})
NEW_RESERVATIONS = ("HATHAT", "HATHAU", "HATHAV")


@dataclass(frozen=True)
class Move:
    """One thing the scripted desk does."""

    kind: Kind
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    #: For a write: the proposal's other fields (``reason``, ``complaint``).
    extra: dict[str, Any] = field(default_factory=dict)
    #: Why the desk does this although the reference does not (``None``: it does).
    inserted: str | None = None
    action: str | None = None
    #: For a write: the arguments it calls with once confirmed (``None``: as proposed).
    call_args: dict[str, Any] | None = None


def reference(task: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(task["evaluation_criteria"].get("actions") or [])


def customer_of(task: Mapping[str, Any]) -> str | None:
    """The task's customer: the user its reference reads or writes for, or the owner of
    the first reservation it touches."""
    db = data.initial_db()
    for a in reference(task):
        args = a["arguments"]
        if "user_id" in args:
            return str(args["user_id"])
        res = db["reservations"].get(args.get("reservation_id"))
        if res is not None:
            return str(res["user_id"])
    return None


#: The customer's reason for a cancellation, by the words of the task that say it.
REASON_WORDS = (
    ("health", r"\b(sick|unwell|ill|health|hospital|surgery)\b"),
    ("weather", r"\b(weather|storm|hurricane|snow)\b"),
    ("airline cancelled flight", r"\b(airline cancel+ed|flight (was|has been) cancel+ed)\b"),
    ("change of plan", r"\b(change of plans?|plans? (have |has )?changed)\b"),
)


def reason_of(task: Mapping[str, Any]) -> str:
    """The reason for a cancellation the task's customer gives, from its own words (its
    instructions and reason for the call); ``other`` when they give none of the policy's."""
    ins = task.get("user_scenario", {}).get("instructions", "")
    text = " ".join(str(ins.get(k) or "") for k in ("task_instructions", "reason_for_call")) \
        if isinstance(ins, Mapping) else str(ins)
    for reason, pattern in REASON_WORDS:
        if re.search(pattern, text, flags=re.I):
            return reason
    return "other"


class _Planner:
    def __init__(self, task: Mapping[str, Any]) -> None:
        self.task, self.db = task, data.initial_db()
        self.user = customer_of(task)
        self.moves: list[Move] = []
        self.read: set[str] = set()
        self.statuses: set[str] = set()
        self.searched: set[tuple[str, str, str]] = set()

    def reservation(self, rid: Any) -> dict[str, Any] | None:
        found = self.db["reservations"].get(rid)
        return found if isinstance(found, dict) else None

    def read_reservation(self, rid: str) -> None:
        if rid not in self.read and self.reservation(rid) is not None:
            self.moves.append(Move("call", "get_reservation_details", {"reservation_id": rid},
                                   inserted="read before write"))
            self.read.add(rid)

    def segment_statuses(self, rid: str) -> None:
        res = self.reservation(rid) or {"flights": []}
        for f in res["flights"]:
            k = rules.key(f["flight_number"], f["date"])
            if f["date"] <= rules.TODAY and k not in self.statuses:
                self.moves.append(Move("call", "get_flight_status",
                                       {"flight_number": f["flight_number"], "date": f["date"]},
                                       inserted="segment status"))
                self.statuses.add(k)

    def search(self, flights: Sequence[Mapping[str, Any]], keep: Sequence[Mapping[str, Any]]
               ) -> None:
        for f in flights:
            if any(k["flight_number"] == f["flight_number"] and k["date"] == f["date"]
                   for k in keep):
                continue
            info = self.db["flights"].get(f["flight_number"])
            if info is None:
                continue
            leg = (info["origin"], info["destination"], f["date"])
            if leg not in self.searched:
                self.moves.append(Move("call", "search_direct_flight",
                                       {"origin": leg[0], "destination": leg[1],
                                        "date": leg[2]}, inserted="flight search"))
                self.searched.add(leg)

    def write(self, a: Mapping[str, Any]) -> None:
        name, args = a["name"], dict(a["arguments"])
        rid = args.get("reservation_id")
        if rid is not None:
            self.read_reservation(rid)
        res = self.reservation(rid) or {}
        extra: dict[str, Any] = {}
        if name == "cancel_reservation":
            self.segment_statuses(rid)
            extra["reason"] = reason_of(self.task)
        if name == "update_reservation_flights":
            keep = res.get("flights", []) if args.get("cabin") == res.get("cabin") else []
            if args.get("cabin") != res.get("cabin"):
                self.segment_statuses(rid)
            self.search(args.get("flights", []), keep)
        if name == "book_reservation":
            self.search(args.get("flights", []), [])
        self.moves.append(Move("write", name, args, extra=extra, action=a["action_id"]))

    def plan(self) -> list[Move]:
        if self.user is not None:
            self.moves.append(Move("call", "get_user_details", {"user_id": self.user},
                                   inserted="profile first"))
        for a in reference(self.task):
            name, args = a["name"], dict(a["arguments"])
            if name == "get_user_details" and args.get("user_id") == self.user:
                continue  # read first already
            if name == "transfer_to_human_agents":
                self.moves.append(Move("event", "hand_over", {
                    "why": "the customer asked for a human agent",
                    "request": args.get("summary", "")[:200] or "the customer's request"},
                    inserted="hand-over"))
                self.moves.append(Move("call", name, args, action=a["action_id"]))
            elif name in WRITES:
                self.write(a)
            elif not self.repeated(name, args):
                self.moves.append(Move("call", name, args, action=a["action_id"]))
                if name == "get_reservation_details":
                    self.read.add(args["reservation_id"])
                if name == "search_direct_flight":
                    self.searched.add((args["origin"], args["destination"], args["date"]))
        return self.moves

    def repeated(self, name: str, args: Mapping[str, Any]) -> bool:
        """A read the desk made already since its last write (the gate refuses the same
        call twice in a state: its answer is above)."""
        for m in reversed(self.moves):
            if m.kind != "call":
                return False
            if m.name == name and m.args == args:
                return True
        return False


def plan(task: Mapping[str, Any]) -> list[Move]:
    """What a policy-keeping desk does for ``task`` (see the module)."""
    return _Planner(task).plan()


# -- the scripted desk and customer -------------------------------------------------------------

class Desk(ScriptedDesk):
    """The airline desk's scripted policy: a write is proposed with its own event
    (``EVENT_OF``) and the proposal's other fields, and runs in a ``writing…`` state."""

    ENDED = ENDED

    def proposal(self, move: Any) -> Action:
        return Action(tool="advance", text="Here is what I will do; please confirm.",
                      args={"event": EVENT_OF[move.name], "tool": move.name,
                            "args": move.args, **move.extra})

    def writing(self, state: str) -> bool:
        return state.startswith("writing")


class Customer:
    """Says yes to each proposal shown that is one of ``wanted`` (tool and arguments), no
    to any other; ``answer`` overrides that. Keeps what it was shown (``shown``: the
    confirmation text fsm rendered)."""

    def __init__(self, wanted: Sequence[Move] = (),
                 answer: Callable[[dict[str, Any]], str] | None = None) -> None:
        self.wanted = [(m.name, m.args) for m in wanted if m.kind == "write"]
        self.answer = answer
        self.asked: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> str:
        asked = dict(getattr(request, "args", {}) or {})
        self.asked.append(asked)
        if self.answer is not None:
            return self.answer(asked)
        return "yes" if (asked.get("tool"), asked.get("args")) in self.wanted else \
            "no, that is not what I asked for"


# -- one run on a fresh server --------------------------------------------------------------------

@dataclass
class Report:
    run: RunState
    events: list[Event]
    steps: int
    cpu_s: float
    bytes: int
    desk: Desk
    #: Every ``tools/call`` that crossed to the server during the run.
    wire: list[dict[str, Any]]
    confirmations: list[str] = field(default_factory=list)

    def refusals(self) -> list[Event]:
        return [e for e in self.events if e.kind == "refusal"]

    def writes_sent(self) -> list[dict[str, Any]]:
        return [c for c in self.wire if c["tool"] in WRITES]


class Session:
    """One fresh airline server (its own process, behind the recording proxy) and one
    store, for one conversation; :meth:`snapshot` reads what the server holds after."""

    def __init__(self, folder: Path, *, spec_changes: Mapping[str, Any] | None = None,
                 options: Mapping[str, Mapping[str, Any]] | None = None,
                 record: bool = True) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.log = folder, folder / "wire.jsonl"
        command = server_command()
        server = airline_server(sys.executable, "-m", "workflows.airline.proxy",
                                str(self.log), command, options=options) if record else \
            airline_server(command, options=options)
        self.source = server.source
        self.spec: WorkflowSpec = build(server, **dict(spec_changes or {}))
        self.store = open_store(f"sqlite:///{folder / 'runs.db'}")

    def close(self) -> None:
        self.store.close()
        self.source.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, goal: str, moves: Sequence[Move], customer: Customer,
            run_id: str = "r1") -> Report:
        desk = Desk(moves)
        before = len(calls(self.log))
        cpu = time.process_time()
        shown: list[str] = []
        with Engine(self.spec, self.store, desk) as engine:
            run = engine.start_conversation(goal, user="customer", run_id=run_id).run
            for _ in range(200):
                if run.status != "awaiting_customer":
                    break
                # What the customer is shown: fsm's rendering of the proposal's call.
                shown.append(asked_summary(self.spec, run.pending, run.facts))
                run = engine.reply(run.run_id, customer(run.pending))
        cpu = time.process_time() - cpu
        events = self.store.events(run.run_id)
        return Report(run, events, run.step, cpu, stored_bytes(self.store.location, run.run_id),
                      desk, calls(self.log)[before:], [s for s in shown if s])

    def snapshot(self, users: Sequence[str], reservations: Sequence[str],
                 flights: Sequence[tuple[str, str]]) -> dict[str, Any]:
        return snapshot(self.source, users, reservations, flights)


def stored_bytes(location: str, run_id: str) -> int:
    """The bytes of the run's rows in the store, as the retail benchmark counts them."""
    from workflows.retail.runner import RUN_TABLES, _reader, _size

    conn, mark = _reader(location)
    try:
        return sum(_size(v) for table in RUN_TABLES for row in conn.execute(
            f"SELECT * FROM {table} WHERE run_id = {mark}", (run_id,)).fetchall() for v in row)
    finally:
        conn.close()


def _call(source: Any, tool: str, args: dict[str, Any]) -> Any:
    result = source.call(tool, args)
    return None if result.is_error else result.value


def in_cents(value: Any) -> Any:
    """Every float (money: gift cards, certificates) as whole cents."""
    if isinstance(value, float):
        return rules.cents(value)
    if isinstance(value, dict):
        return {k: in_cents(v) for k, v in value.items()}
    if isinstance(value, list):
        return [in_cents(v) for v in value]
    return value


def snapshot(source: Any, users: Sequence[str], reservations: Sequence[str],
             flights: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """What the server's read tools show of ``users``, ``reservations`` (and the three ids
    a booking may create) and the seats of ``flights`` (number, date), money in cents."""
    db = data.initial_db()
    out: dict[str, Any] = {"users": {}, "reservations": {}, "seats": {}}
    for u in sorted(set(users)):
        out["users"][u] = in_cents(_call(source, "get_user_details", {"user_id": u}))
    for r in sorted({*reservations, *NEW_RESERVATIONS}):
        out["reservations"][r] = in_cents(_call(source, "get_reservation_details",
                                                {"reservation_id": r}))
    for number, date in sorted(set(flights)):
        info = db["flights"].get(number)
        if info is None:
            continue
        found = _call(source, "search_direct_flight", {"origin": info["origin"],
                                                       "destination": info["destination"],
                                                       "date": date})
        found = found if isinstance(found, list) else [found] if found else []
        seat = next((f["available_seats"] for f in found if isinstance(f, dict)
                     and f.get("flight_number") == number), None)
        out["seats"][rules.key(number, date)] = seat
    return out


def touched(task: Mapping[str, Any], moves: Sequence[Move] = ()) -> tuple[list[str], list[str],
                                                                        list[tuple[str, str]]]:
    """The users, reservations and booked flight-dates the task's reference (and the
    desk's moves) name."""
    users, rids, flights = set(), set(), set()
    who = customer_of(task)
    if who:
        users.add(who)
    items = [(a["name"], a["arguments"]) for a in reference(task)] + \
        [(m.name, m.args) for m in moves]
    for name, args in items:
        if "user_id" in args:
            users.add(args["user_id"])
        if "reservation_id" in args:
            rids.add(args["reservation_id"])
        if name in ("book_reservation", "update_reservation_flights"):
            flights |= {(f["flight_number"], f["date"]) for f in args.get("flights", [])}
    return sorted(users), sorted(rids), sorted(flights)


def expected_state(task: Mapping[str, Any]) -> tuple[dict[str, Any], list[str | None]]:
    """The task's reference actions applied directly to a fresh server (no fsm, no
    gate), and what it then shows of what the task touches; each action's error."""
    from fsm.adapters.mcp import McpServer

    source = McpServer("airline-direct", command=server_command(), timeout=60.0)
    try:
        errors = []
        for a in reference(task):
            result = source.call(a["name"], dict(a["arguments"]))
            errors.append(str(result.value) if result.is_error else None)
        return snapshot(source, *touched(task)), errors
    finally:
        source.close()
