"""A small MCP server for the tests, on the official SDK's ``MCPServer``.

``lookup`` is marked ``readOnlyHint``; ``pay`` is not, and notes every call it gets, with
the idempotency key of its ``_meta``, in ``$TOY_LOG`` (one JSON line each); ``broken``
answers ``isError``. With ``TOY_VARIANT=changed`` the server's tools differ: ``lookup``
says something else and ``refund`` joins them. Run it as ``python mcp_toy.py``.
"""

from __future__ import annotations

import json
import os

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import ToolAnnotations

CHANGED = os.environ.get("TOY_VARIANT") == "changed"
server = MCPServer("toy")


def _note(tool: str, args: dict[str, object], ctx: Context) -> None:
    meta = dict(ctx.request_context.meta or {})
    with open(os.environ["TOY_LOG"], "a") as f:
        f.write(json.dumps({"tool": tool, "args": args,
                            "key": meta.get("fsm/idempotency-key")}) + "\n")


@server.tool(description="The balance of an account, in cents."
             + (" Now with more words." if CHANGED else ""),
             annotations=ToolAnnotations(read_only_hint=True))
def lookup(account: str, ctx: Context) -> dict[str, object]:
    _note("lookup", {"account": account}, ctx)
    return {"account": account, "due": 2400}


@server.tool(description="Pay an account back, in cents.")
def pay(account: str, cents: int, ctx: Context) -> dict[str, object]:
    _note("pay", {"account": account, "cents": cents}, ctx)
    return {"paid": cents}


@server.tool(description="Always fails.", annotations=ToolAnnotations(read_only_hint=True))
def broken(ctx: Context) -> str:
    raise ValueError("the ledger is closed today")


if CHANGED:
    @server.tool(description="Refund an account.")
    def refund(account: str) -> str:
        return "refunded"


if __name__ == "__main__":
    server.run("stdio")
