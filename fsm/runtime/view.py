"""Building the view: what the model sees, and rebuilding it for any past step."""

from __future__ import annotations

from typing import Any

from fsm.definition.spec import ADVANCE, WorkflowSpec
from fsm.policy import View
from fsm.records import Compaction, ViewRecord, built
from fsm.records.transcript import Summary
from fsm.store.roles import RunReads


def advance_schema(spec: WorkflowSpec, events: list[str]) -> dict[str, Any]:
    """The synthetic tool whose ``event`` argument is an enum of the offered events."""
    props: dict[str, Any] = {
        "event": {"type": "string", "enum": list(events), "description": "the event to fire"},
    }
    lines = []
    for event in events:
        model = spec.payloads.get(event)
        fields: list[str] = []
        if model is not None:
            schema = model.model_json_schema()
            for name, prop in schema.get("properties", {}).items():
                prop = {k: v for k, v in prop.items() if k != "title"}
                props.setdefault(name, prop)
                fields.append(name)
        g = spec.guards.get(event)
        desc = f"- {event}"
        if fields:
            desc += f" (payload: {', '.join(fields)})"
        if g is not None:
            desc += f"; only if {g.description}"
        lines.append(desc)
    return {
        "name": ADVANCE,
        "description": "Move the workflow on by firing one of these events:\n" + "\n".join(lines),
        "parameters": {
            "type": "object", "properties": props, "required": ["event"],
            "additionalProperties": False,
        },
    }


class Schemas:
    """The tool schemas a workflow offers, built once per (tools, events) and shared."""

    def __init__(self, spec: WorkflowSpec) -> None:
        self.spec = spec
        self._cache: dict[tuple[tuple[str, ...], tuple[str, ...]], list[dict[str, Any]]] = {}

    @classmethod
    def of(cls, spec: WorkflowSpec) -> Schemas:
        """The schemas of ``spec``, kept with the spec: every engine on it shares them (a
        worker makes an engine per run; building them again would cost each run)."""
        found = spec.cache.get(cls)
        if found is None:
            found = spec.cache[cls] = cls(spec)
        return found  # type: ignore[no-any-return]

    def offered(self, tools: list[str], events: list[str]) -> list[dict[str, Any]]:
        """The schemas of ``tools`` plus ``advance`` for ``events``; treat as read-only."""
        key = (tuple(tools), tuple(events))
        cached = self._cache.get(key)
        if cached is None:
            cached = [self.spec.tools[name].schema() for name in tools]
            if events:
                cached.append(advance_schema(self.spec, events))
            self._cache[key] = cached
        return list(cached)


def compacted(messages: list[dict[str, Any]], compaction: Compaction | None) -> list[dict]:
    """Apply a compaction record: messages[1:upto] become one summary message."""
    if compaction is None:
        return messages
    upto = compaction.upto
    summary = Summary.make(content=compaction.summary, summary_of=[1, upto]).body()
    return messages[:1] + [summary] + messages[upto:]


def render(spec: WorkflowSpec, schemas: Schemas, run_id: str, record: ViewRecord,
           messages: list[dict[str, Any]]) -> View:
    """The exact view of ``record`` given the transcript's first messages."""
    # Built without re-validating every message: the transcript is ours, and checking it
    # again each step would make a step cost grow with the length of the run.
    return built(View, {
        "run_id": run_id, "workflow": spec.name, "step": record.step, "state": record.state,
        "messages": compacted(messages[: record.message_count], record.compaction),
        "tools": schemas.offered(record.tools, record.events), "events": record.events,
        "system_prompt": spec.system_prompt,
        "instructions": spec.instructions.get(record.state, ""),
        "final_allowed": record.state in spec.finish_states,
        "asks_customer": record.state in spec.asks_customer,
    })


def view_at(spec: WorkflowSpec, store: RunReads, run_id: str,
            step: int | None = None) -> View | None:
    """What the model saw at ``step`` (default: the latest step)."""
    record = store.view_record(run_id, step)
    if record is None:
        return None
    return render(spec, Schemas.of(spec), run_id, record,
                  store.messages(run_id, 0, record.message_count))
