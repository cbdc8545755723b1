"""How ``fsm shadow`` reads a recorded airline agent's prose (τ²-bench's airline policy).

The policy: "Before taking any actions that update the booking database (booking,
modifying flights, editing baggage, changing cabin class, or updating passenger
information), you must list the action details and obtain explicit user confirmation
(yes) to proceed." As at the retail desk (:mod:`workflows.retail.shadow`), one answer may
cover several writes, provided the one proposal names each of them.

**The answer** is read as at the retail desk: an explicit yes opens one of the reply's
parts and nothing takes it back.

**The proposal** is every message of the agent since the last write up to the answer
(``span``): agents list the details over a negotiation and then ask for the yes. It must
name what the call changes: the reservation (when the agent read more than one: its id,
or its origin and destination);
the new flights (each flight number); the new passengers (a new person's first and last
name; of one whose first or last name alone changes, that name); the number of
checked bags; the payment method, for bags only when some are paid (its id, its kind —
gift card, credit card, certificate — when the profile has one of that kind, its id's
number or last four digits, or a credit card's last four digits); a certificate's
amount. A booking is named by its flights and passengers.

**The customer's first message** is the reply to the agent's greeting (``greeting``), so
that a user id given there counts as given.

**A cancellation** carries the customer's reason the desk's ``propose_cancel`` requires,
read from the customer's words (:data:`REASONS`; "other" when none fits), and **a
certificate** the complaint (``delayed`` when the customer spoke of a delay, else
``cancelled``) about the reservation of the call.

**A hand-over** the recording makes with ``transfer_to_human_agents`` carries the payload
the desk's ``hand_over`` requires: the request is the call's summary, and the reason is
"the customer asked for a human agent" when one of the customer's messages asks for a
human (``human``, ``agent``, ``representative``, ``supervisor``, ``person``), else "the
desk cannot act".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fsm.sandbox.shadow_rules import Answer, Mention, Seen
from workflows.retail.shadow import RetailProse

#: Words by which a customer asks for a person.
HUMAN = ("human", "agent", "representative", "supervisor", "person", "someone")
#: The customer's reason for a cancellation, by the words they used (the first that fits).
REASONS = (("airline cancelled flight", ("airline cancel", "flight was cancel",
                                         "flight got cancel", "flight has been cancel",
                                         "cancelled by the airline", "canceled by the airline")),
           ("health", ("health", "sick", "ill ", "illness", "medical", "hospital", "surgery",
                       "not feeling well", "injur")),
           ("weather", ("weather", "storm", "hurricane", "snow")),
           ("change of plan", ("change of plan", "plans changed", "plans have changed",
                               "change in plan", "changed my plan", "plan changed")))
#: A payment method's kind (its source) and the words that name it.
KINDS = {"gift_card": "gift card", "credit_card": "credit card", "certificate": "certificate"}


class AirlineProse:
    """The airline desk's rules for recorded prose (see the module's docstring)."""

    summary = ("an answer is a yes when it opens with a yes and takes nothing back; one "
               "proposal may cover several writes, and must name each one's reservation, "
               "flights, passengers, bags, payment method and certificate amount")

    #: The proposal is every message of the agent since the last write, up to the answer.
    span = "since_write"
    #: The customer's first message answers the agent's greeting: the desk reads a user
    #: id given there.
    greeting = True

    def __init__(self) -> None:
        self._retail = RetailProse()

    def answer(self, text: str) -> Answer | None:
        return self._retail.answer(text)

    def mentions(self, tool: str, args: Mapping[str, Any], seen: Seen) -> list[Mention]:
        out: list[Mention] = []
        rid = args.get("reservation_id")
        read = {a.get("reservation_id") for t, a, _ in seen.reads
                if t == "get_reservation_details"}
        if isinstance(rid, str) and read - {rid}:
            out.append(Mention(f"reservation {rid!r}", (rid,), _route(rid, seen)))
        for f in args.get("flights") or []:
            if isinstance(f, Mapping) and tool != "update_reservation_flights" or \
                    isinstance(f, Mapping) and _new_flight(f, rid, seen):
                out.append(Mention(f"flight {f.get('flight_number')!r}",
                                   (str(f.get("flight_number")),)))
        for p, names in _changed(tool, args, rid, seen):
            out.append(Mention(f"passenger {p.get('first_name')} {p.get('last_name')}",
                               (), (names,)))
        if tool == "update_reservation_baggages":
            out.append(Mention(f"{args.get('total_baggages')} bags",
                               (str(args.get("total_baggages")),)))
        if tool == "send_certificate":
            out.append(Mention(f"amount {args.get('amount')!r}", _amounts(args.get("amount"))))
        pid = args.get("payment_id")
        if isinstance(pid, str) and (tool != "update_reservation_baggages"
                                     or args.get("nonfree_baggages")):
            out.append(Mention(f"payment method {pid!r}", _method_names(pid, seen)))
        for p in args.get("payment_methods") or []:
            if isinstance(p, Mapping) and isinstance(p.get("payment_id"), str):
                out.append(Mention(f"payment method {p['payment_id']!r}",
                                   _method_names(p["payment_id"], seen)))
        return out

    def payload(self, event: str, tool: str, args: Mapping[str, Any],
                heard: Sequence[str]) -> dict[str, Any]:
        said = " ".join(heard).lower()
        if event == "hand_over":
            asked = any(w in said for w in HUMAN)
            return {"why": "the customer asked for a human agent" if asked else
                    "the desk cannot act", "request": str(args.get("summary") or tool)}
        if event == "propose_cancel":
            return {"reason": next((r for r, words in REASONS if any(w in said for w in words)),
                                   "other")}
        if event == "propose_certificate":
            return {"complaint": {"reservation_id": str(args.get("reservation_id") or ""),
                                  "about": "delayed" if "delay" in said else "cancelled"}}
        return {}


def _changed(tool: str, args: Mapping[str, Any], rid: Any, seen: Seen
             ) -> list[tuple[Mapping[str, Any], tuple[str, ...]]]:
    """The new passengers of a call, each with the names that must be said: a booking's,
    first and last; of a change, each that differs from the reservation's passenger at the
    same place, by the names that changed (its first and last for a new person)."""
    given = [p for p in args.get("passengers") or [] if isinstance(p, Mapping)]
    res = seen.last("get_reservation_details", reservation_id=rid)
    now = list(res.get("passengers") or []) if isinstance(res, Mapping) else []
    out = []
    for i, p in enumerate(given):
        was = now[i] if tool == "update_reservation_passengers" and i < len(now) else {}
        if p == was:
            continue
        keys = ("first_name", "last_name")
        changed = [k for k in keys if was.get(k) != p.get(k)]
        out.append((p, tuple(str(p.get(k)) for k in (keys if len(changed) != 1 else changed))))
    return out


def _route(rid: str, seen: Seen) -> tuple[tuple[str, ...], ...]:
    """A reservation named by its origin and destination (airport codes), as read."""
    res = seen.last("get_reservation_details", reservation_id=rid)
    if not isinstance(res, Mapping) or not res.get("origin"):
        return ()
    return ((str(res["origin"]), str(res.get("destination"))),)


def _new_flight(flight: Mapping[str, Any], rid: Any, seen: Seen) -> bool:
    """Whether a flight of a change is new (one the reservation does not already fly)."""
    res = seen.last("get_reservation_details", reservation_id=rid)
    kept = {(f.get("flight_number"), f.get("date")) for f in
            (res.get("flights") or [] if isinstance(res, Mapping) else [])}
    return (flight.get("flight_number"), flight.get("date")) not in kept


def _amounts(amount: Any) -> tuple[str, ...]:
    try:
        value = float(amount)
    except (TypeError, ValueError):
        return (str(amount),)
    whole = f"{value:.0f}" if value == int(value) else f"{value:.2f}"
    return (f"${whole}", f"${value:.2f}", f"{whole} dollars")


def _method_names(pid: str, seen: Seen) -> tuple[str, ...]:
    names = [pid]
    user = next((r for t, _, r in reversed(seen.reads) if t == "get_user_details"
                 and isinstance(r, Mapping)), None)
    methods = (user or {}).get("payment_methods") or {}
    method = methods.get(pid) or {}
    source = method.get("source")
    if source in KINDS and [m for m in methods.values()
                            if isinstance(m, Mapping) and m.get("source") == source] == [method]:
        names.append(KINDS[source])
    if method.get("last_four"):
        names.append(str(method["last_four"]))
    digits = pid.rsplit("_", 1)[-1]
    if digits.isdigit():
        names += [digits, digits[-4:]]
    return tuple(names)


#: What ``fsm shadow --workflow airline`` reads recorded prose with.
SHADOW = AirlineProse()
