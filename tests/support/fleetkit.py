"""Real worker processes for the fleet tests, and the policies they drive runs with.

``Fleet`` starts ``fsm worker`` console-script processes against one database, keeps
each one's output in a file, and kills, stops or resumes them with real signals. The
policies are importable by a worker as ``fleetkit:<name>`` (``PYTHONPATH`` has tests/).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fsm.policy import View
from workflows.refund.clerk import clerk

HERE = Path(__file__).resolve().parent
FSM_BIN = str(Path(sys.executable).with_name("fsm"))


# -- policies ------------------------------------------------------------------------------

def marked_clerk(view: View) -> Any:
    """The clerk; in state ``$FLEET_SLOW_STATE`` it first touches ``$FLEET_MARKER`` and
    sleeps ``$FLEET_SLOW_SECONDS``, so a test can catch the worker mid-step."""
    if view.state == os.environ.get("FLEET_SLOW_STATE"):
        Path(os.environ["FLEET_MARKER"]).write_text(view.run_id)
        time.sleep(float(os.environ.get("FLEET_SLOW_SECONDS", "1")))
    return clerk(view)


def sleepy_clerk(view: View) -> Any:
    """The clerk after ``$FLEET_SLEEP`` seconds (default 0.05): a model's latency."""
    time.sleep(float(os.environ.get("FLEET_SLEEP", "0.05")))
    return clerk(view)


async def marked_clerk_async(view: View) -> Any:
    """:func:`marked_clerk` for ``fsm worker --async``: the step's wait is awaited."""
    if view.state == os.environ.get("FLEET_SLOW_STATE"):
        Path(os.environ["FLEET_MARKER"]).write_text(view.run_id)
        await asyncio.sleep(float(os.environ.get("FLEET_SLOW_SECONDS", "1")))
    return clerk(view)


async def sleepy_clerk_async(view: View) -> Any:
    """:func:`sleepy_clerk` for ``fsm worker --async``."""
    await asyncio.sleep(float(os.environ.get("FLEET_SLEEP", "0.05")))
    return clerk(view)


def driving(kind: str, policy: str) -> list[str]:
    """A worker's arguments for ``kind`` (``threads``, ``async``, or ``async-loop``: with
    ``--store-on-loop``) and the fleetkit policy ``policy`` (its ``_async`` twin for an
    async worker)."""
    if kind == "async":
        return ["--async", "--policy", f"fleetkit:{policy}_async"]
    if kind == "async-loop":
        return ["--async", "--store-on-loop", "--policy", f"fleetkit:{policy}_async"]
    return ["--policy", f"fleetkit:{policy}"]


# -- a worker in this process ----------------------------------------------------------------

def run_until(worker: Any, until: Callable[[], Any], timeout: float = 30.0
              ) -> list[BaseException]:
    """Run ``worker`` (a :class:`~fsm.worker.Worker` or an async one) in a thread of this
    process until ``until()`` holds, or ``timeout`` seconds (which only bound a failure);
    then stop it and wait for it to end. What its ``run()`` raised, if anything."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as exc:  # noqa: BLE001 - given back to the test
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not until() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        worker.stop()
        thread.join(60)
    assert not thread.is_alive(), "the worker did not stop"
    return raised


# -- processes -----------------------------------------------------------------------------

def wait_for(what: str, cond: Callable[[], Any], timeout: float = 20.0,
             every: float = 0.05) -> Any:
    """Poll ``cond`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)


class Fleet:
    """Worker processes on database ``url``; ``close()`` kills whatever is left."""

    def __init__(self, url: str, logs: Path, **env: str) -> None:
        self.url = url
        self.logs = logs
        self.env = {**os.environ, "FSM_DB": url, "PYTHONPATH": str(HERE), **env}
        self.env.pop("FSM_FAULT", None)
        self.procs: list[subprocess.Popen[bytes]] = []
        self._files: dict[int, Path] = {}

    def start(self, *args: str, **env: str) -> subprocess.Popen[bytes]:
        n = len(self.procs)
        path = self.logs / f"worker-{n}.log"
        with open(path, "wb") as out:
            proc = subprocess.Popen([FSM_BIN, "worker", "--db", self.url, *args],
                                    env={**self.env, **env}, stdout=out,
                                    stderr=subprocess.STDOUT)
        self.procs.append(proc)
        self._files[proc.pid] = path
        return proc

    def log(self, proc: subprocess.Popen[bytes]) -> str:
        return self._files[proc.pid].read_text(errors="replace")

    def all_logs(self) -> str:
        return "".join(self.log(p) for p in self.procs)

    def started(self, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
        wait_for(f"worker {proc.pid} to start", lambda: "started" in self.log(proc)
                 or proc.poll() is not None, timeout)
        assert proc.poll() is None, f"worker exited early:\n{self.log(proc)}"

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout)

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
            p.wait()
