"""The approval inbox from the command line: ``fsm serve`` and ``fsm users``."""

from __future__ import annotations

import errno
import getpass
import os
import sys

import typer

from fsm.errors import UsageError

from .app import MAX_INT, app, console, fail, print_table
from .context import store_for

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


@users.command("add")
def users_add(
    name: str = typer.Argument(..., help="the account name (the reviewer recorded)"),
    role: str = typer.Option(..., "--role", help="approver or auditor"),
    limit: int | None = typer.Option(
        None, "--limit", min=0, max=MAX_INT, help="approvers: the largest amount they may "
        "release, in the workflow's minor units (paise); default: no limit"),
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

    password = read_password(password_stdin, password_env)
    with store_for(db) as store:
        a = add_account(store, name, role, password, limit)
    shown = "no limit" if a.limit is None else f"limit {a.limit}"
    console.print(f"added {a.name} ({a.role}{', ' + shown if a.role == 'approver' else ''})",
                  markup=False)


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
def users_list(db: str | None = typer.Option(None, "--db", help=DB_URL_HELP)) -> None:
    """List the accounts (never their password hashes)."""
    with store_for(db) as store:
        rows = [[a.name, a.role, "" if a.limit is None else a.limit,
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
            serve(store, host=host, port=port, public_url=public_url)
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
