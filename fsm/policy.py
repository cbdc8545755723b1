"""The policy seam: ``policy(view) -> action``.

A policy is any callable. A model adapter, a rule-based clerk and a scripted test
double are all policies; the engine cannot tell them apart.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fsm.records.transcript import Message, read_all

log = logging.getLogger("fsm.policy")

#: The largest count a :class:`Usage` field holds (2**53, exact in JSON and JavaScript).
#: A policy reporting more, or less than 0, is clamped into ``[0, MAX_COUNT]`` and the
#: usage is marked ``clamped``, so absurd reports cannot overflow the store.
MAX_COUNT = 2**53

_COUNTS = ("input_tokens", "output_tokens", "cost_micros", "calls")


class Usage(BaseModel):
    """What one policy call cost.

    Counts outside ``[0, MAX_COUNT]`` are clamped (and logged on ``fsm.policy``);
    counts of the wrong type (text, fractions, infinity) are refused.
    """

    model_config = ConfigDict(frozen=True, revalidate_instances="always")

    input_tokens: int = Field(default=0, ge=0, le=MAX_COUNT)
    output_tokens: int = Field(default=0, ge=0, le=MAX_COUNT)
    #: Micro-units of the price table's currency.
    cost_micros: int = Field(default=0, ge=0, le=MAX_COUNT)
    #: Model calls made (retries included).
    calls: int = Field(default=1, ge=0, le=MAX_COUNT)
    #: False when the model server sent no token counts: the token budget cannot see
    #: this call (an adapter warns once per policy).
    reported: bool = True
    #: True when a reported count was out of range and was clamped into it.
    clamped: bool = False

    @model_validator(mode="before")
    @classmethod
    def _clamp(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = data
        for name in _COUNTS:
            value = out.get(name)
            if isinstance(value, float) and math.isfinite(value) and value.is_integer():
                value = int(value)
            if isinstance(value, int) and not isinstance(value, bool) and not (
                    0 <= value <= MAX_COUNT):
                if out is data:
                    out = dict(data)  # the caller's dict stays as given
                out[name] = min(max(value, 0), MAX_COUNT)
                out["clamped"] = True
                log.warning("policy usage %s=%s is out of range: counted as %d", name,
                            _short(value), out[name])
        return out

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_micros=self.cost_micros + other.cost_micros,
            calls=self.calls + other.calls,
            reported=self.reported and other.reported,
            clamped=self.clamped or other.clamped,
        )

    def notes(self) -> dict[str, bool]:
        """What the log should say about this usage beyond its counts (empty if nothing):
        ``usage_reported: False`` for a server that sent no counts, ``usage_clamped``."""
        out = {}
        if not self.reported:
            out["usage_reported"] = False
        if self.clamped:
            out["usage_clamped"] = True
        return out


def _short(value: int) -> str:
    """A number for a log line; a huge one by its size (str() refuses > 4300 digits)."""
    return str(value) if value.bit_length() <= 256 else f"<a {value.bit_length()}-bit number>"


#: The usage of an action that reports none: one shared instance (frozen), so an action
#: built without usage does not build and validate one of its own.
NO_USAGE = Usage(calls=0)


class Action(BaseModel):
    """One decision of the policy: a tool call or a final answer.

    Firing a workflow event is a call of the ``advance`` tool with ``{"event": ...}``
    plus the event's payload fields. ``problem`` is set by adapters when the model's
    output was unusable (bad JSON, empty reply); the engine shows it to the model.
    """

    model_config = ConfigDict(frozen=True, revalidate_instances="always")

    tool: str | None = None
    args: dict[str, Any] = {}
    final: str | None = None
    usage: Usage = Field(default_factory=lambda: NO_USAGE)
    problem: str | None = None
    #: Free text the model wrote alongside its call (kept in the transcript).
    text: str | None = None
    #: How a model adapter sent this call, logged with its ``policy`` event (plain JSON):
    #: what ``fsm show --request`` needs to rebuild the exact bytes sent, and under
    #: ``fallbacks`` each change made after the server failed on a request (each is also
    #: logged as a ``fallback`` event).
    request: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Action:
        if self.problem is None and (self.tool is None) == (self.final is None):
            raise ValueError("an action is either a tool call or a final answer")
        return self


class View(BaseModel):
    """Exactly what the policy sees at one step."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    workflow: str
    step: int
    #: The workflow machine's state.
    state: str
    #: The transcript, possibly compacted (see :mod:`fsm.runtime.compaction`): each
    #: message's JSON object (:attr:`transcript` has them typed).
    messages: list[dict[str, Any]]
    #: JSON schemas of the tools allowed in ``state`` plus ``advance``.
    tools: list[dict[str, Any]]
    #: Events the model may fire from here.
    events: list[str]
    system_prompt: str = ""
    instructions: str = ""
    #: True when ``state`` accepts a final answer; False when only a tool call or an
    #: event moves the run on (model adapters then ask the server for a tool call).
    final_allowed: bool = True
    #: True when the model's plain text (no tool call) is a message to the customer here:
    #: the run then waits for the reply, which the model reads in this state.
    asks_customer: bool = False

    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    @property
    def transcript(self) -> list[Message]:
        """:attr:`messages` as typed messages (see :mod:`fsm.records.transcript`)."""
        return read_all(self.messages)


class Policy(Protocol):
    def __call__(self, view: View) -> Action | dict[str, Any]: ...


class PolicyUnavailable(Exception):
    """Raised by a policy whose model could not be reached; the run can resume later.

    ``usage`` is what the failed attempts cost; it counts against the budgets.
    ``request`` is how the last attempt was sent (as :attr:`Action.request`), and
    ``detail`` the server's whole answer, kept in the log while the message (the run's
    reason) stays one line.
    """

    def __init__(self, message: str, usage: Usage | None = None, *,
                 request: dict[str, Any] | None = None, detail: str | None = None) -> None:
        self.usage = usage or NO_USAGE
        self.request = request
        self.detail = detail
        super().__init__(message)


class PolicyRefused(PolicyUnavailable):
    """Raised by a policy whose model server refuses the request, so that asking again
    will not help: a permanent 4xx, or a 500 that recurs on the same request while the
    server answers otherwise. The run stops as ``model_refused``.

    ``overflow`` is True when the prompt does not fit the model's context; the engine
    then compacts the view (when it has a compactor) and asks once more first.
    """

    def __init__(self, message: str, usage: Usage | None = None, *,
                 request: dict[str, Any] | None = None, detail: str | None = None,
                 overflow: bool = False) -> None:
        self.overflow = overflow
        super().__init__(message, usage, request=request, detail=detail)


PolicyFn = Callable[[View], Any]


def as_action(value: Any) -> Action:
    """Accept an :class:`Action` or a plain dict such as ``{"tool": ..., "args": ...}``.

    An :class:`Action` is validated again, so one built with ``model_construct`` and
    fields of the wrong shape is refused here (``ValidationError``) rather than
    failing later inside the engine; its usage is clamped like any other.
    """
    return Action.model_validate(value)
