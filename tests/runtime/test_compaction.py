"""Context compaction: a long run compacts, requests shrink, the record stays complete.

The run is driven through the real SDK against the fake server; every step's
request, rebuilt from the store with ``view_at``, must equal the bytes the server
received, compacted steps included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply, call, error, text
from openai_fixtures import assert_show_matches_server
from refund_scripts import actions, large_refund, small_refund

from fsm import Budgets, Engine, MemoryStore, WorkflowSpec, view_at
from fsm.adapters import OpenAIPolicy
from fsm.policy import Usage
from fsm.records import canonical
from fsm.runtime.compaction import SETTING, Chunk, Compactor, Summary, summarise, view_chars
from fsm.testing import ScriptedPolicy, state_path
from workflows.refund import Shop, build

GOAL = "Order A-1001: the kettle arrived broken, please refund it"
#: A long, wandering run: the model looks at many orders before it gets on with it.
LONG = [
    ("get_order", {"order_id": "A-1001"}),
    ("get_order", {"order_id": "A-1002"}),
    ("get_order", {"order_id": "A-1003"}),
    ("get_order", {"order_id": "A-1004"}),
    ("get_order", {"order_id": "A-1005"}),
    ("get_order", {"order_id": "A-9999"}),
    ("advance", {"event": "details_complete"}),
    ("get_policy", {"order_id": "A-1004"}),
    ("get_policy", {"order_id": "A-1002"}),
    ("get_policy", {"order_id": "A-1003"}),
    ("get_order", {"order_id": "A-1004"}),
    ("get_policy", {"order_id": "A-1005"}),
    ("get_order", {"order_id": "A-1001"}),
    ("get_policy", {"order_id": "A-1001"}),
    ("advance", {"event": "verified"}),
    *small_refund()[4:],  # decide, refund, reply
]
THRESHOLD = 2000

pytestmark = pytest.mark.usefixtures("no_model_env")


@pytest.fixture
def policy(spec: WorkflowSpec, server: FakeOpenAI) -> Iterator[OpenAIPolicy]:
    with OpenAIPolicy(spec, "gpt-4o-mini", base_url=server.base_url, api_key="sk-test",
                      sleep=lambda s: None) as p:
        yield p


def step_replies() -> list[Reply]:
    return [call(name, args) for name, args in LONG]


def compactions(store: MemoryStore, run_id: str) -> list[Any]:
    return [e for e in store.events(run_id) if e.kind == "compaction"]


def policy_steps(store: MemoryStore, run_id: str) -> list[int]:
    return [e.step for e in store.events(run_id) if e.kind == "policy"]


def test_a_long_run_compacts_and_keeps_the_full_record(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        policy: OpenAIPolicy) -> None:
    # The same scripted run twice: without compaction on its own shop, then with it.
    plain_shop = Shop().seed_demo()
    plain_store = MemoryStore()
    server.script(*step_replies())
    plain = Engine(build(plain_shop), plain_store, policy).start(GOAL, user="asha",
                                                                  run_id="long")
    plain_sent = [r.raw for r in server.chat]
    server.requests.clear()
    server.script(*step_replies())
    run = Engine(spec, store, policy, compactor=Compactor(THRESHOLD)).start(
        GOAL, user="asha", run_id="long")
    sent = [r.raw for r in server.chat]
    plain_shop._db.close()

    # The outcome is the same: one refund, one reply, the full path.
    assert run.status == plain.status == "done"
    assert [(r["order_id"], r["amount_paise"]) for r in shop.ledger()] == [("A-1001", 35000)]
    assert state_path(store, "long") == ["collecting", "verifying", "deciding", "refunding",
                                         "replying", "done"]
    # It compacted, more than once, each time folding in more of the transcript.
    logged = compactions(store, "long")
    assert len(logged) >= 2
    uptos = [e.detail["upto"] for e in logged]
    assert uptos == sorted(set(uptos))
    for e in logged:
        assert e.detail["chars_before"] > THRESHOLD >= e.detail["chars_after"]
        assert e.detail["by"] == "deterministic" and (e.cost_micros, e.tokens) == (0, 0)
    # The requests shrank: each compacted step's request is smaller than the one before,
    # and the last request is much smaller than without compaction.
    for e in logged:
        assert len(sent[e.step - 1]) < len(sent[e.step - 2])
    assert len(sent[-1]) < 0.75 * len(plain_sent[-1])
    assert len(sent[-1]) < len(plain_sent[-1]) - 1000
    # The stored transcript is complete: message for message what the uncompacted run kept.
    transcript = store.messages("long")
    assert len(transcript) == run.message_count
    assert transcript == plain_store.messages("long")
    fetched = [m["args"]["order_id"] for m in transcript if m.get("tool") == "get_order"
               and m["role"] == "assistant"]
    assert fetched == ["A-1001", "A-1002", "A-1003", "A-1004", "A-1005", "A-9999", "A-1004",
                       "A-1001"]
    assert b'\\"A-1005\\"' not in sent[-1] and b'\\"A-1005\\"' in plain_sent[-1]
    # "show step N" is what the server received at step N, byte for byte.
    assert_show_matches_server(spec, store, "long", policy, sent)


def test_the_summary_keeps_the_facts_and_ids_stay_stable(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI,
        policy: OpenAIPolicy) -> None:
    server.script(*step_replies())
    Engine(spec, store, policy, compactor=Compactor(THRESHOLD)).start(
        GOAL, user="asha", run_id="long")
    transcript = store.messages("long")
    last = server.chat[-1].body["messages"]
    goal, summary = last[1], last[2]
    assert goal == {"role": "user", "content": GOAL}
    content = summary["content"]
    assert summary["role"] == "user" and content.startswith("Summary of transcript messages 1–")
    # The facts the workflow relies on survive, verbatim.
    run = store.load_run("long")
    for key in ("order", "policy", "decision"):
        assert f"- {key}: {json.dumps(run.facts[key], ensure_ascii=False, sort_keys=True)}" \
            in content
    assert "details_complete → verifying; verified → deciding; small_refund → refunding" \
        in content
    assert "get_order ×8, get_policy ×5" in content
    # Every tool call id in every request names its message in the full transcript.
    for request in server.chat:
        for msg in request.body["messages"]:
            for tc in msg.get("tool_calls", []):
                index = int(tc["id"].removeprefix("call_"))
                assert transcript[index]["role"] == "assistant"
                assert transcript[index]["tool"] == tc["function"]["name"]


def test_the_threshold_comes_from_the_workflow(spec: WorkflowSpec, store: MemoryStore,
                                               server: FakeOpenAI, policy: OpenAIPolicy,
                                               shop: Shop) -> None:
    assert Compactor().threshold({}) == 48_000
    assert Compactor().threshold({SETTING: 900}) == 900
    assert Compactor(700).threshold({SETTING: 900}) == 700
    tuned = spec.model_copy(update={"settings": {**spec.settings, SETTING: THRESHOLD}})
    server.script(*step_replies())
    run = Engine(tuned, store, policy, compactor=Compactor()).start(
        GOAL, user="asha", run_id="long")
    assert run.status == "done" and compactions(store, "long")
    assert all(e.detail["threshold_chars"] == THRESHOLD for e in compactions(store, "long"))

    # The default threshold is far above this short run: nothing is compacted.
    server.script(*step_replies())
    shop2 = Shop().seed_demo()
    Engine(build(shop2), store, policy, compactor=Compactor()).start(
        GOAL, user="asha", run_id="short")
    shop2._db.close()
    assert compactions(store, "short") == []
    assert all(view_at(spec, store, "short", s).messages == store.messages("short")[
        : len(view_at(spec, store, "short", s).messages)] for s in policy_steps(store, "short"))


# -- the model-backed summariser ----------------------------------------------------------

def scripted_with_summaries(server: FakeOpenAI, summary: Reply) -> None:
    """Step requests get the next scripted call; summary requests (no tools) get ``summary``."""
    steps = iter(step_replies())
    server.responder = lambda body: next(steps) if "tools" in body else summary


def test_a_model_summary_is_paid_for_from_the_budget(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI,
        policy: OpenAIPolicy) -> None:
    scripted_with_summaries(server, text("Looked at six orders; A-1001 is the customer's.",
                                         usage=(500, 50)))
    compactor = Compactor(THRESHOLD, summariser=policy.summariser())
    run = Engine(spec, store, policy, compactor=compactor).start(GOAL, user="asha",
                                                                 run_id="long")
    assert run.status == "done"
    logged = compactions(store, "long")
    assert len(logged) >= 2 and all(e.detail["by"] == "model" for e in logged)
    # gpt-4o-mini: 500 in + 50 out = 75 + 30 micros per summary.
    assert [(e.cost_micros, e.tokens) for e in logged] == [(105, 550)] * len(logged)
    policies = [e for e in store.events("long") if e.kind == "policy"]
    assert run.used.cost_micros == sum(e.cost_micros for e in policies + logged)
    assert run.used.tokens == sum(e.tokens for e in policies + logged)
    assert run.used.steps == len(policies) == len(LONG)  # summaries are not steps
    summaries = [r for r in server.chat if "tools" not in r.body]
    assert len(summaries) == len(logged)
    # The first request holds the turns folded in; later ones the summary so far plus
    # only the turns it did not cover.
    transcript = store.messages("long")
    for i, (request, event) in enumerate(zip(summaries, logged, strict=True)):
        system, user = request.body["messages"]
        assert system["role"] == "system" and user["role"] == "user"
        earlier, _, turns = user["content"].rpartition("The turns that follow it:\n")
        start = logged[i - 1].detail["upto"] if i else 1
        assert json.loads(turns) == transcript[start:event.detail["upto"]]
        if i:
            assert earlier == f"The summary so far:\n{logged[i - 1].detail['summary']}\n\n"
        else:
            assert earlier == ""
    shown = server.chat[-1].body["messages"][2]["content"]
    assert "(by the model" in shown and "Looked at six orders" in shown
    assert '- order: {"customer_matches": true' in shown  # the facts, appended verbatim
    assert_show_matches_server(spec, store, "long", policy,
                               [r.raw for r in server.chat if "tools" in r.body])


def test_summary_tokens_can_exhaust_the_budget(spec: WorkflowSpec, store: MemoryStore,
                                               server: FakeOpenAI, policy: OpenAIPolicy,
                                               shop: Shop) -> None:
    limit = Budgets(max_tokens=120 * len(LONG) + 100)  # enough for the steps alone
    server.script(*step_replies())
    run = Engine(spec, store, policy, budgets=limit, compactor=Compactor(THRESHOLD)).start(
        GOAL, user="asha", run_id="deterministic")
    assert run.status == "done"

    other = Shop().seed_demo()
    scripted_with_summaries(server, text("short summary", usage=(500, 50)))
    run = Engine(build(other), store, policy, budgets=limit,
                 compactor=Compactor(THRESHOLD, summariser=policy.summariser())).start(
        GOAL, user="asha", run_id="model")
    other._db.close()
    assert run.status == "budget_exhausted"
    assert run.reason is not None and run.reason.startswith("tokens budget exhausted")


def test_an_unreachable_summariser_falls_back_to_the_deterministic_summary(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI,
        policy: OpenAIPolicy) -> None:
    scripted_with_summaries(server, error(500, "summaries are down"))
    compactor = Compactor(THRESHOLD, summariser=policy.summariser())
    run = Engine(spec, store, policy, compactor=compactor).start(GOAL, user="asha",
                                                                 run_id="long")
    assert run.status == "done"
    first = compactions(store, "long")[0]
    assert first.detail["by"] == "deterministic"
    assert "HTTP 500: summaries are down" in first.detail["fallback"]
    assert first.detail["calls"] == policy.max_retries + 1
    assert first.detail["summary"].startswith("Summary of transcript messages 1–")


# -- any policy, approvals, and compactions that would not help ----------------------------

APPROVED = actions(large_refund())


def test_a_persons_approval_survives_compaction(spec: WorkflowSpec, store: MemoryStore,
                                                shop: Shop) -> None:
    wrong = [{"tool": "refund_item", "args": {"order_id": "A-1002", "item_id": "headphones-1",
                                              "amount_paise": n}} for n in (190_000, 200_000)]
    policy = ScriptedPolicy(APPROVED[:5] + wrong + APPROVED[5:])
    engine = Engine(spec, store, policy,
                    compactor=Compactor(900, keep_chars=100, summary_chars=100, min_keep=1))
    assert engine.start("Order A-1002: please refund", user="ravi",
                        run_id="big").status == "awaiting_approval"
    run = engine.decide("big", True, "sup", "receipt checked")
    assert run.status == "done"
    assert [r["amount_paise"] for r in shop.ledger()] == [180_000]
    last = policy.views[-1]
    summary = last.messages[1]
    assert summary["summary_of"][1] > store.messages("big").index(
        {"role": "user", "content": "approved by sup: receipt checked"})
    assert "- approved by sup: receipt checked" in summary["content"]
    assert '- decision: {"amount_paise": 180000, "item_id": "headphones-1"}' in summary["content"]
    # What the policy was shown is what the store rebuilds for that step.
    for step, shown in zip(policy_steps(store, "big"), policy.views, strict=True):
        assert view_at(spec, store, "big", step) == shown


def test_a_summary_that_would_not_shrink_the_view_is_not_used(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop) -> None:
    def wordy(chunk: Chunk) -> Summary:
        return Summary("very " * 2000, Usage(input_tokens=10, output_tokens=5, calls=1),
                       by="model")

    policy = ScriptedPolicy(APPROVED[:4])
    engine = Engine(spec, store, policy, budgets=Budgets(max_steps=4),
                    compactor=Compactor(400, summariser=wordy))
    run = engine.start("Order A-1002: please refund", user="ravi", run_id="wordy")
    logged = compactions(store, "wordy")
    assert logged and all(e.detail["skipped"] for e in logged)
    assert run.compaction is None
    assert all(v.messages == store.messages("wordy")[: len(v.messages)] for v in policy.views)
    assert run.used.tokens == 15 * len(logged)  # the summaries were paid for all the same


def test_a_broken_summariser_does_not_stop_the_run(spec: WorkflowSpec, store: MemoryStore,
                                                  shop: Shop) -> None:
    def broken(chunk: Chunk) -> Summary:
        raise KeyError("choices")

    policy = ScriptedPolicy(APPROVED[:4])
    run = Engine(spec, store, policy, budgets=Budgets(max_steps=4),
                 compactor=Compactor(700, summariser=broken)).start(
        "Order A-1002: please refund", user="ravi", run_id="broken")
    assert run.state == "deciding"
    first = compactions(store, "broken")[0]
    assert first.detail["fallback"] == "summariser: KeyError: 'choices'"
    assert first.detail["by"] == "deterministic"


# -- the pieces -----------------------------------------------------------------------------

def _transcript() -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "goal"}]
    for i in range(10):
        msgs.append({"role": "assistant", "tool": "get_order", "args": {"order_id": f"A-{i}"}})
        msgs.append({"role": "tool", "tool": "get_order", "result": {"n": "x" * 100}})
    return msgs


def test_the_cut_keeps_recent_turns_and_never_orphans_a_result() -> None:
    msgs = _transcript()
    compactor = Compactor(1000, min_keep=3)
    for keep in (0, 50, 150, 400, 900, 5000):
        upto = compactor.cut(msgs, keep)
        assert 1 <= upto <= len(msgs) - 3
        assert msgs[upto]["role"] != "tool"
        if upto > 1:
            assert view_chars(msgs[upto:]) <= max(keep, view_chars(msgs[-4:]))


def test_the_deterministic_summary_is_stable_and_quotes_people() -> None:
    msgs = _transcript()[1:7] + [
        {"role": "user", "content": "approved by sup: receipt checked"},
        {"role": "user", "content": "a refusal", "runtime": True},
        {"role": "tool", "tool": "refund_item", "error": "ValueError: nope"},
    ]
    chunk = Chunk(workflow="refund", state="refunding", messages=msgs, start=1, end=10,
                  facts={"order": {"order_id": "A-1001"}}, path=[("verified", "deciding")])
    summary = summarise(chunk)
    assert summary == summarise(chunk) and summary.usage.calls == 0
    lines = summary.text.splitlines()
    assert lines[1:3] == ["Run facts (authoritative):", '- order: {"order_id": "A-1001"}']
    assert "Workflow path so far: verified → deciding." in lines
    assert "- approved by sup: receipt checked" in lines
    assert "a refusal" not in summary.text
    assert "Tool calls: get_order ×3; errors or refusals: 2." in lines
    assert lines[-1] == "- refund_item → error: ValueError: nope"
    small = summarise(chunk, max_chars=400)
    assert len(small.text) <= 400 and "Run facts (authoritative):" in small.text


def test_view_chars_is_canonical_json() -> None:
    msgs = [{"role": "user", "content": "héllo"}]
    assert view_chars(msgs) == len(canonical(msgs[0]))
