"""Under a worker, a workflow's resources are opened on one of its run threads and used
from any of them; stopping the worker closes them from its own thread. A resource that
cannot be closed there (a SQLite connection opened on another thread) is one line of the
worker's log, not a traceback, and the worker stops."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from fleetkit import run_until

from fsm import ADVANCE, Action, Engine, SQLiteStore, ToolContext, ToolSpec, define_workflow
from fsm.worker import Worker, WorkerConfig

THREADS: set[str] = set()


def _note(args: Any, ctx: ToolContext) -> dict[str, Any]:
    THREADS.add(threading.current_thread().name)
    notes = ctx.resource("notes")
    with notes.lock:
        return {"rows": notes.count()}


class Notes:
    """A resource as a newcomer writes one: a SQLite connection opened where it is first
    used (``check_same_thread`` left on), and a lock, since runs call it from several
    threads."""

    def __init__(self, location: str) -> None:
        self.lock = threading.Lock()
        self.con = sqlite3.connect(":memory:", check_same_thread=False)
        self.closer = sqlite3.connect(":memory:")  # refuses to close from another thread

    def count(self) -> int:
        return int(self.con.execute("SELECT 1").fetchone()[0])

    def close(self) -> None:
        self.con.close()
        self.closer.close()


SPEC = define_workflow(
    "noting", transitions={"noting": {"noted": "done"}}, tools_by_state={"noting": ["note"]},
    initial="noting", terminal={"done"}, resources={"notes": Notes},
    tools=[ToolSpec("note", _note, "Write a note.")])


def noter(view: Any) -> Action:
    if any(m.get("tool") == "note" and "result" in m for m in view.messages):
        return Action(tool=ADVANCE, args={"event": "noted"})
    return Action(tool="note", args={})


def test_a_resource_that_cannot_be_closed_at_shutdown_is_one_line_not_a_traceback(
        tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    store = SQLiteStore(db)
    engine = Engine(SPEC, store, noter)
    for i in range(4):
        engine.start("note it", run_id=f"n{i}", drive=False,
                     meta={"workflow_ref": "test_worker_threads:SPEC",
                           "policy": "test_worker_threads:noter"})
    lines: list[str] = []
    worker = Worker(store, WorkerConfig(poll_seconds=0.05, concurrency=2), log=lines.append)
    try:
        raised = run_until(worker, lambda: all(
            store.load_run(f"n{i}").status == "done" for i in range(4)), timeout=60)
        assert raised == []
        assert [store.load_run(f"n{i}").status for i in range(4)] == ["done"] * 4
    finally:
        store.close()
    assert all(name.startswith("fsm-run") for name in THREADS)
    closing = [line for line in lines if "could not close resource 'notes'" in line]
    assert len(closing) == 1 and "ProgrammingError" in closing[0]
    assert "\n" not in closing[0] and lines[-1].endswith(": stopped")
