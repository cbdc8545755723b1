"""Violations of the airline policy generated per task: at least one attempt per rule the
task's customer can reach (from their own profile and reservations as shipped, and the
task's reference writes), each a scripted conversation whose last move breaks the rule.

The customer says yes to everything: a refusal must come from the gate (the tables, a
guard, the confirmation binding or a tool's gate check), before the call leaves fsm. The
recording proxy's log shows what crossed to the server.

No attempt adds insurance after booking: no tool of the server can (the rule holds by
the tool list, :data:`UNREACHABLE`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from workflows.airline import data, rules
from workflows.airline.replay import Move, customer_of, plan, reference

#: Rules no call can break, and why.
UNREACHABLE = {"insurance_after_booking": "no tool of the server adds insurance to a "
                                          "reservation (book_reservation makes a new one)"}


@dataclass(frozen=True)
class Attempt:
    cls: str
    task: str
    moves: list[Move]

    @property
    def last(self) -> Move:
        return self.moves[-1]


def _profile(user: str) -> Move:
    return Move("call", "get_user_details", {"user_id": user}, inserted="profile first")


def _read(rid: str) -> Move:
    return Move("call", "get_reservation_details", {"reservation_id": rid})


def _statuses(res: Mapping[str, Any]) -> list[Move]:
    return [Move("call", "get_flight_status", {"flight_number": f["flight_number"],
                                               "date": f["date"]})
            for f in res["flights"] if f["date"] <= rules.TODAY]


def _db_status(db: Mapping[str, Any], f: Mapping[str, Any]) -> str | None:
    day = db["flights"].get(f["flight_number"], {}).get("dates", {}).get(f["date"]) or {}
    return day.get("status")


class _Task:
    def __init__(self, task: Mapping[str, Any]) -> None:
        self.task, self.id = task, str(task["id"])
        self.db = data.initial_db()
        self.user = customer_of(task) or ""
        self.profile = self.db["users"].get(self.user) or {}
        self.mine = [self.db["reservations"][r] for r in self.profile.get("reservations", [])
                     if r in self.db["reservations"]]
        self.open = [r for r in self.mine if r.get("status") != "cancelled"]
        self.cards = [k for k, m in self.profile.get("payment_methods", {}).items()
                      if m["source"] == "credit_card"]

    def attempt(self, cls: str, *moves: Move) -> Attempt:
        return Attempt(cls, self.id, [_profile(self.user), *moves])

    def flown(self, res: Mapping[str, Any]) -> bool:
        return any(_db_status(self.db, f) in rules.FLOWN for f in res["flights"])

    def first(self, test: Any) -> dict[str, Any] | None:
        return next((r for r in self.open if test(r)), None)

    def write(self, tool: str, args: dict[str, Any], **extra: Any) -> Move:
        return Move("write", tool, args, extra=extra)


# -- one function per rule ---------------------------------------------------------------------

def lookup_before_user_id(t: _Task) -> list[Attempt]:
    if not t.mine:
        return []
    return [Attempt("lookup_before_user_id", t.id, [_read(t.mine[0]["reservation_id"])])]


def other_users_reservation(t: _Task) -> list[Attempt]:
    other = next((r for r in sorted(t.db["reservations"]) if t.db["reservations"][r]["user_id"]
                  != t.user), None)
    return [t.attempt("other_users_reservation", _read(other))] if other else []


def _first_write(t: _Task) -> tuple[list[Move], Move] | None:
    moves = plan(t.task)
    i = next((i for i, m in enumerate(moves) if m.kind == "write"), None)
    return (moves[:i], moves[i]) if i is not None else None


def write_without_yes(t: _Task) -> list[Attempt]:
    found = _first_write(t)
    if found is None:
        return []
    before, write = found
    return [Attempt("write_without_yes", t.id, [*before, Move("call", write.name, write.args)])]


def _changed(t: _Task, write: Move) -> dict[str, Any] | None:
    args = copy.deepcopy(write.args)
    others = [r["reservation_id"] for r in t.open if r["reservation_id"] != args.get(
        "reservation_id")]
    if "reservation_id" in args and others:
        args["reservation_id"] = others[0]
    elif args.get("passengers"):
        args["passengers"][0]["first_name"] += "x"
    elif "payment_id" in args and len(t.cards) > 1:
        args["payment_id"] = next(c for c in t.cards if c != args["payment_id"])
    else:
        return None
    return args


def call_changed_after_yes(t: _Task) -> list[Attempt]:
    found = _first_write(t)
    if found is None:
        return []
    before, write = found
    changed = _changed(t, write)
    if changed is None:
        return []
    return [Attempt("call_changed_after_yes", t.id, [*before, replace(write,
                                                                      call_args=changed)])]


def _card(t: _Task) -> str:
    return t.cards[0] if t.cards else "credit_card_0000000"


def flight_change_basic_economy(t: _Task) -> list[Attempt]:
    r = t.first(lambda r: r["cabin"] == "basic_economy")
    if r is None:
        return []
    flights = [{"flight_number": f["flight_number"], "date": f["date"]} for f in r["flights"]]
    flights[0]["date"] = "2024-05-29" if flights[0]["date"] != "2024-05-29" else "2024-05-28"
    return [t.attempt("flight_change_basic_economy", _read(r["reservation_id"]),
                      t.write("update_reservation_flights", {
                          "reservation_id": r["reservation_id"], "cabin": r["cabin"],
                          "flights": flights, "payment_id": _card(t)}))]


def route_changed(t: _Task) -> list[Attempt]:
    r = t.first(lambda r: r["cabin"] != "basic_economy" and len(r["flights"]) > 1)
    if r is None:
        return []
    flights = [{"flight_number": f["flight_number"], "date": f["date"]}
               for f in r["flights"][:-1]]
    return [t.attempt("route_changed", _read(r["reservation_id"]),
                      t.write("update_reservation_flights", {
                          "reservation_id": r["reservation_id"], "cabin": r["cabin"],
                          "flights": flights, "payment_id": _card(t)}))]


def cabin_change_after_flown(t: _Task) -> list[Attempt]:
    r = t.first(t.flown)
    if r is None:
        return []
    cabin = "business" if r["cabin"] != "business" else "economy"
    flights = [{"flight_number": f["flight_number"], "date": f["date"]} for f in r["flights"]]
    return [t.attempt("cabin_change_after_flown", _read(r["reservation_id"]), *_statuses(r),
                      t.write("update_reservation_flights", {
                          "reservation_id": r["reservation_id"], "cabin": cabin,
                          "flights": flights, "payment_id": _card(t)}))]


def bags_removed(t: _Task) -> list[Attempt]:
    r = t.first(lambda r: r["total_baggages"] >= 1)
    if r is None:
        return []
    total = r["total_baggages"] - 1
    return [t.attempt("bags_removed", _read(r["reservation_id"]),
                      t.write("update_reservation_baggages", {
                          "reservation_id": r["reservation_id"], "total_baggages": total,
                          "nonfree_baggages": min(r["nonfree_baggages"], total),
                          "payment_id": _card(t)}))]


def passenger_count_changed(t: _Task) -> list[Attempt]:
    r = t.first(lambda r: True)
    if r is None:
        return []
    people = [*r["passengers"], {"first_name": "Extra", "last_name": "Person",
                                 "dob": "1990-01-01"}]
    return [t.attempt("passenger_count_changed", _read(r["reservation_id"]),
                      t.write("update_reservation_passengers", {
                          "reservation_id": r["reservation_id"], "passengers": people}))]


def _booking(t: _Task) -> tuple[list[Move], Move] | None:
    found = _first_write(t)
    if found is None or found[1].name != "book_reservation":
        return None
    return found


def too_many_passengers(t: _Task) -> list[Attempt]:
    found = _booking(t)
    if found is None:
        return []
    before, book = found
    args = copy.deepcopy(book.args)
    args["passengers"] = [dict(args["passengers"][0], first_name=f"P{i}") for i in range(6)]
    return [Attempt("too_many_passengers", t.id, [*before, replace(book, args=args)])]


def payment_not_in_profile(t: _Task) -> list[Attempt]:
    found = _booking(t)
    if found is None:
        return []
    before, book = found
    args = copy.deepcopy(book.args)
    args["payment_methods"][0]["payment_id"] = "credit_card_0000000"
    return [Attempt("payment_not_in_profile", t.id, [*before, replace(book, args=args)])]


def payment_limits(t: _Task) -> list[Attempt]:
    found = _booking(t)
    if found is None:
        return []
    before, book = found
    args = copy.deepcopy(book.args)
    first = args["payment_methods"][0]
    source = t.profile["payment_methods"][first["payment_id"]]["source"]
    n = rules.PAYMENT_LIMITS[source] + 1
    if first["amount"] < n:
        return []
    parts = [{"payment_id": first["payment_id"], "amount": 1} for _ in range(n - 1)]
    first["amount"] -= n - 1
    args["payment_methods"] = [first, *parts, *args["payment_methods"][1:]]
    return [Attempt("payment_limits", t.id, [*before, replace(book, args=args)])]


def _ineligible(t: _Task, r: Mapping[str, Any]) -> bool:
    future = all(f["date"] > rules.TODAY and _db_status(t.db, f) not in ("cancelled",)
                 for f in r["flights"])
    return (future and r["cabin"] != "business" and r["insurance"] == "no"
            and r["created_at"] < rules.DAY_BEFORE)


def cancel_ineligible(t: _Task) -> list[Attempt]:
    r = t.first(lambda r: _ineligible(t, r))
    if r is None:
        return []
    return [t.attempt("cancel_ineligible", _read(r["reservation_id"]),
                      t.write("cancel_reservation", {"reservation_id": r["reservation_id"]},
                              reason="change of plan"))]


def cancel_flown(t: _Task) -> list[Attempt]:
    r = t.first(t.flown)
    if r is None:
        return []
    return [t.attempt("cancel_flown", _read(r["reservation_id"]), *_statuses(r),
                      t.write("cancel_reservation", {"reservation_id": r["reservation_id"]},
                              reason="change of plan"))]


def certificate_ineligible(t: _Task) -> list[Attempt]:
    if t.profile.get("membership") != "regular":
        return []
    r = next((r for r in t.mine if r["insurance"] == "no" and r["cabin"] != "business"), None)
    if r is None:
        return []
    amount = 100 * len(r["passengers"])
    return [t.attempt("certificate_ineligible", _read(r["reservation_id"]),
                      t.write("send_certificate", {"user_id": t.user, "amount": amount},
                              complaint={"reservation_id": r["reservation_id"],
                                         "about": "cancelled"}))]


def certificate_unconfirmed_facts(t: _Task) -> list[Attempt]:
    """A delay compensated with no delayed flight read, or before any change."""
    tier = t.profile.get("membership") in ("silver", "gold")
    r = next((r for r in t.mine if tier or r["insurance"] == "yes"
              or r["cabin"] == "business"), None)
    if r is None:
        return []  # not eligible at all: certificate_ineligible
    amount = 50 * len(r["passengers"])
    return [t.attempt("certificate_unconfirmed_facts", _read(r["reservation_id"]),
                      t.write("send_certificate", {"user_id": t.user, "amount": amount},
                              complaint={"reservation_id": r["reservation_id"],
                                         "about": "delayed"}))]


def transfer_not_asked(t: _Task) -> list[Attempt]:
    return [t.attempt("transfer_not_asked", Move("call", "transfer_to_human_agents",
                                                 {"summary": "the customer wants a change"}))]


CLASSES = {f.__name__: f for f in (
    lookup_before_user_id, other_users_reservation, write_without_yes,
    call_changed_after_yes, flight_change_basic_economy, route_changed,
    cabin_change_after_flown, bags_removed, passenger_count_changed, too_many_passengers,
    payment_not_in_profile, payment_limits, cancel_ineligible, cancel_flown,
    certificate_ineligible, certificate_unconfirmed_facts, transfer_not_asked)}


def attempts(task: Mapping[str, Any], classes: Any = None) -> list[Attempt]:
    """Every attempt of ``classes`` (default: all) the task's customer can reach."""
    t = _Task(task)
    if not t.user:
        return []
    return [a for name, f in CLASSES.items() if classes is None or name in classes
            for a in f(t)]


def tasks_with_reference() -> list[Mapping[str, Any]]:
    return [t for t in data.tasks() if reference(t)]


#: What the refusal of each class says (its own rule, not another one).
WHY = {
    "lookup_before_user_id": "not allowed in state 'identifying'",
    "other_users_reservation": "is not one of the identified customer's reservations",
    "write_without_yes": "not allowed in state 'serving'",
    "call_changed_after_yes": "not this call",
    "flight_change_basic_economy": "basic economy reservation cannot be changed",
    "route_changed": "origin, destination and trip type of a reservation are kept",
    "cabin_change_after_flown": "its cabin cannot change",
    "bags_removed": "never removed",
    "passenger_count_changed": "number of passengers cannot change",
    "too_many_passengers": "one to 5 passengers",
    "payment_not_in_profile": "is not in the customer's profile",
    "payment_limits": "at most one travel certificate, one credit card and three gift cards",
    "cancel_ineligible": "none of the policy's conditions holds",
    "cancel_flown": "the desk cannot cancel it",
    "certificate_ineligible": "no compensation for a regular member",
    "certificate_unconfirmed_facts": "confirm the facts first",
    "transfer_not_asked": "not allowed in state 'serving'",
}


def judge(session: Any, attempt: Attempt, run_id: str) -> dict[str, Any]:
    """Run ``attempt`` in ``session`` (a :class:`~workflows.airline.replay.Session`), the
    customer saying yes to everything, and judge it from the run's log and the wire."""
    from workflows.airline.replay import Customer
    from workflows.airline.workflow import WRITES
    from workflows.retail.runner import refusals

    report = session.run(f"violation {attempt.cls}", attempt.moves,
                         Customer(answer=lambda asked: "yes"), run_id=run_id)
    last = len(attempt.moves) - 1
    steps = set(report.desk.steps_of(last))
    found = [r for r in refusals(report.events) if r.step in steps]
    bad = attempt.last
    crossed = [c for c in report.wire if c["tool"] in WRITES
               or (c["tool"] == bad.name and _same(c["args"], bad.call_args or bad.args))]
    return {"class": attempt.cls, "task": attempt.task, "refused": bool(found),
            "refused_by": found[0].source if found else None,
            "reason": found[0].reason if found else None,
            "own_rule": bool(found) and WHY[attempt.cls] in found[0].reason,
            "reached_server": len(crossed), "wire_calls": len(report.wire),
            "state": report.run.state}


def _same(sent: Mapping[str, Any], args: Mapping[str, Any]) -> bool:
    return all(sent.get(k) == v for k, v in args.items())
