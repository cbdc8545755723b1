"""The retail desk keeps τ²-bench's written policy, whatever the model tries: asserted on
the retail database's rows and the run's event log."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fsm import Engine, MemoryStore, SQLiteStore
from fsm.errors import ReplyRefused
from fsm.store.base import Store
from fsm.testing import ScriptedCustomer, ScriptedPolicy, talk
from workflows.retail import build, rules
from workflows.retail.database import MemoryRetail, RetailDatabase
from workflows.retail.replay import Customer, Move
from workflows.retail.workflow import COURTESY_PHRASES, YES_PHRASES, interpret

#: olivia_ito_3591: a delivered order paid by PayPal, two pending orders paid by credit
#: card, and a gift card.
EMAIL = "olivia.ito5204@example.com"
USER = "olivia_ito_3591"
DELIVERED, PENDING, PENDING2 = "#W5866402", "#W5442520", "#W7941031"
PAYPAL, CARD, GIFT = "paypal_8049766", "credit_card_9753331", "gift_card_7794233"
#: An order of another customer (olivia_lopez_9494), pending.
THEIRS = "#W8955613"

AUTH = {"tool": "find_user_id_by_email", "args": {"email": EMAIL}}
PROFILE = {"tool": "get_user_details", "args": {"user_id": USER}}
FINISH = {"tool": "advance", "args": {"event": "finish"}}
ADDRESS = {"address1": "9 Elm St", "address2": "", "city": "Boulder", "state": "CO",
           "country": "USA", "zip": "80301"}


def read(order: str) -> dict[str, Any]:
    return {"tool": "get_order_details", "args": {"order_id": order}}


def propose(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": "advance", "text": f"I will run {tool} {args}. Yes or no?",
            "args": {"event": "propose", "tool": tool, "args": args}}


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


def converse(db: RetailDatabase, actions: list[dict[str, Any]], replies: list[str] = (),
             store: Store | None = None) -> tuple[Any, Store, ScriptedCustomer]:
    store = store if store is not None else MemoryStore()
    customer = ScriptedCustomer(list(replies))
    with Engine(build(db), store, ScriptedPolicy(actions)) as engine:
        conversation = engine.start_conversation("I need help with my orders", user="olivia")
        run = talk(engine, conversation.run, customer)
    return run, store, customer


def refusals(store: Store, run_id: str) -> list[str]:
    return [e.reason or "" for e in store.events(run_id) if e.kind == "refusal"]


def ran(store: Store, run_id: str) -> list[str]:
    return [e.tool or "" for e in store.events(run_id)
            if e.kind == "tool" and not (e.detail or {}).get("error")]


def other_variant(db: RetailDatabase, order_id: str) -> tuple[str, str]:
    item = db.call("get_order_details", {"order_id": order_id})["items"][0]
    product = db.call("get_product_details", {"product_id": item["product_id"]})
    new = next(k for k, v in product["variants"].items()
               if k != item["item_id"] and v["available"])
    return item["item_id"], new


def test_a_confirmed_cancellation_runs_once_after_the_yes() -> None:
    db = MemoryRetail()
    run, store, customer = converse(db, [
        AUTH, read(PENDING), propose("cancel_pending_order", order_id=PENDING,
                                     reason="no longer needed"),
        call("cancel_pending_order", order_id=PENDING, reason="no longer needed"), FINISH,
    ], ["yes"])
    assert (run.status, run.state) == ("done", "done")
    assert db.call("get_order_details", {"order_id": PENDING})["status"] == "cancelled"
    [write] = db.writes()
    assert write["tool"] == "cancel_pending_order" and write["key"].startswith(run.run_id)
    assert customer.asked[0].args == {"tool": "cancel_pending_order",
                                      "args": {"order_id": PENDING,
                                               "reason": "no longer needed"}}
    kinds = [(e.kind, e.event or e.tool) for e in store.events(run.run_id)]
    assert kinds.index(("reply", "confirmed")) < kinds.index(("tool", "cancel_pending_order"))
    assert refusals(store, run.run_id) == []


def test_a_write_that_fails_after_another_succeeded_leaves_the_desk_going() -> None:
    """τ²-bench's check refuses the second write (the order is already paid that way); it
    changed nothing, so the desk reads the failure and goes on instead of handing over."""
    db = MemoryRetail()
    cancel = {"order_id": PENDING, "reason": "no longer needed"}
    pay = {"order_id": PENDING2, "payment_method_id": CARD}
    run, store, _ = converse(db, [
        AUTH, read(PENDING), read(PENDING2), propose("cancel_pending_order", **cancel),
        call("cancel_pending_order", **cancel),
        propose("modify_pending_order_payment", **pay),
        call("modify_pending_order_payment", **pay),
        {"tool": "advance", "args": {"event": "withdrawn"}}, FINISH,
    ], ["yes", "yes"])
    assert (run.status, run.state) == ("done", "done")
    assert [w["tool"] for w in db.writes()] == ["cancel_pending_order"]
    [failed] = [e for e in store.events(run.run_id)
                if e.kind == "tool" and e.tool == "modify_pending_order_payment"]
    assert failed.detail["error"].startswith("ValueError")


def test_nothing_of_the_customer_is_read_before_authentication() -> None:
    db = MemoryRetail()
    run, store, customer = converse(db, [
        read(PENDING), PROFILE, propose("cancel_pending_order", order_id=PENDING,
                                        reason="no longer needed"),
        call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
        AUTH, FINISH])
    assert run.status == "done" and customer.asked == []
    said = refusals(store, run.run_id)
    assert len(said) == 4 and all("in state 'authenticating'" in r for r in said), said
    assert ran(store, run.run_id) == ["find_user_id_by_email"]
    assert db.writes() == []


def test_only_the_authenticated_customers_details_and_orders_are_shown() -> None:
    db = MemoryRetail()
    run, store, _ = converse(db, [
        AUTH, call("get_user_details", user_id="olivia_lopez_9494"), read(THEIRS), FINISH])
    assert refusals(store, run.run_id) == [
        "'get_user_details' refused: user 'olivia_lopez_9494' is not the authenticated "
        "customer 'olivia_ito_3591'; the policy shows only their own details"]
    [error] = [e.detail["error"] for e in store.events(run.run_id)
               if e.kind == "tool" and e.detail.get("error")]
    assert error == ("PolicyRefusal: order '#W8955613' is not an order of the "
                     "authenticated customer; the policy shows only their own")
    shown = [m for m in store.messages(run.run_id) if m.get("role") == "tool"]
    assert not any("olivia_lopez_9494" in str(m.get("result", "")) for m in shown)
    assert THEIRS not in store.load_run(run.run_id).facts.get("orders", {})


NOT_KNOWN = " (the customer's gift cards are not known yet: read get_user_details)"


@pytest.mark.parametrize(("before", "tool", "args", "why"), [
    pytest.param([], "cancel_pending_order",
                 {"order_id": PENDING, "reason": "no longer needed"},
                 f"order '{PENDING}' has not been read in this conversation: read it with "
                 "get_order_details and check its status first", id="not-read"),
    pytest.param([read(THEIRS)], "cancel_pending_order",
                 {"order_id": THEIRS, "reason": "no longer needed"},
                 f"order '{THEIRS}' has not been read in this conversation: read it with "
                 "get_order_details and check its status first", id="another-customers"),
    pytest.param([read(DELIVERED)], "cancel_pending_order",
                 {"order_id": DELIVERED, "reason": "no longer needed"},
                 f"order '{DELIVERED}' is 'delivered'; only a pending order may be changed",
                 id="cancel-delivered"),
    pytest.param([read(PENDING)], "return_delivered_order_items",
                 {"order_id": PENDING, "item_ids": ["3330317167"], "payment_method_id": CARD},
                 f"order '{PENDING}' is 'pending'; only a delivered order may be returned or "
                 "exchanged", id="return-pending"),
    pytest.param([read(PENDING)], "cancel_pending_order",
                 {"order_id": PENDING, "reason": "found it cheaper"},
                 "the reason 'found it cheaper' is not one the policy allows (allowed: 'no "
                 "longer needed', 'ordered by mistake')", id="reason"),
    pytest.param([read(DELIVERED)], "return_delivered_order_items",
                 {"order_id": DELIVERED, "item_ids": ["6242772310"], "payment_method_id": CARD},
                 f"a refund goes to the payment method that paid for the order ('{PAYPAL}') "
                 f"or to one of the customer's gift cards, not to '{CARD}'{NOT_KNOWN}",
                 id="refund-elsewhere"),
    pytest.param([read(DELIVERED), PROFILE], "return_delivered_order_items",
                 {"order_id": DELIVERED, "item_ids": ["6242772310"], "payment_method_id": CARD},
                 f"a refund goes to the payment method that paid for the order ('{PAYPAL}') "
                 f"or to one of the customer's gift cards, not to '{CARD}'",
                 id="refund-elsewhere-known"),
    pytest.param([read(DELIVERED)], "return_delivered_order_items",
                 {"order_id": DELIVERED, "item_ids": ["6242772310"], "payment_method_id": GIFT},
                 f"a refund goes to the payment method that paid for the order ('{PAYPAL}') "
                 f"or to one of the customer's gift cards, not to '{GIFT}'{NOT_KNOWN}",
                 id="gift-card-not-known"),
    pytest.param([], "modify_user_address", {"user_id": "olivia_lopez_9494", **ADDRESS},
                 "user 'olivia_lopez_9494' is not the authenticated customer "
                 "'olivia_ito_3591'; only their own address may be changed",
                 id="another-customers-address"),
])
def test_a_proposal_the_policy_forbids_is_refused_before_the_customer_is_asked(
        before: list[dict[str, Any]], tool: str, args: dict[str, Any], why: str) -> None:
    db = MemoryRetail()
    run, store, customer = converse(db, [AUTH, *before, propose(tool, **args), FINISH])
    assert customer.asked == [] and db.writes() == []
    assert refusals(store, run.run_id)[-1] == (
        "event 'propose' refused in state 'serving': guard not met (the policy allows the "
        f"write (own order, read first, right status, reason, refund method)): {why}")


def test_a_return_to_a_gift_card_of_the_customer_is_allowed() -> None:
    db = MemoryRetail()
    args = {"order_id": DELIVERED, "item_ids": ["6242772310"], "payment_method_id": GIFT}
    run, store, _ = converse(db, [AUTH, read(DELIVERED), PROFILE,
                                  propose("return_delivered_order_items", **args),
                                  call("return_delivered_order_items", **args), FINISH],
                             ["Yes, please go ahead."])
    order = db.call("get_order_details", {"order_id": DELIVERED})
    assert (order["status"], order["return_payment_method_id"]) == ("return requested", GIFT)
    assert refusals(store, run.run_id) == []


def test_after_an_item_modification_nothing_else_of_the_order_changes() -> None:
    db = MemoryRetail()
    old, new = other_variant(db, PENDING)
    items = {"order_id": PENDING, "item_ids": [old], "new_item_ids": [new],
             "payment_method_id": CARD}
    later = [
        propose("modify_pending_order_items", **{**items, "item_ids": [new],
                                                 "new_item_ids": [old]}),
        propose("modify_pending_order_address", order_id=PENDING, **ADDRESS),
        propose("modify_pending_order_payment", order_id=PENDING, payment_method_id=PAYPAL),
        propose("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"),
    ]
    run, store, customer = converse(db, [
        AUTH, read(PENDING), propose("modify_pending_order_items", **items),
        call("modify_pending_order_items", **items), *later, FINISH], ["yes"])
    assert len(customer.asked) == 1
    assert [w["tool"] for w in db.writes()] == ["modify_pending_order_items"]
    said = refusals(store, run.run_id)
    assert len(said) == 4 and all(r.endswith(
        f"the items of order '{PENDING}' were modified already: the policy allows no "
        "further change or cancellation of it") for r in said), said
    assert db.call("get_order_details", {"order_id": PENDING})["status"] == \
        "pending (item modified)"


#: Replies that say yes, and nothing else: the only ones that fire ``confirmed``.
CONFIRMING = [
    "yes", "Yes", "YES!", "yes please", "Yes, please go ahead.", "Yes, go ahead.", "ok thanks",
    "Confirmed!", "yes yes", "ok, confirmed", "y", "Yep.", "sure", "Okay, thank you!",
    "That’s right", "that is correct", "Go ahead", "please do it", "Thanks, yes.",
    "yes, sounds good", "Perfect, proceed", "Yes - that's fine, thanks",
]
#: Replies that start with a no: ``not_confirmed``.
DECLINING = [
    "no", "No thanks", "NO!", "nope", "n", "wait", "Wait, what?", "hold on", "Hold on a sec",
    "never mind", "Nevermind.", "don't", "Do not do that", "stop", "cancel",
    "no, that is not what I asked for", "no, I ordered it by mistake",
]
#: Replies that take a yes back, change it, hedge or say nothing: no event, and the
#: customer is asked again.
UNCLEAR = [
    "YES. Actually cancel that", "Yes, actually cancel it", "yes yes stop", "Yes. Never mind.",
    "yes, hold on", "ok, actually refund to my paypal", "Yes but", "yes but use my other card",
    "yes, to my paypal instead", "sure, why not cancel both", "yes, not the lamp though",
    "Yes; no.", "yes... wait", "OK? Don't.", "yes, no problem", "yes, the other order",
    "yes 2", "yes, I think so", "I guess so", "I suppose so, whatever you think is best",
    "sounds good", "thanks", "please", "that's fine", "maybe", "yesterday", "okey dokey",
    "", "   ", "\n\t", "?!", "Actually, no",
]


@pytest.mark.parametrize(("text", "event"), [
    *[pytest.param(t, "confirmed", id=f"yes:{t!r}") for t in CONFIRMING],
    *[pytest.param(t, "not_confirmed", id=f"no:{t!r}") for t in DECLINING],
    *[pytest.param(t, None, id=f"unclear:{t!r}") for t in UNCLEAR],
])
def test_only_an_explicit_yes_confirms(text: str, event: str | None) -> None:
    asked = {"tool": "cancel_pending_order", "args": {"order_id": PENDING}}
    assert interpret(text, asked) == event
    assert interpret(text, {}) is None  # an answer to a plain question confirms nothing


_ALLOWED = {w for p in YES_PHRASES | COURTESY_PHRASES for w in p}
_PIECES = st.sampled_from(sorted({" ".join(p) for p in YES_PHRASES | COURTESY_PHRASES}))
_SEPARATORS = st.sampled_from([" ", ", ", ". ", "! ", " - ", "... ", "\n"])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.tuples(_PIECES, _SEPARATORS), min_size=1, max_size=6),
       other=st.from_regex(r"[A-Za-z']{1,12}", fullmatch=True), at=st.integers(0, 6),
       upper=st.booleans())
def test_a_yes_with_any_other_word_in_it_never_confirms(
        pieces: list[tuple[str, str]], other: str, at: int, upper: bool) -> None:
    """Whatever else a reply of yes and courtesy phrases holds, one word that is neither
    (a take-back, a change, a typo) makes it no yes."""
    assume(other.lower().strip("'") not in _ALLOWED and other.strip("'"))
    words = [f"{w}{sep}" for w, sep in pieces]
    words.insert(min(at, len(words)), f"{other} ")
    text = "".join(words)
    asked = {"tool": "cancel_pending_order", "args": {"order_id": PENDING}}
    assert interpret(text.upper() if upper else text, asked) != "confirmed"


def test_the_scripted_customers_replies_are_read_as_meant() -> None:
    """The replies of the benchmark's scripted customers (workflows/retail/replay.py and
    violations.py) fire what their writes need."""
    asked = {"tool": "cancel_pending_order", "args": {"order_id": PENDING}}
    wanted = Move("write", "cancel_pending_order", {"order_id": PENDING})
    customer = Customer([wanted])
    said = customer(SimpleNamespace(args={"tool": "cancel_pending_order",
                                          "args": {"order_id": PENDING}}))
    other = customer(SimpleNamespace(args={"tool": "cancel_pending_order",
                                           "args": {"order_id": PENDING2}}))
    assert (interpret(said, asked), interpret(other, asked)) == ("confirmed", "not_confirmed")


def test_an_unclear_answer_leaves_the_proposal_unconfirmed() -> None:
    db = MemoryRetail()
    args = {"order_id": PENDING, "reason": "no longer needed"}
    run, store, customer = converse(db, [
        AUTH, read(PENDING), propose("cancel_pending_order", **args),
        call("cancel_pending_order", **args), FINISH], ["I guess so, if you think so", "no"])
    assert len(customer.asked) == 2  # asked again after the unclear answer
    replies = [e.event for e in store.events(run.run_id) if e.kind == "reply"]
    assert replies == [None, "not_confirmed"]
    assert refusals(store, run.run_id) == [
        "tool 'cancel_pending_order' is not allowed in state 'serving' (allowed: "
        "get_user_details, get_order_details, get_product_details, get_item_details, "
        "list_all_product_types, calculate, transfer_to_human_agents)"]
    assert db.writes() == []


def test_a_write_other_than_the_one_confirmed_is_refused() -> None:
    db = MemoryRetail()
    yes = {"order_id": PENDING, "reason": "no longer needed"}
    run, store, _ = converse(db, [
        AUTH, read(PENDING), propose("cancel_pending_order", **yes),
        call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"),
        call("cancel_pending_order", order_id=PENDING2, reason="no longer needed"),
        {"tool": "advance", "args": {"event": "withdrawn"}}, FINISH], ["yes"])
    said = refusals(store, run.run_id)
    assert len(said) == 2 and all("the customer confirmed cancel_pending_order" in r
                                  and "not this call" in r for r in said), said
    assert db.writes() == [] and run.status == "done"


def test_the_write_checks_the_policy_again_on_the_rows_it_changes(tmp_path: Path) -> None:
    """Two conversations with one customer: one proposes a new address for an order
    while the other modifies that order's items. The yes comes after: τ²-bench's tool
    would change the address; the desk's write, checking the row, refuses."""
    path = str(tmp_path / "desk.db")
    with SQLiteStore(path) as store:
        spec = build()
        first = ScriptedPolicy([AUTH, read(PENDING),
                                propose("modify_pending_order_address", order_id=PENDING,
                                        **ADDRESS),
                                call("modify_pending_order_address", order_id=PENDING,
                                     **ADDRESS),
                                {"tool": "advance", "args": {"event": "withdrawn"}}, FINISH])
        with Engine(spec, store, first) as engine:
            waiting = engine.start_conversation("new address", user="olivia").run
            assert waiting.status == "awaiting_customer"
            db = engine.resources.get("retail")
            old, new = other_variant(db, PENDING)
            items = {"order_id": PENDING, "item_ids": [old], "new_item_ids": [new],
                     "payment_method_id": CARD}
            run, _, _ = converse(db, [AUTH, read(PENDING),
                                      propose("modify_pending_order_items", **items),
                                      call("modify_pending_order_items", **items), FINISH],
                                 ["yes"], store=store)
            assert ran(store, run.run_id)[-1] == "modify_pending_order_items"
            done = engine.reply(waiting.run_id, "yes")
            assert done.status == "done"
            [error] = [e.detail["error"] for e in store.events(done.run_id)
                       if e.kind == "tool" and e.detail.get("error")]
            assert error == (f"PolicyRefusal: the items of order '{PENDING}' were modified "
                             "already: the policy allows no further change or cancellation "
                             "of it")
            order = db.call("get_order_details", {"order_id": PENDING})
            assert order["address"]["city"] != "Boulder"
            assert [w["tool"] for w in db.writes()] == ["modify_pending_order_items"]


def test_a_transfer_ends_the_conversation() -> None:
    db = MemoryRetail()
    store = MemoryStore()
    policy = ScriptedPolicy([AUTH, call("transfer_to_human_agents", summary="wants a human"),
                             read(PENDING), FINISH])
    with Engine(build(db), store, policy) as engine:
        run = engine.start_conversation("a human, please", user="olivia").run
        assert (run.status, run.state) == ("handed_over", "transferred_to_human")
        events = len(store.events(run.run_id))
        with pytest.raises(ReplyRefused) as info:
            engine.reply(run.run_id, "yes")
        assert info.value.code == "finished"
        assert engine.resume(run.run_id).status == "handed_over"
    assert len(store.events(run.run_id)) == events
    assert ran(store, run.run_id)[-1] == "transfer_to_human_agents"
    assert len(policy.remaining) == 2  # the desk was never asked again


def test_the_policys_rules_name_each_offence() -> None:
    """The rule the facts can reach only if a write names an order another customer
    owns that the run did read (a database changed under it)."""
    order = {"user_id": "someone_else", "status": "pending", "paid_with": CARD}
    assert rules.problem(USER, "cancel_pending_order",
                         {"order_id": PENDING, "reason": "no longer needed"}, order, []) == (
        f"order '{PENDING}' belongs to another customer; only the authenticated customer's "
        "orders may be changed")
    assert rules.problem(None, "cancel_pending_order", {"order_id": PENDING}, order, []) == (
        "no customer is authenticated: find their user id by email, or by name and zip")


CANCEL = {"order_id": PENDING, "reason": "no longer needed"}
SCRIPT = [AUTH, read(PENDING), propose("cancel_pending_order", **CANCEL),
          call("cancel_pending_order", **CANCEL), FINISH]


def _reply_in_child(path: str, run_id: str) -> int:  # pragma: no cover - a child process
    from fsm.testing.faults import from_environ

    injector = from_environ(os.environ)  # the fault point, read at this entry point
    with SQLiteStore(path) as store, Engine(build(), store, ScriptedPolicy(SCRIPT),
                                            hooks=[injector] if injector else []) as engine:
        engine.reply(run_id, "yes")
    return 0


def test_a_write_killed_before_its_step_commits_changes_the_database_once(
        tmp_path: Path) -> None:
    """SIGKILL after the cancellation ran and before its step committed; a new process
    resumes: the write is called again under its key, the database remembers it, and the
    order is cancelled (and its refund recorded) once."""
    from crashkit import Child

    from fsm.auditor.audit import audit

    path = str(tmp_path / "desk.db")
    with SQLiteStore(path) as store, Engine(build(), store, ScriptedPolicy(SCRIPT)) as engine:
        run = engine.start_conversation("cancel my order", user="olivia").run
    assert run.status == "awaiting_customer"
    died = Child(_reply_in_child, path, run.run_id,
                 env={"FSM_FAULT": "after_tool_before_commit@*"}).wait()
    assert died.killed, died.stderr
    with SQLiteStore(path) as store, Engine(build(), store, ScriptedPolicy(SCRIPT)) as engine:
        db = engine.resources.get("retail")
        assert [w["tool"] for w in db.writes()] == ["cancel_pending_order"]  # it had run
        done = engine.resume(run.run_id)
        assert (done.status, done.state) == ("done", "done")
        [write] = db.writes()
        order = db.call("get_order_details", {"order_id": PENDING})
        assert order["status"] == "cancelled"
        assert [p["transaction_type"] for p in order["payment_history"]] == ["payment",
                                                                              "refund"]
        kinds = [e.kind for e in store.events(run.run_id)]
        assert "recover" in kinds
        assert audit(store, run.run_id).ok


def test_a_conversation_on_postgresql(pg_url: str) -> None:
    """The store and the retail tables in one PostgreSQL database, as for a fleet."""
    from fsm.store.postgres import PostgresStore

    store = PostgresStore(pg_url)
    try:
        with Engine(build(), store, ScriptedPolicy(SCRIPT)) as engine:
            run = engine.start_conversation("cancel my order", user="olivia").run
            run = talk(engine, run, ScriptedCustomer(["yes"]))
            db = engine.resources.get("retail")
            assert run.status == "done"
            assert db.call("get_order_details", {"order_id": PENDING})["status"] == \
                "cancelled"
            assert [w["key"] for w in db.writes()] == [
                e.detail["key"] for e in store.events(run.run_id)
                if e.kind == "tool" and e.tool == "cancel_pending_order"]
    finally:
        store.close()


PROCESSED = "#W5353646"  # olivia_ito_3591's processed order: no write of the desk changes it
TRANSFER = {"tool": "transfer_to_human_agents", "args": {"summary": "wants a human"}}
OFFER = {"final": "I cannot do that here. Would you like a human agent?"}


def transfer_run(opening: str, actions: list[dict[str, Any]], replies: list[str] = (),
                 db: RetailDatabase | None = None) -> tuple[Any, Store]:
    store = MemoryStore()
    policy = ScriptedPolicy(actions)
    with Engine(build(db or MemoryRetail()), store, policy) as engine:
        run = talk(engine, engine.start_conversation(opening, user="olivia").run,
                   ScriptedCustomer(list(replies)))
    return run, store


def test_a_transfer_nobody_asked_for_is_refused_while_the_desk_could_act() -> None:
    """The policy: "transfer the user to a human agent if and only if the request cannot
    be handled within the scope of your actions". A desk that could still act (its
    customer's pending order read, nothing done for them) and was not asked for a human
    is refused the transfer; once the customer asks, in their words, it runs."""
    from fsm.auditor.audit import audit

    run, store = transfer_run("I want to cancel my order", [
        AUTH, read(PENDING), TRANSFER, OFFER, TRANSFER, FINISH],
        replies=["Yes, please get me a human agent."])
    assert refusals(store, run.run_id) == [
        "'transfer_to_human_agents' refused: the customer has not asked for a human agent, "
        "and the desk has neither acted for "
        "them nor read an order it cannot change: help them with the desk's own actions, "
        "or tell them what you cannot do and ask whether they want a human agent; nothing "
        "ran"]
    assert (run.status, run.state) == ("handed_over", "transferred_to_human")
    fired = [(e.kind, e.event) for e in store.events(run.run_id) if e.event]
    assert ("reply", "asked_for_human") in fired and ("transition", "asked_for_human") in fired
    assert audit(store, run.run_id).ok

    # A plain yes to the desk's offer is not an ask: the transfer stays refused.
    run, store = transfer_run("I want to cancel my order", [
        AUTH, read(PENDING), OFFER, TRANSFER, FINISH], replies=["yes"])
    assert run.status == "done" and len(refusals(store, run.run_id)) == 1


def test_a_transfer_passes_when_the_desk_cannot_act_or_has_acted_or_was_asked() -> None:
    # An order of theirs in a status none of the desk's writes changes.
    run, store = transfer_run("undo something", [AUTH, read(PROCESSED), TRANSFER])
    assert run.state == "transferred_to_human" and refusals(store, run.run_id) == []
    # After a write done for them, the rest is outside the desk's actions.
    cancel = {"order_id": PENDING, "reason": "no longer needed"}
    db = MemoryRetail()
    run, store = transfer_run("cancel, then a question", [
        AUTH, read(PENDING), propose("cancel_pending_order", **cancel),
        call("cancel_pending_order", **cancel), TRANSFER], replies=["yes"], db=db)
    assert run.state == "transferred_to_human" and refusals(store, run.run_id) == []
    assert [w["tool"] for w in db.writes()] == ["cancel_pending_order"]
    # Asked in the opening message, before anything else.
    from fsm.auditor.audit import audit

    run, store = transfer_run("Please transfer me to a representative.", [TRANSFER])
    assert run.state == "transferred_to_human" and refusals(store, run.run_id) == []
    opening = [e for e in store.events(run.run_id) if e.kind == "opening"]
    assert [e.event for e in opening] == ["asked_for_human"]
    assert audit(store, run.run_id).ok


@pytest.mark.parametrize(("text", "asks"), [
    ("Can I talk to a human?", True), ("I want a representative", True),
    ("Transfer me, please", True), ("get me your supervisor", True),
    ("Is there a real person there?", True), ("another agent please", True),
    ("yes", False), ("yes please", False), ("I need this undone", False),
    ("refund it to my PayPal", False), ("thanks for your help", False),
])
def test_the_customer_asks_for_a_human_in_their_words(text: str, asks: bool) -> None:
    assert (interpret(text, {}) == "asked_for_human") is asks
    # To a proposal, the same words are no yes.
    assert interpret(text, {"tool": "x"}) != "asked_for_human"
