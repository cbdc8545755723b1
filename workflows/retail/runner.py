"""Running a scripted conversation through the retail desk, and reading its log.

:class:`Bench` holds one store and the retail database in the same database (a SQLite
file or PostgreSQL), the way runs of one database share it. :meth:`Bench.run` resets the
retail tables to the data they were filled from, starts a conversation, drives it with a
:class:`~workflows.retail.replay.Desk` and answers with a customer until it ends, and
returns a :class:`Report` read from the run's hash-chained log: its refusals, the tools'
errors, the steps, the time, and the bytes the run's rows take in the store.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fsm import Engine, WorkflowSpec
from fsm.definition.tools import Resources
from fsm.errors import ReplyRefused
from fsm.records import Event, RunState
from fsm.store import open_store
from fsm.store.base import Store
from fsm.testing import talk
from workflows.retail.database import RetailDatabase
from workflows.retail.replay import Customer, Desk, Move
from workflows.retail.workflow import build

#: The store's tables that hold a run's rows, for the bytes a run takes.
RUN_TABLES = ("runs", "messages", "views", "events", "effects", "replies", "reply_tokens")


@dataclass
class Refusal:
    """One refusal in a run's log, or a tool's error: what was refused, and why."""

    step: int
    what: str
    reason: str
    #: ``tables`` (not allowed in the state), ``guard``, ``confirmation`` (not the call
    #: the customer confirmed), ``check`` (a tool's gate check on the run's facts),
    #: ``repeat``, ``reply``, ``row check`` (the tool refused on the rows it reads: the
    #: policy checked again in its transaction), or ``tool`` (the tool raised: one of
    #: τ²-bench's own checks).
    source: str


@dataclass
class Report:
    """What one conversation did, from its log."""

    run: RunState
    events: list[Event]
    steps: int
    wall_s: float
    cpu_s: float
    bytes: int
    desk: Desk
    refusals: list[Refusal] = field(default_factory=list)

    def at(self, step: int) -> list[Refusal]:
        return [r for r in self.refusals if r.step == step]

    def tools_after(self, tool: str) -> list[str]:
        """The tools that ran after ``tool`` in the log."""
        names = [e.tool for e in self.events if e.kind == "tool" and e.tool]
        return names[names.index(tool) + 1:] if tool in names else []


def _source(ev: Event) -> str:
    reason = ev.reason or ""
    if ev.kind == "tool":
        return "tool"
    if "guard not met" in reason or "guard (" in reason:
        return "guard"
    if "repeated call" in reason:
        return "repeat"
    if "not allowed in state" in reason or "not offered in state" in reason:
        return "tables"
    if "confirm" in reason:
        return "confirmation"
    if ev.tool is None and ev.event is None:
        return "reply"
    return "check"


def refusals(events: Sequence[Event]) -> list[Refusal]:
    """Every refusal of the log, and every error a tool raised."""
    out = []
    for ev in events:
        if ev.kind == "refusal":
            out.append(Refusal(ev.step, ev.tool or ev.event or "reply", ev.reason or "",
                               _source(ev)))
        elif ev.kind == "tool" and (ev.detail or {}).get("error"):
            error = str(ev.detail["error"])
            source = "row check" if error.startswith("PolicyRefusal") else "tool"
            out.append(Refusal(ev.step, ev.tool or "", error, source))
    return out


class Bench:
    """One store and one retail database, in the database at ``location``."""

    def __init__(self, location: str, spec: WorkflowSpec | None = None, *,
                 synchronous: str | None = None) -> None:
        self.spec = spec or build()
        self.store: Store = open_store(location, synchronous=synchronous)
        self.resources = Resources(self.spec.resources, self.store.location)
        try:
            self.db: RetailDatabase = self.resources.get("retail")
        except BaseException:
            self.store.close()
            raise
        self._n = 0
        self._reader: tuple[Any, str] | None = None

    def close(self) -> None:
        if self._reader is not None:
            self._reader[0].close()
        self.resources.close()
        self.store.close()

    def __enter__(self) -> Bench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reset(self) -> None:
        self.db.reset()

    def expected_hash(self, writes: Sequence[tuple[str, dict[str, Any]]]) -> str:
        """The hash of a fresh database (of the bench's data) with ``writes`` (tool,
        arguments) applied."""
        from workflows.retail.database import MemoryRetail

        db = MemoryRetail(data=self.db.data)
        for tool, args in writes:
            db.call(tool, args)
        return db.hash()

    def run(self, goal: str, moves: Sequence[Move], customer: Customer, *,
            run_id: str | None = None, reset: bool = True, finish: bool = True) -> Report:
        """Drive one conversation to its end (see the module's docstring)."""
        if reset:
            self.reset()
        self._n += 1
        desk = Desk(moves, finish=finish)
        wall, cpu = time.perf_counter(), time.process_time()
        with Engine(self.spec, self.store, desk, resources=self.resources) as engine:
            conversation = engine.start_conversation(goal, user="customer",
                                                     run_id=run_id or f"r{self._n}")
            run = talk(engine, conversation.run, customer, max_turns=100)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        events = self.store.events(run.run_id)
        return Report(run, events, run.step, wall, cpu, self.stored_bytes(run.run_id),
                      desk, refusals(events))

    def reply_refused(self, run_id: str, text: str = "yes") -> str | None:
        """The one line a reply to ``run_id`` is refused with now (``None``: accepted)."""
        with Engine(self.spec, self.store, None, resources=self.resources) as engine:
            try:
                engine.accept_reply(run_id, text)
            except ReplyRefused as exc:
                return str(exc)
        return None

    def stored_bytes(self, run_id: str) -> int:
        """The bytes of the run's rows in the store (text as UTF-8, numbers as 8), read on
        a connection of the bench's own."""
        if self._reader is None:
            self._reader = _reader(self.store.location)
        conn, mark = self._reader
        total = 0
        for table in RUN_TABLES:
            rows = conn.execute(f"SELECT * FROM {table} WHERE run_id = {mark}",
                                (run_id,)).fetchall()
            total += sum(_size(v) for row in rows for v in row)
        return total


def _reader(location: str) -> tuple[Any, str]:
    """A read-only connection to the store's database, and its placeholder."""
    if location.startswith(("postgresql://", "postgres://")):
        import psycopg

        return psycopg.connect(location, autocommit=True), "%s"
    path = location.removeprefix("sqlite:///")
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False), "?"


def _size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return 8


class McpBench(Bench):
    """The bench over the retail MCP server: the desk of :mod:`workflows.retail.mcp`, its
    runs' state in ``state_dir``, each run under its own state key."""

    def __init__(self, location: str, state_dir: str, spec: WorkflowSpec | None = None) -> None:
        from workflows.retail.mcp import ServerDatabase, build_over_mcp

        self.spec = spec or build_over_mcp(state_dir)
        self.store = open_store(location)
        self.resources = Resources({}, self.store.location)
        self.source = self.spec.tool_servers[0].source
        self.db = ServerDatabase(state_dir, self.source)  # type: ignore[assignment]
        self._n = 0
        self._reader = None

    def close(self) -> None:
        super().close()
        self.source.close()

    def run(self, goal: str, moves: Sequence[Move], customer: Customer, *,
            run_id: str | None = None, reset: bool = True, finish: bool = True) -> Report:
        from workflows.retail.mcp import _Mapped, profile_first

        given, index = profile_first(list(moves))
        run_id = run_id or f"r{self._n + 1}"
        self.db.use(run_id)  # type: ignore[attr-defined]
        report = super().run(goal, given, customer, run_id=run_id, reset=False,
                             finish=finish)
        report.desk = _Mapped(report.desk, index)  # type: ignore[assignment]
        return report

    def expected_hash(self, writes: Sequence[tuple[str, dict[str, Any]]]) -> str:
        """As τ²-bench's tools leave it: the server keeps τ²-bench's item price."""
        from workflows.retail.database import MemoryRetail

        db = MemoryRetail(upstream_price_bug=True)
        for tool, args in writes:
            db.call(tool, args)
        return db.hash()
