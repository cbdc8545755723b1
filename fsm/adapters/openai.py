"""A policy backed by any OpenAI-compatible chat-completions server.

Works with OpenAI itself and with servers that speak its API with tool calling
(vLLM, Ollama, llama.cpp's server)::

    policy = OpenAIPolicy(spec, "gpt-4o-mini")                     # OPENAI_API_KEY
    policy = OpenAIPolicy(spec, "qwen2.5:7b", base_url="http://localhost:11434/v1")
    Engine(spec, store, policy, budgets=Budgets(max_cost_micros=50_000)).start(goal)

The model, base URL and key come from the arguments, else from ``OPENAI_MODEL``,
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``; a local server (loopback or private
address) gets a placeholder key when none is set.

Each step's request is :func:`~fsm.adapters.translate.body_for` the view and a
:class:`~fsm.adapters.translate.Shape` (model, ``tool_choice``, server family, output
cap, options), encoded by :func:`~fsm.adapters.translate.encode`: those exact bytes go
through the SDK's client, and the shape is logged with the step's ``policy`` event, so
``fsm show --step N --request`` rebuilds what was sent, fallbacks included.

Failures (see :mod:`fsm.adapters.failures`): an unreachable or overloaded server (no
connection, timeouts, 408, 409, 429, 502-504) is retried with backoff, and when it
stays so the policy raises :class:`~fsm.policy.PolicyUnavailable` (the run stops as
``model_unavailable``; ``Engine.resume`` continues it later). A request the server
cannot serve (another 4xx, a 500 that recurs while the server answers ``GET /models``,
a prompt larger than the context) raises :class:`~fsm.policy.PolicyRefused` (the run
stops as ``model_refused``). Every attempt counts in ``Usage.calls``.

Small and local models: the server's family is recognised from ``GET /models`` (or
given: ``server="llama-cpp-python"``), and the request is shaped for what that family
accepts (:mod:`fsm.adapters.servers`). In a state that accepts no final answer the
request asks for a tool call (``tool_choice``: the one offered function, or
``"required"``). When the first attempt fails in a way the choice may have caused (a
400, 422 or 500, a dropped connection), the same request is sent at once with the next
choice of the family's list (``"auto"`` before none at all); a choice that failed is
not sent to that server and model again, and the ``fallback`` events of a run's log
carry that over to a later process (:meth:`OpenAIPolicy.remember`). ``force=False``
(``fsm run --no-force``, ``FSM_TOOL_CHOICE=off``) never forces. Each reply is capped
at ``max_output_tokens`` (default :data:`DEFAULT_MAX_OUTPUT_TOKENS`). Calls the server
leaves in the reply's text (``<tool_call>...``, ``functions.NAME:``, Gemma's
``tool_code``...) are read as calls (:mod:`fsm.adapters.textcalls`). A server that
reports no token ``usage`` is warned about once: the token budget cannot count its
calls.
"""


from __future__ import annotations

import asyncio
import inspect
import ipaddress
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlparse, urlunparse

import openai

from fsm.adapters import servers, translate
from fsm.adapters.failures import Failure, classify
from fsm.adapters.sending import Attempts, Learnt
from fsm.adapters.summariser import ModelSummariser
from fsm.definition.spec import WorkflowSpec
from fsm.errors import ModelConfigError
from fsm.policy import Action, PolicyRefused, PolicyUnavailable, Usage, View
from fsm.pricing import PriceTable
from fsm.records import Event
from fsm.settings import Settings

log = logging.getLogger("fsm.adapters.openai")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Seconds to wait for one reply, unless ``timeout=`` (``fsm run --timeout``) says otherwise.
DEFAULT_TIMEOUT = 60.0
#: Tokens one reply may have, unless ``max_output_tokens=`` (``--max-output-tokens``)
#: says otherwise: room for a tool call with a reply text of a few paragraphs.
DEFAULT_MAX_OUTPUT_TOKENS = 1024
#: Sent as the key to local servers, which ignore it (the SDK insists on one).
LOCAL_API_KEY = "sk-local-no-key"
MAX_BACKOFF_SECONDS = 30.0
#: Seconds to wait for ``GET /models`` (recognising the server, checking it answers).
PROBE_SECONDS = 10.0

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


def shown_url(base_url: str) -> str:
    """``base_url`` as the log may keep it: without a user name or password in it."""
    url = urlparse(base_url)
    if url.username is None and url.password is None:
        return base_url
    host = url.hostname or ""
    netloc = f"{host}:{url.port}" if url.port else host
    return urlunparse(url._replace(netloc=netloc))


class OpenAIPolicy:
    """A policy (``view -> Action``) that asks a chat-completions model for one tool call.

    ``prices`` is a :class:`~fsm.pricing.PriceTable` or a mapping merged over the
    shipped prices (``{"my-model": {"input": 0.5, "output": 1.5}}``, per million
    tokens). ``options`` are extra request fields (``temperature``, ``seed``,
    ``tool_choice``...); ``tool_choice=None`` turns off asking for a tool call.
    ``timeout`` is the seconds to wait for each reply (raise it for slow local models);
    ``max_output_tokens`` caps each reply (``None``: no cap). ``force=False`` never asks
    for a tool call (default: on, unless ``settings.tool_choice`` is ``off``). ``server``
    names the server's family (:data:`fsm.adapters.servers.SERVER_NAMES`; ``"auto"``
    recognises it). ``backoff(attempt, retry_after)`` and ``sleep`` are injectable so
    tests need not wait. ``settings`` (:class:`fsm.settings.Settings`, default: its
    defaults) give what is not passed: ``OPENAI_MODEL``, ``OPENAI_BASE_URL``,
    ``OPENAI_API_KEY``, ``FSM_PRICES`` and ``FSM_TOOL_CHOICE`` when read with
    ``Settings.load()``, as the command line reads them.
    """

    def __init__(
        self, spec: WorkflowSpec | None, model: str | None = None, *,
        base_url: str | None = None, api_key: str | None = None,
        prices: PriceTable | Mapping[str, Any] | None = None, max_retries: int = 3,
        timeout: float = DEFAULT_TIMEOUT, options: Mapping[str, Any] | None = None,
        max_output_tokens: int | None = DEFAULT_MAX_OUTPUT_TOKENS,
        force: bool | None = None, server: str = "auto",
        backoff: Backoff = default_backoff, sleep: Callable[[float], None] = time.sleep,
        settings: Settings | None = None,
    ) -> None:
        s = settings or Settings.defaults()
        self.spec = spec
        self.model = model or s.openai_model or ""
        if not self.model:
            raise ModelConfigError("no model name: pass model= (fsm run --model NAME) or "
                                   "settings with OPENAI_MODEL, e.g. gpt-4o-mini")
        self.base_url = (base_url or s.openai_base_url or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or s.openai_api_key
        if not key:
            if not is_local(self.base_url):
                raise ModelConfigError(
                    f"no API key for {self.base_url}: pass api_key= or set OPENAI_API_KEY "
                    "(a key is optional only for local servers)")
            key = LOCAL_API_KEY
        _check(spec, max_retries, timeout, max_output_tokens, server)
        self.prices = PriceTable.coerce(prices, s.prices)
        self.max_retries = max_retries
        self.timeout = timeout
        self.options = dict(options or {})
        self.max_output_tokens = max_output_tokens
        self.force = s.tool_choice == "auto" if force is None else force
        self.server = server
        self.backoff = backoff
        self.sleep = sleep
        self.client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=timeout,
                                    max_retries=0)
        self._raw_content = "content" in inspect.signature(self.client.post).parameters
        #: What this policy learnt about the server (choices it failed on).
        self.learnt = Learnt(shown_url(self.base_url), self.model)
        self._family: str | None = None if server == "auto" else server
        #: Set once the server sent a reply without ``usage`` (warned about once).
        self._warned_usage = False

    # -- the policy -------------------------------------------------------------------

    def __call__(self, view: View) -> Action:
        attempts = Attempts(self, self.shapes(view), view)
        return self._action(view, attempts, *attempts.run())

    def _action(self, view: View, attempts: Attempts, response: dict[str, Any],
                usage: Usage) -> Action:
        action = translate.action_from_response(response, view, usage)
        return action.model_copy(update={"request": attempts.record()})

    @property
    def unforced(self) -> set[str]:
        """The ``tool_choice`` kinds this server and model failed on."""
        return set(self.learnt.refused)

    def family(self) -> servers.Family:
        """The server's family: as given, else recognised from ``GET /models`` (asked
        once; a server that cannot be reached is asked again on the next call)."""
        if self._family is None:
            return self._recognised(*self.probe())
        return servers.FAMILIES[self._family]

    def _recognised(self, models: Any, reached: bool) -> servers.Family:
        """The family ``GET /models`` says (kept once the server answered)."""
        family = servers.recognise(self.base_url, models)
        if reached:
            self._family = family
        return servers.FAMILIES[family]

    def shapes(self, view: View, family: servers.Family | None = None
               ) -> list[translate.Shape]:
        """The requests to try for ``view``, first choice first: one per ``tool_choice``
        the family accepts, less those this server failed on (the last is kept)."""
        family = family or self.family()
        base = translate.Shape(
            model=self.model, server=family.name, max_output_tokens=self.max_output_tokens,
            time_limit_ms=int(self.timeout * 800) if family.time_limit else None,
            options=self.options)
        if "tool_choice" in self.options or not view.tools:
            return [base]
        forced = self.force and not (view.final_allowed or view.asks_customer)
        order = [c for c in (family.forced if forced else family.free)
                 if c != "function" or len(view.tools) == 1]
        kept = [c for c in order if c not in self.learnt.refused] or order[-1:]
        return [translate.Shape(**{**base.__dict__, "choice": c}) for c in kept]

    def request_for(self, view: View) -> dict[str, Any]:
        """The request body this policy would send first for ``view`` now."""
        return translate.body_for(view, self.shapes(view)[0])

    def settings(self) -> dict[str, Any]:
        """What a run records about this policy besides its model, base URL and timeout
        (never the key), so a later process drives the run the same way."""
        out: dict[str, Any] = {"max_output_tokens": self.max_output_tokens,
                               "force": self.force, "server": self.server}
        if self.options:
            out["options"] = translate.Shape(self.model, options=self.options).record()[
                "options"]
        return out

    def remember(self, events: Iterable[Event]) -> None:
        """Take what earlier processes learnt about this server and model from a run's
        log (its ``fallback`` events), so they are not asked the same again."""
        self.learnt.read(events)

    def complete(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], Usage]:
        """POST ``body`` to ``/chat/completions`` with retries; (response, usage).

        Raises :class:`~fsm.policy.PolicyUnavailable` when every attempt failed.
        """
        attempts = Attempts(self, [], None, raw=dict(body))
        return attempts.run()

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

    def post(self, data: bytes, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST the encoded ``body`` (``data``) to ``/chat/completions``."""
        return _object(self.client.post("/chat/completions", cast_to=dict,
                                         **self._sent(data, body)))

    def _sent(self, data: bytes, body: Mapping[str, Any]) -> dict[str, Any]:
        """The request's arguments to the SDK's ``post``: the exact bytes when it takes
        them; older SDKs encode the same dict themselves."""
        if self._raw_content:
            return {"content": data, "options": {"headers": {"Content-Type":
                                                             "application/json"}}}
        return {"body": dict(body)}

    def probe(self) -> tuple[Any, bool]:
        """(``GET /models``'s JSON or ``None``, whether the server answered at all)."""
        try:
            client = self.client.with_options(timeout=min(self.timeout, PROBE_SECONDS))
            return client.get("/models", cast_to=object), True
        except openai.APIStatusError:
            return None, True  # it answered, if not with models
        except Exception:  # noqa: BLE001 (unreachable, or an answer that is not JSON)
            return None, False

    def classify(self, exc: Exception) -> Failure | None:
        return classify(exc, self.timeout)

    def refused(self, text: str, usage: Usage, request: dict[str, Any] | None,
                failure: Failure) -> PolicyRefused:
        return PolicyRefused(f"{self.model!r} at {shown_url(self.base_url)} {text}", usage,
                             request=request, detail=failure.body, overflow=failure.overflow)

    def unavailable(self, text: str, usage: Usage, request: dict[str, Any] | None,
                    failure: Failure) -> PolicyUnavailable:
        return PolicyUnavailable(f"{self.model!r} at {shown_url(self.base_url)} {text}",
                                 usage, request=request, detail=failure.body)

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()

    def __enter__(self) -> OpenAIPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenAIPolicy(model={self.model!r}, base_url={shown_url(self.base_url)!r})"


class AsyncOpenAIPolicy(OpenAIPolicy):
    """:class:`OpenAIPolicy` through the SDK's async client (``openai.AsyncOpenAI``): an
    ``async def`` policy for :class:`fsm.AsyncEngine` and ``fsm worker --async``. The
    requests, shapes, fallbacks, retries and failures are the same (one
    :class:`~fsm.adapters.sending.Attempts`); the waits are awaited, so a call in flight
    holds no thread. ``sleep_async`` is the backoff's wait (injectable for tests)."""

    def __init__(self, *args: Any,
                 sleep_async: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sleep_async = sleep_async
        self.aclient = openai.AsyncOpenAI(api_key=self.client.api_key, base_url=self.base_url,
                                          timeout=self.timeout, max_retries=0)

    async def __call__(self, view: View) -> Action:  # type: ignore[override]
        family = servers.FAMILIES[self._family] if self._family is not None else \
            self._recognised(*await self.probe_async())
        attempts = Attempts(self, self.shapes(view, family), view)
        return self._action(view, attempts, *await attempts.run_async(self))

    async def post_async(self, data: bytes, body: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`post`, awaited."""
        return _object(await self.aclient.post("/chat/completions", cast_to=dict,
                                               **self._sent(data, body)))

    async def probe_async(self) -> tuple[Any, bool]:
        """:meth:`probe`, awaited."""
        try:
            client = self.aclient.with_options(timeout=min(self.timeout, PROBE_SECONDS))
            return await client.get("/models", cast_to=object), True
        except openai.APIStatusError:
            return None, True
        except Exception:  # noqa: BLE001 (unreachable, or an answer that is not JSON)
            return None, False

    async def aclose(self) -> None:
        """Close both clients' HTTP connections."""
        self.client.close()
        await self.aclient.close()

    def __repr__(self) -> str:
        return f"AsyncOpenAIPolicy(model={self.model!r}, base_url={shown_url(self.base_url)!r})"


def _object(result: Any) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise ValueError(f"expected a JSON object, got {type(result).__name__}")
    return result


def _check(spec: WorkflowSpec | None, max_retries: int, timeout: float,
           max_output_tokens: int | None, server: str) -> None:
    if spec is not None:
        _check_tool_names(spec)
    if max_retries < 0:
        raise ModelConfigError(f"max_retries must be 0 or more, got {max_retries}")
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise ModelConfigError(f"timeout must be a number of seconds above 0, got "
                               f"{timeout!r}")
    if max_output_tokens is not None and not (
            isinstance(max_output_tokens, int) and not isinstance(max_output_tokens, bool)
            and max_output_tokens > 0):
        raise ModelConfigError(f"max_output_tokens must be a whole number of tokens above 0 "
                               f"(or None for no cap), got {max_output_tokens!r}")
    if server not in servers.SERVER_NAMES:
        raise ModelConfigError(f"server must be one of {', '.join(servers.SERVER_NAMES)}, "
                               f"got {server!r}")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _check_tool_names(spec: WorkflowSpec) -> None:
    bad = sorted(n for n in spec.tools if not translate.VALID_NAME.match(n))
    if bad:
        raise ModelConfigError(
            f"workflow {spec.name!r} has tool names the chat-completions API rejects: "
            f"{', '.join(repr(n) for n in bad)} (allowed: letters, digits, _ and -, "
            "at most 64 characters)")
