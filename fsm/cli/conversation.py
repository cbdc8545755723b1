"""``fsm reply``: give a run its customer's reply, then let the run go on."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from fsm.errors import UsageError

from . import exits
from .app import DB_HELP, JSON_HELP, app
from .context import engine_for_run, store_for
from .ops import finish, interruptible

#: How much of standard input or a file is read: more than any reply may hold.
_READ_LIMIT = 4 * 4000 + 4

TEXT_HELP = ("what the customer says; - reads it from standard input, @FILE from a file "
             "(@@text for a reply that starts with @)")


def read_reply(text: str) -> str:
    """The reply as given, from standard input (``-``) or from a file (``@FILE``); one
    final newline of a file or of standard input is dropped. Whether it may be kept (not
    empty, not too long, no NUL) is the engine's to say."""
    if text == "-":
        raw, where = sys.stdin.buffer.read(_READ_LIMIT), "on standard input"
    elif text.startswith("@") and not text.startswith("@@"):
        path = Path(text[1:])
        try:
            with path.open("rb") as f:
                raw = f.read(_READ_LIMIT)
        except OSError as exc:
            raise UsageError(f"cannot read the reply from {str(path)!r}: "
                             f"{exc.strerror or exc}") from None
        where = f"in {str(path)!r}"
    else:
        return text.removeprefix("@") if text.startswith("@@") else text
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"the reply {where} is not valid UTF-8 ({exc}); nothing was kept") \
            from None
    return decoded.removesuffix("\n")


@app.command("reply", epilog=exits.HELP)
def reply_cmd(
    run_id: str = typer.Argument(..., help="the run that talks with its customer"),
    text: str = typer.Argument(..., help=TEXT_HELP),
    no_drive: bool = typer.Option(False, "--no-drive", help="only keep the reply (and let a "
                                  "waiting run read it); a worker or fsm resume continues"),
    db: str | None = typer.Option(None, "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Give a run its customer's reply. A run that waits for its customer reads it at once
    and goes on with the policy it started with; a run in the middle of a step (or one
    whose process died) reads it before its next step. Refused, with nothing kept: an empty
    reply, one over 4000 characters, a NUL, text that is not UTF-8, an unknown run, a
    finished run, a run that is not talking with its customer."""
    from fsm.errors import ReplyRefused, RunNotFound

    said = read_reply(text)
    with store_for(db) as store:
        try:
            engine, _ = engine_for_run(store, run_id)
        except RunNotFound:
            raise ReplyRefused("unknown_run", f"run {run_id!r} not found; nothing was kept",
                               run_id=run_id) from None
        with interruptible(store, run_id):
            kept = engine.accept_reply(run_id, said)
            run = engine.deliver(run_id, drive=not no_drive)
            read = _read(store, run_id, kept.seq)
            finish(store, run, as_json, {"reply": kept.seq, "read": read}, [_kept(
                kept.seq, read, run.status, run_id)])


def _read(store: Any, run_id: str, seq: int) -> bool:
    return any(r.seq == seq and r.read_step is not None for r in store.replies(run_id))


def _kept(seq: int, read: bool, status: str, run_id: str) -> str:
    if read:
        return f"reply    {seq}, read by the run"
    return (f"reply    {seq}, kept: the run ({status}) reads it before its next step "
            f"(another process drives it now, or fsm resume {run_id} continues it)")
