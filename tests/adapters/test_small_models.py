"""Small and local models through the OpenAI-compatible adapter, against the fake server.

Calls written into the reply text in each form small models use, a forced tool
call where no final answer is accepted, the fallback when a server fails on that
(as llama-cpp-python's does), the refusal that tells a model how to proceed, and a
server that reports no usage.
"""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
from typing import Any

import pytest
from fake_openai import FORMS, FakeOpenAI, call, completion, error, text, text_call
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_fixtures import assert_show_matches_server
from paths import ROOT
from refund_scripts import small_refund

from fsm import Budgets, Engine, MemoryStore, WorkflowSpec
from fsm.adapters import ModelConfigError, OpenAIPolicy, translate
from fsm.adapters.textcalls import find_calls
from fsm.errors import SettingsError
from fsm.policy import Usage, View
from fsm.settings import Settings
from fsm.testing import state_path
from workflows.refund import Shop

GOAL = "Order A-1001: the kettle arrived broken, please refund it"
HAPPY = small_refund()
TOOLS_RUN = ["get_order", "get_policy", "refund_item", "send_reply"]
FULL_PATH = ["collecting", "verifying", "deciding", "refunding", "replying", "done"]


def by_name(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


#: What each request of HAPPY asks for: "required" with several tools, else by name.
FORCED = ["required"] * 4 + [by_name("advance"), by_name("refund_item"), by_name("send_reply")]

pytestmark = pytest.mark.usefixtures("no_model_env")


def policy_events(store: MemoryStore, run_id: str) -> list[Any]:
    return [e for e in store.events(run_id) if e.kind == "policy"]


def assert_refunded_once(store: MemoryStore, shop: Shop, run_id: str) -> None:
    assert [(r["item_id"], r["amount_paise"]) for r in shop.ledger()] == [("kettle-1", 35_000)]
    assert [m["text"] for m in shop.outbox()] == [HAPPY[-1][1]["text"]]
    assert state_path(store, run_id) == FULL_PATH
    assert [e.tool for e in store.events(run_id) if e.kind == "tool"] == TOOLS_RUN
    assert [e for e in store.events(run_id) if e.kind == "refusal"] == []


# -- calls written as text ---------------------------------------------------------------

@pytest.mark.parametrize("form", FORMS)
def test_a_run_whose_model_writes_its_calls_as_text(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any, form: str) -> None:
    server.script(*[text_call(form, name, args) for name, args in HAPPY])
    policy = make_policy()
    run = Engine(spec, store, policy).start(GOAL, user="asha", run_id="t1")

    assert (run.status, run.state) == ("done", "done")
    assert_refunded_once(store, shop, "t1")
    first = store.messages("t1")[1]
    assert (first["tool"], first["args"]) == ("get_order", {"order_id": "A-1001"})
    # The model reads its own call back as a native call, linked to its result.
    second = server.chat[1].body["messages"]
    assert second[2]["tool_calls"][0]["function"]["name"] == "get_order"
    assert second[3]["role"] == "tool" and second[3]["tool_call_id"] == "call_1"
    assert_show_matches_server(spec, store, "t1", policy, [r.raw for r in server.chat])


def test_text_around_a_written_call_is_kept(spec: WorkflowSpec, store: MemoryStore,
                                            server: FakeOpenAI, make_policy: Any) -> None:
    server.script(text_call("hermes", *HAPPY[0]))
    Engine(spec, store, make_policy(), budgets=Budgets(max_steps=1)).start(
        GOAL, user="asha", run_id="t1")
    assert store.messages("t1")[1] == {"role": "assistant", "tool": "get_order",
                                       "args": {"order_id": "A-1001"},
                                       "text": "I will look that up."}


def _view(state: str = "collecting", *, final_allowed: bool = False,
          tools: tuple[str, ...] = ("get_order", "advance")) -> View:
    return View(run_id="r", workflow="refund", step=1, state=state, messages=[],
                tools=[{"name": t, "parameters": {}} for t in tools], events=[],
                final_allowed=final_allowed)


def _act(content: str, view: View | None = None) -> Any:
    body = {"choices": [{"message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}]}
    return translate.action_from_response(body, view or _view(), Usage())


TEXT_REPLIES = [
    pytest.param('<tool_call>{"name": "get_order", "arguments": "{\\"order_id\\": \\"A-1\\"}"}'
                 '</tool_call><|im_end|>', ("get_order", {"order_id": "A-1"}, None),
                 id="hermes-arguments-as-a-string"),
    pytest.param('Let me check. {"name": "get_order", "parameters": {"order_id": "A-1"}}',
                 ("get_order", {"order_id": "A-1"}, "Let me check."), id="json-inside-text"),
    pytest.param('<|python_tag|>{"name": "get_order", "parameters": {"order_id": "A-1"}}; '
                 '{"name": "advance", "parameters": {"event": "details_complete"}}<|eot_id|>',
                 ("get_order", {"order_id": "A-1"}, "[runtime] Only one tool call runs per "
                  "step: get_order was taken; ignored: advance. Make them again, one per "
                  "reply, if still needed."), id="python-tag-two-calls"),
    pytest.param('<|python_tag|>get_order.call(order_id="A-1")',
                 ("get_order", {"order_id": "A-1"}, None), id="python-tag-pythonic"),
    pytest.param('{"type": "function", "name": "advance", "parameters": '
                 '{"event": "details_complete"}}',
                 ("advance", {"event": "details_complete"}, None), id="llama-3.2-json"),
    pytest.param('```\n[get_order(order_id="A-1")]\n```', ("get_order", {"order_id": "A-1"}, None),
                 id="pythonic-in-a-fence"),
    # The format llama-cpp-python's chatml-function-calling prompt teaches the model
    # (its template's own example, then as a reply, then HTML-escaped by the template).
    pytest.param('functions.get_order:\n{ "order_id": "A-1", "note": "value2" }',
                 ("get_order", {"order_id": "A-1", "note": "value2"}, None),
                 id="functions-prefix-template-example"),
    pytest.param('message:\nfunctions.get_order:\n{"order_id": "A-1"}\nfunctions.advance:\n'
                 '{"event": "details_complete"}',
                 ("get_order", {"order_id": "A-1"}, "[runtime] Only one tool call runs per "
                  "step: get_order was taken; ignored: advance. Make them again, one per "
                  "reply, if still needed."), id="functions-prefix-two-calls"),
    pytest.param('functions.get_order:\n{&#34;order_id&#34;: &#34;A-1&#34;}',
                 ("get_order", {"order_id": "A-1"}, None), id="functions-prefix-html-escaped"),
    pytest.param('<tool_call>{&quot;name&quot;: &quot;get_order&quot;, &quot;arguments&quot;: '
                 '{&quot;order_id&quot;: &quot;A-1&quot;}}</tool_call>',
                 ("get_order", {"order_id": "A-1"}, None), id="hermes-html-escaped"),
    # Gemma's function-calling format: Python calls in a tool_code block.
    pytest.param('```tool_code\nget_order(order_id="A-1")\n```',
                 ("get_order", {"order_id": "A-1"}, None), id="gemma-tool-code"),
    pytest.param('I will check.\n```tool_code\nprint(get_order(order_id="A-1"))\n```',
                 ("get_order", {"order_id": "A-1"}, "I will check."), id="gemma-tool-code-print"),
    pytest.param("```tool_call\n{'name': 'get_order', 'arguments': {'order_id': 'A-1'}}\n```",
                 ("get_order", {"order_id": "A-1"}, None), id="gemma-tool-call-python-dict"),
]


@pytest.mark.parametrize(("content", "expected"), TEXT_REPLIES)
def test_calls_written_as_text_become_calls(content: str, expected: tuple[Any, ...]) -> None:
    action = _act(content)
    assert (action.tool, action.args, action.text) == expected
    assert action.problem is None and action.final is None


FINAL_ANSWERS = [
    pytest.param("Your refund of ₹350 is on its way.", id="plain"),
    pytest.param('The order said {"status": "delivered", "total": 350}.', id="json-not-a-call"),
    pytest.param('```json\n{"refund": 35000}\n```', id="fenced-json-not-a-call"),
    pytest.param("print(refund)", id="python-call-of-no-offered-tool"),
    pytest.param('{"name": "Asha", "city": "Pune"}', id="a-name-but-no-arguments"),
    pytest.param("{" * 5000, id="unbalanced-braces"),
    pytest.param("Our functions.py module: no call here &amp; nothing to run.",
                 id="escaped-text-without-a-call"),
    pytest.param("```tool_code\nprint(refund)\n```", id="tool-code-of-no-offered-tool"),
]


@pytest.mark.parametrize("content", FINAL_ANSWERS)
def test_text_without_a_call_stays_a_final_answer(content: str) -> None:
    action = _act(content, _view("replying", final_allowed=True))
    assert (action.final, action.tool, action.problem) == (content, None, None)


def test_a_marked_call_that_cannot_be_read_is_a_problem_the_model_reads() -> None:
    action = _act('<tool_call>{"name": "get_order", "arguments": {"order_id": "A-1"}'
                  '</tool_call>')
    assert action.tool is None and action.problem is not None
    assert action.problem.startswith("a <tool_call> block is not one JSON object")
    assert action.problem.endswith("Call exactly one of the offered tools (get_order, advance).")
    assert "python_tag" in (_act("<|python_tag|>not a call").problem or "")
    # A readable call of a tool that is not offered is refused by name.
    action = _act('<tool_call>{"name": "refund_item", "arguments": {}}</tool_call>')
    assert action.tool == "refund_item"
    assert action.problem == ("tool 'refund_item' is not offered in state 'collecting' "
                              "(offered: get_order, advance)")


def test_find_calls_leaves_plain_text_alone() -> None:
    assert find_calls("") is None and find_calls("no calls here") is None
    assert find_calls("x" * 200_000 + '{"name": "a", "arguments": {}}') is None  # too long
    found = find_calls('<function=get_order>{"order_id": "A-1"}</function> done')
    assert found is not None and found.text == "done"
    assert found.calls == [{"function": {"name": "get_order",
                                         "arguments": '{"order_id": "A-1"}'}}]


# -- asking for a tool call, and the fallback ------------------------------------------------

def test_the_system_message_says_whether_text_is_accepted() -> None:
    refused = translate.system_message(_view())["content"]
    accepted = translate.system_message(_view(final_allowed=True))["content"]
    assert refused.endswith("a text answer is not accepted in this state.")
    assert accepted.endswith("Reply with exactly one tool call.")


def test_a_state_with_a_final_answer_is_not_forced() -> None:
    assert translate.forced_choice(_view(final_allowed=True)) is None
    assert translate.forced_choice(_view(tools=())) is None
    assert translate.forced_choice(_view()) == "required"
    assert translate.forced_choice(_view(tools=("send_reply",))) == by_name("send_reply")
    body = translate.request_body(_view(), "m", {"tool_choice": None})
    assert "tool_choice" not in body
    assert translate.request_body(_view(), "m", {"tool_choice": "auto"})["tool_choice"] == "auto"


def test_llama_cpp_rejections_fall_back_once_and_are_remembered(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any, sleeps: list[float], caplog: pytest.LogCaptureFixture) -> None:
    server.mimic_llama_cpp()
    server.script(*[call(name, args) for name, args in HAPPY])
    policy = make_policy()
    with caplog.at_level(logging.WARNING, logger="fsm.adapters.openai"):
        run = Engine(spec, store, policy).start(GOAL, user="asha", run_id="l1")

    assert (run.status, run.state) == ("done", "done")
    assert_refunded_once(store, shop, "l1")
    # Step 1 asks for "required" (a 500), then the same request with "auto", which
    # keeps the tools in the prompt; step 5 forces `advance` by name (the connection
    # drops), then asks with "auto". Neither is tried again, and neither waited.
    sent = [r.body.get("tool_choice") for r in server.chat]
    assert sent == ["required", "auto", "auto", "auto", "auto", by_name("advance"), "auto",
                    "auto", "auto"]
    assert sleeps == []
    assert [e.detail["calls"] for e in policy_events(store, "l1")] == [2, 1, 1, 1, 2, 1, 1]
    assert policy.unforced == {"required", "function"}
    warned = [r.getMessage() for r in caplog.records if r.name == "fsm.adapters.openai"]
    assert len(warned) == 2
    assert "failed on tool_choice required; asking with auto" in warned[0]
    assert "dropped the connection on tool_choice function; asking with auto" in warned[1]
    # The retried request is the first one with tool_choice "auto", nothing else changed.
    first, retried = server.chat[0].body, server.chat[1].body
    assert {**first, "tool_choice": "auto"} == retried
    # Each fallback is in the log, with the server's reason and whether it was learnt.
    fallbacks = [(e.step, e.detail["from"], e.detail["to"], e.detail["learnt"])
                 for e in store.events("l1") if e.kind == "fallback"]
    assert fallbacks == [(1, "required", "auto", True), (5, "function", "auto", True)]
    assert_show_matches_server(spec, store, "l1", policy, [r.raw for r in server.chat])


def test_a_server_that_fails_on_everything_is_not_blamed_on_tool_choice(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any,
        sleeps: list[float]) -> None:
    server.script(error(500), error(500), call(*HAPPY[0]), call(*HAPPY[1]))
    policy = make_policy(max_retries=1)
    run = Engine(spec, store, policy, budgets=Budgets(max_steps=2)).start(
        GOAL, user="asha", run_id="f1")
    assert run.state == "verifying"
    # "auto" failed the same way: the server is to blame, not "required".
    assert [r.body.get("tool_choice") for r in server.chat] == [
        "required", "auto", "auto", "required"]
    assert sleeps == [0.5] and policy.unforced == set()
    assert [e.detail["calls"] for e in policy_events(store, "f1")] == [3, 1]


def test_a_server_that_crashes_on_a_forced_function_is_not_forced_again(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any) -> None:
    # Deciding offers only `advance`: forced by name, the server drops the connection
    # and stays down (503) until the run stops; after the resume it answers again.
    server.drop_forced_function = True
    server.script(*[call(name, args) for name, args in HAPPY[:4]], error(503), error(503))
    engine = Engine(spec, store, make_policy(max_retries=1))
    run = engine.start(GOAL, user="asha", run_id="c1")
    assert (run.status, run.state) == ("model_unavailable", "deciding")
    server.script(*[call(name, args) for name, args in HAPPY[4:]])
    run = engine.resume("c1")
    assert run.status == "done"
    assert_refunded_once(store, shop, "c1")
    forced = [r.body.get("tool_choice") for r in server.chat]
    # Never by name again after the drop; "required" still means the same there.
    assert forced[4:] == [by_name("advance"), "required", "required", "required", "required",
                          "required"]


def test_fsm_tool_choice_off_never_forces(spec: WorkflowSpec, store: MemoryStore,
                                          server: FakeOpenAI, make_policy: Any,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FSM_TOOL_CHOICE", "OFF")
    server.script(*[call(name, args) for name, args in HAPPY])
    Engine(spec, store, make_policy(settings=Settings.load())).start(GOAL, user="asha",
                                                                     run_id="o1")
    # Never forced: "auto" keeps the tools offered.
    assert [r.body.get("tool_choice") for r in server.chat] == ["auto"] * len(HAPPY)
    monkeypatch.setenv("FSM_TOOL_CHOICE", "sometimes")
    with pytest.raises(SettingsError) as refused:
        Settings.load()
    assert str(refused.value) == ("FSM_TOOL_CHOICE='sometimes' is not a tool choice "
                                  "(allowed: auto or off)")


def test_a_forced_request_that_keeps_failing_stops_the_run(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    server.script(error(500, "boom"), error(500, "boom"), error(500, "still broken"))
    run = Engine(spec, store, make_policy(max_retries=1)).start(GOAL, user="asha",
                                                                 run_id="f2")
    # A 500 on every attempt of the same request while the server answers otherwise
    # (GET /models): this request cannot be served; resuming later would not help.
    assert run.status == "model_refused"
    assert run.reason is not None and run.reason.endswith(
        "failed on every attempt of this request while it answers GET /models after 3 "
        "attempt(s): HTTP 500: still broken")


def test_an_explicit_tool_choice_is_sent_as_given(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    server.mimic_llama_cpp()
    server.script(call(*HAPPY[0]))
    Engine(spec, store, make_policy(options={"tool_choice": "required"}, max_retries=0),
           budgets=Budgets(max_steps=1)).start(GOAL, user="asha", run_id="x1")
    # The caller asked for "required": no silent fallback, the server's 500 stands.
    assert [r.body.get("tool_choice") for r in server.chat] == ["required"]


# -- the refusal of a text answer ---------------------------------------------------------

def test_a_refused_text_answer_tells_the_model_how_to_proceed(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any) -> None:
    server.script(text("I will look up the order now."),
                  *[call(name, args) for name, args in HAPPY])
    run = Engine(spec, store, make_policy()).start(GOAL, user="asha", run_id="h1")
    assert run.status == "done" and len(shop.ledger()) == 1
    told = server.chat[1].body["messages"][-1]
    assert told == {"role": "user", "content": (
        "a final answer is not accepted in state 'collecting': the workflow finishes "
        "through its events. Reply with one tool call: get_order, or advance with event "
        "details_complete.")}


# -- usage the server does not report ---------------------------------------------------------

def test_a_server_without_usage_is_warned_about_once_and_logged(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    server.script(call(*HAPPY[0], usage=None), call(*HAPPY[1], usage=None), call(*HAPPY[2]))
    with caplog.at_level(logging.WARNING, logger="fsm.adapters.openai"):
        Engine(spec, store, make_policy(), budgets=Budgets(max_steps=3)).start(
            GOAL, user="asha", run_id="u1")
    warned = [r.getMessage() for r in caplog.records if r.name == "fsm.adapters.openai"]
    assert len(warned) == 1
    assert "'gpt-4o-mini' at " + server.base_url + " sent no token usage" in warned[0]
    details = [e.detail for e in policy_events(store, "u1")]
    assert [d.get("usage_reported", True) for d in details] == [False, False, True]
    assert [e.tokens for e in policy_events(store, "u1")] == [0, 0, 120]


def test_usage_with_only_a_total_counts_as_reported(make_policy: Any) -> None:
    policy = make_policy()
    assert policy.usage_of(completion({"content": "x"}, usage=None).body).reported is False
    assert policy.usage_of({"usage": {"total_tokens": 5}}).reported is True
    assert policy.usage_of({"usage": {"prompt_tokens": True}}).reported is False


# -- the timeout ---------------------------------------------------------------------------

@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "60"])
def test_a_timeout_must_be_positive_seconds(spec: WorkflowSpec, timeout: Any) -> None:
    with pytest.raises(ModelConfigError, match="timeout must be a number of seconds above 0"):
        OpenAIPolicy(spec, "m", base_url="http://127.0.0.1:9/v1", timeout=timeout)


def test_a_slow_reply_within_the_timeout_is_waited_for(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    server.script(dataclasses.replace(call(*HAPPY[0]), delay=0.3))
    run = Engine(spec, store, make_policy(timeout=5.0), budgets=Budgets(max_steps=1)).start(
        GOAL, user="asha", run_id="s1")
    assert policy_events(store, "s1")[0].detail["calls"] == 1 and run.state == "collecting"
    assert len(server.chat) == 1


# -- whatever the text, reading it never raises ---------------------------------------------

_PIECES = st.sampled_from([
    "<tool_call>", "</tool_call>", "<|python_tag|>", "<|eom_id|>", "[TOOL_CALLS]",
    "<function=get_order>", "</function>", "```json\n", "```", "{", "}", "[", "]", ";",
    '"name"', '"arguments"', '"parameters"', ":", ",", '"get_order"', "get_order(",
    "order_id=", ")", '"A-1001"', "1" * 5000, "null", " ", "\n", "é₹",
])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=300), st.lists(_PIECES, max_size=40).map("".join)))
def test_reading_any_reply_text_never_raises(content: str) -> None:
    action = _act(content)
    assert (action.tool is not None) or (action.final is not None) or action.problem
    found = find_calls(content, ("get_order", "advance"))
    if found is not None:
        assert found.calls or found.problem


def test_the_text_call_benchmark_reports_every_input() -> None:
    root = ROOT
    proc = subprocess.run([sys.executable, str(root / "bench" / "text_calls.py"), "-n", "1"],
                          capture_output=True, text=True, timeout=120, cwd=str(root))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["input", "chars", "µs/reply", "call?"] and len(lines) == 13
    assert [line.split()[-1] for line in lines[2:7]] == ["yes"] * 5
