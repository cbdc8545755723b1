"""The ``fsm`` command line. Each command group lives in its own module.

Every failure ends in one ``error:`` line on stderr and an exit status from
:mod:`fsm.cli.exits`; ``--help`` keeps typer's full layout.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer

import fsm.cli.conversation  # noqa: F401 - fsm reply
import fsm.cli.deploys  # noqa: F401 - fsm definitions, fsm migrate, fsm check-history
import fsm.cli.desk  # noqa: F401 - fsm handovers
import fsm.cli.evidence  # noqa: F401 - fsm export, fsm prune
import fsm.cli.keys  # noqa: F401 - fsm keys
import fsm.cli.mcp  # noqa: F401 - fsm mcp serve
import fsm.cli.sandbox  # noqa: F401 - fsm fork, fsm replay, fsm eval
import fsm.cli.shadow  # noqa: F401 - fsm shadow
import fsm.cli.web  # noqa: F401 - fsm serve, fsm users
from fsm.cli import auditor, exits, fleet, inspect, nouns, ops  # noqa: F401 - they register
from fsm.cli.app import app, err_console, forget_settings
from fsm.cli.context import UsageError
from fsm.errors import (
    ApprovalRefused,
    ForkRefused,
    FSMError,
    HandoverRefused,
    ReplyRefused,
    SuiteError,
    WorkflowDefinitionError,
    WorkflowNotFound,
)
from fsm.observability import hooks, telemetry
from fsm.observability.faults import NAME as FAULT_VARIABLE

try:  # typer >= 0.20 carries its own copy of click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer, real click
    from click import exceptions as click_errors  # type: ignore[no-redef]


def _say(first: str, *more: str) -> None:
    err_console.print(f"error: {first}", markup=False)
    for line in more:
        err_console.print(line, markup=False)


def _undecodable(args: Sequence[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python keeps such bytes as surrogates)."""
    for i, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return f"argument {i} is not valid UTF-8: '{shown}'; give text in UTF-8"
    return None


def _usage_line(exc: click_errors.UsageError) -> str:
    message = " ".join(exc.format_message().split())
    ctx = exc.ctx
    if ctx is None:
        return message
    return f"{ctx.command_path}: {message} (see '{ctx.command_path} --help')"


def _fault_injector() -> hooks.Hooks | None:
    """The fault points crash tests name (``FSM_FAULT``), read once, here at the entry
    point. The testing package is loaded only when the variable is set: it brings the
    stores and the definitions, which ``fsm --help`` does without."""
    if not os.environ.get(FAULT_VARIABLE, "").strip():
        return None
    from fsm.testing import faults

    return faults.from_environ(os.environ)


def run(args: Sequence[str] | None = None) -> int:
    """Run one ``fsm`` command line; the exit status."""
    argv = list(sys.argv[1:] if args is None else args)
    bad = _undecodable(argv)
    if bad is not None:
        _say(bad)
        return exits.USAGE
    forget_settings()  # each command line reads the environment once, when it needs to
    # Traces, when the standard OTEL_* variables ask for them: read once, here.
    try:
        tracing = telemetry.from_environ(os.environ, say=_say)
    except FSMError as exc:
        _say(str(exc))
        return exits.USAGE
    try:
        injector = _fault_injector()
    except FSMError as exc:
        _say(str(exc))
        return exits.USAGE
    try:
        with hooks.scope(*(h for h in (tracing, injector) if h is not None)):
            return _run(argv)
    finally:
        if tracing is not None:
            tracing.provider.shutdown()  # sends what is left


def _run(argv: list[str]) -> int:
    try:
        code = app(args=argv, prog_name="fsm", standalone_mode=False)
    except click_errors.NoArgsIsHelpError:
        app(args=[*argv, "--help"], prog_name="fsm", standalone_mode=False)
        return exits.USAGE
    except click_errors.UsageError as exc:
        _say(_usage_line(exc))
        return exits.USAGE
    except click_errors.ClickException as exc:
        _say(" ".join(exc.format_message().split()))
        return exits.ERROR
    except typer.Abort:
        _say("interrupted")
        return exits.INTERRUPTED
    except FSMError as exc:
        lines = str(exc).splitlines() or [type(exc).__name__]
        _say(*lines)
        return exits.USAGE if isinstance(exc, _NOTHING_DONE) else exits.ERROR
    finally:
        forget_settings()
    return code if isinstance(code, int) else exits.OK


#: Errors that refuse an argument before anything is written: "usage, nothing was done".
_NOTHING_DONE = (UsageError, WorkflowNotFound, ApprovalRefused, ReplyRefused,
                 HandoverRefused, WorkflowDefinitionError, ForkRefused, SuiteError)


class _PipeSafe:
    """Standard output that a reader may close early (``fsm runs | head -1``): what no one
    reads any more is dropped, and the command's own exit status stands."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def _closed(self) -> None:
        # Later writes, and the flush at exit, go nowhere instead of failing again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            self._closed()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            self._closed()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _standard_streams() -> None:
    """A closed standard stream (``fsm runs >&-``) reads as empty and writes nowhere; an
    open standard output survives a reader that goes away."""
    if sys.stdin is None:
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - for the whole process
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
    sys.stdout = _PipeSafe(sys.stdout)  # type: ignore[assignment]


def main() -> None:
    """Entry point of the ``fsm`` script."""
    _standard_streams()
    sys.exit(run())


__all__ = ["app", "main", "run"]
