"""A policy backed by any OpenAI-compatible chat-completions server.

Works with OpenAI itself and with servers that speak its API with tool calling
(vLLM, Ollama, llama.cpp's server)::

    policy = OpenAIPolicy(spec, "gpt-4o-mini")                     # OPENAI_API_KEY
    policy = OpenAIPolicy(spec, "qwen2.5:7b", base_url="http://localhost:11434/v1")
    Engine(spec, store, policy, budgets=Budgets(max_cost_micros=50_000)).start(goal)

The model, base URL and key come from the arguments, else from ``OPENAI_MODEL``,
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``; a local server (loopback or private
address) gets a placeholder key when none is set.

Each step sends :meth:`OpenAIPolicy.request_for` of the view, encoded by
:func:`~fsm.adapters.translate.encode`: those exact bytes go through the SDK's
client, so the request of any past step can be rebuilt from the stored run and
compared. Transport failures (429, 408, 409, 5xx, timeouts, refused connections,
a reply that is not JSON) are retried with backoff; when the model stays
unreachable the policy raises :class:`~fsm.policy.PolicyUnavailable`, the engine
stops the run with status ``model_unavailable``, and ``Engine.resume`` continues
it later. Every attempt counts in ``Usage.calls``.

Small and local models: in a state that accepts no final answer the request asks
for a tool call (``tool_choice``: the one offered function, or ``"required"``). A
server that fails on that (llama-cpp-python's answers 500 to ``"required"`` and may
drop the connection on a forced function) is asked again at once without it, and
this policy does not force that kind again (``FSM_TOOL_CHOICE=off`` never forces,
for a server that crashes on it). Calls the server leaves in the reply's
text (``<tool_call>...``, Llama 3's ``<|python_tag|>``, a fenced JSON block...) are
read as calls (:mod:`fsm.adapters.textcalls`). A server that reports no token
``usage`` is warned about once: the token budget cannot count its calls.
"""

from __future__ import annotations

import inspect
import ipaddress
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import openai

from fsm.adapters import translate
from fsm.adapters.summariser import ModelSummariser
from fsm.errors import ModelConfigError
from fsm.policy import Action, PolicyUnavailable, Usage, View
from fsm.pricing import PriceTable
from fsm.spec import WorkflowSpec

log = logging.getLogger("fsm.adapters.openai")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Seconds to wait for one reply, unless ``timeout=`` (``fsm run --timeout``) says otherwise.
DEFAULT_TIMEOUT = 60.0
#: Sent as the key to local servers, which ignore it (the SDK insists on one).
LOCAL_API_KEY = "sk-local-no-key"
RETRY_STATUSES = frozenset({408, 409, 429})
MAX_BACKOFF_SECONDS = 30.0

Backoff = Callable[[int, "float | None"], float]


def default_backoff(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): the server's
    ``Retry-After`` if it sent one, else 0.5, 1, 2, 4... capped at 30."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), MAX_BACKOFF_SECONDS)
    return min(0.5 * 2 ** (attempt - 1), MAX_BACKOFF_SECONDS)


def is_local(base_url: str) -> bool:
    """True for localhost, loopback and private-network addresses."""
    host = (urlparse(base_url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_unspecified


@dataclass(frozen=True)
class _Failure:
    text: str
    retryable: bool
    retry_after: float | None = None
    #: A failure a forced ``tool_choice`` may have caused: a 400, 422 or 500 status, or
    #: a connection dropped without a reply (not 502-504: gateways and overload).
    may_be_choice: bool = False
    #: The connection was closed without a reply.
    dropped: bool = False


@dataclass(frozen=True)
class _Forced:
    """A request that forces a tool call, and the same request without forcing."""

    kind: str
    choice: Any
    fallback: Mapping[str, Any]


class OpenAIPolicy:
    """A policy (``view -> Action``) that asks a chat-completions model for one tool call.

    ``prices`` is a :class:`~fsm.pricing.PriceTable` or a mapping merged over the
    shipped prices (``{"my-model": {"input": 0.5, "output": 1.5}}``, per million
    tokens). ``options`` are extra request fields (``temperature``, ``seed``,
    ``tool_choice``, ``max_completion_tokens``...); ``tool_choice=None`` turns off
    asking for a tool call. ``timeout`` is the seconds to wait for each reply (raise it
    for slow local models). ``backoff(attempt, retry_after)`` and ``sleep`` are
    injectable so tests need not wait.
    """

    def __init__(
        self, spec: WorkflowSpec | None, model: str | None = None, *,
        base_url: str | None = None, api_key: str | None = None,
        prices: PriceTable | Mapping[str, Any] | None = None, max_retries: int = 3,
        timeout: float = DEFAULT_TIMEOUT, options: Mapping[str, Any] | None = None,
        backoff: Backoff = default_backoff, sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.spec = spec
        self.model = model or os.environ.get("OPENAI_MODEL") or ""
        if not self.model:
            raise ModelConfigError("no model name: pass model= (fsm run --model NAME) or set "
                                   "OPENAI_MODEL, e.g. gpt-4o-mini")
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL")
                         or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if not is_local(self.base_url):
                raise ModelConfigError(
                    f"no API key for {self.base_url}: pass api_key= or set OPENAI_API_KEY "
                    "(a key is optional only for local servers)")
            key = LOCAL_API_KEY
        if spec is not None:
            _check_tool_names(spec)
        if max_retries < 0:
            raise ModelConfigError(f"max_retries must be 0 or more, got {max_retries}")
        if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
            raise ModelConfigError(f"timeout must be a number of seconds above 0, got "
                                   f"{timeout!r}")
        self.prices = PriceTable.coerce(prices)
        self.max_retries = max_retries
        self.timeout = timeout
        self.options = dict(options or {})
        self.backoff = backoff
        self.sleep = sleep
        self.client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=timeout,
                                    max_retries=0)
        self._raw_content = "content" in inspect.signature(self.client.post).parameters
        #: Kinds of forced tool_choice ("function", "required") this server failed on.
        self.unforced: set[str] = set()
        choice = os.environ.get("FSM_TOOL_CHOICE", "auto").strip().lower() or "auto"
        if choice not in ("auto", "off"):
            raise ModelConfigError(f"FSM_TOOL_CHOICE must be 'auto' or 'off', got {choice!r}")
        if choice == "off":
            self.unforced = {"function", "required"}
        #: Set once the server sent a reply without ``usage`` (warned about once).
        self._warned_usage = False

    # -- the policy -------------------------------------------------------------------

    def __call__(self, view: View) -> Action:
        kind = self.force_kind(view)
        body = translate.request_body(view, self.model, self.options, force=kind)
        forced = None
        if "tool_choice" in body and "tool_choice" not in self.options and kind is not None:
            # The retry without tool_choice is the same request less that field.
            fallback = {k: v for k, v in body.items() if k != "tool_choice"}
            forced = _Forced(kind, body["tool_choice"], fallback)
        response, usage = self._send(body, forced)
        return translate.action_from_response(response, view, usage)

    def force_kind(self, view: View) -> str | None:
        """The kind of ``tool_choice`` to send for ``view``: ``"function"`` (one tool),
        ``"required"``, or ``None`` (the state accepts a final answer, or this server
        failed on every kind that fits)."""
        if translate.forced_choice(view) is None:
            return None
        kinds = ["function", "required"] if translate.choice_kind(view) == "function" \
            else ["required"]
        return next((k for k in kinds if k not in self.unforced), None)

    def request_for(self, view: View) -> dict[str, Any]:
        """The request body sent for ``view`` (also what ``show`` prints for a step).

        It is the first attempt's: after a server failed on a forced ``tool_choice``,
        the same step's retry leaves ``tool_choice`` out.
        """
        return translate.request_body(view, self.model, self.options,
                                      force=self.force_kind(view))

    def complete(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], Usage]:
        """POST ``body`` to ``/chat/completions`` with retries; (response, usage).

        Raises :class:`~fsm.policy.PolicyUnavailable` when every attempt failed.
        """
        return self._send(body)

    def _send(self, body: Mapping[str, Any], forced: _Forced | None = None
              ) -> tuple[dict[str, Any], Usage]:
        """POST with retries; (response, usage).

        With ``forced``, a first attempt that fails in a way its tool_choice may have
        caused is retried at once without it (not counted against ``max_retries``).
        That kind of tool_choice is then given up for good when the server dropped the
        connection (it may have crashed on it) or when the request without it succeeds.
        """
        data = translate.encode(body)
        attempt = 0
        switched = False
        while True:
            attempt += 1
            try:
                response = self._post(data, body)
            except Exception as exc:
                failure = self._describe(exc)
                if failure is None:
                    raise
                if forced is not None and attempt == 1 and failure.may_be_choice:
                    if failure.dropped:
                        self._unforce(forced, "dropped the connection")
                    body, data, switched = forced.fallback, translate.encode(forced.fallback), True
                    continue
                retries = attempt - (1 if switched else 0)
                if not failure.retryable or retries > self.max_retries:
                    raise PolicyUnavailable(
                        f"{self.model!r} at {self.base_url} failed after {attempt} "
                        f"attempt(s): {failure.text}", Usage(calls=attempt)) from exc
                self.sleep(self.backoff(retries, failure.retry_after))
                continue
            if forced is not None and switched and attempt == 2:
                self._unforce(forced, "failed")
            return response, self.usage_of(response, calls=attempt)

    def _unforce(self, forced: _Forced, how: str) -> None:
        if forced.kind in self.unforced:
            return
        self.unforced.add(forced.kind)
        log.warning("%r at %s %s on tool_choice %s; asking without it: this policy does "
                    "not force a tool call that way again (FSM_TOOL_CHOICE=off never "
                    "forces)", self.model, self.base_url, how, json_choice(forced.choice))

    def usage_of(self, response: Mapping[str, Any], *, calls: int = 1) -> Usage:
        """Tokens from the reply's ``usage``, priced with the table.

        A reply without token counts gives ``Usage(reported=False)``, warned about once
        per policy on the ``fsm.adapters.openai`` logger.
        """
        raw = response.get("usage") if isinstance(response, Mapping) else None
        raw = raw if isinstance(raw, Mapping) else {}
        reported = any(isinstance(raw.get(k), int) and not isinstance(raw.get(k), bool)
                       for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
        if not reported and not self._warned_usage:
            self._warned_usage = True
            log.warning("%r at %s sent no token usage: its calls count 0 tokens and cost 0, "
                        "so token and cost budgets cannot limit them (set --max-steps or "
                        "max_steps to bound the run)", self.model, self.base_url)
        tokens_in = _count(raw.get("prompt_tokens"))
        tokens_out = _count(raw.get("completion_tokens"))
        cost = self.prices.cost(self.model, tokens_in, tokens_out)
        return Usage(input_tokens=tokens_in, output_tokens=tokens_out, cost_micros=cost,
                     calls=calls, reported=reported)

    def summariser(self, max_chars: int = 2000) -> Callable[..., Any]:
        """A model-backed summariser for :class:`fsm.runtime.compaction.Compactor`."""
        return ModelSummariser(self, max_chars=max_chars)

    # -- plumbing ---------------------------------------------------------------------

    def _post(self, data: bytes, body: Mapping[str, Any]) -> dict[str, Any]:
        if self._raw_content:
            result = self.client.post(
                "/chat/completions", cast_to=dict, content=data,
                options={"headers": {"Content-Type": "application/json"}})
        else:  # older SDKs: the SDK encodes the same dict itself
            result = self.client.post("/chat/completions", cast_to=dict, body=dict(body))
        if not isinstance(result, dict):
            raise ValueError(f"expected a JSON object, got {type(result).__name__}")
        return result

    def _describe(self, exc: Exception) -> _Failure | None:
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            text = f"HTTP {status}: {_server_message(exc)}"
            if status in (401, 403):
                text += " (check OPENAI_API_KEY)"
            elif status == 404:
                text += " (check the model name and the base URL)"
            retryable = status in RETRY_STATUSES or status >= 500
            return _Failure(text, retryable, _retry_after(exc.response.headers),
                            may_be_choice=status in (400, 422, 500))
        if isinstance(exc, openai.APITimeoutError):
            return _Failure(f"no reply within {self.timeout:g}s", True)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            # A dropped connection may be a server that crashed on the request; one
            # that was never made cannot be.
            dropped = not _never_connected(exc)
            return _Failure(f"cannot connect ({type(cause).__name__}: {cause})", True,
                            may_be_choice=dropped, dropped=dropped)
        if isinstance(exc, ValueError | openai.APIResponseValidationError):
            return _Failure(f"the server's reply was not a JSON object ({exc})", True)
        return None

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()

    def __enter__(self) -> OpenAIPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenAIPolicy(model={self.model!r}, base_url={self.base_url!r})"


def _never_connected(exc: BaseException) -> bool:
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


def json_choice(choice: Any) -> str:
    """A tool_choice as the server saw it, for a log line."""
    return translate.dumps(choice) if not isinstance(choice, str) else repr(choice)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return body["message"]
    return exc.message


def _retry_after(headers: Any) -> float | None:
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _check_tool_names(spec: WorkflowSpec) -> None:
    bad = sorted(n for n in spec.tools if not translate.VALID_NAME.match(n))
    if bad:
        raise ModelConfigError(
            f"workflow {spec.name!r} has tool names the chat-completions API rejects: "
            f"{', '.join(repr(n) for n in bad)} (allowed: letters, digits, _ and -, "
            "at most 64 characters)")
