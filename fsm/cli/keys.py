"""``fsm keys``: the key that signs every commit's log head (:mod:`fsm.signing`)."""

from __future__ import annotations

import typer

from fsm.errors import SigningKeyError

from .app import DB_HELP, JSON_HELP, console, print_json
from .app import app as root
from .context import reader_for, store_for

app = typer.Typer(no_args_is_help=True,
                  help="The key that signs the log's heads: show its public keys, rotate it.")
root.add_typer(app, name="keys")

DbOpt = typer.Option(None, "--db", help=DB_HELP)
JsonOpt = typer.Option(False, "--json", help=JSON_HELP)


@app.command("show")
def show(db: str | None = DbOpt, as_json: bool = JsonOpt) -> None:
    """Print the public keys an auditor needs (``KEY_ID HEX``, the current one first)."""
    with reader_for(db) as store:
        keys = store.keys
    if not keys.public:
        raise SigningKeyError(f"no key file{f' at {keys.path!r}' if keys.path else ''}: "
                              "nothing to show")
    if as_json:
        print_json({"current": keys.current, "file": keys.path,
                    "public": {k: v.hex() for k, v in keys.public.items()}})
        return
    for line in keys.public_lines():
        console.print(line + ("  (current)" if line.startswith(f"{keys.current} ") else ""),
                      markup=False)


@app.command("rotate")
def rotate(db: str | None = DbOpt) -> None:
    """Make a new signing key; the old public keys stay in the key file, so rows signed
    before still verify. Every commit from now on is signed with the new key."""
    with store_for(db) as store:
        keys = store.keys.rotate()
    console.print(f"rotated: new key {keys.current} in {keys.path}; "
                  f"{len(keys.public) - 1} earlier public keys kept", markup=False)
    console.print(f"{keys.current} {keys.public[keys.current or ''].hex()}", markup=False)
