"""The shared typer application and the helpers every command uses."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from fsm.errors import UsageError
from fsm.location import default_db_path

from .exits import HELP as EXIT_HELP

# Plain help and usage errors (rich_markup_mode=None): typer's rich help formatter imports
# rich's Markdown and markdown-it, which alone take longer than ``fsm --help`` may.
app = typer.Typer(
    name="fsm", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    rich_markup_mode=None, help="Run, inspect, approve and audit fsm workflow runs.",
    epilog=EXIT_HELP,
)


class _LazyConsole:
    """A rich ``Console`` made on first use, so that commands that print nothing through it
    (``fsm --help``) do not import rich."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return getattr(self._console, name)


# Piped output (tests, logs, CI) gets wide tables instead of 80 folded columns.
_WIDTH = None if sys.stdout is not None and sys.stdout.isatty() else 200
console = _LazyConsole(highlight=False, soft_wrap=True, width=_WIDTH)
err_console = _LazyConsole(stderr=True, highlight=False, soft_wrap=True, width=_WIDTH)


@app.callback()
def _root() -> None:
    """Run, inspect, approve and audit fsm workflow runs."""


DB_HELP = ("database: a SQLite file or sqlite:///path, or postgresql://user@host/dbname "
           "(default: $FSM_DB, else ./fsm.db)")
JSON_HELP = "print JSON instead of a table"
#: The largest number SQLite stores (a signed 64-bit integer).
MAX_INT = 2**63 - 1


def db_path(db: str | None) -> str:
    """Resolve --db, then FSM_DB, then ./fsm.db; an empty --db is refused."""
    if db is not None and not db.strip():
        raise UsageError("--db must not be empty; leave it out for $FSM_DB, else ./fsm.db")
    return default_db_path(db)


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str))


def print_table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*["" if v is None else str(v) for v in r])
    console.print(table)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one clear line on stderr; return the exit to raise."""
    err_console.print(f"error: {message}", markup=False)
    return typer.Exit(code)


@app.command("workflows")
def workflows_cmd(as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """List the registered workflows."""
    from fsm.registry import registered

    names = registered()
    if as_json:
        print_json(names)
    else:
        print_table(None, ["workflow", "defined in"], [[k, v] for k, v in sorted(names.items())])
