"""The retail desk: τ²-bench's retail policy as tables, guards and tools.

A conversation with one customer. The desk first finds who the customer is
(``authenticating``: by email, or by name and zip), and only then reads their profile and
orders (``serving``). To change anything it proposes the exact write, which the customer
sees in the desk's words rendered by fsm from the call
(:func:`~workflows.retail.confirm.confirmation_text`), never the model's; only their
explicit yes (``confirmed``, a customer event) opens ``writing``, where the one write
bound to that proposal may run, once. ``transfer_to_human_agents`` hands the run over,
and nothing runs after it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm import Guard, ToolContext, WorkflowSpec, define_workflow
from workflows.retail import rules
from workflows.retail.confirm import PRESENTATION
from workflows.retail.data import ENV, RetailData, configured, load
from workflows.retail.database import RetailDatabase, open_retail
from workflows.retail.operations import CANCEL_REASONS, WRITES
from workflows.retail.tools import DatabaseSource, tools

READS = ["get_user_details", "get_order_details", "get_product_details", "get_item_details",
         "list_all_product_types"]

TRANSITIONS = {
    "authenticating": {"authenticated": "serving", "transferred": "transferred_to_human",
                       "asked_for_human": "authenticating", "finish": "done",
                       "unanswered": "abandoned"},
    "serving":        {"propose": "confirming", "transferred": "transferred_to_human",
                       "asked_for_human": "serving", "finish": "done",
                       "unanswered": "abandoned"},
    "confirming":     {"confirmed": "writing", "not_confirmed": "serving",
                       "unanswered": "abandoned"},
    "writing":        {"written": "serving", "withdrawn": "serving"},
}

TOOLS_BY_STATE = {
    "authenticating": ["find_user_id_by_email", "find_user_id_by_name_zip",
                       "transfer_to_human_agents"],
    "serving":        [*READS, "calculate", "transfer_to_human_agents"],
    "writing":        sorted(WRITES),    # the only state in which the database changes
}

#: Events only the customer's reply fires (``asked_for_human``: they asked for a human
#: agent in their words, which the run remembers).
CUSTOMER_EVENTS = {"confirmed", "not_confirmed", "unanswered", "asked_for_human"}
#: States where the desk's text is a message to the customer.
ASKS_CUSTOMER = {"authenticating", "serving"}
#: How long a conversation waits for the customer before it is abandoned.
REPLY_TTL_SECONDS = 24 * 3600

INSTRUCTIONS = {
    "authenticating": "Authenticate the customer first, even if they give their user id: "
                      "find their user id with find_user_id_by_email, or with "
                      "find_user_id_by_name_zip when they do not know their email. Ask them "
                      "in plain text for what you need.",
    "serving": "Help the authenticated customer with their own orders and profile. Check an "
               "order's status with get_order_details before changing it. To change "
               "anything, fire propose with the exact write (tool and arguments) after "
               "listing its details to the customer: they must answer yes. Transfer to a "
               "human agent only for what the policy and the tools cannot do, once you have "
               "done what you can or found that you cannot, or when the customer asks for "
               "one. Fire finish when the customer has nothing more.",
    "writing": "The customer confirmed. Call exactly the write they confirmed, with the same "
               "arguments. If it fails, fire withdrawn.",
}

SYSTEM_PROMPT = (
    "You are a retail customer-service agent. Work one step at a time: one tool call, or one "
    "message to the customer, never both. Follow the retail policy: authenticate first; "
    "serve only this customer; cancel or modify only pending orders, return or exchange "
    "only delivered ones; items of an order may be modified once, and nothing else of it "
    "after; cancel only for 'no longer needed' or 'ordered by mistake'; refunds go to the "
    "original payment method or a gift card; get an explicit yes before any change."
)


class Proposal(BaseModel):
    """A write the desk proposes; the customer confirms exactly this, or it does not run."""

    model_config = ConfigDict(extra="forbid")
    tool: Literal[
        "cancel_pending_order", "exchange_delivered_order_items",
        "modify_pending_order_address", "modify_pending_order_items",
        "modify_pending_order_payment", "modify_user_address",
        "return_delivered_order_items",
    ] = Field(description="the write to run once the customer says yes")
    args: dict[str, Any] = Field(description="its arguments, exactly as it will be called")


def _proposal_ok(facts: Mapping[str, Any], payload: dict[str, Any]) -> bool:
    return rules.proposal_problem(facts, payload["tool"], payload["args"]) is None


def _proposal_why(facts: Mapping[str, Any], payload: dict[str, Any]) -> str | None:
    return rules.proposal_problem(facts, payload["tool"], payload["args"])


GUARDS = {
    "propose": Guard("the policy allows the write (own order, read first, right status, "
                     "reason, refund method)", _proposal_ok, reason=_proposal_why),
    "authenticated": Guard("a user was found", lambda f, p: bool(f.get("user_id"))),
}


def _phrases(*texts: str) -> frozenset[tuple[str, ...]]:
    return frozenset(tuple(t.split()) for t in texts)


#: Words and phrases that say yes to the proposal shown.
YES_PHRASES = _phrases(
    "yes", "y", "yeah", "yea", "yep", "yup", "sure", "ok", "okay", "alright", "all right",
    "confirm", "confirmed", "i confirm", "correct", "that's correct", "that is correct",
    "that's right", "that is right", "absolutely", "go ahead", "proceed", "please do", "do it")
#: Words and phrases that may stand beside a yes without changing it.
COURTESY_PHRASES = _phrases(
    "please", "thanks", "thank you", "thank you very much", "thanks a lot", "many thanks",
    "that's fine", "that is fine", "sounds good", "great", "perfect")
#: A reply that starts with one of these says no.
NO_PHRASES = _phrases(
    "no", "n", "nope", "nah", "not", "cancel", "stop", "don't", "dont", "do not", "never mind",
    "nevermind", "wait", "hold on")
_LONGEST = max(len(p) for p in YES_PHRASES | COURTESY_PHRASES | NO_PHRASES)
#: What a customer asking for a person says: a human, a representative, a supervisor or a
#: manager, a real or live person or agent, another agent, a transfer to one.
HUMAN_WORDS = re.compile(
    r"\b(?:humans?|representatives?|supervisor|manager|escalate"
    r"|(?:real|live|actual|another|other|a|an) (?:person|agent)"
    r"|someone else|somebody else|transfer(?:red)? (?:me|us|to)|be transferred)\b")


def _words(text: str) -> list[str]:
    """The reply's words, lower-cased; punctuation (and any other symbol) separates them."""
    found = re.findall(r"[\w']+", text.lower().replace("\u2019", "'"))
    return [w for w in (f.strip("'") for f in found) if w]


def _only_yes(words: list[str]) -> bool:
    """Whether ``words`` are yes and courtesy phrases, one after the other, and at least
    one of them a yes."""
    # reach[i]: whether words[:i] split into such phrases, with (True) or without a yes.
    reach: list[set[bool]] = [set() for _ in range(len(words) + 1)]
    reach[0].add(False)
    for i in range(len(words)):
        if not reach[i]:
            continue  # words[:i] is not made of such phrases: no phrase may start here
        for n in range(1, min(_LONGEST, len(words) - i) + 1):
            phrase = tuple(words[i:i + n])
            if phrase in YES_PHRASES:
                reach[i + n].add(True)
            elif phrase in COURTESY_PHRASES:
                reach[i + n] |= reach[i]
    return True in reach[-1]


def asks_for_human(text: str) -> bool:
    """Whether the customer's words ask for a human agent (:data:`HUMAN_WORDS`)."""
    return HUMAN_WORDS.search(text.lower().replace("\u2019", "'")) is not None


def interpret(text: str, asked: dict[str, Any]) -> str | None:
    """The customer event a reply fires. To a plain question: ``asked_for_human`` when it
    asks for a human agent (:func:`asks_for_human`), else nothing. To a proposal:

    ``confirmed`` only for an explicit yes: a yes word or phrase ("yes", "ok", "sure",
    "confirmed", "that's right", "go ahead", "please do", ...), and nothing else in the
    reply but more of them and courtesy ("please", "thanks", "that's fine", "sounds good",
    "great", "perfect") and punctuation. ``not_confirmed`` for a reply that starts with a
    no ("no", "nope", "cancel", "stop", "don't", "never mind", "wait", "hold on", ...).
    Anything else fires nothing, and the customer is asked again: a reply that starts with
    yes and goes on with any other word ("yes, but to my PayPal", "yes. Actually cancel
    that", "yes yes stop") is not a yes, nor taken as a no.
    """
    if not asked:
        return "asked_for_human" if asks_for_human(text) else None
    words = _words(text)
    if _only_yes(words):
        return "confirmed"
    if any(tuple(words[:n]) in NO_PHRASES for n in range(1, _LONGEST + 1)):
        return "not_confirmed"
    return None


class _Fixed:
    """One database for every run (tests build the workflow around their own)."""

    def __init__(self, db: RetailDatabase) -> None:
        self.db = db

    def get(self, ctx: ToolContext) -> RetailDatabase:
        return self.db


class _Resource:
    """The retail database in the run's own database, opened by the runtime."""

    def get(self, ctx: ToolContext) -> RetailDatabase:
        db: RetailDatabase = ctx.resource("retail")
        return db


class _Opener:
    """Opens the retail tables at a location, filled from one database of the schema."""

    def __init__(self, data: RetailData | str | os.PathLike[str]) -> None:
        self.data = data if isinstance(data, RetailData) else load(data)

    def __call__(self, location: str) -> RetailDatabase:
        return open_retail(location, self.data)


def build(db: RetailDatabase | DatabaseSource | None = None, *,
          data: RetailData | str | os.PathLike[str] | None = None,
          system_prompt: str = SYSTEM_PROMPT, **changes: Any) -> WorkflowSpec:
    """The retail desk over ``db`` (default: the retail tables of the database of the
    store the run is driven on, opened by the runtime as the ``retail`` resource and filled
    from ``data``: a database of τ²-bench's retail schema, or the path of one; default:
    ``$FSM_RETAIL_DATA``'s file, else the pinned one).

    ``changes`` replace arguments of ``define_workflow`` (tests change a table to see the
    verifier catch it)."""
    if data is None and os.environ.get(ENV, "").strip():
        data = configured()  # a bad file is refused here, when the workflow is loaded
    source: DatabaseSource
    if db is None:
        source = _Resource()
    elif isinstance(db, RetailDatabase):
        source = _Fixed(db)
    else:
        source = db
    from workflows.retail.invariants import INVARIANTS

    tables: dict[str, Any] = dict(
        transitions=TRANSITIONS, tools_by_state=TOOLS_BY_STATE,
        initial="authenticating", tools=tools(source), guards=GUARDS,
        payloads={"propose": Proposal},
        records={"propose": "proposal", "asked_for_human": "asked_for_human"},
        instructions=INSTRUCTIONS, system_prompt=system_prompt,
        terminal={"done", "abandoned"}, handed_over_states={"transferred_to_human"},
        customer_events=CUSTOMER_EVENTS, asks_customer=ASKS_CUSTOMER, interpret=interpret,
        reply_ttl_seconds=REPLY_TTL_SECONDS, reply_expiry_event="unanswered",
        invariants=INVARIANTS, presentation=PRESENTATION,
        settings={"cancel_reasons": list(CANCEL_REASONS)},
        resources={"retail": open_retail if data is None else _Opener(data)},
    )
    tables.update(changes)
    return define_workflow(tables.pop("name", "retail"), **tables)
