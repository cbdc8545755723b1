"""Runs that talk with their customer: a question waits for the reply, a reply is an event
of the log the model reads, and a write runs only on the customer's yes to exactly it."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from chat_desk import Ledger, build

from fsm import Engine, MemoryStore, ReplyRefused, ToolSpec
from fsm.auditor.audit import audit
from fsm.records import Budgets, text_hash, verify_chain
from fsm.records.conversation import REPLY_MAX, Reply, token_hash
from fsm.runtime.conversation.judging import asked_hash
from fsm.store.sqlite import SQLiteStore
from fsm.testing import ScriptedCustomer, ScriptedPolicy, talk

X = {"order_id": "A-1001", "reason": "no longer needed"}
Y = {"order_id": "A-1001", "reason": "ordered by mistake"}
ASK = {"final": "Which order would you like to cancel?"}
GET = {"tool": "get_order", "args": {"order_id": "A-1001"}}
DONE = {"tool": "advance", "args": {"event": "nothing_to_do"}}


def propose(args: dict[str, Any], tool: str = "cancel_order") -> dict[str, Any]:
    return {"tool": "advance", "text": f"I will cancel with {args}. Go ahead? (yes/no)",
            "args": {"event": "propose", "tool": tool, "args": args}}


def cancel(args: dict[str, Any]) -> dict[str, Any]:
    return {"tool": "cancel_order", "args": args}


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


def desk(ledger: Ledger, store: Any, script: list[Any], **options: Any) -> tuple[
        Engine, ScriptedPolicy]:
    policy = ScriptedPolicy(script)
    return Engine(build(ledger), store, policy, **options), policy


def kinds(store: Any, run_id: str) -> list[str]:
    return [e.kind for e in store.events(run_id)]


# -- asking and waiting -------------------------------------------------------------------

def test_a_question_to_the_customer_commits_and_the_run_waits_with_nothing_running(
        ledger: Ledger) -> None:
    store = MemoryStore()
    engine, policy = desk(ledger, store, [ASK, GET])
    run = engine.start("I want to cancel an order", user="asha")
    assert (run.status, run.state, run.step) == ("awaiting_customer", "talking", 1)
    assert run.pending is not None and run.pending.kind == "customer"
    assert run.pending.message == "Which order would you like to cancel?"
    assert store.messages(run.run_id)[-1] == {
        "role": "assistant", "content": "Which order would you like to cancel?",
        "to": "customer"}
    ask = store.events(run.run_id)[-1]
    assert ask.kind == "ask" and ask.detail["asked"] == asked_hash(run.pending)
    # Nothing runs while it waits: resuming asks nobody and writes nothing.
    before = len(store.events(run.run_id))
    again = engine.resume(run.run_id)
    assert again.status == "awaiting_customer" and again.version == run.version
    assert len(policy.views) == 1 and len(store.events(run.run_id)) == before
    assert store.lease(run.run_id) is None


def test_the_reply_is_an_event_of_the_chain_and_the_model_reads_it(ledger: Ledger) -> None:
    store = MemoryStore()
    engine, policy = desk(ledger, store, [ASK, GET, DONE])
    run = engine.start("I want to cancel an order", user="asha")
    run = engine.reply(run.run_id, "It is A-1001, thanks")
    assert run.status == "done"
    seen = policy.views[1].messages
    assert seen[-1] == {"role": "user", "content": "It is A-1001, thanks", "from": "customer",
                        "reply": 1}
    reply = next(e for e in store.events(run.run_id) if e.kind == "reply")
    assert reply.detail["sha256"] == text_hash("It is A-1001, thanks")
    assert reply.detail["seq"] == 1 and reply.detail["bound"] is True
    assert verify_chain(store.events(run.run_id)) is None
    assert audit(store, run.run_id).ok
    [kept] = store.replies(run.run_id)
    assert kept.text == "It is A-1001, thanks" and kept.read_step == reply.step


def test_an_empty_message_to_the_customer_is_refused_as_an_observation(ledger: Ledger) -> None:
    store = MemoryStore()
    engine, policy = desk(ledger, store, [{"final": "  "}, ASK])
    run = engine.start("cancel please", user="asha")
    assert run.status == "awaiting_customer"
    refusal = next(e for e in store.events(run.run_id) if e.kind == "refusal")
    assert "must say something" in (refusal.reason or "")


def test_a_state_that_asks_the_customer_tells_the_model_so(ledger: Ledger) -> None:
    from fsm.adapters.translate import forced_choice, system_message

    store = MemoryStore()
    engine, policy = desk(ledger, store, [GET, ASK])
    engine.start("cancel please", user="asha")
    view = policy.views[0]
    assert view.asks_customer and not view.final_allowed
    assert "write to the customer in plain text" in system_message(view)["content"]
    assert forced_choice(view) is None  # text is an answer here
    assert "silent" not in view.events  # customer events are never offered


# -- confirmations --------------------------------------------------------------------------

def test_an_explicit_yes_confirms_exactly_the_proposal_and_the_write_runs_once(
        ledger: Ledger) -> None:
    store = MemoryStore()
    engine, policy = desk(ledger, store, [ASK, GET, propose(X), cancel(X), DONE])
    run = engine.start("I want to cancel an order", user="asha")
    customer = ScriptedCustomer(["A-1001", "yes"])
    run = talk(engine, run, customer)
    assert run.status == "done"
    assert [(e["order_id"], e["reason"]) for e in ledger.entries()] == [
        ("A-1001", "no longer needed")]
    asked = customer.asked[1]
    assert asked.args == {"tool": "cancel_order", "args": X} and asked.record == "proposal"
    # The proposal is shown as fsm renders the call (here the plain summary), never in
    # the model's words.
    assert asked.message == 'cancel_order {"order_id":"A-1001","reason":"no longer needed"}'
    events = store.events(run.run_id)
    yes = next(e for e in events if e.kind == "reply" and e.event == "confirmed")
    write = next(e for e in events if e.kind == "tool" and e.tool == "cancel_order")
    assert yes.seq < write.seq
    assert write.detail["confirmed"] == {"reply": 2, "hash": yes.detail["confirms"]["hash"]}
    assert run.confirmation is None  # used once
    assert audit(store, run.run_id).ok


@pytest.mark.parametrize("other", [Y, {"order_id": "A-1002", "reason": "no longer needed"}],
                         ids=["other-reason", "other-order"])
def test_a_write_that_differs_from_what_was_confirmed_is_refused_and_nothing_runs(
        ledger: Ledger, other: dict[str, Any]) -> None:
    store = MemoryStore()
    engine, policy = desk(ledger, store, [ASK, GET, propose(X), cancel(other), cancel(X),
                                          DONE])
    run = talk(engine, engine.start("cancel please", user="asha"),
               ScriptedCustomer(["A-1001", "yes"]))
    assert run.status == "done"
    assert [e["reason"] for e in ledger.entries()] == ["no longer needed"]
    refused = [m for m in store.messages(run.run_id)
               if m.get("tool") == "cancel_order" and "error" in m]
    assert len(refused) == 1
    assert "the customer confirmed cancel_order" in refused[0]["error"]
    assert "nothing ran" in refused[0]["error"]


def test_a_yes_lets_one_write_run_and_no_second(ledger: Ledger) -> None:
    """A desk whose write leaves the run in its state: the same call again is refused."""
    spec = build(ledger)
    cancel_tool = dataclasses.replace(spec.tools["cancel_order"], emits=None,
                                      emits_events=(), always_emits=False)
    transitions = {**spec.transitions, "cancelling": {"finished": "talking"}}
    spec = build(ledger, tools=[spec.tools["get_order"], cancel_tool], transitions=transitions,
                 invariants=())
    store = MemoryStore()
    policy = ScriptedPolicy([ASK, GET, propose(X), cancel(X), cancel(X),
                             {"tool": "advance", "args": {"event": "finished"}}, DONE])
    engine = Engine(spec, store, policy, max_repeats=None)
    run = talk(engine, engine.start("cancel", user="asha"), ScriptedCustomer(["A-1001", "yes"]))
    assert run.status == "done"
    assert len(ledger.entries()) == 1
    errors = [m["error"] for m in store.messages(run.run_id)
              if m.get("tool") == "cancel_order" and "error" in m]
    assert len(errors) == 1 and "has not confirmed this call" in errors[0]


def test_anything_but_a_yes_declines_and_the_write_stays_out_of_reach(ledger: Ledger) -> None:
    store = MemoryStore()
    engine, policy = desk(ledger, store, [ASK, GET, propose(X),
                                          {"tool": "advance", "args": {"event": "confirmed"}},
                                          DONE])
    run = talk(engine, engine.start("cancel", user="asha"),
               ScriptedCustomer(["A-1001", "hmm, maybe later"]))
    assert run.status == "done" and ledger.entries() == []
    events = store.events(run.run_id)
    declined = next(e for e in events if e.kind == "reply" and e.detail["seq"] == 2)
    assert declined.event == "declined" and "confirms" not in declined.detail
    refusal = next(e for e in events if e.kind == "refusal")
    assert "fired only by the customer's reply" in (refusal.reason or "")


@pytest.mark.parametrize("proposal, why", [
    (propose({"order_id": "A-1001", "reason": "bored"}), "arguments of 'cancel_order'"),
    (propose(X, tool="get_order"), "is not one the customer can confirm"),
    ({"tool": "advance", "args": {"event": "propose", "tool": "cancel_order", "args": "x"}},
     "bad payload for event 'propose': args"),
], ids=["bad-arguments", "not-a-confirmed-tool", "args-not-an-object"])
def test_a_proposal_the_write_could_not_take_is_never_shown(
        ledger: Ledger, proposal: dict[str, Any], why: str) -> None:
    store = MemoryStore()
    engine, policy = desk(ledger, store, [ASK, GET, proposal, ASK])
    run = engine.reply(engine.start("cancel", user="asha").run_id, "A-1001")
    assert run.state == "talking" and run.status == "awaiting_customer"
    assert run.pending is not None and run.pending.record is None
    refusal = next(e for e in store.events(run.run_id) if e.kind == "refusal")
    assert why in (refusal.reason or "")


def test_a_reply_that_answers_no_request_confirms_nothing(ledger: Ledger) -> None:
    """A reply kept while the run waited on nothing (it was in the middle of a step) is read
    as what the customer said, but fires no event: the run asks again, at a new version."""
    store = MemoryStore()
    engine, policy = desk(ledger, store, [ASK, GET, propose(X), cancel(X), DONE])
    run = engine.reply(engine.start("cancel", user="asha").run_id, "A-1001")
    assert run.state == "confirming"
    first = run.pending
    store.add_reply(Reply(run_id=run.run_id, text="yes", received_at=time.time(),
                          asked_hash=None, run_version=run.version), version=run.version)
    run = engine.deliver(run.run_id)
    assert (run.status, run.state) == ("awaiting_customer", "confirming")
    assert run.pending is not None and first is not None
    assert run.pending.args == first.args and run.pending.run_version > first.run_version
    assert ledger.entries() == []
    run = engine.reply(run.run_id, "yes")
    assert run.status == "done" and len(ledger.entries()) == 1


def test_two_yes_to_one_proposal_confirm_it_once(ledger: Ledger) -> None:
    store = MemoryStore()
    engine, policy = desk(ledger, store, [ASK, GET, propose(X), cancel(X), DONE])
    run = engine.reply(engine.start("cancel", user="asha").run_id, "A-1001")
    first = engine.accept_reply(run.run_id, "yes")
    second = engine.accept_reply(run.run_id, "yes!")
    assert first.asked_hash == second.asked_hash  # both answer the proposal shown
    run = engine.deliver(run.run_id)
    assert run.status == "done" and len(ledger.entries()) == 1
    replies = [e for e in store.events(run.run_id) if e.kind == "reply"]
    assert [(r.detail["seq"], r.event, r.detail["bound"]) for r in replies[1:]] == [
        (2, "confirmed", True), (3, None, False)]


def test_a_write_that_needs_approval_and_a_yes_waits_for_both(ledger: Ledger) -> None:
    spec = build(ledger)
    tool = dataclasses.replace(spec.tools["cancel_order"], approval=True)
    spec = build(ledger, tools=[spec.tools["get_order"], tool])
    store = MemoryStore()
    engine = Engine(spec, store, ScriptedPolicy([ASK, GET, propose(X), cancel(X), DONE]))
    run = talk(engine, engine.start("cancel", user="asha"), ScriptedCustomer(["A-1001", "yes"]))
    assert run.status == "awaiting_approval" and ledger.entries() == []
    with pytest.raises(ReplyRefused) as refused:
        engine.reply(run.run_id, "any news?")
    assert refused.value.code == "not_waiting" and "person's decision" in str(refused.value)
    run = engine.decide(run.run_id, True, "meera", "ok")
    assert run.status == "done" and len(ledger.entries()) == 1


def test_an_approval_that_changes_the_confirmed_call_runs_nothing(ledger: Ledger) -> None:
    def amend(tool: str | None, args: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
        return {**args, **changes}

    spec = build(ledger)
    tool = dataclasses.replace(spec.tools["cancel_order"], approval=True)
    spec = build(ledger, tools=[spec.tools["get_order"], tool], amend=amend)
    store = MemoryStore()
    engine = Engine(spec, store, ScriptedPolicy([ASK, GET, propose(X), cancel(X), ASK]))
    run = talk(engine, engine.start("cancel", user="asha"), ScriptedCustomer(["A-1001", "yes"]))
    run = engine.decide(run.run_id, True, "meera", "other reason",
                        amend={"reason": "ordered by mistake"})
    assert ledger.entries() == []
    error = next(m["error"] for m in store.messages(run.run_id)
                 if m.get("tool") == "cancel_order" and "error" in m)
    assert "the customer confirmed cancel_order" in error


# -- what the workflow's hook says --------------------------------------------------------------

@pytest.mark.parametrize("hook, why", [
    (lambda text, asked: 1 / 0, "interpret raised ZeroDivisionError"),
    (lambda text, asked: "approved", "interpret returned 'approved', not one of the customer"),
], ids=["raises", "not-a-customer-event"])
def test_an_interpret_hook_that_fails_fails_the_run(ledger: Ledger, hook: Any, why: str) -> None:
    store = MemoryStore()
    engine = Engine(build(ledger, interpret=hook), store,
                    ScriptedPolicy([ASK, GET, propose(X), cancel(X)]))
    run = talk(engine, engine.start("cancel", user="asha"), ScriptedCustomer(["A-1001", "yes"]))
    assert run.status == "failed" and why in (run.reason or "")
    assert ledger.entries() == []


# -- bad replies --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, code", [
    ("", "empty"), ("  \n\t", "empty"), ("\u200b\u200c\u200d\u2060\ufeff", "empty"),
    (" \u200b \u2060 ", "empty"), ("x" * (REPLY_MAX + 1), "too_long"),
    ("yes\x00", "nul"), ("yes \udc80", "not_text"), (42, "not_text"),
], ids=["empty", "blank", "zero-width", "zero-width-and-spaces", "too-long", "nul",
        "lone-surrogate", "not-text"])
def test_a_bad_reply_is_refused_in_one_line_and_keeps_nothing(
        ledger: Ledger, text: Any, code: str) -> None:
    store = MemoryStore()
    engine, _ = desk(ledger, store, [ASK])
    run = engine.start("cancel", user="asha")
    with pytest.raises(ReplyRefused) as refused:
        engine.reply(run.run_id, text)
    assert refused.value.code == code
    assert len(str(refused.value).splitlines()) == 1 and "nothing was kept" in str(refused.value)
    assert store.replies(run.run_id) == []
    assert store.load_run(run.run_id).version == run.version


def test_a_reply_of_the_largest_size_is_kept(ledger: Ledger) -> None:
    store = MemoryStore()
    engine, _ = desk(ledger, store, [ASK, ASK])
    run = engine.start("cancel", user="asha")
    engine.reply(run.run_id, "é" * REPLY_MAX)
    assert store.replies(run.run_id)[0].text == "é" * REPLY_MAX


def test_replies_to_unknown_finished_and_silent_runs_are_refused(ledger: Ledger,
                                                                 shop: Any) -> None:
    from workflows.refund import build as refund
    from workflows.refund.clerk import clerk

    store = MemoryStore()
    engine, _ = desk(ledger, store, [ASK, GET, DONE])
    with pytest.raises(ReplyRefused) as unknown:
        engine.reply("nope", "hello")
    assert unknown.value.code == "unknown_run" and "'nope' not found" in str(unknown.value)
    run = talk(engine, engine.start("cancel", user="asha"), ScriptedCustomer(["A-1001"]))
    assert run.status == "done"
    with pytest.raises(ReplyRefused) as finished:
        engine.reply(run.run_id, "one more thing")
    assert finished.value.code == "finished"
    assert str(finished.value) == (f"run {run.run_id!r} has finished (done): it takes no more "
                                   "replies; nothing was kept")
    refunds = Engine(refund(shop), store, clerk)
    paused = refunds.start("Order A-1002: the headphones broke", user="ravi")
    assert paused.status == "awaiting_approval"
    with pytest.raises(ReplyRefused) as silent:
        refunds.reply(paused.run_id, "hello?")
    assert silent.value.code == "not_waiting" and "does not talk with its customer" in \
        str(silent.value)
    assert len(store.replies(run.run_id)) == 1


def test_the_reply_token_is_given_out_once_and_only_its_hash_is_kept(ledger: Ledger) -> None:
    store = MemoryStore()
    engine, _ = desk(ledger, store, [ASK, GET, ASK])
    chat = engine.start_conversation("cancel", user="asha")
    assert chat.run.status == "awaiting_customer" and len(chat.token) >= 40
    assert store.reply_token(chat.run.run_id) == token_hash(chat.token)
    start = store.events(chat.run.run_id)[0]
    assert start.detail["reply_token_sha256"] == token_hash(chat.token)
    stored = repr(store.events(chat.run.run_id)) + repr(store.messages(chat.run.run_id)) + \
        store.snapshot_text(chat.run.run_id)
    assert chat.token not in stored
    for wrong in ("", "x", chat.token[:-1], chat.token + "x"):
        with pytest.raises(ReplyRefused) as refused:
            engine.reply(chat.run.run_id, "A-1001", token=wrong)
        assert refused.value.code == "token"
    assert store.replies(chat.run.run_id) == []
    plain = engine.start("cancel", user="asha")
    with pytest.raises(ReplyRefused):  # a run given no token takes no token's reply
        engine.reply(plain.run_id, "A-1001", token=chat.token)
    run = engine.reply(chat.run.run_id, "A-1001", token=chat.token)
    assert run.state == "talking" and len(store.replies(chat.run.run_id)) == 1


def test_a_reply_to_a_request_the_run_no_longer_makes_is_refused_as_stale(
        ledger: Ledger) -> None:
    store = MemoryStore()
    engine, _ = desk(ledger, store, [ASK, GET, propose(X)])
    run = engine.start("cancel", user="asha")
    assert run.pending is not None
    question = asked_hash(run.pending)  # type: ignore[arg-type]
    run = engine.reply(run.run_id, "A-1001", asked=question)
    assert run.state == "confirming"
    with pytest.raises(ReplyRefused) as refused:
        engine.reply(run.run_id, "yes", asked=question)
    assert refused.value.code == "stale" and "no longer waits on request" in str(refused.value)
    assert len(store.replies(run.run_id)) == 1 and ledger.entries() == []


# -- replies while the run works, and at once ---------------------------------------------------

def test_a_reply_sent_during_a_step_is_kept_and_read_before_the_next_one(
        ledger: Ledger, tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    store, other_store = SQLiteStore(db), SQLiteStore(db)
    spec = build(ledger)
    sent: list[Any] = []

    def policy(view: Any) -> Any:
        if view.step == 2:  # while this engine holds the run, another process replies
            other = Engine(spec, other_store, None)
            sent.append(other.reply(view.run_id, "and please hurry"))
        return script(view)

    script = ScriptedPolicy([ASK, GET, ASK])
    engine = Engine(spec, store, policy)
    run = engine.reply(engine.start("cancel", user="asha").run_id, "A-1001")
    assert sent[0].status == "running"  # kept, not read: the run was in the middle of a step
    assert run.status == "awaiting_customer" and run.step == 3
    third = script.views[2].messages
    assert third[-1] == {"role": "user", "content": "and please hurry", "from": "customer",
                         "reply": 2}
    events = store.events(run.run_id)
    late = next(e for e in events if e.kind == "reply" and e.detail["seq"] == 2)
    assert late.step == 2 and late.detail["bound"] is False and late.event is None
    assert audit(store, run.run_id).ok


def test_two_replies_sent_at_once_both_arrive_in_the_order_committed(
        ledger: Ledger, tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    stores = [SQLiteStore(db) for _ in range(4)]
    spec = build(ledger)
    engine = Engine(spec, stores[0], ScriptedPolicy([ASK, ASK]))
    run = engine.start("cancel", user="asha")
    barrier = threading.Barrier(3)
    kept: list[Reply] = []

    def send(store: SQLiteStore, text: str) -> None:
        barrier.wait()
        kept.append(Engine(spec, store, None).accept_reply(run.run_id, text))

    threads = [threading.Thread(target=send, args=(stores[i + 1], f"message {i}"))
               for i in range(3)]
    barrier_reset = [t.start() for t in threads]
    del barrier_reset
    for t in threads:
        t.join()
    assert sorted(r.seq for r in kept) == [1, 2, 3]
    run = engine.deliver(run.run_id)
    by_seq = [r.text for r in stores[0].replies(run.run_id)]
    read = [m["content"] for m in stores[0].messages(run.run_id) if m.get("from") == "customer"]
    assert read == by_seq and sorted(read) == ["message 0", "message 1", "message 2"]
    assert all(r.read_step is not None for r in stores[0].replies(run.run_id))


# -- expiry and budgets --------------------------------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_wait_nobody_answers_expires_into_the_state_the_workflow_names(
        ledger: Ledger) -> None:
    store, clock = MemoryStore(), Clock()
    engine, _ = desk(ledger, store, [ASK], clock=clock)
    run = engine.start("cancel", user="asha")
    assert run.pending is not None and run.pending.expires_at == clock.now + 3600
    clock.now += 3599
    assert engine.sweep() == [] and store.load_run(run.run_id).status == "awaiting_customer"
    with pytest.warns(DeprecationWarning, match="sweep_conversations is deprecated"):
        assert engine.sweep_conversations() == []  # the old spelling, for a release
    clock.now += 2
    assert engine.sweep() == [run.run_id]
    after = store.load_run(run.run_id)
    assert (after.status, after.state) == ("handed_over", "closed")
    unanswered = next(e for e in store.events(run.run_id) if e.kind == "unanswered")
    assert unanswered.event == "silent"
    with pytest.raises(ReplyRefused) as refused:
        engine.reply(run.run_id, "sorry, I was away")
    assert refused.value.code == "finished"
    assert audit(store, run.run_id).ok


def test_a_reply_kept_in_time_wins_over_the_expiry(ledger: Ledger) -> None:
    store, clock = MemoryStore(), Clock()
    engine, _ = desk(ledger, store, [ASK, GET, ASK], clock=clock)
    run = engine.start("cancel", user="asha")
    engine.accept_reply(run.run_id, "A-1001")  # kept, but its process died before reading it
    clock.now += 7200
    assert engine.sweep() == [run.run_id]
    after = store.load_run(run.run_id)
    assert after.state == "talking" and after.status == "running"
    assert "unanswered" not in kinds(store, run.run_id)


def test_waiting_for_the_customer_spends_no_budget(
        ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    engine, _ = desk(ledger, store, [ASK, GET, propose(X), cancel(X), DONE],
                     budgets=Budgets(max_steps=4, max_active_seconds=60))
    run = engine.start("cancel", user="asha")
    # The customer takes an hour (the monotonic clock the steps are timed by jumps).
    monotonic = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: monotonic() + 3600.0)
    run = engine.reply(run.run_id, "A-1001")
    assert run.state == "confirming" and run.used.steps == 3
    assert run.used.active_seconds < 3600.0
    run = engine.reply(run.run_id, "yes")
    assert run.status == "budget_exhausted" and run.used.steps == 4
    assert len(ledger.entries()) == 1
    with pytest.raises(ReplyRefused) as refused:
        engine.reply(run.run_id, "thanks")
    assert "raise its budget to continue it" in str(refused.value)


def test_a_tool_that_always_emits_but_fires_nothing_fails_the_run(ledger: Ledger) -> None:
    spec = build(ledger)
    quiet = dataclasses.replace(spec.tools["cancel_order"], emits=lambda r: None)
    spec = build(ledger, tools=[spec.tools["get_order"], quiet])
    engine = Engine(spec, MemoryStore(), ScriptedPolicy([ASK, GET, propose(X), cancel(X)]))
    run = talk(engine, engine.start("cancel", user="asha"), ScriptedCustomer(["A-1001", "yes"]))
    assert run.status == "failed" and "always_emits" in (run.reason or "")


def test_tool_spec_fields_of_conversations_default_to_nothing() -> None:
    tool = ToolSpec("t", lambda a, c: None)
    assert tool.confirmed_by is None and tool.always_emits is False
    assert "confirmed_by" not in tool.public() and "always_emits" not in tool.public()


def test_taking_over_a_waiting_run_keeps_the_request_its_customer_answers(
        ledger: Ledger) -> None:
    store = MemoryStore()
    engine, _ = desk(ledger, store, [ASK, GET, propose(X), cancel(X), DONE])
    run = engine.reply(engine.start("cancel", user="asha").run_id, "A-1001")
    store.acquire(run.run_id, "elsewhere:1:gone", time.time(), ttl=None)
    taken = engine.resume(run.run_id, take_over=True)
    assert taken.version == run.version and taken.status == "awaiting_customer"
    assert engine.reply(run.run_id, "yes").status == "done" and len(ledger.entries()) == 1
