"""The adapter against each family of OpenAI-compatible server, as the fake server models
their request validation (tests/support/fake_families.py): which message shapes each
accepts, what each does with each ``tool_choice`` value, and a whole refund run through
each, over real HTTP on loopback.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from fake_families import FAMILIES
from fake_openai import FakeOpenAI, call
from openai_fixtures import assert_show_matches_server
from refund_scripts import small_refund

from fsm import Engine, MemoryStore, WorkflowSpec
from fsm.adapters import OpenAIPolicy
from fsm.testing import state_path
from workflows.refund import Shop

GOAL = "Order A-1001: the kettle arrived broken, please refund it"
HAPPY = small_refund()
GET_ORDER = {"type": "function", "function": {
    "name": "get_order", "parameters": {"type": "object", "properties": {
        "order_id": {"type": "string"}}, "required": ["order_id"]}}}

pytestmark = pytest.mark.usefixtures("no_model_env")


def by_name(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def post(server: FakeOpenAI, body: dict[str, Any]) -> int:
    """POST ``body`` to the fake as raw JSON; the HTTP status."""
    request = urllib.request.Request(f"{server.base_url}/chat/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@pytest.fixture
def family_server(request: pytest.FixtureRequest) -> Iterator[FakeOpenAI]:
    name, options = request.param
    with FakeOpenAI(name, **options) as s:
        yield s


# -- what each family accepts -------------------------------------------------------------

#: The assistant tool-call message of an earlier step, with content null, missing or "":
#: the status each family answers (llama-cpp-python: its request model, then its template).
CONTENT_SHAPES = {
    "openai": {"null": 200, "missing": 200, "empty": 200},
    "vllm": {"null": 200, "missing": 200, "empty": 200},
    "llama.cpp": {"null": 200, "missing": 200, "empty": 200},
    "llama-cpp-python": {"null": 500, "missing": 500, "empty": 200},
    "ollama": {"null": 200, "missing": 200, "empty": 200},
}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_assistant_content_each_family_accepts(family: str) -> None:
    got = {}
    with FakeOpenAI(family, auto_tools=True) as server:
        server.responder = lambda body: call("get_order", {"order_id": "A-1001"})
        for shape, content in (("null", {"content": None}), ("missing", {}),
                               ("empty", {"content": ""})):
            assistant = {"role": "assistant", **content, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_order", "arguments": "{}"}}]}
            got[shape] = post(server, {"model": "m", "messages": [
                {"role": "user", "content": "goal"}, assistant,
                {"role": "tool", "tool_call_id": "call_1", "content": "{}"}]})
    assert got == CONTENT_SHAPES[family]
    # The adapter sends "", which every family takes.
    assert {shapes["empty"] for shapes in CONTENT_SHAPES.values()} == {200}


#: What each family does with each tool_choice value (tools offered): (status, whether the
#: model's prompt shows the tools, what the reply is constrained to).
CHOICES: dict[str, dict[str, tuple[int, bool | None, str | None]]] = {
    "openai": {"function": (200, True, "get_order"), "required": (200, True, "required"),
               "auto": (200, True, None), "none": (200, True, None),
               "omit": (200, True, None)},
    # "auto" (also the default with tools) needs --enable-auto-tool-choice.
    "vllm": {"function": (200, True, "get_order"), "required": (200, True, "required"),
             "auto": (400, None, None), "none": (200, True, None),
             "omit": (400, None, None)},
    # A named function is read as "auto": nothing forces the call.
    "llama.cpp": {"function": (200, True, None), "required": (200, True, "required"),
                  "auto": (200, True, None), "none": (200, False, None),
                  "omit": (200, True, None)},
    # "required" fails its assert; without tool_choice the tools leave the prompt.
    "llama-cpp-python": {"function": (200, True, "get_order"), "required": (500, None, None),
                         "auto": (200, True, "auto"), "none": (200, False, None),
                         "omit": (200, False, None)},
    # No tool_choice in its OpenAI layer: every value is ignored.
    "ollama": {"function": (200, True, None), "required": (200, True, None),
               "auto": (200, True, None), "none": (200, True, None),
               "omit": (200, True, None)},
}


@pytest.mark.parametrize("family", FAMILIES)
def test_what_each_family_does_with_each_tool_choice(family: str) -> None:
    values = {"function": by_name("get_order"), "required": "required", "auto": "auto",
              "none": "none", "omit": None}
    got = {}
    with FakeOpenAI(family) as server:
        server.responder = lambda body: call("get_order", {"order_id": "A-1001"})
        for name, value in values.items():
            body: dict[str, Any] = {"model": "m", "tools": [GET_ORDER],
                                    "messages": [{"role": "user", "content": "A-1001"}]}
            if value is not None:
                body["tool_choice"] = value
            assert server.family is not None
            before = len(server.family.seen)
            status = post(server, body)
            seen = server.family.seen[before:]
            got[name] = (status, seen[0].tools_shown if seen else None,
                         seen[0].forced if seen else None)
    assert got == CHOICES[family]


# -- a whole run through each family ------------------------------------------------------

#: What the adapter asks each family for, step by step, in the small refund (tools:
#: several in steps 1-4, one in steps 5-7).
ASKED = {
    "openai": ["required"] * 4 + [by_name(n) for n in ("advance", "refund_item", "send_reply")],
    "vllm": ["required"] * 4 + [by_name(n) for n in ("advance", "refund_item", "send_reply")],
    "llama.cpp": ["required"] * 7,
    # Several tools: its own grammar admits one {"name", "arguments"} object of them.
    "llama-cpp-python": ["none"] * 4 + [by_name(n)
                                        for n in ("advance", "refund_item", "send_reply")],
    "ollama": [None] * 7,
}
CAP_FIELD = {"openai": "max_completion_tokens", "vllm": "max_tokens", "llama.cpp": "max_tokens",
             "llama-cpp-python": "max_tokens", "ollama": "max_tokens"}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_refund_run_through_each_family(spec: WorkflowSpec, store: MemoryStore, shop: Shop,
                                          family: str) -> None:
    with FakeOpenAI(family) as server:
        server.script(*[call(name, args) for name, args in HAPPY])
        # OpenAI is recognised by its address; the fake's is loopback, so it is named.
        with OpenAIPolicy(spec, "m", base_url=server.base_url, api_key="k",
                          server="openai" if family == "openai" else "auto") as policy:
            run = Engine(spec, store, policy).start(GOAL, user="asha", run_id="r1")
            assert_show_matches_server(spec, store, "r1", policy, [r.raw for r in server.chat])
        sent = [r.body for r in server.chat]

    assert (run.status, run.state) == ("done", "done"), run.reason
    assert [r["amount_paise"] for r in shop.ledger()] == [35_000]
    assert state_path(store, "r1")[-1] == "done"
    assert len(sent) == len(HAPPY)  # not one request was refused
    assert [b.get("tool_choice") for b in sent] == ASKED[family]
    assert {b[CAP_FIELD[family]] for b in sent} == {1024}
    last = sent[-1]["messages"]
    calls = [m for m in last if m.get("tool_calls")]
    assert calls and all(m["content"] == "" for m in calls)  # never null, never missing
    results = [m for m in last if m["role"] == "tool"]
    if family == "llama-cpp-python":
        # Several tools are forced by a grammar of their names; the system message then
        # lists them, since the prompt shows no tools without a tool_choice.
        assert ['name ::= "\\"get_order\\"" | "\\"advance\\""' in b["grammar"]
                for b in sent[:1]] == [True]
        assert all("grammar" in b for b in sent[:4]) and all("grammar" not in b
                                                           for b in sent[4:])
        assert "- get_order: Fetch an order" in sent[0]["messages"][0]["content"]
        # Its templates show no tool message: results come as user messages.
        assert results == []
        assert sum(m["content"].startswith("result of ") for m in last
                   if m["role"] == "user") == len(HAPPY) - 1
    else:
        assert len(results) == len(HAPPY) - 1
    # The llama.cpp family gets a generation time limit below the client's timeout.
    if family == "llama.cpp":
        assert {b["t_max_predict_ms"] for b in sent} == {48_000}
    else:
        assert all("t_max_predict_ms" not in b for b in sent)


def test_llama_cpp_python_gets_schemas_its_grammar_converter_takes(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop) -> None:
    # refund_item's order_id has a pattern, send_reply's text a maxLength of 2000: either
    # crashes llama-cpp-python when it builds the grammar of a forced call.
    with FakeOpenAI("llama-cpp-python") as server:
        server.script(*[call(name, args) for name, args in HAPPY[:5]],
                      call("refund_item", {"order_id": "not an id", "item_id": "kettle-1",
                                           "amount_paise": 35_000}),
                      *[call(name, args) for name, args in HAPPY[5:]])
        with OpenAIPolicy(spec, "m", base_url=server.base_url) as policy:
            run = Engine(spec, store, policy).start(GOAL, user="asha", run_id="g1")
        assert server.crashes == 0
        sent = [r.body for r in server.chat]
    assert run.status == "done"
    schemas = {t["function"]["name"]: t["function"]["parameters"]
               for b in sent for t in b["tools"]}
    text = json.dumps(schemas)
    assert '"pattern"' not in text and '"maxLength": 2000' not in text
    assert schemas["send_reply"]["properties"]["text"]["minLength"] == 1  # the rest stays
    # What the grammar no longer checks, the gate still does: the bad id was refused.
    refusals = [e for e in store.events("g1") if e.kind == "refusal"]
    assert [e.tool for e in refusals] == ["refund_item"]
    assert "order_id" in (refusals[0].reason or "")
    assert [r["amount_paise"] for r in shop.ledger()] == [35_000]


def test_the_fallback_keeps_the_tools_in_the_prompt(spec: WorkflowSpec,
                                                    store: MemoryStore) -> None:
    # Behind a proxy that hides GET /models the server is not recognised: "required"
    # is tried, fails (a 500), and the same request goes again with "auto", which
    # chatml-function-calling answers with the tools in the prompt. Leaving tool_choice
    # out instead would have taken them out of it.
    with FakeOpenAI("llama-cpp-python", hide_models=True) as server:
        server.script(call("advance", {"event": "details_complete"}))
        with OpenAIPolicy(spec, "m", base_url=server.base_url, max_retries=0) as policy:
            from fsm import Budgets

            Engine(spec, store, policy, budgets=Budgets(max_steps=1)).start(
                GOAL, user="asha", run_id="f1")
        assert server.family is not None
        seen = server.family.seen
    assert [r.body.get("tool_choice") for r in server.chat] == ["required", "auto"]
    assert [(s.choice, s.tools_shown) for s in seen] == [("auto", True)]
    assert store.messages("f1")[1]["tool"] == "advance"
