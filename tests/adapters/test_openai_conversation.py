"""A model over real HTTP (the fake OpenAI-compatible server) holds a conversation: its
text in a state that asks the customer goes to the customer, the reply comes back to it
as a user message, and what it was sent can be rebuilt from the store."""

from __future__ import annotations

from fake_openai import FakeOpenAI, call, text

from fsm import Engine, MemoryStore, view_at
from fsm.adapters import OpenAIPolicy, encode
from workflows.refund import Shop
from workflows.refund.conversation import build_conversation


def test_a_model_asks_for_the_order_number_and_reads_the_reply(server: FakeOpenAI,
                                                               shop: Shop) -> None:
    spec = build_conversation(shop)
    server.script(
        text("Which order is it about? Please give me its number."),
        call("get_order", {"order_id": "A-1001"}),
        call("advance", {"event": "details_complete"}),
    )
    store = MemoryStore()
    policy = OpenAIPolicy(spec, "gpt-4o-mini", base_url=server.base_url, api_key="sk-test")
    try:
        engine = Engine(spec, store, policy)
        run = engine.start("My kettle arrived broken", user="asha", run_id="m1")
        assert (run.status, run.state) == ("awaiting_customer", "collecting")
        assert run.pending is not None
        assert run.pending.message == "Which order is it about? Please give me its number."
        first = server.chat[0].body
        assert first.get("tool_choice", "auto") == "auto"  # text is an answer in this state
        assert "write to the customer in plain text" in first["messages"][0]["content"]
        server.script(call("get_policy", {"order_id": "A-1001"}))
        run = engine.reply("m1", "It is A-1001")
        sent = server.chat
        second = sent[1].body["messages"]
        assert second[-2] == {"role": "assistant",
                              "content": "Which order is it about? Please give me its number."}
        assert second[-1] == {"role": "user", "content": "It is A-1001"}
        assert run.state == "verifying"
        for step, request in zip((1, 2, 3, 4), sent[:4], strict=True):
            view = view_at(spec, store, "m1", step)
            assert view is not None and encode(policy.request_for(view)) == request.raw
    finally:
        policy.close()
