"""Real child processes for the durability tests: run ``fsm`` commands, kill them for real.

``fork_fsm(...)`` forks this (already warmed-up) interpreter and runs the ``fsm``
command line in the child exactly as the console script does (``fsm.cli.main``),
with its own environment, stdout and stderr. A fault point (``FSM_FAULT``) then
kills the child with SIGKILL and the parent sees a real ``-9``. Forking instead of
``exec``-ing a new interpreter keeps a crash matrix of dozens of processes within
seconds; ``run_fsm(...)`` starts the installed console script when the real thing
matters (entry point, imports, exit status).

The policies here are importable as ``crashkit:<name>`` by ``fsm run --policy``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsm.cli  # noqa: F401 - imported once here, so forked children start warm
import workflows.refund.__main__  # noqa: F401
from fsm.policy import View
from workflows.refund.clerk import clerk

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FSM_BIN = str(Path(sys.executable).with_name("fsm"))


@dataclass
class Exit:
    """How a child process ended."""

    #: Exit status, or ``-signal`` when a signal killed it (as ``subprocess`` reports).
    code: int
    stdout: str = ""
    stderr: str = ""

    @property
    def killed(self) -> bool:
        return self.code == -signal.SIGKILL


class Child:
    """A forked child running ``fn(*args)``; its exit status is what ``fn`` returns."""

    def __init__(self, fn: Callable[..., int], *args: Any, env: dict[str, str] | None = None):
        fd, self._out = tempfile.mkstemp(prefix="crashkit-out-")
        os.close(fd)
        fd, self._err = tempfile.mkstemp(prefix="crashkit-err-")
        os.close(fd)
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - runs in the child
            _child(fn, args, env or {}, self._out, self._err)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float = 60.0) -> Exit:
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.kill()
                os.waitpid(self.pid, 0)
                raise TimeoutError(f"child {self.pid} still running after {timeout}s")
            time.sleep(0.002)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        out, err = Path(self._out).read_text(), Path(self._err).read_text()
        os.remove(self._out)
        os.remove(self._err)
        return Exit(code, out, err)


def _child(fn: Callable[..., int], args: tuple[Any, ...], env: dict[str, str], out: str,
           err: str) -> None:  # pragma: no cover - runs in the child
    code = 70
    try:
        for name in ("FSM_FAULT", "FSM_DB", "FSM_SHOP_DB"):
            os.environ.pop(name, None)
        os.environ.update(env)
        for fd, path in ((1, out), (2, err)):
            target = os.open(path, os.O_WRONLY | os.O_TRUNC)
            os.dup2(target, fd)
            os.close(target)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        code = fn(*args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _cli(argv: Sequence[str]) -> int:
    from fsm.cli import main

    sys.argv = ["fsm", *argv]
    main()
    return 0


def _ledger(argv: Sequence[str]) -> int:
    from workflows.refund.__main__ import main

    return main(list(argv))


def start_fsm(*argv: str, env: dict[str, str] | None = None) -> Child:
    """Start ``fsm ARGV...`` in a forked child."""
    return Child(_cli, list(argv), env=env)


def fork_fsm(*argv: str, env: dict[str, str] | None = None) -> Exit:
    """Run ``fsm ARGV...`` in a forked child and wait for it."""
    return start_fsm(*argv, env=env).wait()


def fork_ledger(*argv: str) -> Exit:
    """Run ``python -m workflows.refund ARGV...`` in a forked child."""
    return Child(_ledger, list(argv)).wait()


def process_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a real ``fsm`` process: this one, with these tests importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("FSM_FAULT", "FSM_DB")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT)])
    env.update(extra or {})
    return env


def popen_fsm(*argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start the installed ``fsm`` console script as a new process."""
    return subprocess.Popen([FSM_BIN, *argv], env=process_env(env), cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_fsm(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> Exit:
    """Run the installed ``fsm`` console script as a new process and wait for it."""
    proc = popen_fsm(*argv, env=env)
    out, err = proc.communicate(timeout=timeout)
    return Exit(proc.returncode, out, err)


# -- policies for `fsm run --policy crashkit:<name>` --------------------------------------

def logged_clerk(view: View) -> Any:
    """The refund clerk, noting ``pid step`` of every call in ``$CRASHKIT_LOG``.

    With ``$CRASHKIT_HOLD`` set, each call first waits (up to a minute) until that file
    exists: the process stays in the middle of its run, holding it, for as long as a
    test needs another process to meet it there.
    """
    log = os.environ.get("CRASHKIT_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {view.step}\n")
    hold = os.environ.get("CRASHKIT_HOLD")
    deadline = time.monotonic() + 60
    while hold and not os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.01)
    return clerk(view)


def metered_clerk(view: View) -> Any:
    """The refund clerk, each call reported as a model's would be: 120 tokens in, 30 out,
    and 45 micro-units of cost."""
    from fsm import Usage

    return clerk(view).model_copy(update={"usage": Usage(input_tokens=120, output_tokens=30,
                                                         cost_micros=45)})


def policy_log(path: str | Path) -> list[tuple[int, int]]:
    """``(pid, step)`` of every policy call :func:`logged_clerk` noted, in order."""
    p = Path(path)
    if not p.exists():
        return []
    return [(int(a), int(b)) for a, b in (line.split() for line in p.read_text().splitlines())]


# -- a workflow with a write that is not retry-safe (`fsm run crashkit:TICKETS`) ----------------

def _tickets(*, approval: bool = False, retry_safe: bool = False) -> Any:
    from pydantic import BaseModel

    from fsm import ToolSpec, define_workflow

    class Ticket(BaseModel):
        title: str

    def file_ticket(args: Ticket, ctx: Any) -> dict[str, Any]:
        """Files a ticket in ``$CRASHKIT_TICKETS``; honours its key only if retry-safe."""
        path = Path(os.environ["CRASHKIT_TICKETS"])
        seen = path.read_text().split() if path.exists() else []
        if not (retry_safe and ctx.key in seen):
            with open(path, "a") as f:
                f.write(f"{ctx.key} {args.title}\n")
        return {"filed": args.title}

    return define_workflow(
        "tickets", transitions={"open": {"filed": "closed"}},
        tools_by_state={"open": ["file_ticket"]}, initial="open", terminal={"closed"},
        tools=[ToolSpec("file_ticket", file_ticket, "File a ticket.", Ticket, write=True,
                        retry_safe=retry_safe, approval=approval, emits=lambda r: "filed",
                        emits_events=("filed",))],
    )


TICKETS = _tickets()
#: The same write, waiting for a person's approval before it runs.
APPROVED_TICKETS = _tickets(approval=True)
APPROVED_SAFE_TICKETS = _tickets(approval=True, retry_safe=True)


def ticket_clerk(view: View) -> Any:
    from fsm import Action

    return Action(tool="file_ticket", args={"title": "printer on fire"})
