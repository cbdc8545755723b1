"""``fsm serve``: the inbox under uvicorn, with the notification outbox delivered beside it."""

from __future__ import annotations

import os
import sys
import time

import uvicorn

from fsm.errors import ServeError
from fsm.store.base import Store
from fsm.web.app import Inbox, create_app, new_secret
from fsm.web.auth import SESSION_SECONDS, Sessions
from fsm.web.notify import Notifier


def clock() -> float:
    """Wall-clock time, shifted by ``FSM_CLOCK_OFFSET`` seconds, as the CLI reads it."""
    raw = os.environ.get("FSM_CLOCK_OFFSET") or "0"
    try:
        return time.time() + float(raw)
    except ValueError:
        raise ServeError(f"FSM_CLOCK_OFFSET must be a number of seconds, not {raw!r}") from None


def build(store: Store, *, host: str, port: int, public_url: str | None = None) -> tuple[
        Inbox, Notifier]:
    clock()  # a bad offset fails now, not on the first request
    public = (public_url or f"http://{host}:{port}").rstrip("/")
    secret = os.environ.get("FSM_WEB_SECRET") or new_secret()
    raw = os.environ.get("FSM_SESSION_SECONDS") or str(SESSION_SECONDS)
    try:
        max_age = int(raw)
    except ValueError:
        raise ServeError(f"FSM_SESSION_SECONDS must be a whole number of seconds, not {raw!r}"
                         ) from None
    sessions = Sessions(secret, max_age=max_age, secure=public.startswith("https://"),
                        clock=clock)
    inbox = Inbox(store=store, sessions=sessions, clock=clock)
    notifier = Notifier(store, public_url=public, workflows=inbox.workflows, clock=clock,
                        base_delay=float(os.environ.get("FSM_NOTIFY_BACKOFF") or 2.0))
    inbox.notes.append(
        f"Notifications go to {', '.join(notifier.urls)}." if notifier.urls else
        "No webhook configured (FSM_NOTIFY_URL): notifications are kept, not sent.")
    return inbox, notifier


def where(store: Store) -> str:
    """The database a store opened, as people name it (a URL without its password)."""
    return str(getattr(store, "name", None) or getattr(store, "path", None)
               or type(store).__name__)


def serve(store: Store, *, host: str = "127.0.0.1", port: int = 8000,
          public_url: str | None = None) -> None:
    inbox, notifier = build(store, host=host, port=port, public_url=public_url)
    thread, stop = notifier.start()
    print(f"fsm inbox on http://{host}:{port} (database {where(store)})", file=sys.stderr,
          flush=True)
    try:
        # The client address is the connection's: X-Forwarded-For and Forwarded headers
        # are not trusted, so no client names the address its sign-ins count against.
        uvicorn.run(create_app(inbox), host=host, port=port, log_level="warning",
                    access_log=False, proxy_headers=False)
    finally:
        stop.set()
        thread.join(timeout=5)
        store.close()
