"""Delivering the notification outbox: at least once, signed, retried, deduplicated by key.

A pause writes its notification row in the same transaction (see the stores'
``commit``); this loop posts each due row as JSON to every configured webhook
(``urls``: ``fsm serve`` gives ``FSM_NOTIFY_URL``'s, plus the workflow's
``settings["notify_urls"]``), signed as Standard Webhooks signs (:mod:`fsm.web.webhooks`)
under the secrets in ``secret`` (``FSM_NOTIFY_SECRET``): ``webhook-id`` is the row's key
(the same on every retry, so a receiver drops a key it has seen), ``webhook-timestamp``
the attempt's time, and
``webhook-signature`` covers both and the body, so a captured delivery cannot be replayed
later.

Every failure of an attempt, of any kind (a refused or reset connection, a timeout, an
answer that is not HTTP, a status other than 2xx, a row that cannot be read), is one
failed attempt: retried after an exponential backoff with jitter (longer when the
receiver says ``Retry-After``) until ``max_attempts``. The loop itself never stops on an
error. ``fsm serve`` runs it in a thread; a worker can run the same :meth:`Notifier.run`.
"""

from __future__ import annotations

import email.utils
import json
import random
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from fsm.errors import NotifyError, RunNotFound
from fsm.store.people import Notification
from fsm.store.roles import Outbox
from fsm.web.decisions import Workflows, describe
from fsm.web.webhooks import headers, secret_keys

#: Damaged rows the loop remembers to skip (each is said once).
_SKIPPED_KEPT = 10_000


def checked_urls(urls: list[str]) -> list[str]:
    """``urls``, each an ``http://`` or ``https://`` address."""
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise NotifyError(f"webhook {u!r} is not an http:// or https:// address")
    return list(urls)


class _NotAccepted(Exception):
    """A receiver's answer that is not 2xx; ``retry_after``: the seconds it asked for."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now``: a number of seconds, or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError):
        return None


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Notifier:
    def __init__(self, store: Outbox, *, urls: list[str] | None = None, secret: str | None = None,
                 public_url: str = "", workflows: Workflows | None = None,
                 clock: Callable[[], float] = time.time, max_attempts: int = 8,
                 base_delay: float = 2.0, max_delay: float = 300.0, timeout: float = 5.0,
                 rng: random.Random | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.urls = checked_urls(urls or [])
        self.secret = secret or ""
        self.public_url = public_url.rstrip("/")
        self.workflows = workflows or Workflows()
        self.clock = clock
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.timeout = timeout
        self.rng = rng or random.Random()
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        #: Keys of rows that cannot be read: left where they are (for the audit) and not
        #: tried again by this loop.
        self._skipped: set[str] = set()
        self._last_problem = ""
        if self.urls and not self.secret.strip():
            raise NotifyError("FSM_NOTIFY_URL is set but FSM_NOTIFY_SECRET is not: webhooks "
                              "are signed; set a secret the receivers know")
        self._keys = secret_keys(self.secret)

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
        handover = self.store.handover(note.approval_id) if approval is None else None
        if handover is not None:  # a run handed over: it waits at the desk
            body.update(inbox_url=f"{self.public_url}/handovers/{handover.handover_id}",
                        handover_id=handover.handover_id, reason=handover.reason,
                        cause=handover.cause, request=handover.request)
        if approval is not None:
            ask = describe(spec, run, approval)
            body.update(asked=ask.summary, amount=ask.amount, tool=approval.tool,
                        args=approval.args, args_hash=approval.args_hash,
                        requested_at=approval.requested_at, expires_at=approval.expires_at)
        return body, urls

    def _post(self, url: str, body: bytes, key: str) -> None:
        """One POST; any failure raises (:class:`_NotAccepted` for an answer that is not 2xx)."""
        signed = headers(self._keys, key, int(self.clock()), body)
        request = urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "application/json", "User-Agent": "fsm-notify", **signed})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:  # noqa: S310
                if not 200 <= resp.status < 300:
                    raise _NotAccepted(f"HTTP {resp.status}", None)
        except urllib.error.HTTPError as exc:
            wait = _retry_after(exc.headers.get("Retry-After") if exc.headers else None,
                                self.clock())
            exc.close()
            raise _NotAccepted(f"HTTP Error {exc.code}: {exc.reason}", wait) from None

    def deliver(self, note: Notification) -> Notification:
        """One attempt at ``note``; the row as it is to be saved."""
        now = self.clock()
        try:
            body, urls = self.payload(note)
        except RunNotFound:
            return note.model_copy(update={"status": "failed", "last_error": "run not found"})
        except Exception as exc:  # noqa: BLE001 - a row that cannot be read is one attempt
            return self._failed(note, now, [f"cannot build the notification: {_line(exc)}"])
        if not urls:
            return note.model_copy(update={"status": "unsent",
                                           "last_error": "no webhook configured"})
        if not self._keys:
            return note.model_copy(update={"status": "unsent", "last_error": (
                "webhooks are signed, and FSM_NOTIFY_SECRET holds no secret to sign with")})
        data = json.dumps(body, ensure_ascii=False, sort_keys=True).encode()
        errors: list[str] = []
        wait = 0.0
        for url in urls:
            try:
                self._post(url, data, note.key)
            except _NotAccepted as exc:
                errors.append(f"{url}: {exc}")
                wait = max(wait, exc.retry_after or 0.0)
            except Exception as exc:  # noqa: BLE001 - every failure is a failed attempt
                errors.append(f"{url}: {_line(exc)}")
        if not errors:
            return note.model_copy(update={"status": "delivered", "attempts": note.attempts + 1,
                                           "delivered_at": now, "last_error": None})
        return self._failed(note, now, errors, wait)

    def _failed(self, note: Notification, now: float, errors: list[str],
                wait: float = 0.0) -> Notification:
        attempts = note.attempts + 1
        return note.model_copy(update={
            "status": "failed" if attempts >= self.max_attempts else "pending",
            "attempts": attempts, "next_attempt_at": now + self.backoff(attempts, wait),
            "last_error": "; ".join(errors)[:500],
        })

    def backoff(self, attempts: int, asked: float = 0.0) -> float:
        """Seconds before the next attempt after ``attempts`` failed ones: ``base_delay``
        doubling up to ``max_delay``, of which a random half is taken off (so receivers
        that failed together are not all tried again at the same moment); at least what
        the receiver asked for (``Retry-After``), up to ``max_delay``."""
        delay = min(self.max_delay, self.base_delay * 2 ** min(attempts - 1, 62))
        jittered = delay / 2 + self.rng.uniform(0, delay / 2)
        return max(jittered, min(asked, self.max_delay))

    def deliver_due(self, limit: int = 20) -> int:
        """Attempt every due row once, each on its own; how many were attempted."""
        page = self.store.due_notifications(self.clock(), limit + len(self._skipped),
                                            skip_damaged=True)
        due = [n for n in page if n.key not in self._skipped][:limit]
        for row in page.damaged:
            if row.key is not None and row.key not in self._skipped \
                    and len(self._skipped) < _SKIPPED_KEPT:
                self._skipped.add(row.key)
                self._log(f"notify: skipped a damaged row: {row}")
        for note in due:
            try:
                outcome = self.deliver(note)
            except Exception as exc:  # noqa: BLE001 - one row never stops the others
                outcome = self._failed(note, self.clock(), [_line(exc)])
            try:
                self.store.save_notification(outcome)
            except Exception as exc:  # noqa: BLE001 - tried again on the next pass
                self._say(f"notify: cannot record the attempt at {note.key}: {_line(exc)}")
        return len(due)

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Deliver until ``stop`` is set. Nothing ends the loop but ``stop``: an error
        (the database away, a bug) is said once and the loop goes on after ``interval``."""
        while not stop.is_set():
            try:
                self.deliver_due()
                self._last_problem = ""
            except Exception as exc:  # noqa: BLE001 - the loop outlives its dependencies
                self._say(f"notify: cannot deliver for now: {_line(exc)}; trying again")
            stop.wait(interval)

    def _say(self, line: str) -> None:
        """Say ``line`` unless it was the last thing said (an outage says it once)."""
        if line != self._last_problem:
            self._last_problem = line
            self._log(line)

    def start(self, interval: float = 1.0) -> tuple[threading.Thread, threading.Event]:
        stop = threading.Event()
        thread = threading.Thread(target=self.run, args=(stop, interval), daemon=True,
                                  name="fsm-notify")
        thread.start()
        return thread, stop
