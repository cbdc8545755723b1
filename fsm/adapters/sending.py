"""The attempts of one model call, and what they teach about the server.

:class:`Attempts` sends a call's request shapes (:meth:`OpenAIPolicy.shapes`, best
first). When the first attempt of a shape fails in a way the shape may have caused (a
400, 422 or 500, a dropped connection) and the server did not fail the same way on the
shape before, the next shape is sent at once, without a wait and without using up a
retry. A shape is blamed (:class:`Learnt`, and ``learnt: true`` in its ``fallback``
record) when its connection dropped (the server crashed on it) or the next shape
succeeded at its first attempt. Other failures are retried with backoff, then end the
call (see :mod:`fsm.adapters.failures`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from typing import Any, Protocol

from fsm.adapters import translate
from fsm.adapters.failures import Failure
from fsm.policy import PolicyRefused, PolicyUnavailable, Usage, View
from fsm.records import Event

log = logging.getLogger("fsm.adapters.openai")


class Learnt:
    """The ``tool_choice`` kinds one server (base URL) and model failed on."""

    def __init__(self, base_url: str, model: str) -> None:
        self.base_url = base_url
        self.model = model
        self.refused: set[str] = set()

    def read(self, events: Iterable[Event]) -> None:
        """Add what a run's ``fallback`` events say this server and model failed on."""
        for e in events:
            d = e.detail
            if (e.kind == "fallback" and d.get("learnt") and d.get("base_url") == self.base_url
                    and d.get("model") == self.model and isinstance(d.get("from"), str)):
                self.refused.add(d["from"])

    def refuse(self, choice: str, how: str, instead: str) -> None:
        if choice in self.refused:
            return
        self.refused.add(choice)
        log.warning("%r at %s %s on tool_choice %s; asking with %s: this server and model "
                    "are not asked that way again (fsm run --no-force never forces)",
                    self.model, self.base_url, how, choice, instead)


class Sender(Protocol):
    """What :class:`Attempts` needs of the policy it sends for (the OpenAI adapter)."""

    model: str
    max_retries: int
    learnt: Learnt
    backoff: Callable[[int, float | None], float]
    sleep: Callable[[float], None]

    def post(self, data: bytes, body: Mapping[str, Any]) -> dict[str, Any]: ...
    def classify(self, exc: Exception) -> Failure | None: ...
    def probe(self) -> tuple[Any, bool]: ...
    def usage_of(self, response: Mapping[str, Any], *, calls: int = 1) -> Usage: ...
    def refused(self, text: str, usage: Usage, request: dict[str, Any] | None,
                failure: Failure) -> PolicyRefused: ...
    def unavailable(self, text: str, usage: Usage, request: dict[str, Any] | None,
                    failure: Failure) -> PolicyUnavailable: ...


class AsyncSender(Protocol):
    """What :meth:`Attempts.run_async` awaits (the async OpenAI adapter)."""

    sleep_async: Callable[[float], Awaitable[None]]

    async def post_async(self, data: bytes, body: Mapping[str, Any]) -> dict[str, Any]: ...
    async def probe_async(self) -> tuple[Any, bool]: ...


class _Post:
    """Send one attempt's request."""

    def __init__(self, data: bytes, body: Mapping[str, Any]) -> None:
        self.data, self.body = data, body

    def sync(self, policy: Sender) -> Any:
        return policy.post(self.data, self.body)

    async def awaited(self, policy: AsyncSender) -> Any:
        return await policy.post_async(self.data, self.body)


class _Sleep:
    """Wait before the next attempt."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def sync(self, policy: Sender) -> Any:
        policy.sleep(self.seconds)

    async def awaited(self, policy: AsyncSender) -> Any:
        await policy.sleep_async(self.seconds)


class _Probe:
    """Ask the server ``GET /models``."""

    def sync(self, policy: Sender) -> Any:
        return policy.probe()

    async def awaited(self, policy: AsyncSender) -> Any:
        return await policy.probe_async()


_IO = _Post | _Sleep | _Probe


class Attempts:
    """One call: its attempts, the shapes it went through, what they cost."""

    def __init__(self, policy: Sender, shapes: list[translate.Shape],
                 view: View | None, *, raw: dict[str, Any] | None = None) -> None:
        self.policy = policy
        self.shapes = shapes
        self.view = view
        self.raw = raw
        self.index = 0
        self.attempts = 0
        self.timeouts = 0
        self.fallbacks: list[dict[str, Any]] = []

    def body(self) -> dict[str, Any]:
        if self.raw is not None:
            return self.raw
        assert self.view is not None
        return translate.body_for(self.view, self.shapes[self.index])

    def record(self) -> dict[str, Any] | None:
        """How the last attempt was sent (its shape), the fallbacks, the timeouts."""
        if self.raw is not None:
            return None
        out = self.shapes[self.index].record()
        if self.fallbacks:
            out["fallbacks"] = self.fallbacks
        if self.timeouts:
            out["timed_out"] = self.timeouts
        return out

    def usage(self) -> Usage:
        """What failed attempts cost: each counts as a call; a server that never
        answered a timed-out attempt reported nothing of what it used."""
        return Usage(calls=self.attempts, reported=not self.timeouts)

    def run(self) -> tuple[dict[str, Any], Usage]:
        """Send until a reply comes; raise ``PolicyUnavailable`` or ``PolicyRefused``."""
        sending = self.sending()
        answer: Any = None
        raised: Exception | None = None
        while True:
            ended, step = _resumed(sending, answer, raised)
            if ended:
                return step  # type: ignore[no-any-return]
            answer, raised = None, None
            try:
                answer = step.sync(self.policy)
            except Exception as exc:  # noqa: BLE001 - the attempts judge it
                raised = exc

    async def run_async(self, policy: AsyncSender) -> tuple[dict[str, Any], Usage]:
        """:meth:`run` with the async client of ``policy``: the same attempts, awaited."""
        sending = self.sending()
        answer: Any = None
        raised: Exception | None = None
        while True:
            ended, step = _resumed(sending, answer, raised)
            if ended:
                return step  # type: ignore[no-any-return]
            answer, raised = None, None
            try:
                answer = await step.awaited(policy)
            except Exception as exc:  # noqa: BLE001 - the attempts judge it
                raised = exc

    def sending(self) -> Generator[_IO, Any, tuple[dict[str, Any], Usage]]:
        """The attempts, written once: each request, wait and probe is yielded for
        :meth:`run` or :meth:`run_async` to do (and what it raised thrown back in)."""
        body = self.body()
        data = translate.encode(body)
        on_shape: list[Failure] = []
        retries = 0
        suspect: dict[str, Any] | None = None  # a shape blamed if the next one succeeds
        while True:
            self.attempts += 1
            try:
                response = yield _Post(data, body)
            except Exception as exc:
                failure = self.policy.classify(exc)
                if failure is None:
                    raise
                self.timeouts += failure.timed_out
                if failure.overflow:
                    raise self.policy.refused(
                        f"cannot take the prompt: {failure.text}", self.usage(), self.record(),
                        failure) from exc
                if not on_shape and self._falls_back(failure):
                    suspect = self._next_shape(failure)
                    body, data, on_shape = self.body(), translate.encode(self.body()), []
                    continue
                on_shape.append(failure)
                retries += 1
                yield from self._give_up_if_needed(failure, on_shape, retries, exc)
                yield _Sleep(self.policy.backoff(retries, failure.retry_after))
                continue
            if suspect is not None and not on_shape:
                self._blame(suspect, "failed")
            return response, self.policy.usage_of(response, calls=self.attempts)

    def _falls_back(self, failure: Failure) -> bool:
        if not failure.may_be_request or self.index + 1 >= len(self.shapes):
            return False
        last = self.fallbacks[-1] if self.fallbacks else None
        if last is None:
            return True
        # After a drop the server may be down, and after the same failure on the shape
        # before it is not the shape: retry this one instead.
        return not last["dropped"] and not failure.dropped and last["status"] != failure.status

    def _next_shape(self, failure: Failure) -> dict[str, Any] | None:
        came, self.index = self.shapes[self.index], self.index + 1
        entry: dict[str, Any] = {
            "from": came.choice, "to": self.shapes[self.index].choice,
            "reason": failure.text, "status": failure.status, "dropped": failure.dropped,
            "base_url": self.policy.learnt.base_url, "model": self.policy.model,
            "server": came.server, "learnt": False}
        if failure.body:
            entry["error"] = failure.body
        self.fallbacks.append(entry)
        if failure.dropped:  # it may have crashed the server: never again
            self._blame(entry, "dropped the connection")
            return None
        return entry

    def _blame(self, entry: dict[str, Any], how: str) -> None:
        entry["learnt"] = True
        self.policy.learnt.refuse(entry["from"], how, entry["to"])

    def _give_up_if_needed(self, failure: Failure, on_shape: list[Failure], retries: int,
                           exc: Exception) -> Generator[_IO, Any, None]:
        policy = self.policy
        tried = f"after {self.attempts} attempt(s): {failure.text}"
        if failure.permanent:
            raise policy.refused(f"refused the request {tried}", self.usage(), self.record(),
                                 failure) from exc
        if failure.retryable and retries <= policy.max_retries:
            return
        if len(on_shape) > 1 and all(f.status == 500 for f in on_shape) and \
                (yield _Probe())[1]:
            raise policy.refused(
                f"failed on every attempt of this request while it answers GET /models "
                f"{tried}", self.usage(), self.record(), failure) from exc
        raise policy.unavailable(f"failed {tried}", self.usage(), self.record(),
                                 failure) from exc


def _resumed(sending: Generator[_IO, Any, Any], answer: Any, raised: Exception | None
             ) -> tuple[bool, Any]:
    """Resume the attempts with an answer (or throw in what the I/O raised): ``(True,
    their result)`` once they end, else ``(False, the next I/O to do)``."""
    try:
        return False, sending.throw(raised) if raised is not None else sending.send(answer)
    except StopIteration as done:
        return True, done.value
