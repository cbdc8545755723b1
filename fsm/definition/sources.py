"""Tools from elsewhere: the seam between a workflow's tables and a tool server.

A workflow names its servers with :class:`ToolServer` (``define_workflow(servers=...)``).
Each wraps a :class:`ToolSource`, the connection that lists a server's tools and calls
them; :mod:`fsm.adapters.mcp` implements it for MCP servers (stdio or streamable HTTP).
The definition layer knows only this protocol, so the tables, the checks and the hash
never import a client.

What a server says about itself is data, and is pinned: the canonical hash of its whole
tool list (names, descriptions, input schemas, annotations) is part of the definition
hash, so a server whose tools changed is a new definition. Its annotations are hints: a
tool is a read only when the workflow lists it in ``reads``, or when the server marks it
``readOnlyHint`` and the workflow sets ``accept_hints``. Every other tool is a write, with
a claim, an idempotency key (sent in the call's ``_meta`` under
:data:`IDEMPOTENCY_META_KEY`), the in-doubt rule and any confirmation the workflow asks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, model_validator

from fsm.definition.tools import ToolContext, ToolSpec
from fsm.errors import Unavailable

#: The key of a write's idempotency key (``"{run_id}:{step}"``) in a call's ``_meta``:
#: a server that can use it deduplicates a write that fsm sends again after a crash.
IDEMPOTENCY_META_KEY = "fsm/idempotency-key"

#: The separator of a qualified tool name in the tables: ``"server.tool"``.
QUALIFIER = "."


@dataclass(frozen=True)
class RemoteTool:
    """One tool as its server lists it (``tools/list``)."""

    name: str
    description: str
    #: The JSON schema of the tool's arguments, as the server gave it.
    input_schema: Mapping[str, Any]
    #: The server's annotations (``readOnlyHint``, ``destructiveHint``, ...): hints only.
    annotations: Mapping[str, Any] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        """The tool as plain data, as the pin hashes it."""
        return {"name": self.name, "description": self.description,
                "inputSchema": _plain(self.input_schema), "annotations": _plain(self.annotations)}


@dataclass(frozen=True)
class RemoteResult:
    """What a call returned: its value (structured content, else the text parsed as JSON
    where it is JSON, else the text) and whether the server flagged it an error."""

    value: Any
    is_error: bool = False
    text: str = ""


class ToolFailed(Exception):
    """A tool's answer that is an error (MCP ``isError: true``): an observation for the
    model, never an infrastructure fault."""


@runtime_checkable
class ToolSource(Protocol):
    """A connection to one tool server. Its methods raise :class:`fsm.errors.Unavailable`
    when the server cannot answer (it crashed, hung, timed out, broke the protocol): the
    step then rolls back and is retried, never shown to the model."""

    #: The server's name in the workflow (the ``server`` of ``server.tool``).
    name: str

    def list_tools(self) -> list[RemoteTool]:
        """Every tool the server lists now."""
        ...

    def call(self, tool: str, arguments: dict[str, Any], *,
             meta: dict[str, Any] | None = None) -> RemoteResult:
        """Call ``tool`` with ``arguments`` (``meta`` goes in the request's ``_meta``)."""
        ...

    def where(self) -> str:
        """Where the server is, for people: a command line or a URL."""
        ...

    def close(self) -> None:
        """Stop the server (a process this source started) and let its connection go."""
        ...


@dataclass(frozen=True)
class ToolServer:
    """A tool server as a workflow uses it: which of its tools are reads, which writes
    are safe to send again, and what fsm supplies itself."""

    source: ToolSource
    #: Tools that are reads whatever the server says.
    reads: frozenset[str] = frozenset()
    #: Take the server's ``readOnlyHint: true`` as a read (off: every unlisted tool writes).
    accept_hints: bool = False
    #: Writes the server deduplicates by :data:`IDEMPOTENCY_META_KEY`: after a crash they
    #: are sent again with the same key instead of being handed over as in doubt.
    retry_safe: frozenset[str] = frozenset()
    #: argument → ``fn(ctx) -> value``: arguments fsm fills in every call (e.g. a
    #: per-run ``state_key``). They are left out of the schema the model sees.
    supplied: Mapping[str, Callable[[ToolContext], Any]] = field(default_factory=dict)
    #: tool → more :class:`~fsm.definition.tools.ToolSpec` fields (``emits``, ``emits_events``,
    #: ``approval``, ``check``, ``remember``, ``tags``, ``confirmed_by``, ...).
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: ``fn(value) -> value``: what a call returns to the run, from what the server
    #: answered (e.g. the one field of a wrapper the server puts around every answer);
    #: applied to an ``isError`` answer too, for the text the model reads. ``None``: the
    #: server's answer as it is.
    answer: Callable[[Any], Any] | None = None

    @property
    def name(self) -> str:
        return self.source.name

    def is_read(self, tool: RemoteTool) -> bool:
        """Whether ``tool`` is a read: declared so, or hinted and hints are accepted."""
        if tool.name in self.reads:
            return True
        return self.accept_hints and tool.annotations.get("readOnlyHint") is True


def _name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def tool_list_hash(tools: Sequence[RemoteTool]) -> str:
    """The canonical hash of a tool list: names, descriptions, schemas, annotations, in
    name order (the order a server lists them in does not matter)."""
    blob = json.dumps(sorted((t.public() for t in tools), key=lambda t: t["name"]),
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def visible_schema(tool: RemoteTool, supplied: Sequence[str]) -> dict[str, Any]:
    """The input schema the model sees: the server's, without the supplied arguments."""
    schema = _plain(tool.input_schema) or {"type": "object", "properties": {}}
    if supplied:
        props = schema.get("properties") or {}
        schema["properties"] = {k: v for k, v in props.items() if k not in supplied}
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r not in supplied]
    return schema


def _validator(schema: Mapping[str, Any]) -> Callable[[Any], list[str]]:
    """``check(instance) -> problems`` for a JSON schema (jsonschema, the draft the schema
    names; 2020-12 when it names none)."""
    from jsonschema import validators

    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    checker = cls(schema)

    def check(instance: Any) -> list[str]:
        errors = sorted(checker.iter_errors(instance), key=lambda e: list(e.path))
        return [(f"{'.'.join(str(p) for p in e.path)}: " if e.path else "") + e.message
                for e in errors]

    return check


def arguments_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model whose validation is the JSON schema ``schema`` and whose JSON
    schema is ``schema`` itself: the gate validates a remote tool's arguments as it does
    a local tool's, and a bad call is an observation."""
    check = _validator(schema)

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="allow", frozen=True)

        @model_validator(mode="before")
        @classmethod
        def _schema(cls, data: Any) -> Any:
            problems = check(data)
            if problems:
                raise ValueError("; ".join(problems))
            return data

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return _plain(schema)

    Arguments.__name__ = Arguments.__qualname__ = f"{name}_arguments"
    return Arguments


def remote_value(result: RemoteResult, answer: Callable[[Any], Any] | None = None) -> Any:
    """The value a call returns to the step (through ``answer``), or :class:`ToolFailed`
    for an ``isError`` answer."""
    if result.is_error:
        if answer is not None:
            said = answer(result.value)
            raise ToolFailed(said if isinstance(said, str) else json.dumps(said, default=str))
        raise ToolFailed(result.text or json.dumps(result.value, default=str))
    return result.value if answer is None else answer(result.value)


def remote_tool_spec(server: ToolServer, tool: RemoteTool, registered: str) -> ToolSpec:
    """The :class:`~fsm.definition.tools.ToolSpec` of one of a server's tools, registered as
    ``registered`` (its bare name, or ``server.tool`` where the bare name is taken)."""
    supplied = tuple(sorted(server.supplied))
    source, remote = server.source, tool.name
    makers = dict(server.supplied)

    def call(args: BaseModel, ctx: ToolContext) -> Any:
        arguments = args.model_dump(mode="json")
        arguments.update({k: makers[k](ctx) for k in supplied})
        meta = {IDEMPOTENCY_META_KEY: ctx.key} if ctx.key is not None else None
        return remote_value(source.call(remote, arguments, meta=meta), server.answer)

    write = not server.is_read(tool)
    origin = {"server": server.name, "tool": remote, "annotations": _plain(tool.annotations),
              "supplied": list(supplied),
              **({"answer": _name(server.answer)} if server.answer is not None else {})}
    return ToolSpec(name=registered, fn=call, description=tool.description,
                    args=arguments_model(registered, visible_schema(tool, supplied)),
                    write=write, retry_safe=write and remote in server.retry_safe,
                    origin=origin, **dict(server.options.get(remote, {})))


@dataclass(frozen=True)
class Resolved:
    """The tables' names resolved against the servers' tool lists."""

    #: The tools the tables name, as ToolSpecs.
    tools: list[ToolSpec]
    #: state → tool names, each as registered.
    tools_by_state: dict[str, list[str]]
    #: server → its pin (tools hash, tool names).
    pins: dict[str, dict[str, Any]]
    problems: list[str]


def resolve(servers: Sequence[ToolServer], tools_by_state: Mapping[str, Sequence[str]],
            local: set[str]) -> Resolved:
    """List each server's tools, pin them, and resolve the tables' names (``server.tool``
    or a bare name one server alone has) to tool specs. Every problem is listed."""
    problems: list[str] = []
    listed = _listings(servers, problems)
    by_name = {s.name: s for s in servers}
    targets: dict[str, tuple[str, str]] = {}
    for names in tools_by_state.values():
        for name in names:
            target = _target(name, listed, local, problems) if name not in targets else None
            if target is not None:
                targets[name] = target
    wanted = list(dict.fromkeys(targets.values()))
    registered = _registered_names(wanted, local)
    specs = [remote_tool_spec(by_name[s], listed[s][t], registered[(s, t)]) for s, t in wanted]
    pins = {s.name: _pin(s, list(listed[s.name].values())) for s in servers}
    rows = {state: [registered[targets[n]] if n in targets else n for n in names]
            for state, names in tools_by_state.items()}
    return Resolved(specs, rows, pins, problems)


def _listings(servers: Sequence[ToolServer],
              problems: list[str]) -> dict[str, dict[str, RemoteTool]]:
    """Each server's tools by name; a server that cannot list them, or a name given to
    two servers, is a problem."""
    names = [s.name for s in servers]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        problems.append(f"servers named twice: {', '.join(twice)}")
    listed: dict[str, dict[str, RemoteTool]] = {}
    for server in servers:
        try:
            listed[server.name] = {t.name: t for t in server.source.list_tools()}
        except Unavailable as exc:
            problems.append(f"server {server.name!r} cannot list its tools: {exc}")
            listed[server.name] = {}
    return listed


def _pin(server: ToolServer, tools: list[RemoteTool]) -> dict[str, Any]:
    """What the definition pins of one server: its tool list's hash and the names it
    lists. Where the server is stays out: a server moved is the same server."""
    return {"tools": tool_list_hash(tools), "listed": sorted(t.name for t in tools)}


def _target(name: str, listed: Mapping[str, Mapping[str, RemoteTool]], local: set[str],
            problems: list[str]) -> tuple[str, str] | None:
    """The (server, tool) a name in the tables means, or ``None`` for a local (or
    unknown) tool; a missing or ambiguous remote name is a problem."""
    if name in local:
        return None
    server, dot, tool = name.partition(QUALIFIER)
    if dot and server in listed:
        if tool in listed[server]:
            return server, tool
        problems.append(f"server {server!r} lacks tool {tool!r} that TOOLS_BY_STATE names "
                        f"(it lists: {', '.join(sorted(listed[server])) or 'nothing'})")
        return None
    having = sorted(s for s, tools in listed.items() if name in tools)
    if len(having) > 1:
        problems.append(f"tool {name!r} is listed by servers {', '.join(having)}: name it "
                        f"as {' or '.join(f'{s}.{name}' for s in having)}")
        return None
    return (having[0], name) if having else None


def _registered_names(targets: list[tuple[str, str]],
                      local: set[str]) -> dict[tuple[str, str], str]:
    """Each remote tool's name in the workflow: bare where unique, else ``server.tool``."""
    counts: dict[str, int] = {}
    for _, tool in targets:
        counts[tool] = counts.get(tool, 0) + 1
    return {(s, t): t if counts[t] == 1 and t not in local else f"{s}{QUALIFIER}{t}"
            for s, t in targets}

