"""The policy seam: ``policy(view) -> action``.

A policy is any callable. A model adapter, a rule-based clerk and a scripted test
double are all policies; the engine cannot tell them apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Usage(BaseModel):
    """What one policy call cost."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    #: Micro-units of the price table's currency.
    cost_micros: int = Field(default=0, ge=0)
    #: Model calls made (retries included).
    calls: int = 1

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_micros=self.cost_micros + other.cost_micros,
            calls=self.calls + other.calls,
        )


class Action(BaseModel):
    """One decision of the policy: a tool call or a final answer.

    Firing a workflow event is a call of the ``advance`` tool with ``{"event": ...}``
    plus the event's payload fields. ``problem`` is set by adapters when the model's
    output was unusable (bad JSON, empty reply); the engine shows it to the model.
    """

    model_config = ConfigDict(frozen=True)

    tool: str | None = None
    args: dict[str, Any] = {}
    final: str | None = None
    usage: Usage = Field(default_factory=lambda: Usage(calls=0))
    problem: str | None = None
    #: Free text the model wrote alongside its call (kept in the transcript).
    text: str | None = None

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
    #: The transcript, possibly compacted (see :mod:`fsm.runtime.compaction`).
    messages: list[dict[str, Any]]
    #: JSON schemas of the tools allowed in ``state`` plus ``advance``.
    tools: list[dict[str, Any]]
    #: Events the model may fire from here.
    events: list[str]
    system_prompt: str = ""
    instructions: str = ""

    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]


class Policy(Protocol):
    def __call__(self, view: View) -> Action | dict[str, Any]: ...


class PolicyUnavailable(Exception):
    """Raised by a policy whose model could not be reached; the run can resume later.

    ``usage`` is what the failed attempts cost; it counts against the budgets.
    """

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        self.usage = usage or Usage(calls=0)
        super().__init__(message)


PolicyFn = Callable[[View], Any]


def as_action(value: Any) -> Action:
    """Accept an :class:`Action` or a plain dict such as ``{"tool": ..., "args": ...}``."""
    if isinstance(value, Action):
        return value
    return Action.model_validate(value)
