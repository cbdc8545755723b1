"""Tools: what a workflow lets the model call, and what each call may do."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict

Facts = Mapping[str, Any]

#: The synthetic tool through which the model fires workflow events.
ADVANCE = "advance"


@dataclass(frozen=True)
class ToolContext:
    """What a tool receives besides its arguments."""

    run_id: str
    user: str
    step: int
    facts: Facts
    #: ``"{run_id}:{step}"`` for write tools; ``None`` for read-only ones.
    key: str | None = None
    #: The workflow's resources, opened from the run's database location.
    resources: Resources | None = None

    def resource(self, name: str) -> Any:
        """The workflow's resource ``name`` (see ``define_workflow(resources=...)``)."""
        if self.resources is None:
            raise LookupError(f"no resources are open for run {self.run_id!r}")
        return self.resources.get(name)


class Resources:
    """The resources of one workflow at one database location, opened on first use."""

    def __init__(self, openers: Mapping[str, Callable[[str], Any]], location: str) -> None:
        self._openers = dict(openers)
        self.location = location
        self._open: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Any:
        with self._lock:
            if name not in self._open:
                opener = self._openers.get(name)
                if opener is None:
                    known = ", ".join(sorted(self._openers)) or "none"
                    raise LookupError(f"no resource {name!r} (declared: {known})")
                self._open[name] = opener(self.location)
            return self._open[name]

    def close(self, *, errors: bool = False) -> list[tuple[str, Exception]]:
        """Close every resource opened (those with a ``close`` method). With ``errors``,
        each that raises is returned as ``(name, exception)`` and the others are closed
        all the same; without, the first that raises is raised."""
        with self._lock:
            opened, self._open = self._open, {}
        failed: list[tuple[str, Exception]] = []
        for name, resource in opened.items():
            close = getattr(resource, "close", None)
            if not callable(close):
                continue
            try:
                close()
            except Exception as exc:
                if not errors:
                    raise
                failed.append((name, exc))
        return failed


class NoArgs(BaseModel):
    """Arguments of a tool that takes none."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class ToolSpec:
    """One tool of a workflow.

    ``fn(args, ctx)`` gets the validated pydantic ``args`` and a :class:`ToolContext`
    and returns a JSON-serialisable result. Raising is fine: the model then reads
    ``"TypeName: message"``.
    """

    name: str
    fn: Callable[[Any, ToolContext], Any]
    description: str = ""
    args: type[BaseModel] = NoArgs
    #: A write changes the world; it gets an idempotency key and an effect record.
    write: bool = False
    #: The write honours its idempotency key, so re-calling it after a crash is safe.
    retry_safe: bool = False
    #: ``fn(key, ctx) -> result | None``: the outcome the world holds of this write under
    #: its idempotency key (a payment looked up at the gateway), ``None`` when the world
    #: has none (it never happened). Declared, recovery asks the world rather than trust
    #: the effect row: a row the world contradicts hands the run over. (Not in the
    #: definition hash: it changes what recovery trusts, never what the run may do.)
    lookup: Callable[[str, ToolContext], Any] | None = None
    #: ``True``, or ``fn(args, facts) -> bool``: the call waits for a person first.
    approval: bool | Callable[[Any, Facts], bool] = False
    #: ``fn(result) -> event | None``: the workflow event the result fires. Hooks get the
    #: result as recorded (its JSON form), the same value when a crash replays the call.
    emits: Callable[[Any], str | None] | None = None
    #: Every event ``emits`` may return, checked against the tables at load.
    emits_events: tuple[str, ...] = ()
    #: ``fn(args, facts) -> reason | None``: refuse the call before it runs.
    check: Callable[[Any, Facts], str | None] | None = None
    #: ``fn(args, result, facts) -> dict``: facts to merge into the run after success.
    remember: Callable[[Any, Any, Facts], dict[str, Any]] | None = None
    #: Labels auditors read, e.g. ``frozenset({"moves_money"})`` (drawn in diagrams).
    tags: frozenset[str] = field(default_factory=frozenset)
    #: The fact key of a proposal (``{"tool": ..., "args": {...}}``, the record of the
    #: event that asked the customer) that the customer must confirm first: the call runs
    #: only when its tool and arguments equal what they confirmed, once. ``None``: no
    #: confirmation is needed.
    confirmed_by: str | None = None
    #: The tool's result always fires one of ``emits_events``: the verifier may assume the
    #: run never stays where it was after the call (a run whose ``emits`` returns no event
    #: then fails).
    always_emits: bool = False
    #: Where a tool from a server comes from (``server``, the server's ``tool`` name, its
    #: ``annotations``, the ``supplied`` arguments): set by :mod:`fsm.definition.sources`, ``None``
    #: for a Python tool.
    origin: Mapping[str, Any] | None = None

    def needs_approval(self, args: Any, facts: Facts) -> bool:
        if callable(self.approval):
            return bool(self.approval(args, facts))
        return bool(self.approval)

    def schema(self) -> dict[str, Any]:
        """The JSON schema the model sees for this tool. Shared: treat it as read-only."""
        return self._schema

    @cached_property
    def _schema(self) -> dict[str, Any]:
        # Built once: pydantic's schema generation would otherwise cost a third of a step.
        params = self.args.model_json_schema()
        params.pop("title", None)
        return {"name": self.name, "description": self.description, "parameters": params}

    def public(self) -> dict[str, Any]:
        """What identifies the tool in the definition hash."""
        return {
            **self.schema(),
            "write": self.write,
            "retry_safe": self.retry_safe,
            "approval": "predicate" if callable(self.approval) else self.approval,
            "emits": sorted(self.emits_events),
            "check": self.check is not None,
            "remember": self.remember is not None,
            "tags": sorted(self.tags),
            # Only when set: the hash of a tool that uses neither stays what it was.
            **({"confirmed_by": self.confirmed_by} if self.confirmed_by is not None else {}),
            **({"always_emits": True} if self.always_emits else {}),
            **({"origin": dict(self.origin)} if self.origin is not None else {}),
        }
