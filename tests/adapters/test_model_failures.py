"""What a run does when the model server fails: unreachable or overloaded (stop as
``model_unavailable``, resume later) versus a request it cannot serve (stop as
``model_refused``), a prompt too large for the context (compact first), the output cap,
timed-out attempts, and a long error body (one line of reason, the whole body logged).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from fake_openai import FakeOpenAI, Reply, call, completion, error
from refund_scripts import small_refund

from fsm import Budgets, Engine, MemoryStore, WorkflowSpec
from fsm.records import verify_chain
from fsm.runtime.compaction import Compactor
from workflows.refund import Shop

GOAL = "Order A-1001: the kettle arrived broken, please refund it"
HAPPY = small_refund()

pytestmark = pytest.mark.usefixtures("no_model_env")


def events(store: MemoryStore, run_id: str, kind: str) -> list[Any]:
    return [e for e in store.events(run_id) if e.kind == kind]


def overflow(n_ctx: int = 2048, asked: int = 2100) -> Reply:
    """llama-cpp-python's answer to a prompt larger than its context."""
    return error(400, f"This model's maximum context length is {n_ctx} tokens. However, you "
                 f"requested {asked} tokens ({asked - 5} in the messages, 5 in the "
                 "completion). Please reduce the length of the messages or completion.")


def test_a_permanent_4xx_stops_the_run_as_refused_and_a_resume_can_continue_it(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any, sleeps: list[float]) -> None:
    server.script(call(*HAPPY[0]), error(422, "messages: unsupported value"),
                  error(422, "messages: unsupported value"))
    engine = Engine(spec, store, make_policy())
    run = engine.start(GOAL, user="asha", run_id="p1")
    # The first attempt may have been the forced choice's fault: asked once more with
    # "auto"; the same 422 again is the request's, not the choice's. No waiting.
    assert run.status == "model_refused" and run.state == "collecting"
    assert run.reason == (f"model refused the request: 'gpt-4o-mini' at {server.base_url} "
                          "refused the request after 2 attempt(s): HTTP 422: messages: "
                          "unsupported value")
    assert sleeps == [] and len(server.chat) == 3
    stop = events(store, "p1", "stop")[-1]
    assert stop.detail["status"] == "model_refused"
    assert json.loads(stop.detail["error"])["error"]["message"] == "messages: unsupported value"
    # After the operator fixed what was refused, the run resumes where it stopped.
    server.script(*[call(name, args) for name, args in HAPPY[1:]])
    run = engine.resume("p1")
    assert run.status == "done" and [r["amount_paise"] for r in shop.ledger()] == [35_000]
    assert events(store, "p1", "resume")[0].detail == {"after": "model_refused",
                                                       "rows": events(store, "p1", "resume")[
                                                           0].detail["rows"]}
    verify_chain(store.events("p1"))


def test_an_unreachable_server_is_unavailable_not_refused(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    # 500s that come with a server that does not answer otherwise either: unavailable.
    dead = FakeOpenAI()
    url = dead.base_url
    dead._server.server_close()
    run = Engine(spec, store, make_policy(base_url=url, max_retries=1)).start(
        GOAL, user="asha", run_id="u1")
    assert run.status == "model_unavailable"
    server.script(error(503, "overloaded"), error(503, "overloaded"))
    run = Engine(spec, store, make_policy(max_retries=1)).start(GOAL, user="asha", run_id="u2")
    assert run.status == "model_unavailable"
    assert run.reason is not None and run.reason.endswith(
        "failed after 2 attempt(s): HTTP 503: overloaded")


def test_a_context_overflow_compacts_the_view_and_asks_again(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any) -> None:
    # A model that talks at length before it calls a tool fills a small context.
    chatter = completion({"content": "Let me think about this refund carefully. " * 60})
    server.script(chatter, chatter, chatter, overflow(),
                  *[call(name, args) for name, args in HAPPY])
    compactor = Compactor(threshold_chars=10**9, min_keep=2)  # never by size alone
    run = Engine(spec, store, make_policy(), compactor=compactor).start(
        GOAL, user="asha", run_id="o1")
    assert run.status == "done", run.reason
    assert [r["amount_paise"] for r in shop.ledger()] == [35_000]
    (compaction,) = events(store, "o1", "compaction")
    assert compaction.step == 4 and compaction.detail["overflow"] is True
    too_big, retried = server.chat[3].raw, server.chat[4].raw
    assert len(retried) < len(too_big) // 2
    assert json.loads(retried)["messages"][2]["content"].startswith("Summary of transcript")
    # Both calls of step 4 are logged; only the answered one used up a step.
    step4 = [e.detail.get("step_used", True) for e in events(store, "o1", "policy")
             if e.step == 4]
    assert step4 == [False, True] and run.used.steps == 3 + len(HAPPY)


def test_a_context_overflow_without_compaction_is_its_own_reason(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    server.script(overflow())
    run = Engine(spec, store, make_policy()).start(GOAL, user="asha", run_id="o2")
    assert run.status == "model_refused"
    assert run.reason is not None and "cannot take the prompt: HTTP 400: This model's " \
        "maximum context length is 2048 tokens" in run.reason
    assert len(server.chat) == 1  # not asked again: the same prompt would not fit either


def test_a_long_server_error_is_one_line_of_reason_and_whole_in_the_log(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    # llama-cpp-python's validation errors list every message type of its union.
    message = "7 validation errors:\n" + "\n".join(
        f"  {{'type': 'literal_error', 'loc': ('body', 'messages', {i}), 'msg': 'Input "
        f"should be ...', 'input': {'x' * 1100!r}}}" for i in range(7))
    assert len(message) > 8000
    server.script(error(400, message), error(400, message))
    run = Engine(spec, store, make_policy()).start(GOAL, user="asha", run_id="e1")
    assert run.status == "model_refused"
    assert run.reason is not None and "\n" not in run.reason and len(run.reason) <= 400
    assert "HTTP 400: 7 validation errors: (+" in run.reason
    assert run.reason.endswith("characters in the log)")
    stop = events(store, "e1", "stop")[-1]
    assert json.loads(stop.detail["error"])["error"]["message"] == message
    fallback = events(store, "e1", "fallback")[0]
    assert json.loads(fallback.detail["error"])["error"]["message"] == message


def test_every_reply_is_capped_and_the_cap_can_be_set(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    server.script(call(*HAPPY[0]), call(*HAPPY[0]), call(*HAPPY[0]))
    for run_id, kw in (("c1", {}), ("c2", {"max_output_tokens": 64}),
                       ("c3", {"max_output_tokens": None})):
        Engine(spec, store, make_policy(**kw), budgets=Budgets(max_steps=1)).start(
            GOAL, user="asha", run_id=run_id)
    assert [r.body.get("max_tokens") for r in server.chat] == [1024, 64, None]
    assert events(store, "c2", "policy")[0].detail["request"]["max_output_tokens"] == 64
    # A cap given as a request option is the one sent.
    server.script(call(*HAPPY[0]))
    Engine(spec, store, make_policy(options={"max_completion_tokens": 10}),
           budgets=Budgets(max_steps=1)).start(GOAL, user="asha", run_id="c4")
    assert "max_tokens" not in server.chat[-1].body
    assert server.chat[-1].body["max_completion_tokens"] == 10


def test_a_reply_cut_off_at_the_cap_is_an_observation(
        spec: WorkflowSpec, store: MemoryStore, shop: Shop, server: FakeOpenAI,
        make_policy: Any) -> None:
    runaway = completion({"content": "I will now explain the refund policy in detail. " * 40},
                         usage=(300, 64), finish_reason="length")
    server.script(runaway, *[call(name, args) for name, args in HAPPY])
    run = Engine(spec, store, make_policy(max_output_tokens=64)).start(
        GOAL, user="asha", run_id="l1")
    assert run.status == "done"
    (refusal,) = events(store, "l1", "refusal")
    assert refusal.step == 1 and refusal.reason is not None
    assert refusal.reason.startswith("the reply was cut off at the output cap")
    assert events(store, "l1", "policy")[0].tokens == 364  # what it cost still counts


def test_a_timed_out_attempt_is_counted_and_said_to_be_unreported(
        spec: WorkflowSpec, store: MemoryStore, server: FakeOpenAI, make_policy: Any) -> None:
    server.script(dataclasses.replace(call(*HAPPY[0]), delay=4.0), call(*HAPPY[0]))
    Engine(spec, store, make_policy(timeout=1.5), budgets=Budgets(max_steps=1)).start(
        GOAL, user="asha", run_id="t1")
    logged = events(store, "t1", "policy")[0]
    assert logged.detail["calls"] == 2 and logged.detail["request"]["timed_out"] == 1
    server.script(dataclasses.replace(call(*HAPPY[0]), delay=1.0),
                  dataclasses.replace(call(*HAPPY[0]), delay=1.0))
    run = Engine(spec, store, make_policy(timeout=0.2, max_retries=1),
                 budgets=Budgets(max_steps=1)).start(GOAL, user="asha", run_id="t2")
    assert run.status == "model_unavailable"
    logged = events(store, "t2", "policy")[0]
    # The server never said what the timed-out attempts used: the log says so.
    assert (logged.detail["calls"], logged.detail["usage_reported"]) == (2, False)
    assert logged.detail["request"]["timed_out"] == 2


def test_llama_server_is_given_a_time_limit_so_it_reports_what_it_used(
        spec: WorkflowSpec, store: MemoryStore) -> None:
    with FakeOpenAI("llama.cpp") as server:
        server.script(call(*HAPPY[0]))
        from fsm.adapters import OpenAIPolicy

        with OpenAIPolicy(spec, "m", base_url=server.base_url, timeout=30) as policy:
            Engine(spec, store, policy, budgets=Budgets(max_steps=1)).start(
                GOAL, user="asha", run_id="s1")
        (sent,) = server.chat
    # It stops generating at 80% of the client's timeout and answers with its usage.
    assert sent.body["t_max_predict_ms"] == 24_000
