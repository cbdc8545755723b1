"""What the airline desk remembers of what the server's own read tools answered.

Each function is a tool's ``remember`` (``fn(args, result, facts) -> facts to merge``):

- ``get_user_details``: the identified customer (the first user read is the one served),
  their membership, payment methods (kind and balance) and reservation ids;
- ``get_reservation_details`` and every write that answers with a reservation: the
  reservation's summary (owner, route, trip type, cabin, segments with prices, passenger
  count, bags, insurance, creation time, status);
- ``get_flight_status``: the status of a flight on a date; ``search_direct_flight`` and
  ``search_onestop_flight``: each flight found, available, with its seats and prices;
- a write: the reservation it changed (a delay is compensated only after a change).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.airline.rules import key


def _plain(args: Any) -> dict[str, Any]:
    return args.model_dump() if hasattr(args, "model_dump") else dict(args)


def profile(args: Any, result: Any, facts: Any) -> dict[str, Any]:
    if not isinstance(result, Mapping) or "user_id" not in result:
        return {}
    if facts.get("user_id") and facts.get("user_id") != result["user_id"]:
        return {}
    methods = {pid: {"source": m.get("source"), "amount": m.get("amount")}
               for pid, m in (result.get("payment_methods") or {}).items()}
    return {"user_id": result["user_id"], "membership": result.get("membership"),
            "payment_methods": methods, "user_reservations": list(result.get("reservations")
                                                                  or [])}


def summary(res: Mapping[str, Any]) -> dict[str, Any]:
    """What the desk keeps of a reservation (the server's shape in)."""
    return {"reservation_id": res["reservation_id"], "user_id": res["user_id"],
            "origin": res["origin"], "destination": res["destination"],
            "flight_type": res["flight_type"], "cabin": res["cabin"],
            "flights": [{k: f[k] for k in ("flight_number", "date", "price", "origin",
                                           "destination")} for f in res["flights"]],
            "passengers": len(res["passengers"]), "total_baggages": res["total_baggages"],
            "nonfree_baggages": res["nonfree_baggages"], "insurance": res["insurance"],
            "created_at": res["created_at"], "status": res.get("status"),
            "payments": len(res.get("payment_history") or [])}


def reservation(args: Any, result: Any, facts: Any) -> dict[str, Any]:
    if not isinstance(result, Mapping) or "reservation_id" not in result:
        return {}
    out = {"reservations": {**(facts.get("reservations") or {}),
                            result["reservation_id"]: summary(result)}}
    return out


def named_reservation(args: Any, result: Any, facts: Any) -> dict[str, Any]:
    """A reservation read: :func:`reservation`; read before the profile (the customer gave
    their user id and named it), its owner is the customer served, with that reservation."""
    out = reservation(args, result, facts)
    if out and not facts.get("user_id"):
        out.update(user_id=result["user_id"], user_reservations=[result["reservation_id"]])
    return out


def written(args: Any, result: Any, facts: Any) -> dict[str, Any]:
    """After a write: the reservation it answered with, and that it changed."""
    out = reservation(args, result, facts)
    rid = result.get("reservation_id") if isinstance(result, Mapping) else None
    if rid is None:
        return out
    changed = list(facts.get("changed") or [])
    out["changed"] = changed if rid in changed else [*changed, rid]
    mine = list(facts.get("user_reservations") or [])
    if result.get("user_id") == facts.get("user_id") and rid not in mine:
        out["user_reservations"] = [*mine, rid]
    return out


def spent(args: Any, result: Any, facts: Any) -> dict[str, Any]:
    """After a write that may pay: :func:`written`, and the balances its new payments used,
    as the server deducts them (a gift card pays or is refunded a change; a certificate
    used in a booking is gone)."""
    out = written(args, result, facts)
    if not isinstance(result, Mapping) or "payment_history" not in result:
        return out
    if result.get("status") == "cancelled":
        return out
    before = ((facts.get("reservations") or {}).get(result["reservation_id"]) or {})
    new = result["payment_history"][before.get("payments", 0):]
    methods = {k: dict(v) for k, v in (facts.get("payment_methods") or {}).items()}
    for p in new:
        m = methods.get(p["payment_id"])
        if m is None:
            continue
        if m["source"] == "gift_card":
            m["amount"] = round(float(m.get("amount") or 0) - float(p["amount"]), 2)
        elif m["source"] == "certificate" and before == {}:
            methods.pop(p["payment_id"])
    return {**out, "payment_methods": methods}


def status(args: Any, result: Any, facts: Any) -> dict[str, Any]:
    a = _plain(args)
    if not isinstance(result, str):
        return {}
    return {"statuses": {**(facts.get("statuses") or {}),
                         key(a["flight_number"], a["date"]): result}}


def _flights(result: Any) -> list[Mapping[str, Any]]:
    """Every flight of a search's answer (one, a list, or pairs of a one-stop search)."""
    if isinstance(result, Mapping):
        return [result]
    out: list[Mapping[str, Any]] = []
    for item in result if isinstance(result, list) else []:
        out += _flights(item)
    return out


def found(args: Any, result: Any, facts: Any) -> dict[str, Any]:
    a = _plain(args)
    offers = dict(facts.get("offers") or {})
    statuses = dict(facts.get("statuses") or {})
    for f in _flights(result):
        if "flight_number" not in f or "prices" not in f:
            continue
        k = key(f["flight_number"], f.get("date") or a["date"])
        offers[k] = {"origin": f["origin"], "destination": f["destination"],
                     "prices": f["prices"], "seats": f["available_seats"]}
        statuses[k] = f.get("status", "available")
    return {"offers": offers, "statuses": statuses}
