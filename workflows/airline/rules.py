"""The airline policy's rules that τ³-bench's airline tools leave out, as pure checks.

Each rule answers "why may this write not run?" from what the desk has read through the
server's own read tools and remembered in the run's facts (:mod:`workflows.airline.facts`),
or ``None`` when it may. The guards of the ``propose*`` events apply them to a proposal
before the customer is asked, and each write's gate check applies them again to the call.

Money is compared in cents (the server keeps dollars, gift cards and certificates as
floats). The current time is the policy's: 2024-05-15 15:00 EST.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: The policy's clock ("The current time is 2024-05-15 15:00:00 EST").
NOW = "2024-05-15T15:00:00"
TODAY = "2024-05-15"
#: Booked within the last 24 hours: created at or after this.
DAY_BEFORE = "2024-05-14T15:00:00"
MAX_PASSENGERS = 5
#: At most this many payment methods of each kind in a booking.
PAYMENT_LIMITS = {"certificate": 1, "credit_card": 1, "gift_card": 3}
#: Free checked bags per passenger, by membership and cabin.
FREE_BAGS = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
BAG_FEE = 50
INSURANCE_FEE = 30
#: Statuses of a flight date on which it has taken off.
FLOWN = frozenset({"landed", "flying"})
#: The reasons for a cancellation the desk records (the policy's three, health and
#: weather being the ones insurance covers).
CANCEL_REASONS = ("change of plan", "airline cancelled flight", "health", "weather", "other")
INSURED_REASONS = frozenset({"health", "weather"})
#: Compensation per passenger, by what the customer complains about.
COMPENSATION = {"cancelled": 100, "delayed": 50}


def cents(amount: Any) -> int:
    return round(float(amount) * 100)


def dollars(amount_cents: int) -> str:
    return f"${amount_cents // 100:,}" + (f".{amount_cents % 100:02d}" if amount_cents % 100
                                           else "")


def key(flight_number: Any, date: Any) -> str:
    return f"{flight_number}@{date}"


# -- what is known of a reservation's segments --------------------------------------------

def segment_status(facts: Mapping[str, Any], flight: Mapping[str, Any]) -> str | None:
    """The status of a segment as read (``get_flight_status`` or a search), or ``None``."""
    status = (facts.get("statuses") or {}).get(key(flight["flight_number"], flight["date"]))
    return status if isinstance(status, str) else None


def flown(facts: Mapping[str, Any], res: Mapping[str, Any]) -> bool | None:
    """Whether any segment of ``res`` has taken off: ``True``, ``False``, or ``None`` when a
    segment on or before today has no status read yet (a later date has not flown)."""
    unknown = False
    for f in res["flights"]:
        status = segment_status(facts, f)
        if status in FLOWN:
            return True
        if status is None and f["date"] <= TODAY:
            unknown = True
    return None if unknown else False


def statuses_of(facts: Mapping[str, Any], res: Mapping[str, Any]) -> set[str]:
    return {s for f in res["flights"] if (s := segment_status(facts, f)) is not None}


def _unknown_segments(facts: Mapping[str, Any], res: Mapping[str, Any]) -> str:
    return ", ".join(f"{f['flight_number']} on {f['date']}" for f in res["flights"]
                     if segment_status(facts, f) is None and f["date"] <= TODAY)


# -- the pieces every write needs ----------------------------------------------------------

def _user(facts: Mapping[str, Any]) -> str | None:
    if not facts.get("user_id"):
        return ("no customer is identified: ask the customer for their user id and read "
                "their profile (get_user_details) first")
    return None


def reservation(facts: Mapping[str, Any], rid: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The reservation ``rid`` as read, or why a write to it may not be proposed."""
    res = (facts.get("reservations") or {}).get(rid)
    if res is None:
        return None, (f"reservation {rid!r} has not been read in this conversation: read it "
                      "with get_reservation_details first")
    if res["user_id"] != facts.get("user_id"):
        return None, (f"reservation {rid!r} belongs to another user; only the identified "
                      "customer's reservations may be changed")
    if res.get("status") == "cancelled":
        return None, f"reservation {rid!r} is cancelled already"
    return res, None


def method(facts: Mapping[str, Any], pid: Any) -> tuple[dict[str, Any] | None, str | None]:
    m = (facts.get("payment_methods") or {}).get(pid)
    if m is None:
        return None, (f"payment method {pid!r} is not in the customer's profile; the policy "
                      "takes only payment methods already in the profile")
    return m, None


def _update_payment(facts: Mapping[str, Any], pid: Any, owed_cents: int | None) -> str | None:
    """A change is paid (or refunded) with one gift card or credit card of the profile."""
    m, why = method(facts, pid)
    if m is None:
        return why
    if m["source"] == "certificate":
        return "a change is paid with a gift card or a credit card, not a travel certificate"
    if m["source"] == "gift_card" and owed_cents is not None and \
            cents(m.get("amount") or 0) < owed_cents:
        return (f"gift card {pid!r} holds {dollars(cents(m.get('amount') or 0))}, short of "
                f"the {dollars(owed_cents)} to pay")
    return None


def route(flights: Sequence[Mapping[str, Any]], origin: Any, destination: Any,
          trip: Any) -> str | None:
    """The flights go from ``origin`` to ``destination`` (and back, for a round trip),
    one segment after the other."""
    if not flights:
        return "a reservation has at least one flight"
    for a, b in zip(flights, flights[1:], strict=False):
        if a["destination"] != b["origin"]:
            return (f"the flights do not connect: {a['flight_number']} lands at "
                    f"{a['destination']}, {b['flight_number']} leaves from {b['origin']}")
    if flights[0]["origin"] != origin:
        return f"the trip must start at {origin}, not {flights[0]['origin']}"
    ends = [f["destination"] for f in flights]
    if trip == "one_way" and ends[-1] != destination:
        return f"a one-way trip must end at {destination}, not {ends[-1]}"
    if trip == "round_trip" and (ends[-1] != origin or destination not in ends):
        return (f"a round trip must go from {origin} to {destination} and back to {origin}")
    return None


def _legs(facts: Mapping[str, Any], flights: Sequence[Mapping[str, Any]],
          kept: Sequence[Mapping[str, Any]], cabin: str) -> tuple[list[dict[str, Any]] | None,
                                                                 str | None]:
    """The segments of ``flights`` with their route and price in ``cabin``: a segment kept
    as it was (same flight, date and cabin) keeps its price; any other must have been
    found by a search of this conversation, available, with seats left."""
    offers = facts.get("offers") or {}
    out = []
    for f in flights:
        old = next((k for k in kept if k["flight_number"] == f["flight_number"]
                    and k["date"] == f["date"]), None)
        if old is not None and old.get("cabin") == cabin:
            out.append({**old, "price_cents": cents(old["price"])})
            continue
        offer = offers.get(key(f["flight_number"], f["date"]))
        if offer is None:
            return None, (f"flight {f['flight_number']} on {f['date']} has not been found by a "
                          "search in this conversation: search it first (search_direct_flight "
                          "or search_onestop_flight)")
        out.append({"flight_number": f["flight_number"], "date": f["date"],
                    "origin": offer["origin"], "destination": offer["destination"],
                    "price_cents": cents(offer["prices"][cabin]),
                    "seats": offer["seats"][cabin]})
    return out, None


# -- each write --------------------------------------------------------------------------------

def book(facts: Mapping[str, Any], args: Mapping[str, Any]) -> str | None:
    if args["user_id"] != facts.get("user_id"):
        return (f"user {args['user_id']!r} is not the identified customer "
                f"{facts.get('user_id')!r}")
    n = len(args["passengers"])
    if not 1 <= n <= MAX_PASSENGERS:
        return f"a reservation has one to {MAX_PASSENGERS} passengers, not {n}"
    legs, why = _legs(facts, args["flights"], [], args["cabin"])
    if legs is None:
        return why
    full = next((g for g in legs if g["seats"] < n), None)
    if full is not None:
        return f"flight {full['flight_number']} has {full['seats']} seats left in {args['cabin']}"
    why = route(legs, args["origin"], args["destination"], args["flight_type"])
    if why is not None:
        return why
    return _bags_at_booking(facts, args, n) or _booking_payment(facts, args, legs, n)


def _bags_at_booking(facts: Mapping[str, Any], args: Mapping[str, Any], n: int) -> str | None:
    free = FREE_BAGS[facts.get("membership", "regular")][args["cabin"]] * n
    total, paid = args["total_baggages"], args["nonfree_baggages"]
    if paid < 0 or total < paid:
        return "the bags are a total and the paid ones among them"
    if paid != max(0, total - free):
        return (f"{total} bags with {free} free for a {facts.get('membership')} member's "
                f"{n} passenger(s) in {args['cabin']} make {max(0, total - free)} paid bags, "
                f"not {paid}")
    return None


def _booking_payment(facts: Mapping[str, Any], args: Mapping[str, Any],
                     legs: Sequence[Mapping[str, Any]], n: int) -> str | None:
    price = sum(g["price_cents"] for g in legs) * n
    price += (INSURANCE_FEE * 100 * n if args["insurance"] == "yes" else 0)
    price += BAG_FEE * 100 * args["nonfree_baggages"]
    counts: dict[str, int] = {}
    paid = 0
    for p in args["payment_methods"]:
        m, why = method(facts, p["payment_id"])
        if m is None:
            return why
        counts[m["source"]] = counts.get(m["source"], 0) + 1
        if m["source"] in ("gift_card", "certificate") and \
                cents(m.get("amount") or 0) < cents(p["amount"]):
            return (f"{p['payment_id']!r} holds {dollars(cents(m.get('amount') or 0))}, short "
                    f"of {dollars(cents(p['amount']))}")
        paid += cents(p["amount"])
    over = [k for k, c in counts.items() if c > PAYMENT_LIMITS.get(k, 0)]
    if over:
        return ("a reservation uses at most one travel certificate, one credit card and "
                f"three gift cards (too many: {', '.join(sorted(over))})")
    if paid != price:
        return f"the payments add up to {dollars(paid)}, but the price is {dollars(price)}"
    return None


def change_flights(facts: Mapping[str, Any], args: Mapping[str, Any],
                   res: Mapping[str, Any]) -> str | None:
    old = [{**f, "cabin": res["cabin"]} for f in res["flights"]]
    same = [(f["flight_number"], f["date"]) for f in args["flights"]] == \
        [(f["flight_number"], f["date"]) for f in res["flights"]]
    if not same and res["cabin"] == "basic_economy":
        return "the flights of a basic economy reservation cannot be changed"
    if args["cabin"] != res["cabin"]:
        gone = flown(facts, res)
        if gone is None:
            return ("the cabin cannot change once a segment has flown: read the status of "
                    f"{_unknown_segments(facts, res)} first (get_flight_status)")
        if gone:
            return "a segment of this reservation has flown: its cabin cannot change"
    legs, why = _legs(facts, args["flights"], old, args["cabin"])
    if legs is None:
        return why
    why = route(legs, res["origin"], res["destination"], res["flight_type"])
    if why is not None:
        return ("the origin, destination and trip type of a reservation are kept: " + why)
    n = res["passengers"]
    owed = (sum(g["price_cents"] for g in legs) - sum(cents(f["price"]) for f in old)) * n
    return _update_payment(facts, args["payment_id"], max(owed, 0))


def change_bags(facts: Mapping[str, Any], args: Mapping[str, Any],
                res: Mapping[str, Any]) -> str | None:
    total, paid = args["total_baggages"], args["nonfree_baggages"]
    if total < res["total_baggages"] or paid < res["nonfree_baggages"]:
        return (f"bags can be added, never removed: the reservation has "
                f"{res['total_baggages']} bags ({res['nonfree_baggages']} paid)")
    free = FREE_BAGS[facts.get("membership", "regular")][res["cabin"]] * res["passengers"]
    if total - paid > max(free, res["total_baggages"] - res["nonfree_baggages"]):
        return f"only {free} of the bags are free; the others are paid"
    if paid - res["nonfree_baggages"] > total - res["total_baggages"]:
        return "only the bags added are paid for"
    return _update_payment(facts, args["payment_id"],
                           BAG_FEE * 100 * (paid - res["nonfree_baggages"]))


def change_passengers(facts: Mapping[str, Any], args: Mapping[str, Any],
                      res: Mapping[str, Any]) -> str | None:
    if len(args["passengers"]) != res["passengers"]:
        return (f"the number of passengers cannot change ({res['passengers']}, not "
                f"{len(args['passengers'])}); not even a human agent can change it")
    return None


def cancellation(facts: Mapping[str, Any], res: Mapping[str, Any],
                 reason: Any) -> str | None:
    """Why ``res`` may not be cancelled for ``reason``, or ``None``."""
    if reason not in CANCEL_REASONS:
        return ("the customer's reason for the cancellation is needed (one of: "
                f"{', '.join(CANCEL_REASONS)})")
    gone = flown(facts, res)
    if gone is None:
        return ("read the status of " + _unknown_segments(facts, res) + " first "
                "(get_flight_status): a reservation with a flown segment cannot be cancelled")
    if gone:
        return ("a segment of this reservation has flown: the desk cannot cancel it; "
                "transfer the customer to a human agent")
    if eligible_cancellation(facts, res, reason):
        return None
    return ("none of the policy's conditions holds: booked within the last 24 hours, a flight "
            "cancelled by the airline, a business cabin, or insurance and a health or weather "
            "reason")


def eligible_cancellation(facts: Mapping[str, Any], res: Mapping[str, Any],
                          reason: Any) -> bool:
    return (res["created_at"] >= DAY_BEFORE or "cancelled" in statuses_of(facts, res)
            or res["cabin"] == "business"
            or (res["insurance"] == "yes" and reason in INSURED_REASONS))


def compensation(facts: Mapping[str, Any], args: Mapping[str, Any],
                 complaint: Mapping[str, Any] | None) -> str | None:
    """Why a certificate of ``args`` may not be sent for ``complaint``, or ``None``."""
    if args["user_id"] != facts.get("user_id"):
        return f"user {args['user_id']!r} is not the identified customer"
    if not complaint:
        return ("compensation is offered only when the customer asks for it, about a "
                "cancelled or delayed flight of a reservation: say which")
    res, why = _any_reservation(facts, complaint.get("reservation_id"))
    if res is None:
        return why
    if not (facts.get("membership") in ("silver", "gold") or res["insurance"] == "yes"
            or res["cabin"] == "business"):
        return ("no compensation for a regular member without travel insurance flying "
                "(basic) economy")
    about = complaint.get("about")
    if about not in COMPENSATION:
        return "compensation only for a cancelled or a delayed flight"
    if about not in statuses_of(facts, res):
        return (f"no flight of reservation {res['reservation_id']!r} is known to be {about}: "
                "confirm the facts first (get_flight_status)")
    if about == "delayed" and res["reservation_id"] not in (facts.get("changed") or []):
        return ("for a delay, compensation comes after the reservation was changed or "
                "cancelled, in this conversation")
    due = COMPENSATION[about] * res["passengers"]
    if cents(args["amount"]) != due * 100:
        return (f"the certificate for a {about} flight is ${COMPENSATION[about]} per "
                f"passenger: {dollars(due * 100)}, not {dollars(cents(args['amount']))}")
    return None


def _any_reservation(facts: Mapping[str, Any], rid: Any) -> tuple[dict[str, Any] | None,
                                                                  str | None]:
    res = (facts.get("reservations") or {}).get(rid)
    if res is None:
        return None, f"reservation {rid!r} has not been read in this conversation"
    if res["user_id"] != facts.get("user_id"):
        return None, f"reservation {rid!r} belongs to another user"
    return res, None


# -- a proposal --------------------------------------------------------------------------------

_CHANGES = {"update_reservation_flights": change_flights,
            "update_reservation_baggages": change_bags,
            "update_reservation_passengers": change_passengers}


def problem(facts: Mapping[str, Any], proposal: Mapping[str, Any]) -> str | None:
    """Why the policy forbids the proposal (``tool``, ``args``, and ``reason`` for a
    cancellation or ``complaint`` for a certificate), or ``None``."""
    why = _user(facts)
    if why is not None:
        return why
    tool, args = proposal["tool"], proposal["args"]
    if tool == "book_reservation":
        return book(facts, args)
    if tool == "send_certificate":
        return compensation(facts, args, proposal.get("complaint"))
    res, why = reservation(facts, args.get("reservation_id"))
    if res is None:
        return why
    if tool == "cancel_reservation":
        return cancellation(facts, res, proposal.get("reason"))
    return _CHANGES[tool](facts, args, res)
