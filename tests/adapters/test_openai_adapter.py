"""The OpenAI-compatible policy, through the real SDK, against a real local HTTP server.

The fake server (tests/fake_openai.py) is scripted per test and records every
request body; assertions are on what it received, on the shop's ledger and outbox,
and on the run's event log.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply, call, calls, error, text
from openai_fixtures import assert_show_matches_server
from refund_scripts import small_refund

from fsm import Budgets, Engine, MemoryStore, WorkflowSpec
from fsm.adapters import ModelConfigError, OpenAIPolicy, translate
from fsm.adapters.openai import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    LOCAL_API_KEY,
    default_backoff,
    is_local,
)
from fsm.policy import Usage, View
from fsm.pricing import Price, PriceError, PriceTable
from fsm.records import verify_chain
from fsm.settings import Settings
from fsm.testing import state_path
from workflows.refund import Shop

GOAL = "Order A-1001: the kettle arrived broken, please refund it"
FULL_PATH = ["collecting", "verifying", "deciding", "refunding", "replying", "done"]
HAPPY = small_refund()
#: (tools, advance events) the model must be offered at each step of HAPPY.
OFFERED = [
    (["get_order", "advance"], ["details_complete"]),
    (["get_order", "advance"], ["details_complete"]),
    (["get_order", "get_policy", "advance"], ["verified", "cannot_verify"]),
    (["get_order", "get_policy", "advance"], ["verified", "cannot_verify"]),
    (["advance"], ["small_refund", "large_refund", "no_refund"]),
    (["refund_item"], []),
    (["send_reply"], []),
]

pytestmark = pytest.mark.usefixtures("no_model_env")


def script_happy(server: FakeOpenAI, start: int = 0, usage: tuple[int, int] = (100, 20)) -> None:
    server.script(*[call(name, args, usage=usage) for name, args in HAPPY[start:]])


def policy_events(store: MemoryStore, run_id: str) -> list[Any]:
    return [e for e in store.events(run_id) if e.kind == "policy"]


# -- a full run -----------------------------------------------------------------------------

def test_full_refund_run_through_the_sdk(spec: WorkflowSpec, store: MemoryStore, shop: Shop,
                                         server: FakeOpenAI, make_policy: Any) -> None:
    script_happy(server)
    policy = make_policy()
    run = Engine(spec, store, policy).start(GOAL, user="asha", run_id="r1")

    assert (run.status, run.state, run.reason) == ("done", "done", None)
    assert [(r["order_id"], r["item_id"], r["amount_paise"]) for r in shop.ledger()] == [
        ("A-1001", "kettle-1", 35000)]
    assert [m["text"] for m in shop.outbox()] == [HAPPY[-1][1]["text"]]
    assert state_path(store, "r1") == FULL_PATH
    verify_chain(store.events("r1"))

    sent = server.chat
    assert len(sent) == len(HAPPY) == server.requests.__len__()
    first = sent[0]
    assert first.headers["authorization"] == "Bearer sk-test"
    body = first.body
    assert list(body) == ["model", "messages", "tools", "tool_choice", "parallel_tool_calls",
                          "max_tokens"]
    assert body["model"] == "gpt-4o-mini" and body["parallel_tool_calls"] is False
    assert body["max_tokens"] == DEFAULT_MAX_OUTPUT_TOKENS  # every reply is capped
    # No refund state accepts a final answer: each request asks for a tool call, by name
    # when only one tool is offered.
    assert [r.body["tool_choice"] for r in sent] == ["required"] * 4 + [
        {"type": "function", "function": {"name": name}}
        for name in ("advance", "refund_item", "send_reply")]
    system, user = body["messages"]
    assert system["role"] == "system" and spec.system_prompt in system["content"]
    assert spec.instructions["collecting"] in system["content"]
    assert user == {"role": "user", "content": GOAL}
    # Every step's usage is logged with its cost: gpt-4o-mini, 100 in + 20 out = 27 micros.
    logged = policy_events(store, "r1")
    assert [(e.tokens, e.cost_micros, e.detail["calls"]) for e in logged] == [(120, 27, 1)] * 7
    assert run.used.cost_micros == 7 * 27 and run.used.input_tokens == 700
    assert_show_matches_server(spec, store, "r1", policy, [r.raw for r in sent])


def test_tool_calls_and_results_are_linked_by_ids_from_the_transcript(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    script_happy(server)
    Engine(spec, store, make_policy()).start(GOAL, user="asha", run_id="r1")
    last = server.chat[-1].body["messages"]
    transcript = store.messages("r1")
    # messages[0] is the system prompt; chat message i + 1 is transcript message i.
    assert len(last) == 1 + len(transcript) - 2  # the final call and result came after
    for i, msg in enumerate(last[1:]):
        if msg["role"] == "assistant":
            (tc,) = msg["tool_calls"]
            assert tc["id"] == f"call_{i}"
            assert json.loads(tc["function"]["arguments"]) == transcript[i]["args"]
            assert last[i + 2] == {"role": "tool", "tool_call_id": f"call_{i}",
                                   "content": translate.dumps(transcript[i + 1]["result"])}
    # The same call keeps its id in every later request.
    ids = [[m["tool_calls"][0]["id"] for m in r.body["messages"] if m.get("tool_calls")]
           for r in server.chat]
    for earlier, later in zip(ids, ids[1:], strict=False):
        assert later[: len(earlier)] == earlier


def test_offered_tools_change_with_the_state(spec: WorkflowSpec, store: MemoryStore,
                                             server: FakeOpenAI, make_policy: Any) -> None:
    script_happy(server)
    Engine(spec, store, make_policy()).start(GOAL, user="asha", run_id="r1")
    got = [(r.tool_names(), r.events()) for r in server.chat]
    assert got == OFFERED
    for r in server.chat:
        schemas = {t["function"]["name"]: t["function"] for t in r.body["tools"]}
        for name in schemas.keys() - {"advance"}:
            assert schemas[name]["parameters"] == spec.tools[name].schema()["parameters"]
    # Without tools (never in the refund workflow's model states) nothing tool-related is sent.
    view = View(run_id="x", workflow="refund", step=1, state="done",
                messages=[{"role": "user", "content": "hi"}], tools=[], events=[])
    assert list(translate.request_body(view, "m")) == ["model", "messages"]


# -- unusable model output ------------------------------------------------------------------

BAD_REPLIES = [
    pytest.param(call("get_order", '{"order_id": A-1001'), "get_order",
                 "arguments of 'get_order' are not valid JSON", id="malformed-json"),
    pytest.param(call("get_order", '["A-1001"]'), "get_order",
                 "arguments of 'get_order' must be a JSON object, got list", id="non-object"),
    pytest.param(call("delete_everything", {"really": True}), "delete_everything",
                 "tool 'delete_everything' is not offered in state 'collecting' "
                 "(offered: get_order, advance)", id="unknown-tool"),
    pytest.param(call("refund_item", {"order_id": "A-1001", "item_id": "kettle-1",
                                      "amount_paise": 35000}), "refund_item",
                 "tool 'refund_item' is not offered in state 'collecting'",
                 id="tool-of-another-state"),
    pytest.param(call("get order!", {}), None, "tool 'get order!' is not offered",
                 id="invalid-name"),
    pytest.param(text(""), None, "the reply was empty: no tool call and no text",
                 id="empty-reply"),
    pytest.param(text(None), None, "the reply was empty", id="null-content"),
    pytest.param(Reply(body={"id": "x", "choices": [], "usage": {"prompt_tokens": 100,
                                                                "completion_tokens": 20}}),
                 None, "the reply had no choices", id="no-choices"),
    pytest.param(text(None, refusal="I cannot help with refunds."), None,
                 "the model refused: I cannot help with refunds.", id="refusal"),
    pytest.param(text("I will look up the order now."), None,
                 "a final answer is not accepted in state 'collecting'", id="text-only"),
]


@pytest.mark.parametrize(("reply", "tool", "problem"), BAD_REPLIES)
def test_unusable_output_becomes_an_observation(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any, reply: Reply, tool: str | None, problem: str) -> None:
    server.script(reply)
    script_happy(server)
    policy = make_policy()
    run = Engine(spec, store, policy).start(GOAL, user="asha", run_id="r1")

    assert run.status == "done"  # the run recovered on the next reply
    assert len(shop.ledger()) == 1
    refusals = [e for e in store.events("r1") if e.kind == "refusal"]
    assert len(refusals) == 1 and refusals[0].step == 1
    assert problem in (refusals[0].reason or "") and refusals[0].tool == tool
    assert [e.tool for e in store.events("r1") if e.kind == "tool"] == [
        "get_order", "get_policy", "refund_item", "send_reply"]
    # The model read the problem in its next request.
    second = server.chat[1].body["messages"]
    observation = second[-1]["content"]
    assert problem in observation
    if tool is not None:
        assert second[-1]["role"] == "tool"
        assert second[-1]["tool_call_id"] == second[-2]["tool_calls"][0]["id"] == "call_1"
    else:
        assert second[-1]["role"] == "user"
    # Unusable replies cost tokens too.
    assert [e.tokens for e in policy_events(store, "r1")] == [120] * 8
    assert_show_matches_server(spec, store, "r1", policy, [r.raw for r in server.chat])


def test_parallel_calls_run_the_first_and_tell_the_model(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any) -> None:
    server.script(calls(("get_order", {"order_id": "A-1001"}),
                        ("advance", {"event": "details_complete"}),
                        ("refund_item", {"order_id": "A-1001", "item_id": "kettle-1",
                                         "amount_paise": 35000})))
    script_happy(server, start=1)
    policy = make_policy()
    run = Engine(spec, store, policy).start(GOAL, user="asha", run_id="r1")

    assert run.status == "done" and len(shop.ledger()) == 1
    step1 = [e for e in store.events("r1") if e.step == 1]
    assert [(e.kind, e.tool, e.event) for e in step1] == [
        ("policy", None, None), ("tool", "get_order", None)]  # nothing else ran
    assert store.messages("r1")[1]["tool"] == "get_order"
    told = server.chat[1].body["messages"][2]
    assert told["role"] == "assistant" and told["tool_calls"][0]["function"]["name"] == "get_order"
    assert "Only one tool call runs per step" in told["content"]
    assert "ignored: advance, refund_item" in told["content"]
    assert_show_matches_server(spec, store, "r1", policy, [r.raw for r in server.chat])


# -- transport failures ---------------------------------------------------------------------

def test_429_then_success_retries_and_counts_every_attempt(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any,
        sleeps: list[float]) -> None:
    server.script(error(429, "rate limited", headers={"Retry-After": "7"}), error(503))
    script_happy(server)
    run = Engine(spec, store, make_policy()).start(GOAL, user="asha", run_id="r1")

    assert run.status == "done"
    assert sleeps == [7.0, 1.0]  # the server's Retry-After, then our own backoff
    first = policy_events(store, "r1")[0]
    assert first.detail["calls"] == 3 and first.tokens == 120
    assert server.chat[0].raw == server.chat[1].raw == server.chat[2].raw
    assert len(server.chat) == len(HAPPY) + 2


def test_persistent_500_stops_the_run_then_resume_finishes_it(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any, sleeps: list[float]) -> None:
    engine = Engine(spec, store, make_policy(max_retries=2))
    # Two good steps, then the server breaks for longer than the retries last.
    server.script(call(*HAPPY[0]), call(*HAPPY[1]), error(503, "overloaded"), error(500),
                  error(502, "bad gateway"))
    run = engine.start(GOAL, user="asha", run_id="r1")

    assert run.status == "model_unavailable" and run.state == "verifying"
    assert run.reason == ("model unavailable: 'gpt-4o-mini' at " + server.base_url +
                          " failed after 3 attempt(s): HTTP 502: bad gateway")
    assert sleeps == [0.5, 1.0]
    stop = store.events("r1")[-1]
    assert (stop.kind, stop.detail["status"]) == ("stop", "model_unavailable")
    failed = policy_events(store, "r1")[-1]
    assert (failed.detail["calls"], failed.tokens, failed.cost_micros) == (3, 0, 0)
    assert shop.ledger() == []
    assert len(server.chat) == 5

    # The server recovers; the same engine (or a new process) resumes the run.
    script_happy(server, start=2)
    run = engine.resume("r1")
    assert (run.status, run.state) == ("done", "done")
    assert [r["amount_paise"] for r in shop.ledger()] == [35000]
    assert state_path(store, "r1") == FULL_PATH
    assert "resume" in [e.kind for e in store.events("r1")]
    # The first request after the resume is the very request that failed.
    assert server.chat[5].raw == server.chat[2].raw
    assert run.used.steps == 2 + 5  # the call that got no answer uses up no step
    verify_chain(store.events("r1"))


def test_a_timeout_and_a_refused_connection_stop_the_run_clearly(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    server.script(error(200, delay=1.0), error(200, delay=1.0))
    run = Engine(spec, store, make_policy(timeout=0.2, max_retries=1)).start(
        GOAL, user="asha", run_id="slow")
    assert run.status == "model_unavailable"
    assert run.reason is not None and run.reason.endswith(
        "failed after 2 attempt(s): no reply within 0.2s")

    dead = FakeOpenAI()  # bound, then closed: nothing listens on its port
    url = dead.base_url
    dead._server.server_close()
    run = Engine(spec, store, make_policy(base_url=url, max_retries=1)).start(
        GOAL, user="asha", run_id="dead")
    assert run.status == "model_unavailable"
    assert "failed after 2 attempt(s): cannot connect" in (run.reason or "")


def test_errors_that_retrying_cannot_fix_stop_at_once(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any,
        sleeps: list[float]) -> None:
    server.script(error(401, "invalid api key"))
    run = Engine(spec, store, make_policy()).start(GOAL, user="asha", run_id="r1")
    # Not "unavailable": the server answered, and will answer the same until the key
    # changes. The run can be resumed after that.
    assert run.status == "model_refused"
    assert run.reason is not None and run.reason.endswith(
        "refused the request after 1 attempt(s): HTTP 401: invalid api key "
        "(check OPENAI_API_KEY)")
    assert sleeps == [] and len(server.chat) == 1


def test_a_reply_that_is_not_json_is_retried(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    server.script(Reply(body=b"<html>proxy error</html>"))
    script_happy(server)
    run = Engine(spec, store, make_policy()).start(GOAL, user="asha", run_id="r1")
    assert run.status == "done"
    assert policy_events(store, "r1")[0].detail["calls"] == 2


def test_default_backoff_doubles_and_is_capped() -> None:
    assert [default_backoff(n, None) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert default_backoff(20, None) == 30.0 and default_backoff(1, 120.0) == 30.0


# -- usage, cost, budgets -------------------------------------------------------------------

def test_usage_becomes_cost_and_exhausts_the_cost_budget(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any) -> None:
    # gpt-4o: $2.50 / $10.00 per million → 2000 in + 500 out = 5000 + 5000 micros.
    script_happy(server, usage=(2000, 500))
    engine = Engine(spec, store, make_policy(model="gpt-4o"),
                    budgets=Budgets(max_cost_micros=25_000))
    run = engine.start(GOAL, user="asha", run_id="r1")

    assert run.status == "budget_exhausted"
    assert run.reason == "cost (micros) budget exhausted: used 30000 of 25000"
    assert [(e.cost_micros, e.tokens) for e in policy_events(store, "r1")] == [(10_000, 2500)] * 3
    assert run.used.cost_micros == 30_000 and run.used.tokens == 7500
    assert len(server.chat) == 3 and shop.ledger() == []
    assert store.events("r1")[-1].detail["status"] == "budget_exhausted"


def test_usage_exhausts_the_token_budget_across_a_resume(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    server.script(call(*HAPPY[0], usage=(900, 100)), error(503), error(503))
    engine = Engine(spec, store, make_policy(max_retries=1),
                    budgets=Budgets(max_tokens=2500))
    assert engine.start(GOAL, user="asha", run_id="r1").status == "model_unavailable"
    script_happy(server, start=1, usage=(900, 100))
    run = engine.resume("r1")
    assert run.status == "budget_exhausted"
    assert run.reason == "tokens budget exhausted: used 3000 of 2500"
    assert len(server.chat) == 3 + 2


def test_custom_prices_and_an_unknown_model(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    script_happy(server, usage=(1_000_000, 1_000_000))
    policy = make_policy(model="local-llama", prices={"local-llama": {"input": 0.1,
                                                                      "output": "0.2"}})
    run = Engine(spec, store, policy).start(GOAL, user="asha", run_id="priced")
    assert run.used.cost_micros == 7 * 300_000

    server.script(*[call(*step, usage=(1000, 1000)) for step in HAPPY[:3]])
    with caplog.at_level(logging.WARNING, logger="fsm.pricing"):
        run = Engine(spec, store, make_policy(model="mystery-7b"),
                     budgets=Budgets(max_steps=3)).start(GOAL, user="asha", run_id="free")
    assert run.status == "budget_exhausted" and run.state == "verifying"
    assert run.used.cost_micros == 0 and run.used.tokens == 6000
    warnings = [r.getMessage() for r in caplog.records if r.name == "fsm.pricing"]
    assert len(warnings) == 1 and "no price for model 'mystery-7b'" in warnings[0]


def test_a_reply_without_usage_counts_zero_tokens(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    server.script(call(*HAPPY[0], usage=None))
    script_happy(server, start=1)
    Engine(spec, store, make_policy()).start(GOAL, user="asha", run_id="r1")
    assert policy_events(store, "r1")[0].tokens == 0


def test_price_table() -> None:
    table = PriceTable.default()
    assert table.cost("gpt-4o-mini", 1_000_000, 1_000_000) == 750_000
    assert table.cost("gpt-4o-mini-2024-07-18", 1_000_000, 0) == 150_000
    assert table.cost("gpt-4o-mini", 1, 0) == 1  # rounded up, never free
    assert table.cost("gpt-4o-mini", 0, 0) == 0
    assert Price.per_million("0.000001", 0) == Price(1, 0)
    with pytest.raises(PriceError, match="at most 6 decimal places"):
        Price.per_million("0.0000001", 0)
    with pytest.raises(PriceError, match="price of model 'x' must be"):
        PriceTable.coerce({"x": 3})


def test_prices_from_the_fsm_prices_file(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-4o": {"input": 1, "output": 2}, "mine": [0.5, 0.5]}))
    monkeypatch.setenv("FSM_PRICES", str(path))
    table = PriceTable.default(Settings.load().prices)
    assert table.cost("gpt-4o", 1_000_000, 1_000_000) == 3_000_000
    assert table.cost("mine", 2_000_000, 0) == 1_000_000
    assert table.cost("gpt-4.1", 1_000_000, 0) == 2_000_000  # the shipped prices remain
    assert PriceTable.default().cost("gpt-4o", 1_000_000, 0) == 2_500_000  # no file: shipped
    path.write_text("not json")
    with pytest.raises(PriceError, match="cannot read price file"):
        PriceTable.default(Settings.load().prices)


# -- configuration --------------------------------------------------------------------------

def test_model_url_and_key_come_from_the_environment(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_MODEL", "gpt-4.1-mini")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.script(call(*HAPPY[0]))
    with OpenAIPolicy(spec, settings=Settings.load()) as policy:
        assert (policy.model, policy.base_url) == ("gpt-4.1-mini", server.base_url)
        Engine(spec, store, policy, budgets=Budgets(max_steps=1)).start(GOAL, user="asha")
    assert server.chat[0].headers["authorization"] == "Bearer sk-from-env"
    assert server.chat[0].body["model"] == "gpt-4.1-mini"


def test_a_local_server_needs_no_key(spec: WorkflowSpec, store: MemoryStore,
                                     server: FakeOpenAI) -> None:
    server.script(call(*HAPPY[0]))
    # The signature `fsm run --model NAME --base-url URL` uses.
    with OpenAIPolicy(spec, "qwen2.5:7b", base_url=server.base_url, api_key=None) as policy:
        Engine(spec, store, policy, budgets=Budgets(max_steps=1)).start(GOAL, user="asha")
    assert server.chat[0].headers["authorization"] == f"Bearer {LOCAL_API_KEY}"


def test_missing_settings_are_reported(spec: WorkflowSpec,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_MODEL", "gpt-4o")  # read only by Settings.load()
    with pytest.raises(ModelConfigError, match="no model name: pass model=.*OPENAI_MODEL"):
        OpenAIPolicy(spec)
    with pytest.raises(ModelConfigError,
                       match="no API key for https://api.openai.com/v1: .*OPENAI_API_KEY"):
        OpenAIPolicy(spec, "gpt-4o")
    assert is_local("http://localhost:11434/v1") and is_local("http://192.168.1.5:8000/v1")
    assert is_local("http://[::1]:8080/v1") and not is_local("https://api.example.com/v1")


def test_tool_names_the_api_rejects_are_refused_at_construction() -> None:
    from fsm import ToolSpec, define_workflow

    spec = define_workflow("odd", transitions={"a": {"go": "b"}}, tools_by_state={"a": ["look up"]},
                           initial="a", terminal={"b"},
                           tools=[ToolSpec("look up", lambda a, c: None)])
    with pytest.raises(ModelConfigError, match="'look up'"):
        OpenAIPolicy(spec, "m", base_url="http://127.0.0.1:9/v1")


# -- translation details --------------------------------------------------------------------

def _view(messages: list[dict[str, Any]]) -> View:
    return View(run_id="r", workflow="refund", step=3, state="verifying", messages=messages,
                tools=[], events=[])


def test_translation_keeps_ids_across_compaction_and_repairs_loose_ends() -> None:
    messages = [
        {"role": "user", "content": "goal"},
        {"role": "user", "content": "summary", "summary_of": [1, 7]},
        {"role": "tool", "tool": "get_order", "result": {"b": 1, "a": 2}},  # its call was cut
        {"role": "assistant", "tool": "get_policy", "args": {"z": 1, "a": [2]}},
        {"role": "tool", "tool": "get_policy", "error": "LookupError: no order"},
        {"role": "assistant", "tool": "advance", "args": {}},  # paused: no result yet
        {"role": "user", "content": "approved by sup"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "final": "done"},
    ]
    out = translate.chat_messages(_view(messages))[1:]
    assert out[1] == {"role": "user", "content": "summary"}
    assert out[2] == {"role": "user", "content": 'result of get_order: {"a": 2, "b": 1}'}
    assert out[3]["tool_calls"][0]["id"] == "call_8"  # index 8 in the full transcript
    assert out[3]["tool_calls"][0]["function"]["arguments"] == '{"a": [2], "z": 1}'
    assert out[4] == {"role": "tool", "tool_call_id": "call_8",
                      "content": "error: LookupError: no order"}
    assert out[5]["tool_calls"][0]["id"] == "call_10"
    assert out[6] == {"role": "tool", "tool_call_id": "call_10", "content": translate.NO_RESULT}
    assert out[7] == {"role": "user", "content": "approved by sup"}
    # The empty reply is left out: no placeholder words are put in the model's mouth.
    assert out[8] == {"role": "assistant", "content": "done"}
    assert len(out) == 9


def test_replies_become_actions() -> None:
    view = View(run_id="r", workflow="refund", step=1, state="collecting", messages=[],
                tools=[{"name": "get_order", "parameters": {}}], events=[])
    usage = Usage(input_tokens=5, output_tokens=1, cost_micros=2, calls=1)

    def act(message: dict[str, Any]) -> Any:
        body = {"choices": [{"message": message, "finish_reason": "stop"}]}
        return translate.action_from_response(body, view, usage)

    a = act({"content": "checking", "tool_calls": [
        {"function": {"name": "get_order", "arguments": '{"order_id": "A-1001"}'}}]})
    assert (a.tool, a.args, a.text, a.problem, a.usage) == (
        "get_order", {"order_id": "A-1001"}, "checking", None, usage)
    a = act({"content": None, "function_call": {"name": "get_order", "arguments": ""}})
    assert (a.tool, a.args, a.problem) == ("get_order", {}, None)
    a = act({"content": "  "})
    assert a.problem is not None
    assert "Call exactly one of the offered tools (get_order)" in a.problem
