"""The approval inbox from the command line: ``fsm serve`` and ``fsm users``."""

from __future__ import annotations

import errno
import getpass
import os
import sys
from typing import TYPE_CHECKING

import typer

from fsm.errors import AmountError, FSMError, UsageError

from .app import app, console, fail, print_table, settings
from .context import store_for

if TYPE_CHECKING:
    from fsm.definition.presentation import Presentation

users = typer.Typer(no_args_is_help=True, help="Manage the accounts of the approval inbox.")
app.add_typer(users, name="users")

DB_URL_HELP = ("database: a SQLite file, sqlite:///PATH or postgresql://... "
               "(default: $FSM_DB, else ./fsm.db)")
#: The roles of an inbox account (``fsm.web.accounts``, which ``import fsm.cli`` does not
#: load).
ROLES = ("approver", "auditor")
PASSWORD_STDIN_HELP = "read the password from the first line of standard input"
PASSWORD_ENV_HELP = "read the password from this environment variable"


def _web() -> None:
    """Fail clearly when the web extra is not installed."""
    try:
        import argon2  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"the inbox needs the web extra (pip install 'fsm[web]'): {exc}") from None



def read_password(stdin: bool, env: str | None) -> str:
    """The new password, never echoed: stdin, an environment variable, or a prompt."""
    if stdin and env:
        raise UsageError("give either --password-stdin or --password-env, not both")
    if env:
        value = os.environ.get(env)
        if not value:
            raise UsageError(f"environment variable {env} is not set or empty")
        return value
    if stdin:
        line = sys.stdin.readline().rstrip("\r\n")
        if not line:
            raise UsageError("no password on standard input")
        return line
    if not sys.stdin.isatty():
        raise UsageError("no terminal to ask for the password: use --password-stdin or "
                         "--password-env NAME")
    first = getpass.getpass("password: ")
    if first != getpass.getpass("again: "):
        raise UsageError("the two passwords differ")
    return first


LIMIT_HELP = ("approvers: the largest amount they may release, in the workflow's currency "
              "in major units (15,000 or 15000.50: fifteen thousand of the currency, not of "
              "its minor unit); default: no limit")
WORKFLOW_HELP = ("the workflow whose currency --limit is in (default: the one currency "
                 "the registered workflows name)")


def _currency_of(workflow: str | None) -> Presentation:
    """The presentation whose currency a release limit is typed in: ``--workflow``'s, else
    the one currency the registered workflows name (whole numbers if none names one)."""
    from fsm.definition.presentation import PLAIN
    from fsm.definition.registry import load_workflow, registered

    if workflow is not None:
        return _typed_in(load_workflow(workflow).presentation, workflow)
    found, unnamed = {}, []
    for name in sorted(registered()):
        try:
            shown = load_workflow(name).presentation
        except FSMError:
            continue
        if shown.currency is not None:
            found[name] = shown
        elif shown.money is not None:
            unnamed.append(name)
    if unnamed:
        raise UsageError(f"--limit is an amount in a workflow's currency, and workflow "
                         f"{', '.join(unnamed)} shows money (money=) without naming its "
                         "currency: give --workflow")
    if len({p.currency for p in found.values()}) > 1:
        names = ", ".join(f"{n} ({p.unit.unit})" for n, p in found.items())
        raise UsageError(f"--limit is an amount in a workflow's currency, and several are "
                         f"registered: give --workflow (one of {names})")
    return next(iter(found.values()), PLAIN)


def _typed_in(shown: Presentation, workflow: str) -> Presentation:
    """``shown``, when a limit can be typed and shown in its currency: a workflow that
    writes its own money (``money=``) without a ``currency=`` gives no major unit, and a
    limit typed as its help says (major units) would be read a hundred times off."""
    if shown.currency is None and shown.money is not None:
        raise UsageError(f"workflow {workflow!r} shows amounts with its own money= but names "
                         "no currency, so a release limit cannot be typed or shown in it: "
                         "give its Presentation a currency= (e.g. Currency(symbol=\"$\", "
                         "digits=2, minor=\"cents\", major=\"dollars\"))")
    return shown


def parse_limit(text: str | None, workflow: str | None, what: str = "--limit") -> int | None:
    """A release limit as minor units: an amount in the workflow's currency, or ``none``."""
    if text is None or text.strip().lower() == "none":
        return None
    try:
        return _currency_of(workflow).parse_money(text, what)
    except AmountError as exc:
        raise UsageError(f"{exc}; nothing was changed") from None


def limit_text(limit: int | None, workflow: str | None) -> str:
    """A release limit as people read it (``no limit`` for none)."""
    if limit is None:
        return "no limit"
    try:
        return _currency_of(workflow).show_money(limit)
    except UsageError:
        return f"{limit} (minor units)"


@users.command("add")
def users_add(
    name: str = typer.Argument(..., help="the account name (the reviewer recorded)"),
    role: str = typer.Option(..., "--role", help="approver or auditor"),
    limit: str | None = typer.Option(None, "--limit", help=LIMIT_HELP),
    workflow: str | None = typer.Option(None, "--workflow", help=WORKFLOW_HELP),
    password_stdin: bool = typer.Option(False, "--password-stdin", help=PASSWORD_STDIN_HELP),
    password_env: str | None = typer.Option(None, "--password-env", help=PASSWORD_ENV_HELP),
    db: str | None = typer.Option(None, "--db", help=DB_URL_HELP),
) -> None:
    """Create an account."""
    if role not in ROLES:
        raise typer.BadParameter(f"unknown role {role!r} (allowed: {', '.join(ROLES)})",
                                 param_hint="--role")
    _web()
    from fsm.web.accounts import add_account

    minor = parse_limit(limit, workflow)
    password = read_password(password_stdin, password_env)
    with store_for(db) as store:
        a = add_account(store, name, role, password, minor)
    shown = "no limit" if a.limit is None else f"limit {limit_text(a.limit, workflow)}"
    console.print(f"added {a.name} ({a.role}{', ' + shown if a.role == 'approver' else ''})",
                  markup=False)


@users.command("limit")
def users_limit(
    name: str = typer.Argument(..., help="the approver"),
    limit: str = typer.Argument(..., help="the new release limit, in the workflow's "
                                "currency in major units (e.g. 15,000), or none"),
    workflow: str | None = typer.Option(None, "--workflow", help=WORKFLOW_HELP),
    db: str | None = typer.Option(None, "--db", help=DB_URL_HELP),
) -> None:
    """Set an approver's release limit (its sessions end, as on any change)."""
    _web()
    from fsm.web.accounts import set_limit

    minor = parse_limit(limit, workflow, "the limit")
    with store_for(db) as store:
        set_limit(store, name, minor)
    console.print(f"release limit of {name}: {limit_text(minor, workflow)}", markup=False)


@users.command("passwd")
def users_passwd(
    name: str = typer.Argument(..., help="the account"),
    password_stdin: bool = typer.Option(False, "--password-stdin", help=PASSWORD_STDIN_HELP),
    password_env: str | None = typer.Option(None, "--password-env", help=PASSWORD_ENV_HELP),
    db: str | None = typer.Option(None, "--db", help=DB_URL_HELP),
) -> None:
    """Set an account's password."""
    _web()
    from fsm.web.accounts import set_password

    password = read_password(password_stdin, password_env)
    with store_for(db) as store:
        set_password(store, name, password)
    console.print(f"password of {name} changed", markup=False)


@users.command("disable")
def users_disable(
    name: str = typer.Argument(..., help="the account"),
    enable: bool = typer.Option(False, "--enable", help="enable it again instead"),
    db: str | None = typer.Option(None, "--db", help=DB_URL_HELP),
) -> None:
    """Disable an account: it can no longer sign in, and its sessions stop working."""
    _web()
    from fsm.web.accounts import set_disabled

    with store_for(db) as store:
        set_disabled(store, name, not enable)
    console.print(f"{name} {'enabled' if enable else 'disabled'}", markup=False)


@users.command("list")
def users_list(
    workflow: str | None = typer.Option(None, "--workflow", help="show limits in this "
                                        "workflow's currency"),
    db: str | None = typer.Option(None, "--db", help=DB_URL_HELP),
) -> None:
    """List the accounts (never their password hashes)."""
    with store_for(db) as store:
        rows = [[a.name, a.role, "" if a.role != "approver" else limit_text(a.limit, workflow),
                 "disabled" if a.disabled else "active"] for a in store.accounts()]
    print_table(None, ["name", "role", "limit", "state"], rows)


@app.command("serve")
def serve_cmd(
    db: str | None = typer.Option(None, "--db", help=DB_URL_HELP),
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="port to listen on"),
    public_url: str | None = typer.Option(
        None, "--public-url", help="the inbox's address in notifications (default: "
        "http://HOST:PORT); an https:// address also marks cookies Secure"),
) -> None:
    """Serve the approval inbox; also delivers notifications to $FSM_NOTIFY_URL."""
    _web()
    from fsm.web.server import serve

    _can_listen(host, port)
    with store_for(db) as store:
        try:
            serve(store, host=host, port=port, public_url=public_url, settings=settings())
        except SystemExit as exc:
            # uvicorn's own exit when it cannot start (it printed why): not a run's status.
            if exc.code in (0, None):
                raise
            raise fail(f"the inbox could not start on {host}:{port} (see the line above)"
                       ) from None


def _can_listen(host: str, port: int) -> None:
    """Refuse an address this machine cannot listen on, before anything starts."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise UsageError(f"--host {host!r} is not an address of this machine "
                         f"({getattr(exc, 'strerror', None) or exc})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            hint = " (another program uses the port; give --port)" \
                if exc.errno == errno.EADDRINUSE else ""
            raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None
