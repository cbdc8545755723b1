"""No write without the customer's yes to exactly it, under hostile policies and customers
(hypothesis): whatever the model says and whatever the customer answers, every
cancellation in the ledger was confirmed, in an earlier reply of the log, with exactly its
arguments, and no yes let two writes run."""

from __future__ import annotations

import random
from typing import Any

from chat_desk import Ledger, build, clerk
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm import Budgets, Engine, MemoryStore, ReplyRefused
from fsm.auditor.audit import audit
from fsm.records import FINAL_STATUSES, call_subject, fingerprint, verify_chain
from fsm.testing import MeddlingPolicy, RandomPolicy

SETTINGS = settings(max_examples=40, deadline=None)
SAYINGS = ["yes", "Yes!", "no", "A-1001", "A-1002", "B-2001", "maybe", "cancel A-1002 too",
           "yes, go ahead", "", " ", "y", "confirm", "x" * 5000, "yes\x00"]


def _play(policy_for: Any, rng: random.Random, turns: int) -> tuple[Ledger, MemoryStore, str]:
    ledger = Ledger()
    spec = build(ledger)
    store = MemoryStore()
    engine = Engine(spec, store, policy_for(spec), budgets=Budgets(max_steps=40))
    run = engine.start("I want to cancel an order", user="asha", run_id="p")
    for _ in range(turns):
        if run.status in FINAL_STATUSES:
            break
        try:
            run = engine.reply("p", rng.choice(SAYINGS))
        except ReplyRefused:
            continue  # a bad reply: refused, nothing kept
        if run.status not in ("awaiting_customer", *FINAL_STATUSES):
            run = engine.resume("p")
    return ledger, store, run.status


def _check(ledger: Ledger, store: MemoryStore) -> None:
    events = store.events("p")
    assert verify_chain(events) is None and audit(store, "p").ok
    yes = {e.detail["seq"]: e for e in events
           if e.kind == "reply" and isinstance(e.detail.get("confirms"), dict)}
    writes = [e for e in events if e.kind == "tool" and e.tool == "cancel_order"]
    used = [w.detail["confirmed"]["reply"] for w in writes]
    assert len(used) == len(set(used))  # one write per yes
    for w in writes:
        confirmation = yes[w.detail["confirmed"]["reply"]]
        assert confirmation.seq < w.seq
        assert confirmation.detail["confirms"]["hash"] == fingerprint(
            call_subject("cancel_order", w.detail["args"]))
    by_key = {w.detail["key"]: w for w in writes}
    for entry in ledger.entries():  # every cancellation is one of those confirmed writes
        assert by_key[entry["key"]].detail["args"]["order_id"] == entry["order_id"]


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), turns=st.integers(1, 12))
def test_a_random_policy_never_writes_without_a_yes_to_exactly_it(seed: int, turns: int) -> None:
    rng = random.Random(seed)
    ledger, store, _ = _play(lambda spec: RandomPolicy.for_spec(spec, rng=rng), rng, turns)
    _check(ledger, store)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), turns=st.integers(1, 12),
       rate=st.floats(0.1, 0.6))
def test_a_meddling_policy_never_writes_without_a_yes_to_exactly_it(
        seed: int, turns: int, rate: float) -> None:
    rng = random.Random(seed)
    ledger, store, _ = _play(lambda spec: MeddlingPolicy(clerk, rng=rng, rate=rate), rng,
                             turns)
    _check(ledger, store)


def test_the_meddling_policy_does_reach_confirmed_writes() -> None:
    """The property is not vacuous: sensible runs get yeses and cancel."""
    written = 0
    for seed in range(30):
        rng = random.Random(seed)
        ledger, store, _ = _play(lambda spec, r=rng: MeddlingPolicy(clerk, rng=r, rate=0.2), rng,
                                 12)
        _check(ledger, store)
        written += len(ledger.entries())
    assert written >= 3
