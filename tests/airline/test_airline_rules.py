"""The airline policy's rules as the guards apply them, on facts as the desk remembers
them from the server's answers (``workflows/airline/facts.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.airline import facts as remembered
from workflows.airline import rules

RES = {"reservation_id": "ABC123", "user_id": "u1", "origin": "JFK", "destination": "SFO",
       "flight_type": "round_trip", "cabin": "economy",
       "flights": [{"flight_number": "HAT1", "date": "2024-05-20", "price": 100,
                    "origin": "JFK", "destination": "SFO"},
                   {"flight_number": "HAT2", "date": "2024-05-25", "price": 120,
                    "origin": "SFO", "destination": "JFK"}],
       "passengers": [{"first_name": "A", "last_name": "B", "dob": "1990-01-01"}] * 2,
       "payment_history": [{"payment_id": "credit_card_1", "amount": 440}],
       "created_at": "2024-05-01T10:00:00", "total_baggages": 2, "nonfree_baggages": 0,
       "insurance": "no"}
USER = {"user_id": "u1", "membership": "silver", "reservations": ["ABC123"],
        "payment_methods": {"credit_card_1": {"source": "credit_card", "id": "credit_card_1"},
                            "gift_card_1": {"source": "gift_card", "id": "gift_card_1",
                                            "amount": 30.5},
                            "certificate_1": {"source": "certificate", "id": "certificate_1",
                                              "amount": 100.0}}}


def _facts(res: dict[str, Any] | None = None, user: dict[str, Any] | None = None,
           **more: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    facts.update(remembered.profile({}, user or USER, facts))
    facts.update(remembered.reservation({}, res or RES, facts))
    facts.update(more)
    return facts


def _cancel(facts: dict[str, Any], reason: str = "change of plan") -> str | None:
    return rules.problem(facts, {"tool": "cancel_reservation",
                                 "args": {"reservation_id": "ABC123"}, "reason": reason})


def test_cancellation_needs_one_of_the_four_conditions() -> None:
    assert "none of the policy's conditions" in (_cancel(_facts()) or "")
    assert _cancel(_facts({**RES, "created_at": "2024-05-14T16:00:00"})) is None
    assert _cancel(_facts({**RES, "cabin": "business"})) is None
    insured = _facts({**RES, "insurance": "yes"})
    assert _cancel(insured, "health") is None and _cancel(insured, "weather") is None
    assert _cancel(insured, "change of plan") is not None
    cancelled = _facts(statuses={"HAT1@2024-05-20": "cancelled"})
    assert _cancel(cancelled, "airline cancelled flight") is None


def test_no_cancellation_once_a_segment_has_flown_and_its_status_is_read_first() -> None:
    past = {**RES, "cabin": "business", "flights": [
        {**RES["flights"][0], "date": "2024-05-10"}, RES["flights"][1]]}
    assert "read the status of HAT1 on 2024-05-10" in (_cancel(_facts(past)) or "")
    flown = _facts(past, statuses={"HAT1@2024-05-10": "landed"})
    assert "transfer the customer to a human agent" in (_cancel(flown) or "")


def _cert(facts: dict[str, Any], amount: int, about: str = "cancelled") -> str | None:
    return rules.problem(facts, {"tool": "send_certificate",
                                 "args": {"user_id": "u1", "amount": amount},
                                 "complaint": {"reservation_id": "ABC123", "about": about}})


def test_compensation_rules() -> None:
    facts = _facts(statuses={"HAT1@2024-05-20": "cancelled"})
    assert _cert(facts, 200) is None  # silver: $100 × 2 passengers
    assert "$200, not $100" in (_cert(facts, 100) or "")
    regular = _facts(user={**USER, "membership": "regular"},
                     statuses={"HAT1@2024-05-20": "cancelled"})
    assert "no compensation for a regular member" in (_cert(regular, 200) or "")
    assert "confirm the facts first" in (_cert(_facts(), 200) or "")
    delayed = _facts(statuses={"HAT1@2024-05-20": "delayed"})
    assert "after the reservation was changed or cancelled" in (_cert(delayed, 100, "delayed")
                                                                or "")
    assert _cert({**delayed, "changed": ["ABC123"]}, 100, "delayed") is None
    assert rules.problem(facts, {"tool": "send_certificate", "args": {
        "user_id": "u1", "amount": 200}}) is not None  # never unasked


def _change(facts: dict[str, Any], **args: Any) -> str | None:
    call = {"reservation_id": "ABC123", "cabin": "economy", "payment_id": "credit_card_1",
            "flights": [{"flight_number": f["flight_number"], "date": f["date"]}
                        for f in RES["flights"]], **args}
    return rules.problem(facts, {"tool": "update_reservation_flights", "args": call})


def test_flight_changes() -> None:
    basic = _facts({**RES, "cabin": "basic_economy"})
    new = [{"flight_number": "HAT9", "date": "2024-05-21"},
           {"flight_number": "HAT2", "date": "2024-05-25"}]
    assert "basic economy" in (_change(basic, cabin="basic_economy", flights=new) or "")
    # A cabin change keeps the flights, even of basic economy, at the searched price.
    assert "search it first" in (_change(basic, cabin="economy") or "")
    prices = {f"{f['flight_number']}@{f['date']}": {
        "origin": f["origin"], "destination": f["destination"], "prices": {"economy": 150},
        "seats": {"economy": 9}} for f in RES["flights"]}
    assert _change({**basic, "offers": prices}, cabin="economy") is None
    assert "search it first" in (_change(_facts(), flights=new) or "")
    found = {"HAT9@2024-05-21": {"origin": "JFK", "destination": "LAX",
                                 "prices": {"economy": 90}, "seats": {"economy": 9}}}
    assert "trip type of a reservation are kept" in (_change(_facts(offers=found),
                                                             flights=new) or "")
    found["HAT9@2024-05-21"]["destination"] = "SFO"
    assert _change(_facts(offers=found), flights=new) is None
    assert "not a travel certificate" in (_change(_facts(), payment_id="certificate_1") or "")


def test_cabin_is_kept_once_a_segment_has_flown_and_gift_cards_must_cover() -> None:
    past = {**RES, "flights": [{**RES["flights"][0], "date": "2024-05-12"}, RES["flights"][1]]}
    found = {f"{f['flight_number']}@{f['date']}": {
        "origin": f["origin"], "destination": f["destination"],
        "prices": {"business": 400}, "seats": {"business": 5}} for f in past["flights"]}
    flown = _facts(past, statuses={"HAT1@2024-05-12": "landed"}, offers=found)
    assert "its cabin cannot change" in (_change(flown, cabin="business", flights=[
        {"flight_number": f["flight_number"], "date": f["date"]} for f in past["flights"]])
        or "")
    facts = _facts(offers={**found, "HAT1@2024-05-20": {**found["HAT1@2024-05-12"]}})
    short = _change(facts, cabin="business", payment_id="gift_card_1")
    assert short is not None and "short of the $1,160 to pay" in short


@pytest.mark.parametrize(("total", "paid", "problem"), [
    (1, 0, "never removed"), (3, 0, None), (6, 0, "only 4 of the bags are free"),
    (6, 2, None), (3, 1, None)])
def test_bags_are_added_never_removed_the_free_ones_by_tier_and_cabin(
        total: int, paid: int, problem: str | None) -> None:
    why = rules.problem(_facts(), {"tool": "update_reservation_baggages", "args": {
        "reservation_id": "ABC123", "total_baggages": total, "nonfree_baggages": paid,
        "payment_id": "credit_card_1"}})
    assert (why is None) if problem is None else (problem in (why or "")), why


def test_passenger_count_is_kept() -> None:
    args = {"reservation_id": "ABC123", "passengers": RES["passengers"][:1]}
    assert "cannot change (2, not 1)" in (rules.problem(_facts(), {
        "tool": "update_reservation_passengers", "args": args}) or "")


def _book(**changes: Any) -> dict[str, Any]:
    args = {"user_id": "u1", "origin": "JFK", "destination": "SFO", "flight_type": "one_way",
            "cabin": "economy", "flights": [{"flight_number": "HAT1", "date": "2024-05-20"}],
            "passengers": [{"first_name": "A", "last_name": "B", "dob": "1990-01-01"}],
            "payment_methods": [{"payment_id": "credit_card_1", "amount": 100}],
            "total_baggages": 2, "nonfree_baggages": 0, "insurance": "no"}
    return {"tool": "book_reservation", "args": {**args, **changes}}


OFFER = {"HAT1@2024-05-20": {"origin": "JFK", "destination": "SFO",
                             "prices": {"economy": 100}, "seats": {"economy": 9}}}


@pytest.mark.parametrize(("changes", "problem"), [
    ({}, None),
    ({"passengers": [{"first_name": "A", "last_name": "B", "dob": "1990-01-01"}] * 6},
     "one to 5 passengers"),
    ({"payment_methods": [{"payment_id": "credit_card_9", "amount": 100}]},
     "not in the customer's profile"),
    ({"payment_methods": [{"payment_id": "gift_card_1", "amount": 31},
                          {"payment_id": "credit_card_1", "amount": 69}]}, "short of $31"),
    ({"payment_methods": [{"payment_id": "credit_card_1", "amount": 50},
                          {"payment_id": "credit_card_1", "amount": 50}]}, "too many"),
    ({"insurance": "yes"}, "the price is $130"),
    ({"total_baggages": 3, "nonfree_baggages": 0}, "make 1 paid bags"),
    ({"destination": "LAX"}, "must end at LAX"),
    ({"user_id": "u2"}, "not the identified customer"),
])
def test_booking(changes: dict[str, Any], problem: str | None) -> None:
    why = rules.problem(_facts(offers=OFFER), _book(**changes))
    assert (why is None) if problem is None else (problem in (why or "")), why


def test_nothing_is_proposed_before_the_profile_is_read() -> None:
    assert "ask the customer for their user id" in (rules.problem({}, _book()) or "")


def test_a_search_answer_is_remembered_flight_by_flight() -> None:
    flight = {"flight_number": "HAT1", "origin": "JFK", "destination": "SFO",
              "status": "available", "date": None, "available_seats": {"economy": 3},
              "prices": {"economy": 100}}
    one = remembered.found({"origin": "JFK", "destination": "SFO", "date": "2024-05-20"},
                           flight, {})
    assert one["offers"]["HAT1@2024-05-20"]["prices"] == {"economy": 100}
    pairs = remembered.found({"date": "2024-05-20"}, [[{**flight, "date": "2024-05-20"},
                                                       {**flight, "flight_number": "HAT2",
                                                        "date": "2024-05-21"}]], {})
    assert set(pairs["offers"]) == {"HAT1@2024-05-20", "HAT2@2024-05-21"}


def test_a_reply_naming_a_user_id_fires_user_id_given_and_a_proposal_reads_yes() -> None:
    from workflows.airline.workflow import interpret

    assert interpret("Sure! My user ID is emma_kim_9957.", {}) == "user_id_given"
    assert interpret("It's reservation EHGLP3, I don't remember my id", {}) is None
    assert interpret("yes", {"tool": "cancel_reservation", "args": {}}) == "confirmed"
    assert interpret("emma_kim_9957", {"tool": "cancel_reservation", "args": {}}) is None
