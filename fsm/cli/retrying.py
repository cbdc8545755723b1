"""Driving a run from the command line through failures of the infrastructure.

A step that a lost connection or a timeout failed rolls back and the run stays
resumable (:class:`fsm.Unavailable`); the command waits and tries again, saying so on one
line each time, until the run stops, or the engine hands it over after its bound, or the
command's own tries run out (when the database itself cannot be reached, nothing can be
counted in it): then one ``error:`` line, and the run stays resumable.

``FSM_RETRIES`` (tries in a row), ``FSM_RETRY_SECONDS`` (the first wait) and
``FSM_RETRY_MAX_SECONDS`` (the longest) set the bound and the backoff.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .app import err_console

if TYPE_CHECKING:
    from fsm.records import RunState
    from fsm.runtime.retry import Retry
    from fsm.settings import Settings


def retry_of(settings: Settings) -> Retry:
    """The retry bound and backoff of this command (``FSM_RETRIES``, ``FSM_RETRY_SECONDS``,
    ``FSM_RETRY_MAX_SECONDS``)."""
    from fsm.runtime.retry import Retry

    return Retry(tries=settings.retries, first=settings.retry_seconds,
                 most=settings.retry_max_seconds)


def retrying(first: Callable[[], RunState], again: Callable[[], RunState],
             retry: Retry, sleep: Callable[[float], None] = time.sleep) -> RunState:
    """``first()``, and ``again()`` after each :class:`~fsm.errors.Unavailable`, waiting
    as the error says (else as ``retry`` does); the last error once ``retry.tries`` tries
    in a row failed."""
    from fsm.errors import Unavailable

    call, tries = first, 0
    while True:
        try:
            return call()
        except Unavailable as exc:
            tries += 1
            if tries >= retry.tries:
                raise
            delay = exc.retry_in if exc.retry_in is not None else retry.delay(tries)
            err_console.print(f"unavailable: {exc}; trying again in {delay:.1f}s",
                              markup=False, soft_wrap=True)
            sleep(delay)
            call = again
