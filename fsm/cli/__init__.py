"""The ``fsm`` command line. Each command group lives in its own module.

Every failure ends in one ``error:`` line on stderr and an exit status from
:mod:`fsm.cli.exits`; ``--help`` keeps typer's full layout.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer

import fsm.cli.web  # noqa: F401 - fsm serve, fsm users
from fsm.cli import auditor, exits, fleet, inspect, ops  # noqa: F401 - they register their commands
from fsm.cli.app import app, err_console
from fsm.cli.context import UsageError
from fsm.errors import FSMError

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


def run(args: Sequence[str] | None = None) -> int:
    """Run one ``fsm`` command line; the exit status."""
    argv = list(sys.argv[1:] if args is None else args)
    bad = _undecodable(argv)
    if bad is not None:
        _say(bad)
        return exits.USAGE
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
        return exits.USAGE if isinstance(exc, UsageError) else exits.ERROR
    return code if isinstance(code, int) else exits.OK


def main() -> None:
    """Entry point of the ``fsm`` script."""
    sys.exit(run())


__all__ = ["app", "main", "run"]
