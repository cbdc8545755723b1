"""The ``fsm`` command line. Each command group lives in its own module."""

from __future__ import annotations

import sys

import fsm.cli.web  # noqa: F401 - fsm serve, fsm users
from fsm.cli import auditor, fleet, inspect, ops  # noqa: F401 - they register their commands
from fsm.cli.app import app, err_console
from fsm.errors import FSMError


def main() -> None:
    """Entry point: a framework error becomes one clear line on stderr and exit status 1."""
    try:
        app()
    except FSMError as exc:
        lines = str(exc).splitlines() or [type(exc).__name__]
        err_console.print(f"error: {lines[0]}", markup=False)
        for line in lines[1:]:
            err_console.print(line, markup=False)
        sys.exit(1)


__all__ = ["app", "main"]
