"""Delivering the notification outbox: at least once, signed, retried, deduplicated by key.

A pause writes its notification row in the same transaction (see the stores'
``commit``); this loop posts each due row as JSON to every configured webhook
(``FSM_NOTIFY_URL``, comma-separated, plus the workflow's ``settings["notify_urls"]``).
The body is signed with HMAC-SHA256 under ``FSM_NOTIFY_SECRET`` in the
``X-Fsm-Signature: sha256=<hex>`` header; ``X-Fsm-Key`` carries the dedupe key (a
receiver that sees a key twice ignores the second). A failure is retried with
exponential backoff until ``max_attempts``. ``fsm serve`` runs it in a thread; a worker
can run the same :meth:`Notifier.run`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from fsm.errors import FSMError, NotifyError, RunNotFound
from fsm.store.base import Store
from fsm.store.people import Notification
from fsm.web.decisions import Workflows, describe


def env_urls() -> list[str]:
    raw = os.environ.get("FSM_NOTIFY_URL", "")
    urls = [u.strip() for u in raw.replace(" ", ",").split(",") if u.strip()]
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise NotifyError(f"FSM_NOTIFY_URL: {u!r} is not an http:// or https:// address")
    return urls


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Notifier:
    def __init__(self, store: Store, *, urls: list[str] | None = None, secret: str | None = None,
                 public_url: str = "", workflows: Workflows | None = None,
                 clock: Callable[[], float] = time.time, max_attempts: int = 8,
                 base_delay: float = 2.0, max_delay: float = 300.0, timeout: float = 5.0) -> None:
        self.store = store
        self.urls = env_urls() if urls is None else urls
        self.secret = secret if secret is not None else os.environ.get("FSM_NOTIFY_SECRET", "")
        self.public_url = public_url.rstrip("/")
        self.workflows = workflows or Workflows()
        self.clock = clock
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.timeout = timeout
        if self.urls and not self.secret:
            raise NotifyError("FSM_NOTIFY_URL is set but FSM_NOTIFY_SECRET is not: webhooks "
                              "are signed; set a secret the receivers know")

    def payload(self, note: Notification) -> tuple[dict[str, Any], list[str]]:
        """The JSON body for ``note`` and the webhooks it goes to."""
        run = self.store.load_run(note.run_id)
        approval = self.store.approval(note.approval_id)
        spec = self.workflows.spec(self.store, run)
        urls = list(self.urls) + list((spec.settings.get("notify_urls") or []) if spec else [])
        body: dict[str, Any] = {
            "key": note.key, "kind": note.kind, "run_id": run.run_id, "workflow": run.workflow,
            "customer": run.user, "approval_id": note.approval_id,
            "inbox_url": f"{self.public_url}/approvals/{note.approval_id}",
        }
        if approval is not None:
            ask = describe(spec, run, approval)
            body.update(asked=ask.summary, amount=ask.amount, tool=approval.tool,
                        args=approval.args, args_hash=approval.args_hash,
                        requested_at=approval.requested_at, expires_at=approval.expires_at)
        return body, urls

    def _post(self, url: str, body: bytes, key: str) -> None:
        request = urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "application/json", "X-Fsm-Key": key,
            "X-Fsm-Signature": sign(self.secret, body), "User-Agent": "fsm-notify",
        })
        with urllib.request.urlopen(request, timeout=self.timeout) as resp:  # noqa: S310
            if not 200 <= resp.status < 300:
                raise OSError(f"HTTP {resp.status}")

    def deliver(self, note: Notification) -> Notification:
        """One attempt at ``note``; the row as it is to be saved."""
        now = self.clock()
        try:
            body, urls = self.payload(note)
        except RunNotFound:
            return note.model_copy(update={"status": "failed", "last_error": "run not found"})
        if not urls:
            return note.model_copy(update={"status": "unsent",
                                           "last_error": "no webhook configured"})
        data = json.dumps(body, ensure_ascii=False, sort_keys=True).encode()
        errors = []
        for url in urls:
            try:
                self._post(url, data, note.key)
            except (OSError, urllib.error.URLError, ValueError) as exc:
                errors.append(f"{url}: {exc}")
        attempts = note.attempts + 1
        if not errors:
            return note.model_copy(update={"status": "delivered", "attempts": attempts,
                                           "delivered_at": now, "last_error": None})
        delay = min(self.max_delay, self.base_delay * 2 ** (attempts - 1))
        return note.model_copy(update={
            "status": "failed" if attempts >= self.max_attempts else "pending",
            "attempts": attempts, "next_attempt_at": now + delay,
            "last_error": "; ".join(errors)[:500],
        })

    def deliver_due(self, limit: int = 20) -> int:
        """Attempt every due row once; how many were attempted."""
        due = self.store.due_notifications(self.clock(), limit)
        for note in due:
            self.store.save_notification(self.deliver(note))
        return len(due)

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Deliver until ``stop`` is set; a store error is retried on the next pass."""
        while not stop.is_set():
            try:
                self.deliver_due()
            except FSMError:
                pass
            stop.wait(interval)

    def start(self, interval: float = 1.0) -> tuple[threading.Thread, threading.Event]:
        stop = threading.Event()
        thread = threading.Thread(target=self.run, args=(stop, interval), daemon=True,
                                  name="fsm-notify")
        thread.start()
        return thread, stop
