"""``fsm run --model`` against a local OpenAI-compatible server, ``fsm show --request``,
and ``--timeout`` for slow models."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli_inproc import Cli
from fake_openai import FakeOpenAI, call, error
from refund_scripts import large_refund, small_refund

from fsm import SQLiteStore
from workflows.refund.shop import Shop

HAPPY = small_refund()


def fsm(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "FSM_FAULT"))}
    return subprocess.run([sys.executable, "-m", "fsm", *args, "--db", str(db)],
                          capture_output=True, text=True, env=env, timeout=60)


def ledger(db: Path) -> list[int]:
    """The amounts the shop in ``db`` paid out."""
    shop = Shop(str(db))
    try:
        return [r["amount_paise"] for r in shop.ledger()]
    finally:
        shop._db.close()


def test_run_with_a_model_and_show_the_exact_requests(tmp_path: Path, server: FakeOpenAI,
                                                      cli: Cli) -> None:
    db = tmp_path / "m.db"
    server.script(*[call(name, args, usage=(1000, 50)) for name, args in HAPPY])
    proc = fsm(db, "run", "refund", "Order A-1001: the kettle arrived broken", "--user", "asha",
               "--run-id", "m1", "--model", "gpt-4o-mini", "--base-url", server.base_url,
               "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "done" and out["tokens"] == 7 * 1050
    assert out["cost_micros"] > 0
    assert ledger(db) == [35_000]
    sent = [r.raw for r in server.chat]
    assert len(sent) == len(HAPPY)
    for step, raw in enumerate(sent, start=1):  # what the process sent, rebuilt here
        shown = cli("show", "m1", "--step", str(step), "--request", "--db", str(db))
        assert shown.code == 0, shown.err
        assert shown.out.rstrip("\n").encode() == raw, f"step {step} differs"
    history = json.loads(cli("history", "m1", "--json", "--db", str(db)).out)
    policy = [e for e in history if e["kind"] == "policy"]
    assert all(e["tokens"] == 1050 and e["cost_micros"] > 0 for e in policy)


def test_show_request_needs_a_model_for_a_rule_based_run(tmp_path: Path, cli: Cli) -> None:
    db = str(tmp_path / "c.db")
    assert cli("run", "refund", "Order A-1001: broken", "--user", "asha",
               "--run-id", "c1", "--db", db).code == 0
    shown = cli("show", "c1", "--request", "--db", db)
    assert shown.code == 1 and "give --model NAME" in shown.err
    body = json.loads(cli("show", "c1", "--step", "6", "--request", "--model", "m",
                          "--db", db).out)
    assert body["model"] == "m"
    assert [t["function"]["name"] for t in body["tools"]] == ["refund_item"]


def policy_calls(db: Path, run_id: str) -> list[int]:
    """``calls`` (attempts) of each policy step in the run's log."""
    store = SQLiteStore(str(db))
    try:
        return [e.detail["calls"] for e in store.events(run_id) if e.kind == "policy"]
    finally:
        store.close()


def test_timeout_for_a_slow_model_is_used_by_run_and_by_approve(tmp_path: Path,
                                                                server: FakeOpenAI) -> None:
    db = tmp_path / "t.db"
    steps = large_refund()
    slow = [dataclasses.replace(call(*steps[0]), delay=4.0), *[call(*s) for s in steps[:5]]]
    server.script(*slow)
    proc = fsm(db, "run", "refund", "Order A-1002: the headphones broke", "--user", "ravi",
               "--run-id", "t1", "--model", "gpt-4o-mini", "--base-url", server.base_url,
               "--timeout", "1.5", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "awaiting_approval"
    # The first reply came after 4 s: given up on at 1.5 s, asked again.
    assert policy_calls(db, "t1") == [2, 1, 1, 1, 1]

    server.script(dataclasses.replace(call(*steps[5]), delay=4.0),
                  *[call(*s) for s in steps[5:]])
    proc = fsm(db, "approve", "t1", "--reviewer", "priya", "--note", "ok", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "done"
    assert policy_calls(db, "t1") == [2, 1, 1, 1, 1, 2, 1]  # the recorded --timeout held
    assert ledger(db) == [180_000]


def test_bad_timeouts_are_refused(tmp_path: Path, server: FakeOpenAI) -> None:
    db = tmp_path / "b.db"
    proc = fsm(db, "run", "refund", "Order A-1001: broken", "--model", "m", "--base-url",
               server.base_url, "--timeout", "0")
    assert proc.returncode == 2  # a usage error: nothing was done
    assert proc.stderr.strip() == ("error: --timeout must be a number of seconds above 0 and "
                                   "at most 86400, not 0")
    proc = fsm(db, "run", "refund", "Order A-1001: broken", "--timeout", "5")
    assert proc.returncode == 2  # a usage error
    assert proc.stderr.strip() == "error: --timeout applies to --model only"
    assert server.chat == []


# -- the policy a run remembers ------------------------------------------------------------

def events_of(db: Path, run_id: str) -> list[Any]:
    store = SQLiteStore(str(db))
    try:
        return store.events(run_id)
    finally:
        store.close()


def test_a_resumed_run_keeps_its_model_and_a_change_is_explicit_and_logged(
        tmp_path: Path, cli: Cli) -> None:
    db = tmp_path / "k.db"
    with FakeOpenAI() as first, FakeOpenAI() as second:
        first.script(*[call(*s) for s in HAPPY[:2]], error(401, "key revoked"))
        proc = fsm(db, "run", "refund", "Order A-1001: the kettle arrived broken", "--user",
                   "asha", "--run-id", "k1", "--model", "small-1", "--base-url",
                   first.base_url, "--max-output-tokens", "128")
        assert proc.returncode == 7, proc.stderr  # model refused the request
        # A plain resume continues with the model, endpoint and cap the run started with.
        first.script(call(*HAPPY[2]), error(401, "key revoked"))
        assert fsm(db, "resume", "k1").returncode == 7
        assert [r.body["model"] for r in first.chat] == ["small-1"] * 5
        assert {r.body["max_tokens"] for r in first.chat} == {128}
        assert [e for e in events_of(db, "k1") if e.kind == "policy_set"] == []
        # A change of model is explicit, and logged.
        second.script(call(*HAPPY[3]), error(401, "key revoked"))
        assert fsm(db, "resume", "k1", "--model", "small-2", "--base-url",
                   second.base_url).returncode == 7
        (changed,) = [e for e in events_of(db, "k1") if e.kind == "policy_set"]
        assert changed.detail["policy"] == "model:small-2"
        assert changed.detail["base_url"] == second.base_url
        assert changed.detail["previous"]["policy"] == "model:small-1"
        assert changed.detail["previous"]["settings"]["max_output_tokens"] == 128
        # ... and from then on a plain resume continues with the new one.
        second.script(*[call(*s) for s in HAPPY[4:]])
        proc = fsm(db, "resume", "k1", "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["status"] == "done"
        assert len(first.chat) == 5 and [r.body["model"] for r in second.chat] == \
            ["small-2"] * 5
        answered = [first.chat[i].raw for i in (0, 1, 3)] + \
            [second.chat[i].raw for i in (0, 2, 3, 4)]
    assert ledger(db) == [35_000]
    # `fsm show --request` works for every step, each with the model it was sent to.
    steps = [e.step for e in events_of(db, "k1")
             if e.kind == "policy" and e.detail.get("step_used", True)]
    assert len(steps) == len(answered)
    for step, raw in zip(steps, answered, strict=True):
        shown = cli("show", "k1", "--step", str(step), "--request", "--db", str(db))
        assert shown.code == 0, shown.err
        assert shown.out.rstrip("\n").encode() == raw, f"step {step} differs"


def test_show_request_prints_what_was_sent_after_a_fallback(tmp_path: Path,
                                                            cli: Cli) -> None:
    db = tmp_path / "f.db"
    with FakeOpenAI() as server:
        server.mimic_llama_cpp()  # a 500 on "required"
        server.script(*[call(*s) for s in HAPPY])
        proc = fsm(db, "run", "refund", "Order A-1001: broken", "--user", "asha", "--run-id",
                   "f1", "--model", "m", "--base-url", server.base_url)
        assert proc.returncode == 0, proc.stderr
        forced, retried = server.chat[0], server.chat[1]
    assert forced.body["tool_choice"] == "required" and retried.body["tool_choice"] == "auto"
    shown = cli("show", "f1", "--step", "1", "--request", "--db", str(db))
    assert shown.out.rstrip("\n").encode() == retried.raw  # the bytes of the answered try
    history = json.loads(cli("history", "f1", "--json", "--db", str(db)).out)
    fallback = next(e for e in history if e["kind"] == "fallback")
    assert (fallback["step"], fallback["detail"]["from"], fallback["detail"]["to"]) == (
        1, "required", "auto")
    assert fallback["reason"].startswith("HTTP 500: Internal Server Error")


def test_a_restarted_server_is_not_crashed_again_by_a_resumed_run(tmp_path: Path) -> None:
    # llama-cpp-python behind a proxy that hides GET /models, without a chat format:
    # forcing refund_item by name builds a grammar from its order_id pattern, and the
    # server crashes. The run stops; the server is restarted; the resumed run, in a new
    # process, does not force that way again.
    db = tmp_path / "c.db"
    with FakeOpenAI("llama-cpp-python", hide_models=True, chat_format="llama-2") as server:
        server.script(*[call(*s) for s in HAPPY[:5]])
        proc = fsm(db, "run", "refund", "Order A-1001: broken", "--user", "asha", "--run-id",
                   "c1", "--model", "gemma", "--base-url", server.base_url)
        assert proc.returncode == 6, proc.stderr  # the crashed server is unreachable
        assert server.crashes == 1
        crashed_on = server.chat[-1].body["tool_choice"]
        server.restart()
        server.script(*[call(*s) for s in HAPPY[5:]])
        proc = fsm(db, "resume", "c1", "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["status"] == "done"
        assert server.crashes == 1
        resumed = [r.body.get("tool_choice") for r in server.chat[6:]]
    assert crashed_on == {"type": "function", "function": {"name": "refund_item"}}
    assert resumed == ["required", "required"]
    learnt = [e.detail for e in events_of(db, "c1") if e.kind == "fallback"]
    assert [(d["from"], d["learnt"], d["dropped"]) for d in learnt] == [
        ("function", True, True)]
    assert ledger(db) == [35_000]


def test_no_force_is_recorded_with_the_run_and_kept_on_resume(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    with FakeOpenAI() as server:
        server.script(call(*HAPPY[0]), error(401, "key revoked"))
        assert fsm(db, "run", "refund", "Order A-1001: broken", "--user", "asha",
                   "--run-id", "n1", "--model", "m", "--base-url", server.base_url,
                   "--no-force").returncode == 7
        server.script(*[call(*s) for s in HAPPY[1:]])
        assert fsm(db, "resume", "n1").returncode == 0
        assert {r.body["tool_choice"] for r in server.chat} == {"auto"}
    start = events_of(db, "n1")[0]
    assert start.detail["settings"]["force"] is False
    assert "key" not in json.dumps(start.detail).lower().replace("max_", "")


def test_model_flags_need_a_model(tmp_path: Path) -> None:
    db = tmp_path / "u.db"
    proc = fsm(db, "run", "refund", "Order A-1001: broken", "--max-output-tokens", "10")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --max-output-tokens applies to --model only"
    proc = fsm(db, "run", "refund", "Order A-1001: broken", "--model", "m", "--base-url",
               "http://127.0.0.1:9/v1", "--server", "nope")
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: --server must be one of auto, openai,")
