"""Definitions as data: what a store records of a definition, and its tables read back.

A store records each definition the first time it sees it (:func:`definition_record`):
the workflow's name, the hash, the version label, and as JSON everything the hash
covers (the tables, the tools' schemas, the guards' descriptions), the states and the
invariants. :class:`Shape` is what a definition allows, read from a spec or from such a
record, so that an audit judges a run's steps against the definition in force at each
step without importing any workflow code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fsm.definition.spec import WorkflowSpec
from fsm.records import DefinitionRecord


def invariant_json(inv: object) -> dict[str, Any]:
    """An invariant as JSON: its kind and its fields (a custom one: its title)."""
    out: dict[str, Any] = {"kind": type(inv).__name__}
    if dataclasses.is_dataclass(inv) and not isinstance(inv, type):
        for f in dataclasses.fields(inv):
            value = getattr(inv, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
    title = getattr(inv, "title", None)
    if isinstance(title, str):
        out["title"] = title
    return out


def definition_body(spec: WorkflowSpec) -> dict[str, Any]:
    """``spec`` as the JSON a store keeps: what its hash covers, plus its states, its
    version label and its invariants (kept with the spec after the first call)."""
    found = spec.cache.get(definition_body)
    if found is None:
        found = spec.cache[definition_body] = {
            **spec.behaviour(), "states": list(spec.states), "version": spec.version,
            "invariants": [invariant_json(i) for i in spec.invariants],
        }
    return found  # type: ignore[no-any-return]


def definition_record(spec: WorkflowSpec, now: float = 0.0) -> DefinitionRecord:
    """The record a store keeps of ``spec``."""
    return DefinitionRecord(definition_hash=spec.definition_hash, workflow=spec.name,
                            version=spec.version, body=definition_body(spec), recorded_at=now)


@dataclass(frozen=True)
class Shape:
    """What a definition allows, as plain tables: states, events and who fires them,
    tools by state and their argument schemas. Read from a spec or a stored record."""

    workflow: str
    definition_hash: str
    version: str
    initial: str
    states: tuple[str, ...]
    transitions: Mapping[str, Mapping[str, str]]
    tools_by_state: Mapping[str, tuple[str, ...]]
    terminal: frozenset[str]
    finish_states: frozenset[str]
    human_events: frozenset[str]
    #: tool → the events its results may fire.
    tool_events: Mapping[str, frozenset[str]]
    #: tool → the JSON schema of its arguments.
    tool_schemas: Mapping[str, Any]
    #: event → the JSON schema of its payload.
    payload_schemas: Mapping[str, Any]
    #: Events only a customer's reply fires (none for a workflow that never talks).
    customer_events: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        return self.version or self.definition_hash

    @classmethod
    def of(cls, spec: WorkflowSpec) -> Shape:
        return cls.read(spec.definition_hash, definition_body(spec))

    @classmethod
    def of_record(cls, record: DefinitionRecord) -> Shape:
        return cls.read(record.definition_hash, record.body, record.version)

    @classmethod
    def read(cls, definition_hash: str, body: Mapping[str, Any], version: str = "") -> Shape:
        """The shape of a stored body; a body of another shape raises ``ValueError``."""
        try:
            tools = body.get("tools") or {}
            return cls(
                workflow=str(body["name"]), definition_hash=definition_hash,
                version=str(body.get("version") or version), initial=str(body["initial"]),
                states=tuple(body.get("states") or ()),
                transitions={s: dict(ev) for s, ev in body["transitions"].items()},
                tools_by_state={s: tuple(ts) for s, ts in body["tools_by_state"].items()},
                terminal=frozenset(body.get("terminal") or ()),
                finish_states=frozenset(body.get("finish_states") or ()),
                human_events=frozenset(body.get("human_events") or ()),
                tool_events={n: frozenset(t.get("emits") or ()) for n, t in tools.items()},
                tool_schemas={n: t.get("parameters") or {} for n, t in tools.items()},
                payload_schemas=dict(body.get("payloads") or {}),
                customer_events=frozenset(body.get("customer_events") or ()),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"definition {definition_hash} is not a definition body "
                             f"({type(exc).__name__}: {exc})") from None

    def events_from(self, state: str) -> Mapping[str, str]:
        return self.transitions.get(state, {})

    def waits_for_person(self, state: str) -> bool:
        """True when every way out of ``state`` is a human-only event (as the spec says)."""
        events = self.events_from(state)
        return (bool(events) and state not in self.finish_states
                and all(e in self.human_events for e in events))

    def fired_by_tools(self, event: str) -> frozenset[str]:
        """The tools whose results may fire ``event``."""
        return frozenset(t for t, evs in self.tool_events.items() if event in evs)
