"""``fsm mcp serve``: a real ``fsm`` process serving a workflow's runs over stdio, driven by
the official ``mcp`` client. The runs are the store's: the CLI approves them and
``fsm audit`` checks them."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from crashkit import process_env, run_fsm
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from paths import ROOT

from fsm import SQLiteStore
from fsm.auditor.audit import audit

FSM = str(Path(sys.executable).with_name("fsm"))
LIST_CHANGED = "notifications/tools/list_changed"

Host = Callable[[ClientSession, list[str]], Awaitable[Any]]


def host(workflow: str, db: str, script: Host, *, elicit: Any = None) -> Any:
    """Run ``fsm mcp serve WORKFLOW --db DB`` and drive it with ``script(session, seen)``;
    ``seen`` collects the methods of the notifications the server sent."""
    seen: list[str] = []

    async def note(message: Any) -> None:
        method = getattr(message, "method", None)
        if method:
            seen.append(method)

    async def main() -> Any:
        params = StdioServerParameters(command=FSM, args=["mcp", "serve", workflow, "--db", db],
                                       env=process_env(), cwd=str(ROOT))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, message_handler=note,
                                     elicitation_callback=elicit) as session:
                await session.initialize()
                return await script(session, seen)

    return anyio.run(main)


async def names(session: ClientSession) -> list[str]:
    return [t.name for t in (await session.list_tools()).tools]


async def call(session: ClientSession, name: str, **args: Any) -> tuple[str, bool]:
    result = await session.call_tool(name, args)
    return result.content[0].text, result.is_error  # type: ignore[union-attr]


def test_the_tool_list_follows_the_state_and_an_out_of_state_call_is_refused(
        tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")

    async def script(s: ClientSession, seen: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"before": await names(s)}
        await call(s, "start", goal="Order A-1001: the kettle arrived broken", user="asha",
                   run_id="m1")
        out["collecting"] = await names(s)
        out["refused"] = await call(s, "refund_item", order_id="A-1001", item_id="K",
                                    amount_paise=5)
        out["order"] = await call(s, "get_order", order_id="A-1001")
        out["notes_before"] = seen.count(LIST_CHANGED)
        out["moved"] = await call(s, "advance", event="details_complete")
        out["notes_after"] = seen.count(LIST_CHANGED)
        out["verifying"] = await names(s)
        return out

    out = host("refund", db, script)
    assert out["before"] == ["start", "continue"]
    assert out["collecting"] == ["start", "continue", "get_order", "advance"]
    assert out["refused"] == ("tool 'refund_item' is not allowed in state 'collecting' "
                              "(allowed: get_order)", True)
    assert json.loads(out["order"][0].splitlines()[0])["order_id"] == "A-1001"
    assert out["notes_after"] == out["notes_before"] + 1
    assert "state verifying" in out["moved"][0]
    assert out["verifying"] == ["start", "continue", "get_order", "get_policy", "advance"]
    store = SQLiteStore(db)
    refusal = [e for e in store.events("m1") if e.kind == "refusal"]
    assert [e.tool for e in refusal] == ["refund_item"]
    assert not [e for e in store.events("m1") if e.kind == "tool" and e.tool == "refund_item"]
    assert audit(store, "m1").ok


def test_an_approval_waits_and_a_later_call_continues_the_same_run(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    order = "A-1002"

    async def decide(s: ClientSession, seen: list[str]) -> tuple[str, bool]:
        await call(s, "start", goal=f"Order {order}: my headphones stopped working",
                   user="ravi", run_id="big")
        found = json.loads((await call(s, "get_order", order_id=order))[0].splitlines()[0])
        await call(s, "advance", event="details_complete")
        policy = json.loads((await call(s, "get_policy", order_id=order))[0].splitlines()[0])
        await call(s, "advance", event="verified")
        return await call(s, "advance", event="large_refund", item_id=found["item_id"],
                          amount_paise=policy["refundable_paise"])

    said, error = host("refund", db, decide)
    assert not error and "run big: state awaiting_approval" in said
    assert "waits for a person's approval" in said and "continue with run_id big" in said
    approved = run_fsm("approve", "big", "--reviewer", "priya", "--no-drive", "--db", db)
    assert approved.code == 0, approved

    async def finish(s: ClientSession, seen: list[str]) -> dict[str, Any]:
        return {"continued": await call(s, "continue", run_id="big"),
                "tools": await names(s)}

    out = host("refund", db, finish)
    assert "run big: state refunding" in out["continued"][0]
    assert "refund_item" in out["tools"]
    assert SQLiteStore(db).load_run("big").state == "refunding"


def test_a_customer_confirmed_write_is_asked_through_elicitation(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> Any:
        import mcp_types as types

        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    cancel = {"tool": "cancel_pending_order",
              "args": {"order_id": "#W5918442", "reason": "no longer needed"}}

    async def script(s: ClientSession, seen: list[str]) -> dict[str, Any]:
        await call(s, "start", goal="Please cancel my order", run_id="c1")
        await call(s, "find_user_id_by_email", email="sofia.rossi2645@example.com")
        await call(s, "get_order_details", order_id="#W5918442")
        out = {"proposed": await call(s, "advance", event="propose", **cancel)}
        out["writing"] = await names(s)
        out["cancelled"] = await call(s, "cancel_pending_order", **cancel["args"])
        return out

    out = host("retail", db, script, elicit=elicit)
    assert len(asked) == 1 and "Cancel order #W5918442 (reason: " in asked[0]
    assert out["proposed"][0].startswith("the customer confirmed")
    assert "cancel_pending_order" in out["writing"]
    cancelled, error = out["cancelled"]
    assert not error and json.loads(cancelled.splitlines()[0])["status"] == "cancelled"
    assert audit(SQLiteStore(db), "c1").ok


def test_without_elicitation_the_result_says_what_to_confirm(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    cancel = {"tool": "cancel_pending_order",
              "args": {"order_id": "#W5918442", "reason": "no longer needed"}}

    async def script(s: ClientSession, seen: list[str]) -> dict[str, Any]:
        await call(s, "start", goal="Please cancel my order", run_id="c2")
        await call(s, "find_user_id_by_email", email="sofia.rossi2645@example.com")
        await call(s, "get_order_details", order_id="#W5918442")
        out = {"proposed": await call(s, "advance", event="propose", **cancel),
               "waiting": await names(s)}
        out["replied"] = await call(s, "reply", text="yes")
        out["writing"] = await names(s)
        return out

    out = host("retail", db, script)
    proposed, error = out["proposed"]
    assert not error and "the customer must confirm:" in proposed
    assert "call reply with their answer" in proposed
    assert out["waiting"] == ["start", "continue", "reply"]
    assert "state writing" in out["replied"][0]
    assert "cancel_pending_order" in out["writing"]


def test_over_http_on_loopback_fsms_own_client_drives_a_run(tmp_path: Path) -> None:
    """``fsm mcp serve --http PORT`` and :func:`fsm.adapters.mcp.http_server`: the same
    run over streamable HTTP."""
    import socket
    import subprocess
    import time

    from fsm.adapters.mcp import McpServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = str(tmp_path / "runs.db")
    proc = subprocess.Popen([FSM, "mcp", "serve", "refund", "--db", db, "--http", str(port)],
                            env=process_env(), cwd=str(ROOT), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.05)
        client = McpServer("desk", url=f"http://127.0.0.1:{port}/mcp")
        assert [t.name for t in client.list_tools()] == ["start", "continue"]
        started = client.call("start", {"goal": "Order A-1001: the kettle arrived broken",
                                        "user": "asha", "run_id": "h1"})
        assert not started.is_error and "run h1: state collecting" in started.text
        assert "get_order" in [t.name for t in client.list_tools()]
        refused = client.call("send_reply", {"text": "done"})
        assert refused.is_error and "'send_reply' is not allowed in state 'collecting'" in \
            refused.text
        client.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert SQLiteStore(db).load_run("h1").state == "collecting"


def test_a_url_off_loopback_is_refused() -> None:
    import pytest

    from fsm.adapters.mcp import McpServer
    from fsm.errors import UsageError

    with pytest.raises(UsageError, match="is not on loopback"):
        McpServer("far", url="http://example.com/mcp")
