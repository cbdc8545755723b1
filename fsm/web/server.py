"""``fsm serve``: the inbox under uvicorn, with the notification outbox delivered beside it."""

from __future__ import annotations

import logging
import sys

import uvicorn

from fsm.settings import Settings
from fsm.store.base import Store
from fsm.web.app import Inbox, create_app, new_secret
from fsm.web.auth import Sessions
from fsm.web.decisions import Workflows
from fsm.web.notify import Notifier
from fsm.web.pages import Diagrams


def build(store: Store, *, host: str, port: int, public_url: str | None = None,
          settings: Settings | None = None) -> tuple[Inbox, Notifier]:
    """The inbox and its notification loop, as ``settings`` configure them (the shifted
    clock, the session key and lifetime, the webhooks, their secret and backoff)."""
    s = settings or Settings.defaults()
    public = (public_url or f"http://{host}:{port}").rstrip("/")
    sessions = Sessions(s.web_secret or new_secret(), max_age=s.session_seconds,
                        secure=public.startswith("https://"), clock=s.clock)
    inbox = Inbox(store=store, sessions=sessions, clock=s.clock,
                  workflows=Workflows(settings=s), diagrams=Diagrams(dot_timeout=s.dot_timeout))
    notifier = Notifier(store, urls=list(s.notify_url), secret=s.notify_secret,
                        public_url=public, workflows=inbox.workflows, clock=s.clock,
                        base_delay=s.notify_backoff)
    inbox.notes.append(
        f"Notifications go to {', '.join(notifier.urls)}." if notifier.urls else
        "No webhook configured (FSM_NOTIFY_URL): notifications are kept, not sent.")
    return inbox, notifier


def where(store: Store) -> str:
    """The database a store opened, as people name it (a URL without its password)."""
    return str(getattr(store, "name", None) or getattr(store, "path", None)
               or type(store).__name__)


def _log_to_stderr() -> None:
    """What the inbox logs (a workflow it cannot load) goes to standard error, one line."""
    logger = logging.getLogger("fsm")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def serve(store: Store, *, host: str = "127.0.0.1", port: int = 8000,
          public_url: str | None = None, settings: Settings | None = None) -> None:
    """Serve the inbox until interrupted, delivering notifications beside it."""
    inbox, notifier = build(store, host=host, port=port, public_url=public_url,
                            settings=settings)
    _log_to_stderr()
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
