"""What a failed request to a model server means: retry later, ask another way, or stop.

- **Unreachable or overloaded** (retry with backoff; the run stops as
  ``model_unavailable`` when it lasts): no connection, no reply in time, 408, 409, 429,
  502-504, a reply that is not JSON.
- **This request cannot be served** (the run stops as ``model_refused``): any other 4xx
  (401, 403, 404, 413, 422...), a 500 that recurs on every attempt of the same request
  while the server answers otherwise, and a prompt larger than the model's context
  (``overflow``: the engine compacts the view and asks once more first).
- **Maybe the request's shape** (``may_be_request``): a 400, 422 or 500, or a connection
  dropped without a reply (a server that crashed on it). The first attempt of a request
  that fails this way is asked again at once another way (see :mod:`fsm.adapters.openai`).

The run's reason is :attr:`Failure.text`, one line; :attr:`Failure.body` keeps the
server's whole answer for the log.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import openai

from fsm.records import one_line

RETRY_STATUSES = frozenset({408, 409, 429})
#: Statuses that may come from the request's shape (a forced tool_choice, a schema).
SHAPE_STATUSES = frozenset({400, 422, 500})
#: How much of a server's message the one-line reason quotes.
QUOTED_CHARS = 200
_OVERFLOW = re.compile(r"maximum context length|exceeds? the available context size|"
                       r"context window|context length exceeded|too many tokens in the prompt",
                       re.IGNORECASE)


@dataclass(frozen=True)
class Failure:
    """One failed attempt, classified."""

    #: One line for the run's reason: ``HTTP 500: <the server's message, shortened>``.
    text: str
    retryable: bool
    retry_after: float | None = None
    #: The HTTP status, when the server answered.
    status: int | None = None
    #: The server's whole answer (its error body), for the log.
    body: str | None = None
    may_be_request: bool = False
    #: The connection was closed without a reply.
    dropped: bool = False
    #: The prompt does not fit the model's context.
    overflow: bool = False
    #: No reply within the timeout.
    timed_out: bool = False

    @property
    def permanent(self) -> bool:
        """A refusal that asking the same again cannot change."""
        return self.overflow or (self.status is not None and 400 <= self.status < 500
                                 and self.status not in RETRY_STATUSES)


def classify(exc: Exception, timeout: float) -> Failure | None:
    """``exc`` of one attempt as a :class:`Failure`; ``None`` for an exception that is
    not a transport failure (a bug: it is raised on)."""
    if isinstance(exc, openai.APIStatusError):
        return _status_failure(exc)
    if isinstance(exc, openai.APITimeoutError):
        return Failure(f"no reply within {timeout:g}s", True, timed_out=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        # A dropped connection may be a server that crashed on the request; one that was
        # never made cannot be.
        dropped = not never_connected(exc)
        what = "the connection was dropped without a reply" if dropped else "cannot connect"
        return Failure(f"{what} ({type(cause).__name__}: {one_line(str(cause), 120)})", True,
                       may_be_request=dropped, dropped=dropped)
    if isinstance(exc, ValueError | openai.APIResponseValidationError):
        return Failure(f"the server's reply was not a JSON object ({one_line(str(exc), 120)})",
                       True)
    return None


def _status_failure(exc: openai.APIStatusError) -> Failure:
    status = exc.status_code
    message, body = server_message(exc)
    text = f"HTTP {status}: {quoted(message)}"
    if status in (401, 403):
        text += " (check OPENAI_API_KEY)"
    elif status == 404:
        text += " (check the model name and the base URL)"
    overflow = status in (400, 413) and is_overflow(exc.body, message)
    retryable = status in RETRY_STATUSES or status >= 500
    return Failure(text, retryable, _retry_after(exc.response.headers), status=status,
                   body=body, may_be_request=status in SHAPE_STATUSES and not overflow,
                   overflow=overflow)


def server_message(exc: openai.APIStatusError) -> tuple[str, str]:
    """(the error's message, the whole answer as text)."""
    try:
        whole = exc.response.text
    except Exception:  # a streamed or closed response
        whole = str(exc.body)
    inner = _error_object(exc.body)
    if isinstance(inner.get("message"), str):
        return inner["message"], whole
    return (whole if whole.strip() else exc.message), whole


def quoted(message: str) -> str:
    """A server's message for a one-line reason: its first line, at most
    :data:`QUOTED_CHARS` characters, saying how much more the log keeps."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return "(the server sent an empty error message)"
    first = one_line(lines[0], QUOTED_CHARS)
    rest = len(" ".join(message.split())) - len(first)
    return first if rest <= 0 else f"{first} (+{rest} characters in the log)"


def is_overflow(body: Any, message: str) -> bool:
    """True for an error that says the prompt does not fit the model's context, in the
    words of OpenAI and llama-cpp-python (``context_length_exceeded``), llama-server
    (``exceed_context_size_error``) or vLLM (its message)."""
    inner = _error_object(body)
    if inner.get("code") == "context_length_exceeded" or \
            inner.get("type") == "exceed_context_size_error":
        return True
    return bool(_OVERFLOW.search(message))


def _error_object(body: Any) -> Mapping[str, Any]:
    """The ``error`` object of an error body (the SDK may give it or the whole body)."""
    if not isinstance(body, Mapping):
        return {}
    inner = body.get("error")
    return inner if isinstance(inner, Mapping) else body


def never_connected(exc: BaseException) -> bool:
    """True when the connection was never made (refused, unknown host): the request's
    body cannot have caused that. Matched by name: the SDK's HTTP library varies."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError | socket.gaierror) or (
                type(seen).__name__ == "ConnectError"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _retry_after(headers: Any) -> float | None:
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
